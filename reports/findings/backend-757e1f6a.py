"""[torch.compile] backend compile fails at <inductor generated code>:call: GraniteDoclingForConditionalGeneration
(compile_prefill, backend inductor).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python backend-757e1f6a.py
The suite saw: fullgraph compile failed: inductor failed where dynamo alone traces the same call fullgraph (backend
eager): its generated code raised: AssertionError: expected size 64==64, stride 1==16 at dim=1; expected size  ...
Shared by 4 class(es), 12 cell(s) of 3 check(s) (index.json lists them).
"""

import torch
from transformers import (GraniteDoclingConfig, GraniteDoclingForConditionalGeneration, GraniteDoclingTextConfig,
    GraniteDoclingVisionConfig)

CONFIG = GraniteDoclingConfig(
    text_config=GraniteDoclingTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, pad_token_id=253, bos_token_id=254, eos_token_id=254),
    vision_config=GraniteDoclingVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, out_hidden_size=64, deepstack_visual_indexes=[0, 1]),
    image_token_id=255, pad_token_id=253)
BACKEND = 'inductor'


def tiny_model():
    torch.manual_seed(0)
    return GraniteDoclingForConditionalGeneration(CONFIG).eval()


# The inputs compile_prefill fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[253, 253, 0, 1, 2, 3, 4, 252, 255, 5, 6, 7, 8], list(range(9, 15)) + [252, 255, 15, 16,
        17, 18, 19]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0] + [1] * 11, [1] * 13], dtype=torch.int64),
    'pixel_values': (torch.randn((2, 1, 3, 32, 32), generator=g, dtype=torch.float32) * 1.09 + 0.192),
    'pixel_attention_mask': torch.full((2, 1), True, dtype=torch.bool),
}

with torch.no_grad():  # dynamo alone (backend eager) traces the same call fullgraph
    torch.compile(tiny_model(), fullgraph=True, backend="eager")(**inputs)
torch._dynamo.reset()
compiled = torch.compile(tiny_model(), fullgraph=True, backend=BACKEND)
with torch.no_grad():
    compiled(**inputs)  # compiled before any eager call on this instance
