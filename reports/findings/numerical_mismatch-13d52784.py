"""[legacy cache] wrong numbers at decode step # from EncoderDecoderCache(tuples): LongT5ForConditionalGeneration
(legacy_cache).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float16). Run: python numerical_mismatch-13d52784.py
The suite saw: decode step 1 from EncoderDecoderCache(tuples): logits differ from eager by nan > nan
Shared by 1 class(es), 1 cell(s) of 1 check(s) (index.json lists them).
"""

import torch
from transformers import LongT5Config, LongT5ForConditionalGeneration

CONFIG = LongT5Config(vocab_size=256, d_model=64, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4,
    decoder_start_token_id=0)
DTYPE = torch.float16
IDS = 'decoder_input_ids'
CACHE = 'cache'
DECODE_STEPS = 2
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
    """The inputs legacy_cache fed: token ids literal."""
    inputs = {
        'input_ids': torch.tensor([[0, 0, 0, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
            dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
        'decoder_input_ids': torch.tensor([[0, 123, 191], [0, 116, 17]], dtype=torch.int64),
    }
    return {k: in_dtype(v) for k, v in inputs.items()}


def logits_of(output):
    """The logits of a model output: `logits`, a scorer's first `logits*` field, a tuple's first tensor."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict) and "logits" in output:
        return output["logits"]
    if isinstance(getattr(output, "logits", None), torch.Tensor):
        return output.logits
    if isinstance(output, dict):
        for key, value in output.items():
            if key.startswith("logits") and isinstance(value, torch.Tensor):
                return value
    return output[0]


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


def cache_of(output):
    """The cache a forward returned (`cache` in newer 5.x, `past_key_values` before)."""
    get = output.get if isinstance(output, dict) else lambda name: getattr(output, name, None)
    return next((get(name) for name in ("cache", "past_key_values") if get(name) is not None), None)


def to_legacy(cache):
    """The legacy tuples of a cache, cloned: per layer (key, value), or (key, value, cross key, cross value)."""
    def pairs(c):
        return tuple((getattr(layer, "keys", None), getattr(layer, "values", None)) for layer in c.layers)

    if hasattr(cache, "to_legacy_cache"):
        legacy = cache.to_legacy_cache()
    elif hasattr(cache, "self_attention_cache"):
        legacy = tuple(a + b for a, b in zip(pairs(cache.self_attention_cache), pairs(cache.cross_attention_cache)))
    else:
        legacy = pairs(cache)
    return tuple(tuple(t.detach().clone() if isinstance(t, torch.Tensor) else t for t in layer) for layer in legacy)


def from_legacy(cache, legacy):
    """The installed API's conversion back: `from_legacy_cache` where it exists, else the constructor."""
    from transformers.cache_utils import DynamicCache

    kind = type(cache) if hasattr(cache, "self_attention_cache") else DynamicCache
    return kind.from_legacy_cache(legacy) if hasattr(kind, "from_legacy_cache") else kind(legacy)


def decode(owner, prefill, output, cache):
    """DECODE_STEPS steps after the prefill, feeding the last prompt tokens back, with the inputs
    generate passes (its own prepare_inputs_for_generation where the model has one)."""
    logits = []
    for step in range(DECODE_STEPS):
        token = prefill[IDS][:, prefill[IDS].shape[1] - 1 - step:prefill[IDS].shape[1] - step]
        inputs = {k: v for k, v in prefill.items() if k not in (IDS, 'decoder_attention_mask')}
        inputs[IDS] = token
        inputs[CACHE] = cache
        inputs['use_cache'] = True
        with torch.no_grad():
            output = owner(**inputs)
        logits.append(logits_of(output).detach().clone())
        cache = cache_of(output)
    return logits

prefill = sample_inputs()
owner = tiny_model()  # the module whose forward takes the cache
with torch.no_grad():
    output = owner(**prefill, use_cache=True)
cache = cache_of(output)
legacy = to_legacy(cache)
converted = from_legacy(cache, legacy)
expected = decode(owner, prefill, output, cache)
actual = decode(owner, prefill, output, converted)
for step, (got, want) in enumerate(zip(actual, expected)):
    within, beyond = close(got, want, ATOL, RTOL)
    if not within:
        what = f"decode step {step + 1} from {type(converted).__name__}"
        what += ".from_legacy_cache" if hasattr(type(converted), "from_legacy_cache") else "(tuples)"
        raise AssertionError(f"{what}: logits differ from eager by {beyond}")
