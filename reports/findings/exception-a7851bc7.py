"""[StaticCache] raises at transformers.models.prophetnet.modeling_prophetnet:ProphetNetDecoder.prepare_attention_mask:
ProphetNetForConditionalGeneration (static_cache).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float16). Run: python exception-a7851bc7.py
The suite saw: RuntimeError: The size of tensor a (3) must match the size of tensor b (12) at non-singleton
dimension 5 (at transformers/models/prophetnet/modeling_prophetnet.py:1315)
Shared by 1 class(es), 9 cell(s) of 9 check(s) (index.json lists them).
"""

import torch
from transformers import ProphetNetConfig, ProphetNetForConditionalGeneration

CONFIG = ProphetNetConfig(vocab_size=256, hidden_size=64, encoder_ffn_dim=128, num_encoder_layers=2,
    num_encoder_attention_heads=4, decoder_ffn_dim=128, num_decoder_layers=2, num_decoder_attention_heads=4)
DTYPE = torch.float16
NEW_TOKENS = 10


def tiny_model():
    torch.manual_seed(0)
    return ProphetNetForConditionalGeneration(CONFIG).to(DTYPE).eval()


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
        'input_ids': torch.tensor([[0, 0, 0, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
            dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
        'decoder_input_ids': torch.tensor([[0, 123, 191], [0, 116, 17]], dtype=torch.int64),
    }
    return {k: in_dtype(v) for k, v in inputs.items()}


def greedy(model, inputs, new_tokens, **extra):
    """Greedy generate of exactly `new_tokens` tokens (EOS cannot stop it), generate's auto-compile off."""
    with torch.no_grad():
        return model.generate(**inputs, do_sample=False, num_beams=1, max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, disable_compile=True, **extra)


inputs = sample_inputs()
dynamic = greedy(tiny_model(), inputs, NEW_TOKENS, output_scores=True, return_dict_in_generate=True)
static = greedy(tiny_model(), inputs, NEW_TOKENS, output_scores=True, return_dict_in_generate=True,
                cache_implementation="static")
