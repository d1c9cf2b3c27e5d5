"""[StaticCache] raises at
transformers.models.higgs_audio_v2.generation_higgs_audio_v2:HiggsAudioV2GenerationMixin._get_logits_processor:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python exception-6c09fc37.py
The suite saw: ValueError: HiggsAudioV2 generates audio codebook logits, not text logits. The following logits
processors are not compatible: ['MinLengthLogitsProcessor', 'MinNewTokensLengthLogitsProcessor']. Only the fol ...
Shared by 1 class(es), 12 cell(s) of 12 check(s) (index.json lists them).
"""

import torch
from transformers import HiggsAudioV2Config, HiggsAudioV2ForConditionalGeneration

CONFIG = HiggsAudioV2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, pad_token_id=251, eos_token_id=252, head_dim=16, codebook_size=64,
    audio_token_id=255, audio_bos_token_id=253, audio_delay_token_id=254, audio_stream_bos_id=249,
    audio_stream_eos_id=250)
NEW_TOKENS = 10


def tiny_model():
    torch.manual_seed(0)
    return HiggsAudioV2ForConditionalGeneration(CONFIG).eval()


def sample_inputs():
    """The inputs static_cache fed: token ids literal."""
    return {
        'input_ids': torch.tensor([[251, 251, 251, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
            dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    }


def greedy(model, inputs, new_tokens, **extra):
    """Greedy generate of exactly `new_tokens` tokens (EOS cannot stop it), generate's auto-compile off."""
    with torch.no_grad():
        return model.generate(**inputs, do_sample=False, num_beams=1, max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, disable_compile=True, **extra)


inputs = sample_inputs()
dynamic = greedy(tiny_model(), inputs, NEW_TOKENS, output_scores=True, return_dict_in_generate=True)
