"""[ONNX] raises at transformers.models.udop.modeling_udop:combine_image_text_embeddings: UdopForConditionalGeneration
(export_onnx).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32); needs onnxruntime too. Run: python
exception-0cae35b1.py
The suite saw: export (transformers.exporters.OnnxExporter): RuntimeError: The tensor has a non-zero number of
elements, but its data is not allocated yet. (at transformers/models/udop/modeling_udop.py:220)
Shared by 1 class(es), 7 cell(s) of 7 check(s) (index.json lists them).
"""

import os
import tempfile

import torch
from transformers import UdopConfig, UdopForConditionalGeneration

CONFIG = UdopConfig(vocab_size=256, d_model=64, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4,
    image_size=32, patch_size=8, decoder_start_token_id=0)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return UdopForConditionalGeneration(CONFIG).eval()


# The inputs export_onnx fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
        dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    'pixel_values': torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32),
    'bbox': torch.tensor([[[116, 698, 319, 957], [145, 96, 388, 570], [532, 164, 939, 844], [279, 45, 398, 597], [185,
        901, 742, 989], [567, 156, 745, 922], [94, 15, 958, 461], [614, 420, 976, 962], [204, 143, 787, 969]], [[297,
        37, 656, 83], [463, 426, 713, 980], [341, 932, 596, 993], [238, 343, 267, 683], [560, 328, 718, 362], [224, 169,
        584, 881], [13, 291, 945, 711], [793, 29, 994, 355], [863, 74, 914, 404]]], dtype=torch.int64),
    'decoder_input_ids': torch.tensor([[0, 70, 81], [0, 127, 93]], dtype=torch.int64),
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
