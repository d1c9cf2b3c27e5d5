"""[torch.export] data-dependent guard at transformers.vision_utils:get_vision_position_ids:
GlmImageForConditionalGeneration (export_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-028e77aa.py
The suite saw: torch.export.export(strict=False): GuardOnDataDependentSymNode: Could not extract specialized integer
from data-dependent expression Max(0, u0 - 1) + Max(0, u1 - 1) (unhinted: Max(0, u0 - 1) + Max(0, u1 - 1)). ...
Shared by 1 class(es), 36 cell(s) of 36 check(s) (index.json lists them).
"""

import torch
from transformers import (GlmImageConfig, GlmImageForConditionalGeneration, GlmImageTextConfig, GlmImageVQVAEConfig,
    GlmImageVisionConfig)

CONFIG = GlmImageConfig(
    text_config=GlmImageTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4,
        rope_parameters={'rope_theta': 10000.0, 'rope_type': 'default', 'mrope_section': [2, 3, 3]},
        pad_token_id=254, vision_vocab_size=192, eos_token_id=65),
    vision_config=GlmImageVisionConfig(depth=2, hidden_size=64, num_heads=4, image_size=32, patch_size=8,
        intermediate_size=128),
    vq_config=GlmImageVQVAEConfig(embed_dim=64, num_embeddings=64, latent_channels=64), image_token_id=255,
    image_start_token_id=64, image_end_token_id=65)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return GlmImageForConditionalGeneration(CONFIG).eval()


# The inputs export_forward fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[254, 254, 254, 52, 67, 26, 174, 67, 64] + [255] * 16 + [65, 26, 44, 97, 33, 64], [254,
        254, 254, 9, 88, 191, 84, 64] + [255] * 16 + [65, 109, 119, 108, 79, 194, 64]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 28, [0, 0, 0] + [1] * 28], dtype=torch.int64),
    'pixel_values': torch.randn((32, 192), generator=g, dtype=torch.float32),
    'image_grid_thw': torch.tensor([[1, 4, 4]] * 4, dtype=torch.int64),
    'images_per_sample': torch.full((2,), 2, dtype=torch.int64),
}

with torch.no_grad():
    torch.export.export(tiny_model(), (), kwargs=dict(inputs, **CONSTANTS), strict=False)
