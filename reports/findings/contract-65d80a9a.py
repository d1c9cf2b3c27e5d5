"""[StaticCache] contract broken at static cache diverges from the dynamic cache at new token # (rows [#]: static [#]
vs dynamic [#]); scores there differ by # > # (float64 witness: #): MoshiForConditionalGeneration (static_cache).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, bfloat16). Run: python contract-65d80a9a.py
The suite saw: static cache diverges from the dynamic cache at new token 4 (rows [0]: static [115] vs dynamic [10]);
scores there differ by 0.15 > 0.0104 (float64 witness: 0)
Shared by 1 class(es), 1 cell(s) of 1 check(s) (index.json lists them).
"""

import torch
from transformers import MimiConfig, MoshiConfig, MoshiDepthConfig, MoshiForConditionalGeneration

CONFIG = MoshiConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=4, audio_vocab_size=64, head_dim=16, ffn_dim=128,
    audio_encoder_config=MimiConfig(hidden_size=64, num_filters=4, codebook_size=64, codebook_dim=64,
        vector_quantization_hidden_dimension=64, upsample_groups=64, num_hidden_layers=2, intermediate_size=128,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16),
    depth_decoder_config=MoshiDepthConfig(vocab_size=256, hidden_size=64, input_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, audio_vocab_size=64, head_dim=16, ffn_dim=128))
DTYPE = torch.bfloat16
NEW_TOKENS = 10
ATOL = 0.01
RTOL = 0.016


def tiny_model():
    """A fresh tiny model as the suite builds it: seed 0, weights left all zero get small random values."""
    torch.manual_seed(0)
    model = MoshiForConditionalGeneration(CONFIG)
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
        'input_ids': torch.tensor([[0, 0, 0, 28, 28, 107, 145, 199, 139], [60, 16, 194, 167, 192, 21, 137, 100, 140]],
            dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
        'moshi_audio_codes': torch.tensor([[[44, 47, 53, 0, 3, 59, 3, 39, 9], [19, 21, 50, 36, 23, 6, 24, 24, 12], [58,
            1, 38, 39, 23, 46, 24, 17, 37], [25, 13, 8, 9, 20, 51, 16, 51, 5], [62, 15, 47, 0, 18, 35, 24, 49, 51], [29,
            19, 19, 14, 39, 32, 1, 9, 57], [63, 32, 31, 10, 52, 23, 35, 62, 11], [50, 55, 28, 34, 0, 0, 36, 53, 5]],
            [[38, 40, 52, 17, 15, 4, 41, 42, 58], [31, 56, 1, 1, 39, 41, 57, 35, 38], [55, 11, 46, 18, 27, 0, 14, 35,
            53], [12, 57, 42, 20, 11, 4, 6, 4, 47], [63, 52, 3, 12, 36, 52, 40, 14, 15], [20, 35, 58, 23, 15, 13, 53,
            21, 48], [49, 5, 41, 35, 0, 31, 5, 30, 0], [49, 50, 36, 34, 48, 29, 3, 34, 42]]], dtype=torch.int64),
        'user_audio_codes': torch.tensor([[[13, 48, 39, 21, 9, 63, 0, 10, 50], [43, 58, 63, 23, 59, 2, 57, 34, 62], [35,
            30, 59, 3, 18, 46, 35, 20, 17], [50, 27, 14, 41, 58, 1, 36, 10, 22], [43, 40, 11, 2, 51, 16, 32, 54, 0],
            [38, 19, 46, 42, 51, 56, 60, 40, 13], [30, 24, 61, 2, 3, 30, 34, 43, 13], [48, 40, 8, 19, 31, 8, 26, 2,
            56]], [[52, 3, 44, 61, 14, 32, 4, 3, 45], [11, 60, 22, 13, 57, 45, 11, 56, 16], [24, 29, 21, 46, 25, 16, 60,
            57, 54], [53, 61, 19, 33, 40, 32, 36, 59, 59], [57, 6, 21, 31, 13, 7, 56, 24, 15], [41, 18, 40, 54, 15, 11,
            38, 47, 29], [57, 1, 31, 54, 44, 24, 61, 24, 3], [18, 47, 3, 42, 12, 38, 35, 22, 62]]], dtype=torch.int64),
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
