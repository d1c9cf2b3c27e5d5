"""[torch.compile] compile verdict depends on an earlier eager call at
transformers.models.voxtral_realtime.modeling_voxtral_realtime:VoxtralRealtimeConv1dCacheLayer.lazy_initialization:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python call_order-2f91cb11.py
The suite saw: call order changes the verdict: compiled before any eager call: fullgraph compile failed:
Unsupported: Unsupported context manager: Dynamo does not know how to enter a `RLock` context manager. (at ...
Shared by 1 class(es), 6 cell(s) of 6 check(s) (index.json lists them).
"""

import torch
from transformers import (VoxtralRealtimeConfig, VoxtralRealtimeEncoderConfig, VoxtralRealtimeForConditionalGeneration,
    VoxtralRealtimeTextConfig)

CONFIG = VoxtralRealtimeConfig(
    audio_config=VoxtralRealtimeEncoderConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_mel_bins=16, head_dim=16),
    text_config=VoxtralRealtimeTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-05,
        rope_parameters={'rope_theta': 1000000.0, 'rope_type': 'default'}, sliding_window=8192,
        tie_word_embeddings=True),
    hidden_size=64)
BACKEND = 'eager'


def tiny_model():
    torch.manual_seed(0)
    return VoxtralRealtimeForConditionalGeneration(CONFIG).eval()


# The inputs compile_prefill fed: token ids literal; input_features seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
        dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    'input_features': torch.randn((2, 16, 72), generator=g, dtype=torch.float32),
    'num_delay_tokens': 6,
}

def logits_of(output):
    """The logits of a model output: `logits`, a scorer's first `logits*` field, a tuple's first tensor."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict) and "logits" in output:
        return output["logits"]
    if isinstance(getattr(output, "logits", None), torch.Tensor):
        return output.logits
    if isinstance(output, dict):
        for key, value in output.items():
            if key.startswith("logits") and isinstance(value, torch.Tensor):
                return value
    return output[0]


model = tiny_model()
compiled = torch.compile(model, fullgraph=True, backend=BACKEND)
reference = tiny_model()  # a second instance, same weights
with torch.no_grad():
    expected = logits_of(reference(**inputs))
def attempt(module):
    """The exception a compiled call raises, None when it runs."""
    try:
        with torch.no_grad():
            module(**inputs)
    except Exception as exc:
        return exc
    return None

cold = attempt(compiled)  # compiled before any eager call: fails
with torch.no_grad():  # the eager-called instance, traced once with graph breaks allowed
    torch.compile(reference, backend="eager")(**inputs)
torch._dynamo.reset()
warm = attempt(torch.compile(reference, fullgraph=True, backend=BACKEND))  # compiled after eager
print(f"compiled before any eager call: {cold or 'pass'}; after an eager call: {warm or 'pass'}")
if (cold is None) != (warm is None):  # the call order changes the verdict: the failing one, as raised
    raise cold or warm
