"""[torch.compile] wrong numbers at compiled logits differ from eager by # > #: MT5ForConditionalGeneration
(compile_prefill, backend inductor).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, bfloat16). Run: python numerical_mismatch-9eee58f6.py
The suite saw: compiled logits differ from eager by 0.192 > 0.0132
Shared by 13 class(es), 16 cell(s) of 2 check(s) (index.json lists them).
"""

import torch
from transformers import MT5Config, MT5ForConditionalGeneration

CONFIG = MT5Config(vocab_size=256, d_model=64, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4)
DTYPE = torch.bfloat16
BACKEND = 'inductor'
ATOL = 0.01
RTOL = 0.016


def tiny_model():
    """A fresh tiny model as the suite builds it: seed 0, weights left all zero get small random values."""
    torch.manual_seed(0)
    model = MT5ForConditionalGeneration(CONFIG)
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
    """The inputs compile_prefill fed: token ids literal."""
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


inputs = sample_inputs()
model = tiny_model()
compiled = torch.compile(model, fullgraph=True, backend=BACKEND)
reference = tiny_model()  # a second instance, same weights
with torch.no_grad():
    expected = logits_of(reference(**inputs))
with torch.no_grad():
    actual = logits_of(compiled(**inputs))  # compiled before any eager call on this instance
within, beyond = close(actual, expected, ATOL, RTOL)
if not within:
    raise AssertionError(f"compiled logits differ from eager by {beyond}")
