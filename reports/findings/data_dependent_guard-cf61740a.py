"""[torch.export] data-dependent guard at
transformers.models.llava_onevision.modeling_llava_onevision:LlavaOnevisionModel.get_image_features:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-cf61740a.py
The suite saw: torch.export.export(strict=False): GuardOnDataDependentSymNode: Could not extract specialized integer
from data-dependent expression u0 (unhinted: u0). (Size-like symbols: none) (at ...
Shared by 1 class(es), 29 cell(s) of 29 check(s) (index.json lists them).
"""

import torch
from transformers import (LlavaOnevisionConfig, LlavaOnevisionForConditionalGeneration, Qwen2Config, SiglipVisionConfig)

CONFIG = LlavaOnevisionConfig(
    vision_config=SiglipVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, vision_use_head=False),
    text_config=Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_window_layers=2,
        layer_types=['full_attention', 'full_attention']),
    image_token_index=254, video_token_index=255,
    image_grid_pinpoints=[[32, 32], [32, 64], [32, 96], [64, 32], [64, 64], [64, 96], [96, 32], [96, 64], [96, 96]])
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return LlavaOnevisionForConditionalGeneration(CONFIG).eval()


# The inputs export_forward fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 84, 16, 146, 48, 11] + [254] * 52 + [137, 92, 67, 116], [0, 0, 0, 180, 84, 18,
        182] + [254] * 52 + [44, 32, 76, 15, 75]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 61, [0, 0, 0] + [1] * 61], dtype=torch.int64),
    'pixel_values': torch.randn((2, 3, 3, 32, 32), generator=g, dtype=torch.float32),
    'image_sizes': torch.tensor([[32, 64], [32, 64]], dtype=torch.int64),
    'batch_num_images': torch.full((2,), 1, dtype=torch.int64),
}

with torch.no_grad():
    torch.export.export(tiny_model(), (), kwargs=dict(inputs, **CONSTANTS), strict=False)
