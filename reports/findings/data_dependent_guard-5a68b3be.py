"""[torch.export] data-dependent guard at transformers.vision_utils:get_vision_window_index:
MuseGlimmerForConditionalGeneration (export_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-5a68b3be.py
The suite saw: torch.export.export(strict=False): GuardOnDataDependentSymNode: Could not extract specialized integer
from data-dependent expression u1 (unhinted: u1). (Size-like symbols: none) (at transformers/vision_utils.py:162)
Shared by 6 class(es), 252 cell(s) of 42 check(s) (index.json lists them).
"""

import torch
from transformers import (MuseGlimmerConfig, MuseGlimmerForConditionalGeneration, MuseGlimmerTextConfig,
    MuseGlimmerVisionConfig)

CONFIG = MuseGlimmerConfig(
    text_config=MuseGlimmerTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, head_dim=16, eos_token_id=253, bos_token_id=252,
        layer_types=['sliding_attention', 'full_attention'], layer_rope_theta=[10000.0, 10000.0]),
    vision_config=MuseGlimmerVisionConfig(patch_size=8, num_attention_heads=4, num_hidden_layers=2, hidden_size=64,
        intermediate_size=128, layer_types=['window_attention', 'full_attention']),
    image_token_id=255, video_token_id=254, out_hidden_size=256, projector_hidden_size=64)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return MuseGlimmerForConditionalGeneration(CONFIG).eval()


# The inputs export_forward fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 154, 175, 161, 48, 73] + [255] * 4 + [132, 54, 43, 99], [0, 0, 0, 13, 185, 190,
        125] + [255] * 4 + [81, 143, 70, 68, 177]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 13, [0, 0, 0] + [1] * 13], dtype=torch.int64),
    'pixel_values': torch.randn((32, 384), generator=g, dtype=torch.float32),
    'image_grid_thw': torch.tensor([[1, 4, 4], [1, 4, 4]], dtype=torch.int64),
}

with torch.no_grad():
    torch.export.export(tiny_model(), (), kwargs=dict(inputs, **CONSTANTS), strict=False)
