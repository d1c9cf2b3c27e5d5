"""[StaticCache] raises at transformers.models.t5gemma2.modeling_t5gemma2:T5Gemma2Decoder.forward:
T5Gemma2ForConditionalGeneration (static_cache).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python exception-9673adfe.py
The suite saw: TypeError: expected Tensor as element 0 in argument 0, but got NoneType (at
transformers/models/t5gemma2/modeling_t5gemma2.py:1022)
Shared by 1 class(es), 9 cell(s) of 9 check(s) (index.json lists them).
"""

import torch
from transformers import (SiglipVisionConfig, T5Gemma2Config, T5Gemma2DecoderConfig, T5Gemma2EncoderConfig,
    T5Gemma2ForConditionalGeneration, T5Gemma2TextConfig)

CONFIG = T5Gemma2Config(
    encoder=T5Gemma2EncoderConfig(
        text_config=T5Gemma2TextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            layer_types=['sliding_attention', 'full_attention'], dropout_rate=0.0),
        vision_config=SiglipVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, image_size=32, patch_size=8),
        mm_tokens_per_image=4, boi_token_index=253, eoi_token_index=254, image_token_index=255),
    decoder=T5Gemma2DecoderConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        layer_types=['sliding_attention', 'full_attention'], dropout_rate=0.0),
    image_token_index=255, eoi_token_index=254, vocab_size=256)
NEW_TOKENS = 10


def tiny_model():
    torch.manual_seed(0)
    return T5Gemma2ForConditionalGeneration(CONFIG).eval()


def sample_inputs():
    """The inputs static_cache fed: token ids literal; pixel_values seeded random of the recorded shape."""
    g = torch.Generator().manual_seed(0)
    return {
        'input_ids': torch.tensor([[0, 0, 3, 4, 5, 6, 7, 253] + [255] * 4 + [254, 8, 9, 10, 11], list(range(12,
            18)) + [253] + [255] * 4 + [254, 18, 19, 20, 21, 22]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0] + [1] * 15, [1] * 17], dtype=torch.int64),
        'pixel_values': (torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32) * 0.583 + 0.00223),
        'decoder_input_ids': torch.tensor([[0, 118, 193], [0, 119, 64]], dtype=torch.int64),
    }


def greedy(model, inputs, new_tokens, **extra):
    """Greedy generate of exactly `new_tokens` tokens (EOS cannot stop it), generate's auto-compile off."""
    with torch.no_grad():
        return model.generate(**inputs, do_sample=False, num_beams=1, max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, disable_compile=True, **extra)


inputs = sample_inputs()
dynamic = greedy(tiny_model(), inputs, NEW_TOKENS, output_scores=True, return_dict_in_generate=True)
static = greedy(tiny_model(), inputs, NEW_TOKENS, output_scores=True, return_dict_in_generate=True,
                cache_implementation="static")
