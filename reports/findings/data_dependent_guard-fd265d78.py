"""[torch.export] data-dependent guard at transformers.models.kimi_k25.modeling_kimi_k25:get_vision_frame_index:
Kimi_K25ForConditionalGeneration (export_forward_strict).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-fd265d78.py
The suite saw: torch.export.export(strict=True): UserError: Could not guard on data-dependent expression u4 > 1
(unhinted: u4 > 1). (Size-like symbols: none) (at transformers/models/kimi_k25/modeling_kimi_k25.py:93)
Shared by 1 class(es), 42 cell(s) of 42 check(s) (index.json lists them).
"""

import torch
from transformers import DeepseekV3Config, Kimi_K25Config, Kimi_K25ForConditionalGeneration, Kimi_K25VisionConfig

CONFIG = Kimi_K25Config(
    text_config=DeepseekV3Config(vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=4, kv_lora_rank=32,
        q_lora_rank=32, qk_rope_head_dim=8, v_head_dim=16, qk_nope_head_dim=8, n_group=1, topk_group=1,
        num_experts_per_tok=2, first_k_dense_replace=1, qk_head_dim=16, head_dim=8),
    vision_config=Kimi_K25VisionConfig(patch_size=8, num_attention_heads=4, num_hidden_layers=2, hidden_size=64,
        intermediate_size=128),
    projection_hidden_size=64, image_token_id=254, video_token_id=255, vision_start_token_id=252,
    vision_end_token_id=253)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return Kimi_K25ForConditionalGeneration(CONFIG).eval()


# The inputs export_forward_strict fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 66, 10, 187, 194, 174, 252] + [254] * 4 + [253, 108, 164, 68, 44], [0, 0, 0,
        153, 99, 85, 52, 252] + [254] * 4 + [253, 6, 151, 56, 186, 77]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 15, [0, 0, 0] + [1] * 15], dtype=torch.int64),
    'pixel_values': torch.randn((32, 3, 8, 8), generator=g, dtype=torch.float32),
    'image_grid_thw': torch.tensor([[1, 4, 4], [1, 4, 4]], dtype=torch.int64),
}

with torch.no_grad():
    torch.export.export(tiny_model(), (), kwargs=dict(inputs, **CONSTANTS), strict=True)
