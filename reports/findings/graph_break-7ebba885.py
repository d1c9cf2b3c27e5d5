"""[torch.compile] graph break under fullgraph at
transformers.utils.output_capturing:select_hidden_states.<locals>.wrapped_fn.<locals>.wrapper:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python graph_break-7ebba885.py
The suite saw: fullgraph compile failed: Unsupported: mapping proxy affected by dictionary mutation: A dict has been
modified while we have an existing mappingproxy object. A mapping proxy object, as the name suggest, proxies a ...
Shared by 8 class(es), 54 cell(s) of 7 check(s) (index.json lists them).
"""

import torch
from transformers import CLIPVisionConfig, LlamaConfig, LlavaNextVideoConfig, LlavaNextVideoForConditionalGeneration

CONFIG = LlavaNextVideoConfig(
    vision_config=CLIPVisionConfig(hidden_size=64, intermediate_size=128, projection_dim=64, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, vocab_size=256),
    text_config=LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16),
    image_token_index=255, video_token_index=254,
    image_grid_pinpoints=[[32, 64], [64, 32], [64, 64], [96, 32], [32, 96]])
BACKEND = 'eager'
MARKED = {'attention_mask': [1], 'input_ids': [1]}


def tiny_model():
    torch.manual_seed(0)
    return LlavaNextVideoForConditionalGeneration(CONFIG).eval()


# The inputs compile_dynamic fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 84, 16, 146, 48, 11] + [255] * 52 + [137, 92, 67, 116], [0, 0, 0, 180, 84, 18,
        182] + [255] * 52 + [44, 32, 76, 15, 75]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 61, [0, 0, 0] + [1] * 61], dtype=torch.int64),
    'pixel_values': torch.randn((2, 3, 3, 32, 32), generator=g, dtype=torch.float32),
    'image_sizes': torch.tensor([[32, 64], [32, 64]], dtype=torch.int64),
}

for name, dims in MARKED.items():  # the prompt axis of every sequence-aligned input
    for value in inputs[name] if isinstance(inputs[name], (list, tuple)) else [inputs[name]]:
        for dim in dims:
            torch._dynamo.mark_dynamic(value, dim)
model = tiny_model()
compiled = torch.compile(model, fullgraph=True, backend=BACKEND)
with torch.no_grad():
    compiled(**inputs)  # before any eager call, the prompt length dynamic
