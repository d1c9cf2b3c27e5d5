"""[ONNX] data-dependent guard at transformers.models.glm_ocr.modeling_glm_ocr:GlmOcrModel.get_rope_index:
GlmOcrForConditionalGeneration (export_onnx).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32); needs onnxruntime too. Run: python
data_dependent_guard-0ff72061.py
The suite saw: export (transformers.exporters.OnnxExporter): GuardOnDataDependentSymNode: Could not guard on data-
dependent expression Eq(u15, 0) (unhinted: Eq(u15, 0)). (Size-like symbols: u15) (at ...
Shared by 1 class(es), 18 cell(s) of 18 check(s) (index.json lists them).
"""

import os
import tempfile

import torch
from transformers import GlmOcrConfig, GlmOcrForConditionalGeneration, GlmOcrTextConfig, GlmOcrVisionConfig

CONFIG = GlmOcrConfig(
    text_config=GlmOcrTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2,
        rope_parameters={'rope_theta': 10000.0, 'rope_type': 'default', 'mrope_section': [2, 3, 3]}),
    vision_config=GlmOcrVisionConfig(depth=2, hidden_size=64, num_heads=4, image_size=32, patch_size=8,
        out_hidden_size=64, intermediate_size=128),
    image_token_id=254, video_token_id=255, image_start_token_id=250, image_end_token_id=251,
    video_start_token_id=252, video_end_token_id=253)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return GlmOcrForConditionalGeneration(CONFIG).eval()


# The inputs export_onnx fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 154, 175, 161, 48, 73, 250] + [254] * 4 + [251, 132, 54, 43, 99], [0, 0, 0, 13,
        185, 190, 125, 250] + [254] * 4 + [251, 81, 143, 70, 68, 177]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 15, [0, 0, 0] + [1] * 15], dtype=torch.int64),
    'pixel_values': torch.randn((32, 384), generator=g, dtype=torch.float32),
    'image_grid_thw': torch.tensor([[1, 4, 4], [1, 4, 4]], dtype=torch.int64),
    'mm_token_type_ids': torch.tensor([[0] * 9 + [1] * 4 + [0] * 5, [0] * 8 + [1] * 4 + [0] * 6], dtype=torch.int64),
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
