"""[StaticCache] raises at torch.utils._contextlib:context_decorator.<locals>.decorate_context:
Pop2PianoForConditionalGeneration (static_cache).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float16). Run: python exception-01a8ebce.py
The suite saw: TypeError: Pop2PianoForConditionalGeneration.generate() missing 1 required positional argument:
'input_features' (at _contextlib.py:124)
Shared by 1 class(es), 9 cell(s) of 9 check(s) (index.json lists them).
"""

import torch
from transformers import Pop2PianoConfig, Pop2PianoForConditionalGeneration

CONFIG = Pop2PianoConfig(vocab_size=256, d_model=64, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4)
DTYPE = torch.float16
NEW_TOKENS = 10


def tiny_model():
    torch.manual_seed(0)
    return Pop2PianoForConditionalGeneration(CONFIG).to(DTYPE).eval()


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
