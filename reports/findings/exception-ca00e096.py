"""[torch.compile] raises at transformers.generation.utils:GenerationMixin._prepare_static_cache:
MusicgenMelodyForConditionalGeneration (compile_decode).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python exception-ca00e096.py
The suite saw: generate with a StaticCache and compiled decode failed: KeyError: 'encoder_outputs' (at
transformers/generation/utils.py:2196)
Shared by 1 class(es), 9 cell(s) of 9 check(s) (index.json lists them).
"""

import torch
from transformers import (EncodecConfig, MusicgenMelodyConfig, MusicgenMelodyDecoderConfig,
    MusicgenMelodyForConditionalGeneration, T5Config)
from transformers.generation.configuration_utils import CompileConfig

CONFIG = MusicgenMelodyConfig(
    text_encoder=T5Config(is_encoder_decoder=False, vocab_size=256, d_model=64, d_ff=128, num_layers=2,
        num_decoder_layers=2, num_heads=4, use_cache=False),
    audio_encoder=EncodecConfig(hidden_size=64, num_filters=4, codebook_size=64, codebook_dim=64),
    decoder=MusicgenMelodyDecoderConfig(vocab_size=64, num_hidden_layers=2, ffn_dim=128, num_attention_heads=4,
        hidden_size=64, pad_token_id=64, bos_token_id=64))
BACKEND = 'eager'
NEW_TOKENS = 5


def tiny_model():
    torch.manual_seed(0)
    return MusicgenMelodyForConditionalGeneration(CONFIG).eval()


# The inputs compile_decode fed: token ids literal; input_features seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 63, 91, 193, 76, 18, 167], [143, 147, 56, 135, 69, 45, 124, 22, 118]],
        dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    'decoder_input_ids': torch.tensor([[64, 24, 24], [64, 12, 58], [64, 1, 38], [64, 39, 23], [64, 46, 24], [64, 17,
        37], [64, 25, 13], [64, 8, 9]], dtype=torch.int64),
    'input_features': torch.randn((2, 8, 12), generator=g, dtype=torch.float32),
}

model = tiny_model()
config = CompileConfig(fullgraph=True, backend=BACKEND, mode=None)
config._compile_all_devices = True  # generate compiles on CUDA only unless told otherwise
with torch.no_grad():
    model.generate(**inputs, do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                   disable_compile=False, cache_implementation="static", compile_config=config)
