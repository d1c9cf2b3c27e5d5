"""[transformers.exporters] contract broken at quantize: the artifact is no smaller:
LlavaNextVideoForConditionalGeneration (exporter_dynamo_pt2e_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python contract-549e9346.py
The suite saw: quantize: the quantized artifact is no smaller than the float one: the artifact is 2296633 bytes, the
float export's 1644639, 737280 bytes of it weights no node uses
Shared by 39 class(es), 39 cell(s) of 1 check(s) (index.json lists them).
"""

import os
import tempfile

import torch
from transformers import CLIPVisionConfig, LlamaConfig, LlavaNextVideoConfig, LlavaNextVideoForConditionalGeneration
from transformers.exporters import DynamoExporter, DynamoConfig
from transformers.exporters.quantizers import PT2EQuantizer
from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
    X86InductorQuantizer, get_default_x86_inductor_quantization_config)

CONFIG = LlavaNextVideoConfig(
    vision_config=CLIPVisionConfig(hidden_size=64, intermediate_size=128, projection_dim=64, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, vocab_size=256),
    text_config=LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16),
    image_token_index=255, video_token_index=254,
    image_grid_pinpoints=[[32, 64], [64, 32], [64, 64], [96, 32], [32, 96]])
CONSTANTS = {'use_cache': False}


def tiny_model():
    """A fresh tiny model as the suite builds it: seed 0, weights left all zero get small random values."""
    torch.manual_seed(0)
    model = LlavaNextVideoForConditionalGeneration(CONFIG)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.eval()


# The inputs exporter_dynamo_pt2e_forward fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 84, 16, 146, 48, 11] + [255] * 52 + [137, 92, 67, 116], [0, 0, 0, 180, 84, 18,
        182] + [255] * 52 + [44, 32, 76, 15, 75]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 61, [0, 0, 0] + [1] * 61], dtype=torch.int64),
    'pixel_values': torch.randn((2, 3, 3, 32, 32), generator=g, dtype=torch.float32),
    'image_sizes': torch.tensor([[32, 64], [32, 64]], dtype=torch.int64),
}

def artifact_bytes(exported):
    """The bytes of an export's saved programs, its JSON files left out (`checks.common.quantized.artifact_bytes`)."""
    with tempfile.TemporaryDirectory() as folder:
        exported.save_pretrained(folder)
        return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(folder)
                   for name in names if not name.endswith(".json"))


model = tiny_model()
quantizer = PT2EQuantizer(X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config()))
exporter, config = DynamoExporter(), DynamoConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
quantized_bytes = artifact_bytes(exported)
float_bytes = artifact_bytes(DynamoExporter().export(tiny_model(), dict(inputs, **CONSTANTS),
    DynamoConfig(dynamic=True)))
if quantized_bytes >= float_bytes:
    raise AssertionError(f"quantize: the artifact is no smaller: {quantized_bytes} bytes quantized, "
                         f"{float_bytes} bytes the float export")
