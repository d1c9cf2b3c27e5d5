"""[torch.export] data-dependent guard at transformers.image_processing_utils:select_best_resolution:
LlavaNextForConditionalGeneration:llava-next-mistral (export_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-320b65b2.py
The suite saw: torch.export.export(strict=False): GuardOnDataDependentSymNode: Could not guard on data-dependent
expression (IntTrueDiv(32, u0)) < (IntTrueDiv(64, u1)) (unhinted: (IntTrueDiv(32, u0)) < (IntTrueDiv(64, u1))) ...
Shared by 5 class(es), 50 cell(s) of 14 check(s) (index.json lists them).
"""

import torch
from transformers import CLIPVisionConfig, LlavaNextConfig, LlavaNextForConditionalGeneration, MistralConfig

CONFIG = LlavaNextConfig(
    vision_config=CLIPVisionConfig(hidden_size=64, intermediate_size=128, projection_dim=64, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, vocab_size=256),
    text_config=MistralConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=None),
    image_token_index=255, image_grid_pinpoints=[[32, 64], [64, 32], [64, 64], [96, 32], [32, 96]])
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return LlavaNextForConditionalGeneration(CONFIG).eval()


# The inputs export_forward fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 3, 4, 5, 6, 7] + [255] * 44 + [8, 9, 10, 11], list(range(12,
        18)) + [255] * 44 + [18, 19, 20, 21, 22]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0] + [1] * 53, [1] * 55], dtype=torch.int64),
    'pixel_values': (torch.randn((2, 3, 3, 32, 32), generator=g, dtype=torch.float32) * 1.14 + -0.123),
    'image_sizes': torch.tensor([[32, 48], [32, 48]], dtype=torch.int64),
}

with torch.no_grad():
    torch.export.export(tiny_model(), (), kwargs=dict(inputs, **CONSTANTS), strict=False)
