"""[torch.export] data-dependent guard at transformers.models.ovis2.modeling_ovis2:Ovis2Model.forward:
Ovis2ForConditionalGeneration (export_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-96e7a443.py
The suite saw: torch.export.export(strict=False): GuardOnDataDependentSymNode: Could not guard on data-dependent
expression Eq(u1, 1) (unhinted: Eq(u1, 1)). (Size-like symbols: none) (at ...
Shared by 1 class(es), 23 cell(s) of 23 check(s) (index.json lists them).
"""

import torch
from transformers import Ovis2Config, Ovis2ForConditionalGeneration, Ovis2VisionConfig, Qwen2Config

CONFIG = Ovis2Config(
    vision_config=Ovis2VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, vocab_size=256),
    text_config=Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_window_layers=2,
        layer_types=['full_attention', 'full_attention']),
    image_token_id=250, visual_indicator_token_ids=[251, 252, 253, 254, 255], vocab_size=256, hidden_size=64)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return Ovis2ForConditionalGeneration(CONFIG).eval()


# The inputs export_forward fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 66, 10, 187, 194, 174] + [250] * 16 + [108, 164, 68, 44], [0, 0, 0, 153, 99,
        85, 52] + [250] * 16 + [6, 151, 56, 186, 77]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 25, [0, 0, 0] + [1] * 25], dtype=torch.int64),
    'pixel_values': torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32),
}

with torch.no_grad():
    torch.export.export(tiny_model(), (), kwargs=dict(inputs, **CONSTANTS), strict=False)
