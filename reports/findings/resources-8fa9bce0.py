"""[transformers.exporters] resources at resident memory past the cell memory limit: M2M100ForConditionalGeneration
(exporter_executorch_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python resources-8fa9bce0.py
The suite saw: resident memory reached 22622 MiB, past the cell memory limit of 20628 MiB; the cell was stopped
Shared by 5 class(es), 5 cell(s) of 3 check(s) (index.json lists them).
"""

import torch
from transformers import M2M100Config, M2M100ForConditionalGeneration
from transformers.exporters import ExecutorchExporter, ExecutorchConfig

CONFIG = M2M100Config(vocab_size=256, encoder_layers=2, encoder_ffn_dim=128, encoder_attention_heads=4,
    decoder_layers=2, decoder_ffn_dim=128, decoder_attention_heads=4, d_model=64)
CONSTANTS = {'use_cache': False}
ATOL = 0.0001
RTOL = 1.3e-06


def tiny_model():
    torch.manual_seed(0)
    return M2M100ForConditionalGeneration(CONFIG).eval()


# The inputs exporter_executorch_forward fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[1, 1, 1, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
        dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    'decoder_input_ids': torch.tensor([[2, 123, 191], [2, 116, 17]], dtype=torch.int64),
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


def runner_kwargs(runner, owner, inputs):
    """What a runner is called with: the output flags dropped, the exporter's own `precompute_export_inputs`
    applied, only the kwargs its graph was traced with."""
    from transformers.exporters.utils import precompute_export_inputs

    flags = ("use_cache", "output_attentions", "output_hidden_states", "return_dict", "return_loss")
    ready = {key: value for key, value in inputs.items() if key not in flags}
    with torch.no_grad():
        precompute_export_inputs(owner, ready)
    traced, constants = runner.metadata.kwargs, runner.metadata.in_constants
    return {key: value for key, value in ready.items() if key in traced and key not in constants}


model = tiny_model()
exporter, config = ExecutorchExporter(), ExecutorchConfig(dynamic=True)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
runner = exported.to("cpu").runners["model"]
reference = tiny_model()
actual = logits_of(runner(**runner_kwargs(runner, reference, dict(inputs, **CONSTANTS))))
with torch.no_grad():
    expected = logits_of(reference(**inputs, **CONSTANTS))
mask2d = inputs.get("decoder_attention_mask", inputs.get("attention_mask"))
if mask2d is not None and mask2d.dim() == 2 and expected.shape[:2] == mask2d.shape:
    actual, expected = actual[mask2d.bool()], expected[mask2d.bool()]  # the non-padding positions
what = "executorch runner logits on the sample"
within, beyond = close(actual, expected, ATOL, RTOL)
if not within:
    raise AssertionError(f"{what}: logits differ from eager by {beyond}")
