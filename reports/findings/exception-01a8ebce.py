"""[torch.compile] raises at torch.utils._contextlib:context_decorator.<locals>.decorate_context:
Pop2PianoForConditionalGeneration (compile_decode, backend inductor).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python exception-01a8ebce.py
The suite saw: TypeError: Pop2PianoForConditionalGeneration.generate() missing 1 required positional argument:
'input_features' (at _contextlib.py:124)
Shared by 1 class(es), 5 cell(s) of 5 check(s) (index.json lists them).
"""

import torch
from transformers import Pop2PianoConfig, Pop2PianoForConditionalGeneration

CONFIG = Pop2PianoConfig(vocab_size=256, d_model=64, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4)
NEW_TOKENS = 5


def tiny_model():
    torch.manual_seed(0)
    return Pop2PianoForConditionalGeneration(CONFIG).eval()


# The inputs compile_decode fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
        dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    'decoder_input_ids': torch.tensor([[0, 123, 191], [0, 116, 17]], dtype=torch.int64),
}

def greedy(model, inputs, new_tokens, **extra):
    """Greedy generate of exactly `new_tokens` tokens (EOS cannot stop it), generate's auto-compile off."""
    with torch.no_grad():
        return model.generate(**inputs, do_sample=False, num_beams=1, max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, disable_compile=True, **extra)


eager = greedy(tiny_model(), inputs, NEW_TOKENS, output_logits=True, return_dict_in_generate=True)
