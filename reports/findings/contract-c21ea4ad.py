"""[StaticCache] contract broken at after the prefill, the static cache's keys of self-attention layer # differ from
the dynamic cache's by # > # while the scores agree: GlmImageForConditionalGeneration (static_cache).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float16). Run: python contract-c21ea4ad.py
The suite saw: after the prefill, the static cache's keys of self-attention layer 0 differ from the dynamic cache's
by 0.902 > 0.0105 while the scores agree
Shared by 1 class(es), 3 cell(s) of 3 check(s) (index.json lists them).
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
DTYPE = torch.float16
NEW_TOKENS = 10
ATOL = 0.01
RTOL = 0.001


def tiny_model():
    """A fresh tiny model as the suite builds it: seed 0, weights left all zero get small random values."""
    torch.manual_seed(0)
    model = GlmImageForConditionalGeneration(CONFIG)
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
    """The inputs static_cache fed: token ids literal; pixel_values seeded random of the recorded shape."""
    g = torch.Generator().manual_seed(0)
    inputs = {
        'input_ids': torch.tensor([[254, 254, 254, 52, 67, 26, 174, 67, 64] + [255] * 16 + [65, 26, 44, 97, 33, 64],
            [254, 254, 254, 9, 88, 191, 84, 64] + [255] * 16 + [65, 109, 119, 108, 79, 194, 64]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 28, [0, 0, 0] + [1] * 28], dtype=torch.int64),
        'pixel_values': torch.randn((32, 192), generator=g, dtype=torch.float32),
        'image_grid_thw': torch.tensor([[1, 4, 4]] * 4, dtype=torch.int64),
        'images_per_sample': torch.full((2,), 2, dtype=torch.int64),
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

inputs = sample_inputs()
dynamic = greedy(tiny_model(), inputs, NEW_TOKENS, output_scores=True, return_dict_in_generate=True)
static = greedy(tiny_model(), inputs, NEW_TOKENS, output_scores=True, return_dict_in_generate=True,
                cache_implementation="static")
first, worst = divergence(static, dynamic)
for step in range(min(first + 1, len(dynamic.scores))):
    within, beyond = close(static.scores[step], dynamic.scores[step], ATOL, RTOL)
    if within:
        continue
    note = ''
    if step < first:
        raise AssertionError(f"static cache scores differ from the dynamic cache's at new token "
                                  f"{step} by {beyond} while the tokens agree{note}")
    new_static, new_dynamic = static.sequences[:, -NEW_TOKENS:], dynamic.sequences[:, -NEW_TOKENS:]
    rows = (new_static[:, first] != new_dynamic[:, first]).nonzero().flatten().tolist()
    raise AssertionError(f"static cache diverges from the dynamic cache at new token {first} (rows "
                              f"{rows}: static {new_static[rows, first].tolist()} vs dynamic "
                              f"{new_dynamic[rows, first].tolist()}); scores there differ by "
                              f"{beyond}{note}")
