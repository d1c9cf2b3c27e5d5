"""[torch.compile] data-dependent guard at
transformers.models.ernie4_5_vl_moe.modeling_ernie4_5_vl_moe:Ernie4_5_VLMoeVisionAttention.forward:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-ef0d9d73.py
The suite saw: fullgraph compile failed: GuardOnDataDependentSymNode: Could not guard on data-dependent expression
Eq(u8, 0) (unhinted: Eq(u8, 0)). (Size-like symbols: u8) (at ...
Shared by 2 class(es), 46 cell(s) of 23 check(s) (index.json lists them).
"""

import torch
from transformers import (Ernie4_5_VLMoeConfig, Ernie4_5_VLMoeTextConfig, Ernie4_5_VLMoeVisionConfig,
    Ernie4_5_VL_MoeForConditionalGeneration)

CONFIG = Ernie4_5_VLMoeConfig(
    text_config=Ernie4_5_VLMoeTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2,
        rope_parameters={'rope_theta': 500000.0, 'rope_type': 'default', 'mrope_section': [3, 3, 2]},
        moe_intermediate_size=[128, 128], moe_k=2, moe_num_experts=4, mlp_layer_types=['dense', 'sparse']),
    vision_config=Ernie4_5_VLMoeVisionConfig(depth=2, hidden_size=64, num_heads=4, patch_size=8,
        intermediate_size=128),
    image_start_token_id=251, image_end_token_id=252, image_token_id=250, video_start_token_id=253,
    video_end_token_id=254, video_token_id=255)
BACKEND = 'eager'
MARKED = {'attention_mask': [1], 'input_ids': [1], 'mm_token_type_ids': [1]}


def tiny_model():
    torch.manual_seed(0)
    return Ernie4_5_VL_MoeForConditionalGeneration(CONFIG).eval()


# The inputs compile_dynamic fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 66, 10, 187, 194, 174, 251] + [250] * 4 + [252, 108, 164, 68, 44], [0, 0, 0,
        153, 99, 85, 52, 251] + [250] * 4 + [252, 6, 151, 56, 186, 77]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 15, [0, 0, 0] + [1] * 15], dtype=torch.int64),
    'pixel_values': torch.randn((32, 192), generator=g, dtype=torch.float32),
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
