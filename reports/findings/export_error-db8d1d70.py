"""[transformers.exporters] export fails at transformers.exporters.exporter_dynamo:DynamoExporter.export_program:
Kosmos2ForConditionalGeneration (exporter_openvino_pt2e_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-db8d1d70.py
The suite saw: lower: PT2EQuantizer on openvino: AssertionError: Expecting input to have dtype torch.float32, but
got dtype: torch.int32 (at transformers/exporters/exporter_dynamo.py:139)
Shared by 13 class(es), 29 cell(s) of 5 check(s) (index.json lists them).
"""

import torch
from transformers import Kosmos2Config, Kosmos2ForConditionalGeneration, Kosmos2TextConfig, Kosmos2VisionConfig
from transformers.exporters import OpenVINOExporter, OpenVINOConfig
from transformers.exporters.quantizers import PT2EQuantizer
from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
    X86InductorQuantizer, get_default_x86_inductor_quantization_config)

CONFIG = Kosmos2Config(
    text_config=Kosmos2TextConfig(vocab_size=256, embed_dim=64, layers=2, ffn_dim=128, attention_heads=4),
    vision_config=Kosmos2VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8))
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return Kosmos2ForConditionalGeneration(CONFIG).eval()


# The inputs exporter_openvino_pt2e_forward fed: token ids literal; pixel_values seeded random of the recorded
# shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[1, 1, 1, 66, 10, 187, 194, 174, 153, 99, 85, 52, 6, 151, 56, 186, 77, 83, 16, 105, 69,
        173, 110, 178, 110, 125, 54, 174, 76, 10, 98, 20, 135, 137, 136, 140, 151, 25, 57, 90, 36, 124, 166, 69, 124,
        51, 170, 119, 38, 78, 141, 123, 103, 180, 10, 87, 119, 88, 89, 91, 199, 112, 98, 69, 43, 170, 89, 73, 54, 80,
        23, 121, 108, 164, 68, 44], [1, 1, 1, 144, 128, 75, 64, 118, 95, 16, 24, 38, 70, 81, 127, 93, 96, 73, 86, 55,
        20, 109, 52, 175, 23, 32, 80, 197, 56, 99, 38, 98, 133, 44, 112, 61, 135, 5, 120, 3, 46, 86, 46, 111, 32, 17,
        154, 136, 84, 143, 104, 75, 157, 122, 138, 181, 71, 133, 179, 82, 36, 120, 103, 148, 33, 90, 117, 65, 53, 119,
        195, 187, 160, 196, 38, 138]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 73, [0, 0, 0] + [1] * 73], dtype=torch.int64),
    'image_embeds_position_mask': torch.tensor([[False] * 8 + [True] * 64 + [False] * 4,
        [False] * 7 + [True] * 64 + [False] * 5], dtype=torch.bool),
    'pixel_values': torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32),
}

model = tiny_model()
quantizer = PT2EQuantizer(X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config()))
exporter, config = OpenVINOExporter(), OpenVINOConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
