"""[torch.compile] graph break under fullgraph at transformers.models.ovis2.modeling_ovis2:Ovis2Model.forward:
Ovis2ForConditionalGeneration (compile_dynamic).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python graph_break-465bd903.py
The suite saw: fullgraph compile failed: Unsupported: Data-dependent branching: Detected data-dependent branching
(e.g. `if my_tensor.sum() > 0:`). Dynamo does not support tracing dynamic control flow. (at ...
Shared by 1 class(es), 7 cell(s) of 7 check(s) (index.json lists them).
"""

import torch
from transformers import Ovis2Config, Ovis2ForConditionalGeneration, Ovis2VisionConfig, Qwen2Config

CONFIG = Ovis2Config(
    vision_config=Ovis2VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, vocab_size=256),
    text_config=Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_window_layers=2,
        layer_types=['full_attention', 'full_attention']),
    image_token_id=250, visual_indicator_token_ids=[251, 252, 253, 254, 255], vocab_size=256, hidden_size=64)
BACKEND = 'eager'
MARKED = {'attention_mask': [1], 'input_ids': [1]}


def tiny_model():
    torch.manual_seed(0)
    return Ovis2ForConditionalGeneration(CONFIG).eval()


# The inputs compile_dynamic fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 66, 10, 187, 194, 174] + [250] * 16 + [108, 164, 68, 44], [0, 0, 0, 153, 99,
        85, 52] + [250] * 16 + [6, 151, 56, 186, 77]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 25, [0, 0, 0] + [1] * 25], dtype=torch.int64),
    'pixel_values': torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32),
}

for name, dims in MARKED.items():  # the prompt axis of every sequence-aligned input
    for value in inputs[name] if isinstance(inputs[name], (list, tuple)) else [inputs[name]]:
        for dim in dims:
            torch._dynamo.mark_dynamic(value, dim)
model = tiny_model()
compiled = torch.compile(model, fullgraph=True, backend=BACKEND)
with torch.no_grad():
    compiled(**inputs)  # before any eager call, the prompt length dynamic
