"""[torch.export] data-dependent guard at transformers.integrations.sdpa_attention:sdpa_attention_forward:
MiniCPMV4_7ForConditionalGeneration (export_forward_strict).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float16). Run: python data_dependent_guard-de9e685a.py
The suite saw: torch.export.export(strict=True): UserError: Consider annotating your code using torch._check*().
Could not guard on data-dependent expression u4 > 1 (unhinted: u4 > 1). (Size-like symbols: none) (at ...
Shared by 11 class(es), 140 cell(s) of 24 check(s) (index.json lists them).
"""

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
DTYPE = torch.float16
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return MiniCPMV4_7ForConditionalGeneration(CONFIG).to(DTYPE).eval()


def in_dtype(value):
    """Floating tensors cast to the run's dtype (DTYPE), as the suite cast the inputs it fed."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(DTYPE)
    if isinstance(value, (list, tuple)):
        return type(value)(in_dtype(v) for v in value)
    return value


def sample_inputs():
    """The inputs export_forward_strict fed: token ids literal; pixel_values seeded random of the recorded shape."""
    g = torch.Generator().manual_seed(0)
    inputs = {
        'input_ids': torch.tensor([[0, 0, 0, 117, 92, 148, 160, 110, 255, 198, 103, 40, 116], [0, 0, 119, 119, 88, 144,
            255, 255, 5, 181, 169, 129, 67]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 10, [0, 0] + [1] * 11], dtype=torch.int64),
        'pixel_values': torch.randn((1, 3, 8, 384), generator=g, dtype=torch.float32),
        'target_sizes': torch.tensor([[4, 4], [4, 8]], dtype=torch.int32),
        'mm_token_type_ids': torch.tensor([[0] * 8 + [1] + [0] * 4, [0] * 6 + [1, 1] + [0] * 5], dtype=torch.int64),
    }
    return {k: in_dtype(v) for k, v in inputs.items()}


inputs = sample_inputs()
with torch.no_grad():
    torch.export.export(tiny_model(), (), kwargs=dict(inputs, **CONSTANTS), strict=True)
