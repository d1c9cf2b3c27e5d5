"""[ONNX] raises at
transformers.models.switch_transformers.modeling_switch_transformers:SwitchTransformersTop1Router.forward:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32); needs onnxruntime too. Run: python
exception-10d9c9d6.py
The suite saw: export (transformers.exporters.OnnxExporter): RuntimeError: Cannot swap t1 because it has weakref
associated with it (at __init__.py:45)
Shared by 1 class(es), 1 cell(s) of 1 check(s) (index.json lists them).
"""

import os
import tempfile

import torch
from transformers import SwitchTransformersConfig, SwitchTransformersForConditionalGeneration

CONFIG = SwitchTransformersConfig(vocab_size=256, d_model=64, d_ff=128, num_layers=2, num_sparse_encoder_layers=2,
    num_decoder_layers=2, num_sparse_decoder_layers=2, num_heads=4, num_experts=4, encoder_sparse_step=4,
    decoder_sparse_step=1, decoder_start_token_id=0)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return SwitchTransformersForConditionalGeneration(CONFIG).eval()


# The inputs export_onnx fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
        dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    'decoder_input_ids': torch.tensor([[0, 123, 191], [0, 116, 17]], dtype=torch.int64),
}


def leaf_feed(kwargs, prefix=""):
    """Tensor leaves of keyword inputs by dotted path (``name``, ``name.0``, ...): the ONNX graph's input names."""
    feed = {}
    for key, value in kwargs.items():
        if isinstance(value, torch.Tensor):
            feed[f"{prefix}{key}"] = value
        elif isinstance(value, (list, tuple, dict)):
            feed.update(leaf_feed(value if isinstance(value, dict) else dict(enumerate(value)), f"{prefix}{key}."))
    return feed


def onnx_export(module, kwargs, path):
    """`module(**kwargs)` to an ONNX file with transformers' OnnxExporter; the feed (input name -> tensor)."""
    from transformers.exporters import OnnxConfig, OnnxExporter

    with torch.no_grad():
        exported = OnnxExporter().export(module, kwargs, OnnxConfig())  # adds the inputs it precomputes
        OnnxExporter.save_program(exported.program, path)
    return leaf_feed(kwargs)


model = tiny_model()
folder = tempfile.mkdtemp()
feed = onnx_export(model, {**inputs, **CONSTANTS}, os.path.join(folder, "model.onnx"))
