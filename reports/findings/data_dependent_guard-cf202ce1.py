"""[torch.compile] data-dependent guard at
transformers.models.video_llama_3.modeling_video_llama_3:VideoLlama3VisionAttention.forward:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-cf202ce1.py
The suite saw: fullgraph compile failed: GuardOnDataDependentSymNode: Could not guard on data-dependent expression
Eq(u8, 0) (unhinted: Eq(u8, 0)). (Size-like symbols: u8) (at ...
Shared by 1 class(es), 23 cell(s) of 23 check(s) (index.json lists them).
"""

import torch
from transformers import (Qwen2Config, VideoLlama3Config, VideoLlama3ForConditionalGeneration, VideoLlama3VisionConfig)

CONFIG = VideoLlama3Config(
    text_config=Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_window_layers=2,
        layer_types=['full_attention', 'full_attention']),
    vision_config=VideoLlama3VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, patch_size=8),
    image_token_id=254, video_token_id=255)
BACKEND = 'eager'
MARKED = {'attention_mask': [1], 'input_ids': [1]}


def tiny_model():
    torch.manual_seed(0)
    return VideoLlama3ForConditionalGeneration(CONFIG).eval()


# The inputs compile_dynamic fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 142, 82, 189, 195, 37] + [254] * 4 + [195, 49, 32, 173], [0, 0, 0, 164, 20, 88,
        101] + [254] * 4 + [88, 107, 143, 80, 18]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 13, [0, 0, 0] + [1] * 13], dtype=torch.int64),
    'pixel_values': torch.randn((8, 192), generator=g, dtype=torch.float32),
    'image_grid_thw': torch.tensor([[1, 2, 2], [1, 2, 2]], dtype=torch.int64),
    'image_merge_sizes': torch.full((2,), 1, dtype=torch.int64),
}

for name, dims in MARKED.items():  # the prompt axis of every sequence-aligned input
    for value in inputs[name] if isinstance(inputs[name], (list, tuple)) else [inputs[name]]:
        for dim in dims:
            torch._dynamo.mark_dynamic(value, dim)
model = tiny_model()
compiled = torch.compile(model, fullgraph=True, backend=BACKEND)
with torch.no_grad():
    compiled(**inputs)  # before any eager call, the prompt length dynamic
