"""[torch.export] export fails at
transformers.models.musicgen_melody.modeling_musicgen_melody:MusicgenMelodyDecoder.forward:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float16). Run: python export_error-ec503377.py
The suite saw: torch.export.export(strict=True): AssertionError: Dynamo attempts to add additional input during
export: value=0.8444218635559082, source=RandomValueSource(random_call_index=0) (at builder.py:3467)
Shared by 1 class(es), 3 cell(s) of 3 check(s) (index.json lists them).
"""

import torch
from transformers import (EncodecConfig, MusicgenMelodyConfig, MusicgenMelodyDecoderConfig,
    MusicgenMelodyForConditionalGeneration, T5Config)

CONFIG = MusicgenMelodyConfig(
    text_encoder=T5Config(is_encoder_decoder=False, vocab_size=256, d_model=64, d_ff=128, num_layers=2,
        num_decoder_layers=2, num_heads=4, use_cache=False),
    audio_encoder=EncodecConfig(hidden_size=64, num_filters=4, codebook_size=64, codebook_dim=64),
    decoder=MusicgenMelodyDecoderConfig(vocab_size=64, num_hidden_layers=2, ffn_dim=128, num_attention_heads=4,
        hidden_size=64, pad_token_id=64, bos_token_id=64))
DTYPE = torch.float16
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return MusicgenMelodyForConditionalGeneration(CONFIG).to(DTYPE).eval()


def in_dtype(value):
    """Floating tensors cast to the run's dtype (DTYPE), as the suite cast the inputs it fed."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(DTYPE)
    if isinstance(value, (list, tuple)):
        return type(value)(in_dtype(v) for v in value)
    return value


def sample_inputs():
    """The inputs export_forward_strict fed: token ids literal; input_features seeded random of the recorded shape.
    """
    g = torch.Generator().manual_seed(0)
    inputs = {
        'input_ids': torch.tensor([[0, 0, 0, 63, 91, 193, 76, 18, 167], [143, 147, 56, 135, 69, 45, 124, 22, 118]],
            dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
        'decoder_input_ids': torch.tensor([[64, 24, 24], [64, 12, 58], [64, 1, 38], [64, 39, 23], [64, 46, 24], [64, 17,
            37], [64, 25, 13], [64, 8, 9]], dtype=torch.int64),
        'input_features': torch.randn((2, 8, 12), generator=g, dtype=torch.float32),
    }
    return {k: in_dtype(v) for k, v in inputs.items()}


inputs = sample_inputs()
with torch.no_grad():
    torch.export.export(tiny_model(), (), kwargs=dict(inputs, **CONSTANTS), strict=True)
