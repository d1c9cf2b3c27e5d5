"""[StaticCache] contract broken at static cache scores differ from the dynamic cache's at new token # by nan > nan
while the tokens agree (float64 witness: #): LongT5ForConditionalGeneration (static_cache).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float16). Run: python contract-a7f366e3.py
The suite saw: static cache scores differ from the dynamic cache's at new token 0 by nan > nan while the tokens
agree (float64 witness: 0)
Shared by 1 class(es), 1 cell(s) of 1 check(s) (index.json lists them).
"""

import torch
from transformers import LongT5Config, LongT5ForConditionalGeneration

CONFIG = LongT5Config(vocab_size=256, d_model=64, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4,
    decoder_start_token_id=0)
DTYPE = torch.float16
NEW_TOKENS = 10
ATOL = 0.01
RTOL = 0.001


def tiny_model():
    """A fresh tiny model as the suite builds it: seed 0, weights left all zero get small random values."""
    torch.manual_seed(0)
    model = LongT5ForConditionalGeneration(CONFIG)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.to(DTYPE).eval()


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


def close(actual, expected, atol, rtol):
    """(within, "<diff> > <allowed>" at the worst element): |actual - expected| <= atol + rtol * |expected|
    elementwise, equal entries (two equal infinities too) differ by 0, NaN is beyond any tolerance."""
    if actual.shape != expected.shape:
        raise AssertionError(f"logits shape {tuple(actual.shape)} != expected {tuple(expected.shape)}")
    if not actual.numel():
        return True, ""
    a, e = actual.detach().double().flatten(), expected.detach().double().flatten()
    delta, allowed = torch.where(a == e, torch.zeros_like(a), (a - e).abs()), atol + rtol * e.abs()
    ratios = delta / allowed
    worst = int(ratios.isnan().nonzero()[0]) if ratios.isnan().any() else int(ratios.argmax())
    return bool(ratios[worst] <= 1.0), f"{float(delta[worst]):.3g} > {float(allowed[worst]):.3g}"


def greedy(model, inputs, new_tokens, **extra):
    """Greedy generate of exactly `new_tokens` tokens (EOS cannot stop it), generate's auto-compile off."""
    with torch.no_grad():
        return model.generate(**inputs, do_sample=False, num_beams=1, max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, disable_compile=True, **extra)


def scores_diff(a, b):
    """Max abs difference of two score tensors, equal entries (both -inf too) counting 0."""
    a, b = a.double(), b.double()
    delta = torch.where(a == b, torch.zeros_like(a), (a - b).abs())
    return float(delta.max()) if delta.numel() else 0.0


def divergence(static, dynamic):
    """(the first new token where any row differs, the worst score difference up to it)."""
    steps = len(dynamic.scores)
    differs = (static.sequences[:, -steps:] != dynamic.sequences[:, -steps:]).any(dim=0)
    first = int(differs.nonzero()[0]) if differs.any() else steps
    diffs = [scores_diff(static.scores[s], dynamic.scores[s]) for s in range(min(first + 1, steps))]
    return first, max(diffs, default=0.0)

def witness(inputs):
    """The same comparison in float64: near 0 says float32 rounding."""
    wide = {k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
            for k, v in inputs.items()}
    try:
        dynamic = greedy(tiny_model().double(), wide, NEW_TOKENS, output_scores=True,
                         return_dict_in_generate=True)
        static = greedy(tiny_model().double(), wide, NEW_TOKENS, output_scores=True,
                        return_dict_in_generate=True, cache_implementation="static")
    except Exception:
        return ""
    return f" (float64 witness: {divergence(static, dynamic)[1]:.3g})"

inputs = sample_inputs()
dynamic = greedy(tiny_model(), inputs, NEW_TOKENS, output_scores=True, return_dict_in_generate=True)
static = greedy(tiny_model(), inputs, NEW_TOKENS, output_scores=True, return_dict_in_generate=True,
                cache_implementation="static")
first, worst = divergence(static, dynamic)
for step in range(min(first + 1, len(dynamic.scores))):
    within, beyond = close(static.scores[step], dynamic.scores[step], ATOL, RTOL)
    if within:
        continue
    note = witness(inputs)
    if step < first:
        raise AssertionError(f"static cache scores differ from the dynamic cache's at new token "
                                  f"{step} by {beyond} while the tokens agree{note}")
    new_static, new_dynamic = static.sequences[:, -NEW_TOKENS:], dynamic.sequences[:, -NEW_TOKENS:]
    rows = (new_static[:, first] != new_dynamic[:, first]).nonzero().flatten().tolist()
    raise AssertionError(f"static cache diverges from the dynamic cache at new token {first} (rows "
                              f"{rows}: static {new_static[rows, first].tolist()} vs dynamic "
                              f"{new_dynamic[rows, first].tolist()}); scores there differ by "
                              f"{beyond}{note}")
