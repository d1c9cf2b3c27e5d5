"""[torch.export] data-dependent guard at
transformers.models.paddleocr_vl.modeling_paddleocr_vl:PaddleOCRVisionAttention.forward:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float16). Run: python data_dependent_guard-930017ff.py
The suite saw: torch.export.export(strict=True): UserError: Consider annotating your code using torch._check*().
Could not guard on data-dependent expression Eq(u12, 0) (unhinted: Eq(u12, 0)). (Size-like symbols: u12) (at ...
Shared by 1 class(es), 23 cell(s) of 23 check(s) (index.json lists them).
"""

import torch
from transformers import (PaddleOCRTextConfig, PaddleOCRVLConfig, PaddleOCRVLForConditionalGeneration,
    PaddleOCRVisionConfig)

CONFIG = PaddleOCRVLConfig(
    text_config=PaddleOCRTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4,
        rope_parameters={'rope_theta': 500000.0, 'rope_type': 'default', 'mrope_section': [2, 3, 3]}, head_dim=16),
    vision_config=PaddleOCRVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8),
    image_token_id=252, video_token_id=253, vision_start_token_id=254, vision_end_token_id=255)
DTYPE = torch.float16
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return PaddleOCRVLForConditionalGeneration(CONFIG).to(DTYPE).eval()


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
        'input_ids': torch.tensor([[0, 0, 3, 4, 5, 6, 7, 252, 8, 9, 10, 11], list(range(12, 18)) + [252, 18, 19, 20, 21,
            22]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0] + [1] * 10, [1] * 12], dtype=torch.int64),
        'mm_token_type_ids': torch.tensor([[0] * 7 + [1] + [0] * 4, [0] * 6 + [1] + [0] * 5], dtype=torch.int64),
        'pixel_values': (torch.randn((8, 3, 8, 8), generator=g, dtype=torch.float32) * 0.46 + 0.193),
        'image_grid_thw': torch.tensor([[1, 2, 2], [1, 2, 2]], dtype=torch.int64),
    }
    return {k: in_dtype(v) for k, v in inputs.items()}


inputs = sample_inputs()
with torch.no_grad():
    torch.export.export(tiny_model(), (), kwargs=dict(inputs, **CONSTANTS), strict=True)
