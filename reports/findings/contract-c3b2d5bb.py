"""[torch.compile] contract broken at generate did not compile the decode step (its cache is not a compileable static
cache, or the model's generate bypasses compilation): MusicgenForConditionalGeneration (compile_decode).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python contract-c3b2d5bb.py
The suite saw: generate did not compile the decode step (its cache is not a compileable static cache, or the model's
generate bypasses compilation)
Shared by 1 class(es), 4 cell(s) of 4 check(s) (index.json lists them).
"""

import torch
from transformers import (EncodecConfig, MusicgenConfig, MusicgenDecoderConfig, MusicgenForConditionalGeneration,
    T5Config)
from torch._dynamo.utils import counters, guard_failures
from transformers import LogitsProcessorList
from transformers.generation.configuration_utils import CompileConfig

CONFIG = MusicgenConfig(
    text_encoder=T5Config(is_encoder_decoder=False, vocab_size=256, d_model=64, d_ff=128, num_layers=2,
        num_decoder_layers=2, num_heads=4, use_cache=False),
    audio_encoder=EncodecConfig(hidden_size=64, num_filters=4, codebook_size=64, codebook_dim=64),
    decoder=MusicgenDecoderConfig(vocab_size=64, num_hidden_layers=2, ffn_dim=128, num_attention_heads=4,
        hidden_size=64, pad_token_id=64, bos_token_id=64))
BACKEND = 'eager'
ATOL = 1e-05
RTOL = 1.3e-06
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

def close(actual, expected, atol, rtol):
    """(within, "<diff> > <allowed>" at the worst element): |actual - expected| <= atol + rtol * |expected|
    elementwise, equal entries (two equal infinities too) differ by 0, NaN is beyond any tolerance."""
    if actual.shape != expected.shape:
        raise AssertionError(f"logits shape {tuple(actual.shape)} != expected {tuple(expected.shape)}")
    if not actual.numel():
        return True, ""
    a, e = actual.detach().double(), expected.detach().double()
    delta = torch.where(a == e, torch.zeros_like(a), (a - e).abs())
    allowed = atol + rtol * e.abs()
    ratios = (delta / allowed).flatten()
    nan = torch.isnan(ratios)
    worst = int(nan.nonzero()[0]) if nan.any() else int(ratios.argmax())
    within = not nan.any() and float(ratios[worst]) <= 1.0
    return within, f"{float(delta.flatten()[worst]):.3g} > {float(allowed.flatten()[worst]):.3g}"


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
failed = [str(reason) for reasons in guard_failures.values() for reason in reasons]
if failed:
    raise AssertionError("decode step recompiled after the first step; failed guard: " + failed[0])
for step, (actual, expected) in enumerate(zip(compiled.logits, eager.logits)):
    within, beyond = close(actual, expected, ATOL, RTOL)
    if not within:
        what = "prefill" if step == 0 else f"decode step {step}"
        raise AssertionError(f"{what}: compiled static-cache logits differ from eager "
                                  f"dynamic-cache decoding by {beyond}")
