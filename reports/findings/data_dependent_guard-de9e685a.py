"""[torch.compile] data-dependent guard at transformers.integrations.sdpa_attention:sdpa_attention_forward:
MiniCPMOcrForConditionalGeneration (compile_dynamic).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-de9e685a.py
The suite saw: fullgraph compile failed: UserError: Consider annotating your code using torch._check*(). Could not
guard on data-dependent expression u4 > 1 (unhinted: u4 > 1). (Size-like symbols: none) (at ...
Shared by 11 class(es), 89 cell(s) of 15 check(s) (index.json lists them).
"""

import torch
from transformers import (MiniCPMOcrConfig, MiniCPMOcrForConditionalGeneration, MiniCPMOcrVisionConfig,
    Qwen3_5TextConfig)

CONFIG = MiniCPMOcrConfig(
    text_config=Qwen3_5TextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2,
        rope_parameters={'rope_theta': 10000.0, 'partial_rotary_factor': 0.25, 'rope_type': 'default',
            'mrope_section': [1, 1, 1]},
        head_dim=24, linear_key_head_dim=16, linear_value_head_dim=16,
        layer_types=['linear_attention', 'full_attention']),
    vision_config=MiniCPMOcrVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8),
    image_token_id=255, video_token_id=254, patch_size=8)
BACKEND = 'eager'
MARKED = {'attention_mask': [1], 'input_ids': [1]}


def tiny_model():
    torch.manual_seed(0)
    return MiniCPMOcrForConditionalGeneration(CONFIG).eval()


# The inputs compile_dynamic fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0] * 4 + [117, 92, 148, 160, 110] + [255] * 4 + [198, 103, 40, 116], [119, 119, 88,
        144] + [255] * 8 + [5, 181, 169, 129, 67]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0] * 4 + [1] * 13, [1] * 17], dtype=torch.int64),
    'pixel_values': torch.randn((1, 3, 8, 384), generator=g, dtype=torch.float32),
    'target_sizes': torch.tensor([[4, 4], [4, 8]], dtype=torch.int32),
}

for name, dims in MARKED.items():  # the prompt axis of every sequence-aligned input
    for value in inputs[name] if isinstance(inputs[name], (list, tuple)) else [inputs[name]]:
        for dim in dims:
            torch._dynamo.mark_dynamic(value, dim)
model = tiny_model()
compiled = torch.compile(model, fullgraph=True, backend=BACKEND)
with torch.no_grad():
    compiled(**inputs)  # before any eager call, the prompt length dynamic
