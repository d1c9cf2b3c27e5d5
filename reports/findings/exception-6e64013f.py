"""[StaticCache] raises at transformers.models.kyutai_speech_to_text.modeling_kyutai_speech_to_text:KyutaiSpeechToTextF
orConditionalGeneration.generate: KyutaiSpeechToTextForConditionalGeneration (static_cache).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float16). Run: python exception-6e64013f.py
The suite saw: AttributeError: 'NoneType' object has no attribute 'shape' (at
transformers/models/kyutai_speech_to_text/modeling_kyutai_speech_to_text.py:909)
Shared by 1 class(es), 12 cell(s) of 12 check(s) (index.json lists them).
"""

import torch
from transformers import KyutaiSpeechToTextConfig, KyutaiSpeechToTextForConditionalGeneration, MimiConfig

CONFIG = KyutaiSpeechToTextConfig(codebook_vocab_size=64, vocab_size=256, hidden_size=64, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=4, head_dim=16, ffn_dim=128, audio_bos_token_id=63,
    audio_pad_token_id=2304, bos_token_id=254,
    codec_config=MimiConfig(hidden_size=64, num_filters=4, codebook_size=64,
        vector_quantization_hidden_dimension=64, upsample_groups=64, num_hidden_layers=2, intermediate_size=128,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16))
DTYPE = torch.float16
NEW_TOKENS = 10


def tiny_model():
    torch.manual_seed(0)
    return KyutaiSpeechToTextForConditionalGeneration(CONFIG).to(DTYPE).eval()


def in_dtype(value):
    """Floating tensors cast to the run's dtype (DTYPE), as the suite cast the inputs it fed."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(DTYPE)
    if isinstance(value, (list, tuple)):
        return type(value)(in_dtype(v) for v in value)
    return value


def sample_inputs():
    """The inputs static_cache fed: token ids literal."""
    inputs = {
        'input_ids': torch.tensor([[[3] + [2304] * 32, [3] + [2304] * 32, [3] + [2304] * 32, [33, 34, 10, 46, 54, 44,
            56, 15, 12, 37, 11, 18, 9, 32, 30, 62, 2, 53, 2, 53, 32, 43, 17, 15, 18, 1, 0, 53, 33, 10, 60, 10, 44], [58,
            8, 25, 11, 21, 7, 61, 55, 32, 40, 25, 32, 61, 13, 11, 59, 40, 17, 5, 50, 4, 2, 2, 31, 58, 27, 51, 22, 14,
            49, 7, 17, 4], [57, 35, 47, 15, 52, 18, 5, 39, 4, 19, 26, 59, 62, 5, 52, 48, 2, 1, 61, 52, 29, 49, 31, 28,
            10, 19, 59, 52, 61, 53, 1, 59, 12], [125, 28, 39, 44, 6, 15, 5, 44, 17, 11, 16, 41, 29, 58, 60, 52, 39, 37,
            24, 60, 46, 1, 34, 49, 26, 1, 19, 7, 43, 28, 25, 34, 16], [108, 14, 58, 32, 20, 30, 4, 42, 22, 12, 48, 45,
            10, 12, 11, 34, 16, 39, 31, 27, 7, 44, 28, 53, 23, 11, 38, 37, 35, 50, 20, 8, 21], [74, 30, 15, 49, 58, 30,
            46, 47, 57, 60, 30, 49, 41, 7, 46, 45, 36, 6, 45, 33, 8, 38, 14, 11, 30, 26, 23, 0, 21, 53, 52, 11, 13]],
            [[46, 56, 29, 9, 41, 20, 4, 30, 15, 27, 53, 45, 3, 50, 9, 59, 35, 27, 4, 49, 47, 24, 61, 61, 36, 27, 43, 16,
            57, 57, 33, 28, 59], [33, 4, 22, 58, 40, 52, 27, 44, 50, 20, 25, 54, 9, 21, 55, 21, 55, 28, 19, 57, 23, 2,
            42, 24, 19, 33, 34, 22, 31, 7, 50, 4, 26], [23, 48, 17, 61, 19, 56, 28, 5, 39, 46, 10, 12, 59, 26, 41, 5, 0,
            22, 61, 15, 38, 39, 12, 10, 60, 48, 20, 30, 34, 58, 18, 23, 2], [193, 40, 48, 15, 44, 45, 56, 38, 11, 1, 42,
            55, 62, 41, 23, 48, 13, 44, 48, 10, 51, 27, 33, 16, 33, 52, 36, 37, 3, 50, 49, 25, 29], [65, 17, 58, 48, 4,
            18, 11, 46, 27, 52, 59, 39, 22, 22, 56, 51, 9, 40, 23, 17, 4, 8, 30, 17, 30, 53, 17, 37, 9, 39, 6, 7, 48],
            [141, 19, 56, 29, 29, 56, 22, 45, 26, 51, 25, 23, 22, 27, 33, 59, 46, 1, 38, 50, 38, 53, 11, 36, 37, 20, 3,
            12, 15, 10, 0, 18, 49], [58, 49, 20, 53, 21, 62, 32, 57, 13, 14, 46, 16, 62, 39, 13, 12, 30, 19, 5, 1, 58,
            49, 35, 46, 1, 17, 12, 62, 59, 32, 21, 25, 61], [193, 28, 46, 27, 35, 37, 39, 17, 26, 32, 28, 29, 18, 56,
            36, 55, 44, 22, 25, 7, 38, 28, 19, 46, 34, 39, 35, 34, 58, 56, 5, 55, 32], [27, 9, 54, 37, 62, 17, 37, 23,
            38, 39, 36, 58, 53, 25, 57, 17, 18, 55, 24, 41, 46, 40, 1, 59, 26, 10, 5, 34, 34, 27, 48, 39, 12]]],
            dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    }
    return {k: in_dtype(v) for k, v in inputs.items()}


def greedy(model, inputs, new_tokens, **extra):
    """Greedy generate of exactly `new_tokens` tokens (EOS cannot stop it), generate's auto-compile off."""
    with torch.no_grad():
        return model.generate(**inputs, do_sample=False, num_beams=1, max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, disable_compile=True, **extra)


inputs = sample_inputs()
dynamic = greedy(tiny_model(), inputs, NEW_TOKENS, output_scores=True, return_dict_in_generate=True)
