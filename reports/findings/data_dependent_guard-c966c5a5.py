"""[torch.export] data-dependent guard at
transformers.models.cosmos3_edge.modeling_cosmos3_edge:Cosmos3EdgeVisionEmbeddings.resize_positional_embeddings:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-c966c5a5.py
The suite saw: torch.export.export(strict=False): GuardOnDataDependentSymNode: Could not guard on data-dependent
expression u1 > 0 (unhinted: u1 > 0). (Size-like symbols: none) (at ...
Shared by 1 class(es), 42 cell(s) of 42 check(s) (index.json lists them).
"""

import torch
from transformers import (Cosmos3EdgeConfig, Cosmos3EdgeForConditionalGeneration, Cosmos3EdgeTextConfig,
    Cosmos3EdgeVisionConfig)

CONFIG = Cosmos3EdgeConfig(
    text_config=Cosmos3EdgeTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2,
        rope_parameters={'rope_type': 'default', 'rope_theta': 100000000.0, 'mrope_section': [3, 2, 3]},
        head_dim=16),
    vision_config=Cosmos3EdgeVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, patch_size=8),
    projector_hidden_size=64, image_token_id=253, video_token_id=252, vision_start_token_id=254,
    vision_end_token_id=255)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return Cosmos3EdgeForConditionalGeneration(CONFIG).eval()


# The inputs export_forward fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 28, 105, 156, 157, 44, 254] + [253] * 4 + [255, 84, 28, 109, 75], [0, 0, 0, 76,
        195, 180, 38, 254] + [253] * 4 + [255, 46, 36, 85, 58, 169]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 15, [0, 0, 0] + [1] * 15], dtype=torch.int64),
    'pixel_values': torch.randn((32, 192), generator=g, dtype=torch.float32),
    'image_grid_thw': torch.tensor([[1, 4, 4], [1, 4, 4]], dtype=torch.int64),
    'mm_token_type_ids': torch.tensor([[0] * 9 + [1] * 4 + [0] * 5, [0] * 8 + [1] * 4 + [0] * 6], dtype=torch.int64),
}

with torch.no_grad():
    torch.export.export(tiny_model(), (), kwargs=dict(inputs, **CONSTANTS), strict=False)
