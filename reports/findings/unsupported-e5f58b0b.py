"""[torch.export] unsupported construct at
transformers.models.voxtral_realtime.modeling_voxtral_realtime:VoxtralRealtimeCausalConv1d.forward:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python unsupported-e5f58b0b.py
The suite saw: torch.export.export(strict=True): Unsupported: Unsupported context manager (at
transformers/models/voxtral_realtime/modeling_voxtral_realtime.py:229)
Shared by 1 class(es), 3 cell(s) of 3 check(s) (index.json lists them).
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
CONSTANTS = {'num_delay_tokens': 6, 'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return VoxtralRealtimeForConditionalGeneration(CONFIG).eval()


# The inputs export_forward_strict fed: token ids literal; input_features seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
        dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    'input_features': torch.randn((2, 16, 72), generator=g, dtype=torch.float32),
}

with torch.no_grad():
    torch.export.export(tiny_model(), (), kwargs=dict(inputs, **CONSTANTS), strict=True)
