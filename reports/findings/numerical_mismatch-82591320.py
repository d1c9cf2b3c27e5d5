"""[transformers.exporters] wrong numbers at quantize: the logits are float's: ChameleonForConditionalGeneration
(exporter_dynamo_pt2e_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python numerical_mismatch-82591320.py
The suite saw: quantize: the quantizer left the model unquantized: the logits of the longer are 792.3 dB SQNR from
eager float's, above 98 dB: no 8-bit quantization on their path (the artifact is 6120222 bytes, the float expo ...
Shared by 1 class(es), 9 cell(s) of 9 check(s) (index.json lists them).
"""

import torch
from transformers import ChameleonConfig, ChameleonForConditionalGeneration, ChameleonVQVAEConfig
from transformers.exporters import DynamoExporter, DynamoConfig
from transformers.exporters.quantizers import PT2EQuantizer
from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
    X86InductorQuantizer, get_default_x86_inductor_quantization_config)

CONFIG = ChameleonConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=4,
    vq_config=ChameleonVQVAEConfig(embed_dim=64, num_embeddings=64, latent_channels=64, base_channels=64,
        channel_multiplier=[1, 1, 1, 1, 1], num_res_blocks=1),
    vocabulary_map={
        '<image>': 200, 'IMGIMGAZ': 100, 'IMGIMGBZ': 101, 'IMGIMGCZ': 102, 'IMGIMGDZ': 103, 'IMGIMGEZ': 104,
        'IMGIMGFZ': 105, 'IMGIMGGZ': 106, 'IMGIMGHZ': 107, 'IMGIMGIZ': 108, 'IMGIMGJZ': 109, 'IMGIMGBAZ': 110,
        'IMGIMGBBZ': 111, 'IMGIMGBCZ': 112, 'IMGIMGBDZ': 113, 'IMGIMGBEZ': 114, 'IMGIMGBFZ': 115, 'IMGIMGBGZ': 116,
        'IMGIMGBHZ': 117, 'IMGIMGBIZ': 118, 'IMGIMGBJZ': 119, 'IMGIMGCAZ': 120, 'IMGIMGCBZ': 121, 'IMGIMGCCZ': 122,
        'IMGIMGCDZ': 123, 'IMGIMGCEZ': 124, 'IMGIMGCFZ': 125, 'IMGIMGCGZ': 126, 'IMGIMGCHZ': 127, 'IMGIMGCIZ': 128,
        'IMGIMGCJZ': 129, 'IMGIMGDAZ': 130, 'IMGIMGDBZ': 131, 'IMGIMGDCZ': 132, 'IMGIMGDDZ': 133, 'IMGIMGDEZ': 134,
        'IMGIMGDFZ': 135, 'IMGIMGDGZ': 136, 'IMGIMGDHZ': 137, 'IMGIMGDIZ': 138, 'IMGIMGDJZ': 139, 'IMGIMGEAZ': 140,
        'IMGIMGEBZ': 141, 'IMGIMGECZ': 142, 'IMGIMGEDZ': 143, 'IMGIMGEEZ': 144, 'IMGIMGEFZ': 145, 'IMGIMGEGZ': 146,
        'IMGIMGEHZ': 147, 'IMGIMGEIZ': 148, 'IMGIMGEJZ': 149, 'IMGIMGFAZ': 150, 'IMGIMGFBZ': 151, 'IMGIMGFCZ': 152,
        'IMGIMGFDZ': 153, 'IMGIMGFEZ': 154, 'IMGIMGFFZ': 155, 'IMGIMGFGZ': 156, 'IMGIMGFHZ': 157, 'IMGIMGFIZ': 158,
        'IMGIMGFJZ': 159, 'IMGIMGGAZ': 160, 'IMGIMGGBZ': 161, 'IMGIMGGCZ': 162, 'IMGIMGGDZ': 163,
    },
    image_token_id=200)
CONSTANTS = {'use_cache': False}
CEILING_DB = 98.0


def tiny_model():
    """A fresh tiny model as the suite builds it: seed 0, weights left all zero get small random values."""
    torch.manual_seed(0)
    model = ChameleonForConditionalGeneration(CONFIG)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.eval()


def sample_inputs():
    """The inputs exporter_dynamo_pt2e_forward fed: token ids literal; pixel_values seeded random of the recorded
    shape.
    """
    g = torch.Generator().manual_seed(0)
    return {
        'input_ids': torch.tensor([[0, 0, 0, 66, 10, 187, 194, 174] + [200] * 4 + [108, 164, 68, 44], [0, 0, 0, 153, 99,
            85, 52] + [200] * 4 + [6, 151, 56, 186, 77]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 13, [0, 0, 0] + [1] * 13], dtype=torch.int64),
        'pixel_values': torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32),
    }


def longer_inputs():
    """The longer request exporter_dynamo_pt2e_forward served too."""
    g = torch.Generator().manual_seed(1)
    return {
        'input_ids': torch.tensor([[0, 0, 0, 66, 10, 187, 194, 174] + [200] * 4 + [108, 164, 68, 44, 7, 140, 173, 56,
            100], [0, 0, 0, 153, 99, 85, 52] + [200] * 4 + [6, 151, 56, 186, 77, 196, 157, 82, 173, 120]],
            dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 18, [0, 0, 0] + [1] * 18], dtype=torch.int64),
        'pixel_values': torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32),
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
if sqnr > CEILING_DB:
    raise AssertionError(f"quantize: the logits are float's: {sqnr:.2f} dB on the longer "
                         f"(above {CEILING_DB} dB: not quantized)")
