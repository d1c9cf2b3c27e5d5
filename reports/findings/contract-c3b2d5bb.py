"""[torch.compile] contract broken at generate did not compile the decode step (its cache is not a compileable static
cache, or the model's generate bypasses compilation): MusicgenForConditionalGeneration (compile_decode).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python contract-c3b2d5bb.py
The suite saw: generate did not compile the decode step (its cache is not a compileable static cache, or the model's
generate bypasses compilation)
Shared by 1 class(es), 6 cell(s) of 6 check(s) (index.json lists them).
"""

import torch
from transformers import (EncodecConfig, MusicgenConfig, MusicgenDecoderConfig, MusicgenForConditionalGeneration,
    T5Config)
from torch._dynamo.utils import counters
from transformers import LogitsProcessorList
from transformers.generation.configuration_utils import CompileConfig

CONFIG = MusicgenConfig(
    text_encoder=T5Config(is_encoder_decoder=False, vocab_size=256, d_model=64, d_ff=128, num_layers=2,
        num_decoder_layers=2, num_heads=4, use_cache=False),
    audio_encoder=EncodecConfig(hidden_size=64, num_filters=4, codebook_size=64, codebook_dim=64),
    decoder=MusicgenDecoderConfig(vocab_size=64, num_hidden_layers=2, ffn_dim=128, num_attention_heads=4,
        hidden_size=64, pad_token_id=64, bos_token_id=64))
BACKEND = 'eager'
NEW_TOKENS = 5


def tiny_model():
    """A fresh tiny model as the suite builds it: seed 0, weights left all zero get small random values."""
    torch.manual_seed(0)
    model = MusicgenForConditionalGeneration(CONFIG)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.eval()


# The inputs compile_decode fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 63, 91, 193, 76, 18, 167], [143, 147, 56, 135, 69, 45, 124, 22, 118]],
        dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    'decoder_input_ids': torch.tensor([[64, 24, 24], [64, 12, 58], [64, 1, 38], [64, 39, 23], [64, 46, 24], [64, 17,
        37], [64, 25, 13], [64, 8, 9]], dtype=torch.int64),
}


def greedy(model, inputs, new_tokens, **extra):
    """Greedy generate of exactly `new_tokens` tokens (EOS cannot stop it), generate's auto-compile off."""
    with torch.no_grad():
        return model.generate(**inputs, do_sample=False, num_beams=1, max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, disable_compile=True, **extra)


eager = greedy(tiny_model(), inputs, NEW_TOKENS, output_logits=True, return_dict_in_generate=True)
model = tiny_model()
config = CompileConfig(fullgraph=True, backend=BACKEND, mode=None)
config._compile_all_devices = True  # generate compiles on CUDA only unless told otherwise
torch._dynamo.reset()
counters.clear()
with torch.no_grad(), torch._dynamo.config.patch(recompile_limit=NEW_TOKENS + 1):  # count each recompile
    compiled = model.generate(
        **inputs, do_sample=False, num_beams=1, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
        disable_compile=False, cache_implementation="static", compile_config=config, output_logits=True,
        return_dict_in_generate=True,
        logits_processor=LogitsProcessorList([]))  # forced onto the eager tokens
breaks = list(counters["graph_break"])
if breaks:
    raise AssertionError(f"the compiled decode step has {len(breaks)} graph break(s), first: "
                                 f"{breaks[0]}")
if not counters["stats"]["unique_graphs"]:
    raise AssertionError("generate did not compile the decode step (its cache is not a "
                  "compileable static cache, or the model's generate bypasses compilation)")
