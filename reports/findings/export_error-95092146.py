"""[transformers.exporters] export fails at transformers.exporters.runners.runner_onnx:OnnxModelRunner.from_program:
Mistral3ForConditionalGeneration (exporter_onnx_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-95092146.py
The suite saw: onnx runner: Fail: [ONNXRuntimeError] : 1 : FAIL : Node (node_squeeze_1) Op (Squeeze)
[ShapeInferenceError] Dimension of input 0 must be 1 instead of 8 (at ...
Shared by 3 class(es), 4 cell(s) of 2 check(s) (index.json lists them).
"""

import torch
from transformers import Mistral3Config, Mistral3ForConditionalGeneration, MistralConfig, PixtralVisionConfig
from transformers.exporters import OnnxExporter, OnnxConfig

CONFIG = Mistral3Config(
    vision_config=PixtralVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, head_dim=16, vocab_size=256),
    text_config=MistralConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-05,
        rope_parameters={'rope_theta': 1000000000.0, 'rope_type': 'default'}, sliding_window=None))
CONSTANTS = {'use_cache': False}
ATOL = 0.0001
RTOL = 1.3e-06


def tiny_model():
    torch.manual_seed(0)
    return Mistral3ForConditionalGeneration(CONFIG).eval()


# The inputs exporter_onnx_forward fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 28, 105, 156, 157, 44] + [10] * 4 + [84, 28, 109, 75], [0, 0, 0, 76, 195, 180,
        38] + [10] * 4 + [46, 36, 85, 58, 169]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 13, [0, 0, 0] + [1] * 13], dtype=torch.int64),
    'pixel_values': torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32),
    'image_sizes': torch.full((2, 2), 32, dtype=torch.int64),
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
