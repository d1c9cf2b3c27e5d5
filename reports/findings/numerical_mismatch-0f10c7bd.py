"""[transformers.exporters] wrong numbers at quantize: SQNR below the floor: OmniASRForConditionalGeneration
(exporter_dynamo_pt2e_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python numerical_mismatch-0f10c7bd.py
The suite saw: quantize: the logits of the longer are 29.21 dB SQNR from eager float's, below the 30 dB floor: the
quantization destroyed the model (the artifact is 1259537 bytes, the float export's 18384344, 393216 bytes of  ...
Shared by 89 class(es), 317 cell(s) of 18 check(s) (index.json lists them).
"""

import torch
from transformers import LlamaConfig, OmniASRAudioConfig, OmniASRConfig, OmniASRForConditionalGeneration
from transformers.exporters import DynamoExporter, DynamoConfig
from transformers.exporters.quantizers import PT2EQuantizer
from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
    X86InductorQuantizer, get_default_x86_inductor_quantization_config)

CONFIG = OmniASRConfig(
    audio_config=OmniASRAudioConfig(hidden_size=64, num_attention_heads=4, num_hidden_layers=2,
        intermediate_size=128),
    text_config=LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=8192, rms_norm_eps=1e-05, head_dim=16),
    audio_token_id=255)
CONSTANTS = {'use_cache': False}
FLOOR_DB = 30.0


def tiny_model():
    """A fresh tiny model as the suite builds it: seed 0, weights left all zero get small random values."""
    torch.manual_seed(0)
    model = OmniASRForConditionalGeneration(CONFIG)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.eval()


def sample_inputs():
    """The inputs exporter_dynamo_pt2e_forward fed: token ids literal."""
    return {
        'input_ids': torch.tensor([[1, 1, 1, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
            dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    }


def longer_inputs():
    """The longer request exporter_dynamo_pt2e_forward served too."""
    return {
        'input_ids': torch.tensor([[1, 1, 1, 118, 193, 119, 64, 61, 24, 7, 140, 173, 56, 100], [37, 107, 92, 39, 189,
            180, 10, 29, 23, 196, 157, 82, 173, 120]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 11, [1] * 14], dtype=torch.int64),
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


def sqnr_db(actual, expected):
    """SQNR of quantized logits against float ones, in dB (`checks.common.quantized.sqnr_db`): inf when equal."""
    expected, actual = expected.double(), actual.double()
    noise = torch.linalg.vector_norm(actual - expected)
    if noise == 0:
        return float("inf")
    return float(20 * torch.log10(torch.linalg.vector_norm(expected) / noise))


inputs = sample_inputs()
model = tiny_model()
quantizer = PT2EQuantizer(X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config()))
exporter, config = DynamoExporter(), DynamoConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
runner = exported.to("cpu").runners["model"]
reference = tiny_model()
request = longer_inputs()
actual = logits_of(runner(**runner_kwargs(runner, reference, dict(request, **CONSTANTS))))
with torch.no_grad():
    expected = logits_of(reference(**request, **CONSTANTS))
mask2d = request.get("decoder_attention_mask", request.get("attention_mask"))
if mask2d is not None and mask2d.dim() == 2 and expected.shape[:2] == mask2d.shape:
    actual, expected = actual[mask2d.bool()], expected[mask2d.bool()]  # non-padding positions
sqnr = sqnr_db(actual, expected)  # against eager float's logits
if sqnr < FLOOR_DB:
    raise AssertionError(f"quantize: SQNR below the floor: {sqnr:.2f} dB on the longer "
                         f"(floor {FLOOR_DB} dB)")
