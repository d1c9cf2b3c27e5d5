"""[torch.export] data-dependent guard at
transformers.models.hy_v4_vl.modeling_hy_v4_vl:HYV4VLVisionPatchEmbed.interpolate_pos_encoding:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-c8fa33ae.py
The suite saw: torch.export.export(strict=False): GuardOnDataDependentSymNode: Could not extract specialized integer
from data-dependent expression u0 (unhinted: u0). (Size-like symbols: none) (at ...
Shared by 1 class(es), 29 cell(s) of 29 check(s) (index.json lists them).
"""

import torch
from transformers import HYV4VLConfig, HYV4VLForConditionalGeneration, HYV4VLTextConfig, HYV4VLVisionConfig

CONFIG = HYV4VLConfig(
    text_config=HYV4VLTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, head_dim=8, initializer_range=0.02,
        pad_token_id=252, bos_token_id=251, eos_token_id=253, n_routed_experts=4, num_experts_per_tok=2,
        q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=16,
        mlp_layer_types=['dense', 'sparse'], layer_types=['indexed_attention', 'indexed_attention'],
        index_head_dim=16, index_n_heads=4, indexer_types=['full', 'shared'],
        rope_parameters={'rope_theta': 10000.0, 'rope_type': 'default', 'mrope_section': [1, 1, 2]}, qk_head_dim=16),
    vision_config=HYV4VLVisionConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4,
        num_key_value_heads=4, num_hidden_layers=2, out_hidden_size=64, patch_size=8),
    image_token_id=254, video_token_id=255)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return HYV4VLForConditionalGeneration(CONFIG).eval()


# The inputs export_forward fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[252, 252, 252, 66, 10, 187, 194, 174] + [254] * 6 + [108, 164, 68, 44], [252, 252, 252,
        153, 99, 85, 52] + [254] * 6 + [6, 151, 56, 186, 77]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 15, [0, 0, 0] + [1] * 15], dtype=torch.int64),
    'pixel_values': torch.randn((32, 192), generator=g, dtype=torch.float32),
    'image_grid_thw': torch.tensor([[1, 4, 4], [1, 4, 4]], dtype=torch.int64),
    'mm_token_type_ids': torch.tensor([[0] * 8 + [1] * 6 + [0] * 4, [0] * 7 + [1] * 6 + [0] * 5], dtype=torch.int64),
}

with torch.no_grad():
    torch.export.export(tiny_model(), (), kwargs=dict(inputs, **CONSTANTS), strict=False)
