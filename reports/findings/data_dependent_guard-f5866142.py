"""[torch.compile] data-dependent guard at transformers.models.lfm3_vl.modeling_lfm3_vl:Lfm3VlVisionAttention.forward:
Lfm3VlForConditionalGeneration (compile_dynamic).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-f5866142.py
The suite saw: fullgraph compile failed: GuardOnDataDependentSymNode: Could not guard on data-dependent expression
Eq(u8, 0) (unhinted: Eq(u8, 0)). (Size-like symbols: u8) (at transformers/models/lfm3_vl/modeling_lfm3_vl.py:2 ...
Shared by 1 class(es), 14 cell(s) of 14 check(s) (index.json lists them).
"""

import torch
from transformers import Lfm3Config, Lfm3VlConfig, Lfm3VlForConditionalGeneration, Lfm3VlVisionConfig

CONFIG = Lfm3VlConfig(
    vision_config=Lfm3VlVisionConfig(hidden_size=64, intermediate_size=128, patch_size=8, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, layer_types=['conv', 'full_attention']),
    text_config=Lfm3Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, pad_token_id=249, bos_token_id=250, eos_token_id=251,
        layer_types=['conv', 'full_attention'], head_dim=16),
    image_token_id=255, video_token_id=254, vision_start_token_id=252, vision_end_token_id=253,
    projector_hidden_size=256)
BACKEND = 'eager'
MARKED = {'attention_mask': [1], 'input_ids': [1]}


def tiny_model():
    torch.manual_seed(0)
    return Lfm3VlForConditionalGeneration(CONFIG).eval()


# The inputs compile_dynamic fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[249, 249, 249, 154, 175, 161, 48, 73, 252] + [255] * 4 + [253, 132, 54, 43, 99], [249,
        249, 249, 13, 185, 190, 125, 252] + [255] * 4 + [253, 81, 143, 70, 68, 177]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 15, [0, 0, 0] + [1] * 15], dtype=torch.int64),
    'pixel_values': torch.randn((32, 384), generator=g, dtype=torch.float32),
    'image_grid_thw': torch.tensor([[1, 4, 4], [1, 4, 4]], dtype=torch.int64),
}

for name, dims in MARKED.items():  # the prompt axis of every sequence-aligned input
    for value in inputs[name] if isinstance(inputs[name], (list, tuple)) else [inputs[name]]:
        for dim in dims:
            torch._dynamo.mark_dynamic(value, dim)
model = tiny_model()
compiled = torch.compile(model, fullgraph=True, backend=BACKEND)
with torch.no_grad():
    compiled(**inputs)  # before any eager call, the prompt length dynamic
