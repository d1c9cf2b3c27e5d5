"""[torch.compile] graph break under fullgraph at transformers.modeling_utils:AttentionInterface.get_interface:
FunAsrNanoForConditionalGeneration (compile_dynamic).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python graph_break-2a78a93b.py
The suite saw: fullgraph compile failed: Unsupported: logging.Logger method not supported for non-export cases:
logging.Logger methods are not supported for non-export cases. (at transformers/modeling_utils.py:5264: ...
Shared by 1 class(es), 7 cell(s) of 7 check(s) (index.json lists them).
"""

import torch
from transformers import (FunAsrNanoAdaptorConfig, FunAsrNanoConfig, FunAsrNanoEncoderConfig,
    FunAsrNanoForConditionalGeneration, Qwen3Config)

CONFIG = FunAsrNanoConfig(
    adaptor_config=FunAsrNanoAdaptorConfig(hidden_size=64, num_attention_heads=4, intermediate_size=16,
        projector_hidden_size=64),
    audio_config=FunAsrNanoEncoderConfig(num_mel_bins=16, hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_timestamp_prediction_layers=2),
    text_config=Qwen3Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=40960,
        tie_word_embeddings=True, max_window_layers=2, layer_types=['full_attention', 'full_attention']),
    audio_token_id=255)
BACKEND = 'eager'
MARKED = {'attention_mask': [1], 'input_ids': [1]}


def tiny_model():
    torch.manual_seed(0)
    return FunAsrNanoForConditionalGeneration(CONFIG).eval()


# The inputs compile_dynamic fed: token ids literal; input_features seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 94, 37, 50, 58, 111] + [255] * 64 + [181, 136, 20, 143], [0, 0, 0, 106, 171,
        79, 102] + [255] * 64 + [135, 27, 62, 180, 33]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 73, [0, 0, 0] + [1] * 73], dtype=torch.int64),
    'input_features': torch.randn((2, 64, 112), generator=g, dtype=torch.float32),
    'input_features_mask': torch.full((2, 64), 1, dtype=torch.int64),
}

for name, dims in MARKED.items():  # the prompt axis of every sequence-aligned input
    for value in inputs[name] if isinstance(inputs[name], (list, tuple)) else [inputs[name]]:
        for dim in dims:
            torch._dynamo.mark_dynamic(value, dim)
model = tiny_model()
compiled = torch.compile(model, fullgraph=True, backend=BACKEND)
with torch.no_grad():
    compiled(**inputs)  # before any eager call, the prompt length dynamic
