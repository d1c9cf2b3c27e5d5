"""[torch.compile] data-dependent guard at
transformers.models.glm5_next.modeling_glm5_next:Glm5NextVisionAttention.forward: Glm5NextForConditionalGeneration

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-e6ef5f8b.py
The suite saw: fullgraph compile failed: GuardOnDataDependentSymNode: Could not guard on data-dependent expression
Eq(u8, 0) (unhinted: Eq(u8, 0)). (Size-like symbols: u8) (at ...
Shared by 1 class(es), 42 cell(s) of 42 check(s) (index.json lists them).
"""

import torch
from transformers import Glm5NextConfig, Glm5NextForConditionalGeneration, Glm5NextTextConfig, Glm5NextVisionConfig

CONFIG = Glm5NextConfig(
    text_config=Glm5NextTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=4, kv_lora_rank=32,
        q_lora_rank=32, v_head_dim=16, qk_nope_head_dim=8, num_experts_per_tok=2, pad_token_id=249,
        mlp_layer_types=['dense', 'sparse'], index_head_dim=16, index_n_heads=4,
        layer_types=['linear_attention', 'indexed_attention'], indexer_types=['full', 'full'], linear_head_dim=16,
        linear_num_heads=4, qk_head_dim=8),
    vision_config=Glm5NextVisionConfig(depth=2, hidden_size=64, num_heads=4, image_size=32, patch_size=8,
        out_hidden_size=64, intermediate_size=128, projection_intermediate_size=128),
    image_token_id=254, video_token_id=255, image_start_token_id=250, image_end_token_id=251,
    video_start_token_id=252, video_end_token_id=253)
BACKEND = 'eager'
MARKED = {'attention_mask': [1], 'input_ids': [1], 'mm_token_type_ids': [1]}


def tiny_model():
    torch.manual_seed(0)
    return Glm5NextForConditionalGeneration(CONFIG).eval()


# The inputs compile_dynamic fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[249, 249, 249, 154, 175, 161, 48, 73, 250] + [254] * 4 + [251, 132, 54, 43, 99], [249,
        249, 249, 13, 185, 190, 125, 250] + [254] * 4 + [251, 81, 143, 70, 68, 177]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 15, [0, 0, 0] + [1] * 15], dtype=torch.int64),
    'pixel_values': torch.randn((32, 384), generator=g, dtype=torch.float32),
    'image_grid_thw': torch.tensor([[1, 4, 4], [1, 4, 4]], dtype=torch.int64),
    'mm_token_type_ids': torch.tensor([[0] * 9 + [1] * 4 + [0] * 5, [0] * 8 + [1] * 4 + [0] * 6], dtype=torch.int64),
}

for name, dims in MARKED.items():  # the prompt axis of every sequence-aligned input
    for value in inputs[name] if isinstance(inputs[name], (list, tuple)) else [inputs[name]]:
        for dim in dims:
            torch._dynamo.mark_dynamic(value, dim)
model = tiny_model()
compiled = torch.compile(model, fullgraph=True, backend=BACKEND)
with torch.no_grad():
    compiled(**inputs)  # before any eager call, the prompt length dynamic
