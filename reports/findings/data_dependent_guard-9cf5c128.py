"""[torch.export] data-dependent guard at transformers.models.qwen3_asr.modeling_qwen3_asr:get_audio_cu_seqlens:
Qwen3ASRForConditionalGeneration (export_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float16). Run: python data_dependent_guard-9cf5c128.py
The suite saw: torch.export.export(strict=False): GuardOnDataDependentSymNode: Could not extract specialized integer
from data-dependent expression u1 (unhinted: u1). (Size-like symbols: none) (at ...
Shared by 1 class(es), 36 cell(s) of 36 check(s) (index.json lists them).
"""

import torch
from transformers import Qwen3ASRConfig, Qwen3ASREncoderConfig, Qwen3ASRForConditionalGeneration, Qwen3Config

CONFIG = Qwen3ASRConfig(
    audio_config=Qwen3ASREncoderConfig(num_mel_bins=16, encoder_layers=2, encoder_attention_heads=4,
        encoder_ffn_dim=128, d_model=64, downsample_hidden_size=64),
    text_config=Qwen3Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=65536,
        tie_word_embeddings=True, max_window_layers=2, layer_types=['full_attention', 'full_attention']),
    audio_token_id=254, timestamp_token_id=255, pad_token_id=253, eos_token_id=[252, 253])
DTYPE = torch.float16
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return Qwen3ASRForConditionalGeneration(CONFIG).to(DTYPE).eval()


def in_dtype(value):
    """Floating tensors cast to the run's dtype (DTYPE), as the suite cast the inputs it fed."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(DTYPE)
    if isinstance(value, (list, tuple)):
        return type(value)(in_dtype(v) for v in value)
    return value


def sample_inputs():
    """The inputs export_forward fed: token ids literal; input_features seeded random of the recorded shape."""
    g = torch.Generator().manual_seed(0)
    inputs = {
        'input_ids': torch.tensor([[253, 253, 253, 130, 168, 51, 60, 6] + [254] * 728 + [64, 111, 24, 190], [253, 253,
            253, 69, 22, 34, 124] + [254] * 728 + [112, 101, 37, 161, 141]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 737, [0, 0, 0] + [1] * 737], dtype=torch.int64),
        'input_features': torch.randn((2, 16, 100), generator=g, dtype=torch.float32),
        'input_features_mask': torch.full((2, 100), 1, dtype=torch.int64),
    }
    return {k: in_dtype(v) for k, v in inputs.items()}


inputs = sample_inputs()
with torch.no_grad():
    torch.export.export(tiny_model(), (), kwargs=dict(inputs, **CONSTANTS), strict=False)
