"""[torch.export] unsupported construct at transformers.utils.output_capturing:maybe_install_capturing_hooks:
LlavaForConditionalGeneration (export_forward_strict).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python unsupported-1827035f.py
The suite saw: torch.export.export(strict=True): Unsupported: Unsupported context manager (at
transformers/utils/output_capturing.py:239)
Shared by 11 class(es), 22 cell(s) of 2 check(s) (index.json lists them).
"""

import torch
from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration

CONFIG = LlavaConfig(
    vision_config=CLIPVisionConfig(hidden_size=64, intermediate_size=128, projection_dim=64, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, vocab_size=256),
    text_config=LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16),
    image_token_index=255)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return LlavaForConditionalGeneration(CONFIG).eval()


# The inputs export_forward_strict fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 3, 4, 5, 6, 7] + [255] * 16 + [8, 9, 10, 11], list(range(12,
        18)) + [255] * 16 + [18, 19, 20, 21, 22]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0] + [1] * 25, [1] * 27], dtype=torch.int64),
    'pixel_values': (torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32) * 1.09 + 0.192),
}

with torch.no_grad():
    torch.export.export(tiny_model(), (), kwargs=dict(inputs, **CONSTANTS), strict=True)
