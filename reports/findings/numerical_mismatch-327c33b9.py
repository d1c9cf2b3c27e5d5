"""[legacy cache] wrong numbers at decode step # from DynamicCache(tuples): GlmImageForConditionalGeneration
(legacy_cache).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python numerical_mismatch-327c33b9.py
The suite saw: decode step 1 from DynamicCache(tuples): logits differ from eager by 0.00725 > 1.01e-05
Shared by 2 class(es), 4 cell(s) of 3 check(s) (index.json lists them).
"""

import torch
from transformers import (GlmImageConfig, GlmImageForConditionalGeneration, GlmImageTextConfig, GlmImageVQVAEConfig,
    GlmImageVisionConfig)

CONFIG = GlmImageConfig(
    text_config=GlmImageTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4,
        rope_parameters={'rope_theta': 10000.0, 'rope_type': 'default', 'mrope_section': [2, 3, 3]},
        pad_token_id=254, vision_vocab_size=192, eos_token_id=65),
    vision_config=GlmImageVisionConfig(depth=2, hidden_size=64, num_heads=4, image_size=32, patch_size=8,
        intermediate_size=128),
    vq_config=GlmImageVQVAEConfig(embed_dim=64, num_embeddings=64, latent_channels=64), image_token_id=255,
    image_start_token_id=64, image_end_token_id=65)
IDS = 'input_ids'
CACHE = 'cache'
DECODE_STEPS = 2
EXTRA = {'next_sequence_length': 1, 'is_first_iteration': False}
ATOL = 1e-05
RTOL = 1.3e-06


def tiny_model():
    """A fresh tiny model as the suite builds it: seed 0, weights left all zero get small random values."""
    torch.manual_seed(0)
    model = GlmImageForConditionalGeneration(CONFIG)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.eval()


def sample_inputs():
    """The inputs legacy_cache fed: token ids literal; pixel_values seeded random of the recorded shape."""
    g = torch.Generator().manual_seed(0)
    return {
        'input_ids': torch.tensor([[254, 254, 254, 52, 67, 26, 174, 67, 64] + [255] * 16 + [65, 26, 44, 97, 33, 64],
            [254, 254, 254, 9, 88, 191, 84, 64] + [255] * 16 + [65, 109, 119, 108, 79, 194, 64]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 28, [0, 0, 0] + [1] * 28], dtype=torch.int64),
        'pixel_values': torch.randn((32, 192), generator=g, dtype=torch.float32),
        'image_grid_thw': torch.tensor([[1, 4, 4]] * 4, dtype=torch.int64),
        'images_per_sample': torch.full((2,), 2, dtype=torch.int64),
        'position_ids': torch.tensor([[0] * 4 + list(range(1, 28)), [0] * 4 + list(range(1, 28))], dtype=torch.int64),
    }


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
    ids, state, logits = prefill[IDS], None, []
    for step in range(DECODE_STEPS):
        token = prefill[IDS][:, prefill[IDS].shape[1] - 1 - step:prefill[IDS].shape[1] - step]
        if state is None:
            state = {k: v for k, v in prefill.items() if k != IDS}
            state = owner._update_model_kwargs_for_generation(output, state, is_encoder_decoder=False)
        ids = torch.cat([ids, token], dim=1)
        kwargs = {k: v for k, v in state.items() if k not in ('cache', 'past_key_values')}
        inputs = dict(owner.prepare_inputs_for_generation(ids, **kwargs, **{CACHE: cache},
                                                          use_cache=True, **EXTRA))
        inputs[CACHE] = cache
        inputs['use_cache'] = True
        with torch.no_grad():
            output = owner(**inputs)
        logits.append(logits_of(output).detach().clone())
        cache = cache_of(output)
        state = owner._update_model_kwargs_for_generation(output, dict(state), is_encoder_decoder=False)
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
