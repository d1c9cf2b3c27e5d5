"""[ONNX] raises at transformers.models.minicpmv4_7.modeling_minicpmv4_7:MiniCPMV4_7VisionEmbeddings.forward:
MiniCPMV4_7ForConditionalGeneration (onnx_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python exception-5c36729f.py
The suite saw: export of part 'vision' (transformers.exporters.OnnxExporter): RuntimeError: Attempting to broadcast
a dimension of length 32 at -2! Mismatching argument at index 1 had torch.Size([1, 32, 64]); but expected shap ...
Shared by 1 class(es), 1 cell(s) of 1 check(s) (index.json lists them).
"""

import os
import tempfile

import torch
from transformers import (MiniCPMV4_7Config, MiniCPMV4_7ForConditionalGeneration, MiniCPMV4_7VisionConfig,
    Qwen3_5TextConfig)

CONFIG = MiniCPMV4_7Config(
    text_config=Qwen3_5TextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2,
        rope_parameters={'rope_theta': 10000.0, 'partial_rotary_factor': 0.25, 'rope_type': 'default',
            'mrope_section': [1, 1, 1]},
        head_dim=24, linear_key_head_dim=16, linear_value_head_dim=16,
        layer_types=['linear_attention', 'full_attention']),
    vision_config=MiniCPMV4_7VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8),
    image_size=32, image_token_id=255, video_token_id=254, patch_size=8)


def tiny_model():
    torch.manual_seed(0)
    return MiniCPMV4_7ForConditionalGeneration(CONFIG).eval()


# The inputs onnx_generate fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[119, 119, 88, 144, 255, 255, 5, 181, 169, 129, 67]], dtype=torch.int64),
    'attention_mask': torch.full((1, 11), 1, dtype=torch.int64),
    'pixel_values': torch.randn((1, 3, 8, 384), generator=g, dtype=torch.float32),
    'target_sizes': torch.tensor([[4, 8]], dtype=torch.int32),
    'mm_token_type_ids': torch.tensor([[0] * 4 + [1, 1] + [0] * 5], dtype=torch.int64),
}

def image_features(output):
    """Features as [tokens, hidden]: `pooler_output`, a tensor, or a list of them."""
    pooled = getattr(output, "pooler_output", None)
    if isinstance(pooled, (torch.Tensor, list, tuple)):
        output = pooled
    elif not isinstance(output, (torch.Tensor, list, tuple)) and hasattr(output, "last_hidden_state"):
        output = output.last_hidden_state
    if isinstance(output, (list, tuple)):
        return torch.cat([image_features(o) for o in output], dim=0)
    return output.reshape(-1, output.shape[-1])


class VisionPart(torch.nn.Module):
    """Vision encoder + projector: media -> the placeholder features [tokens, hidden]."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.config = model.config  # transformers' exporters read the config of what they export

    def forward(self, **media):
        return image_features(self.model.get_image_features(**media))


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
media = {k: inputs[k] for k in ['pixel_values', 'target_sizes']}
folder = tempfile.mkdtemp()
onnx_export(VisionPart(model), dict(media), os.path.join(folder, "model.onnx"))
