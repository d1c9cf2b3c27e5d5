"""[torch.compile] graph break under fullgraph at transformers.integrations.sdpa_attention:sdpa_attention_forward:
MoonshineForConditionalGeneration (compile_dynamic).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python graph_break-0eb37f0a.py
The suite saw: fullgraph compile failed: Unsupported: TypeError when making fake tensor call (at
transformers/integrations/sdpa_attention.py:182: `attn_output = torch.nn.functional.scaled_dot_product_attention(`)
Shared by 2 class(es), 2 cell(s) of 1 check(s) (index.json lists them).
"""

import torch
from transformers import MoonshineConfig, MoonshineForConditionalGeneration

CONFIG = MoonshineConfig(vocab_size=256, hidden_size=64, intermediate_size=128, encoder_num_hidden_layers=2,
    decoder_num_hidden_layers=2, encoder_num_attention_heads=4, decoder_num_attention_heads=4,
    encoder_num_key_value_heads=4, decoder_num_key_value_heads=4)
BACKEND = 'eager'
MARKED = {'decoder_input_ids': [1]}


def tiny_model():
    torch.manual_seed(0)
    return MoonshineForConditionalGeneration(CONFIG).eval()


# The inputs compile_dynamic fed: token ids literal; input_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_values': torch.randn((2, 3200), generator=g, dtype=torch.float32),
    'attention_mask': torch.full((2, 3200), 1, dtype=torch.int64),
    'decoder_input_ids': torch.tensor([[1, 157, 100], [1, 104, 128]], dtype=torch.int64),
}

for name, dims in MARKED.items():  # the prompt axis of every sequence-aligned input
    for value in inputs[name] if isinstance(inputs[name], (list, tuple)) else [inputs[name]]:
        for dim in dims:
            torch._dynamo.mark_dynamic(value, dim)
model = tiny_model()
compiled = torch.compile(model, fullgraph=True, backend=BACKEND)
with torch.no_grad():
    compiled(**inputs)  # before any eager call, the prompt length dynamic
