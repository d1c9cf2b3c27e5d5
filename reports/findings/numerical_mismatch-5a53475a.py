"""[transformers.exporters] wrong numbers at onnx runner logits on the sample: T5GemmaForConditionalGeneration
(exporter_onnx_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python numerical_mismatch-5a53475a.py
The suite saw: onnx runner logits on the sample: logits differ from eager by 0.379 > 0.0001
Shared by 2 class(es), 2 cell(s) of 1 check(s) (index.json lists them).
"""

import torch
from transformers import T5GemmaConfig, T5GemmaForConditionalGeneration, T5GemmaModuleConfig
from transformers.exporters import OnnxExporter, OnnxConfig

CONFIG = T5GemmaConfig(
    encoder=T5GemmaModuleConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        layer_types=['sliding_attention', 'full_attention'], dropout_rate=0.0),
    decoder=T5GemmaModuleConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        layer_types=['sliding_attention', 'full_attention'], is_decoder=True, dropout_rate=0.0,
        cross_attention_hidden_size=64),
    vocab_size=256)
CONSTANTS = {'use_cache': False}
ATOL = 0.0001
RTOL = 1.3e-06


def tiny_model():
    """A fresh tiny model as the suite builds it: seed 0, weights left all zero get small random values."""
    torch.manual_seed(0)
    model = T5GemmaForConditionalGeneration(CONFIG)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.eval()


# The inputs exporter_onnx_forward fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
        dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    'decoder_input_ids': torch.tensor([[0, 123, 191], [0, 116, 17]], dtype=torch.int64),
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
exporter, config = OnnxExporter(), OnnxConfig(dynamic=True)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
runner = exported.to("cpu").runners["model"]
reference = tiny_model()
actual = logits_of(runner(**runner_kwargs(runner, reference, dict(inputs, **CONSTANTS))))
with torch.no_grad():
    expected = logits_of(reference(**inputs, **CONSTANTS))
mask2d = inputs.get("decoder_attention_mask", inputs.get("attention_mask"))
if mask2d is not None and mask2d.dim() == 2 and expected.shape[:2] == mask2d.shape:
    actual, expected = actual[mask2d.bool()], expected[mask2d.bool()]  # the non-padding positions
what = "onnx runner logits on the sample"
within, beyond = close(actual, expected, ATOL, RTOL)
if not within:
    raise AssertionError(f"{what}: logits differ from eager by {beyond}")
