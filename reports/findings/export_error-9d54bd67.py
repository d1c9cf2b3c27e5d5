"""[transformers.exporters] export fails at
transformers.exporters.runners.runner_openvino:OpenVINOModelRunner.from_program: Blip2ForConditionalGeneration

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-9d54bd67.py
The suite saw: load: openvino runners: RuntimeError: Exception from src/inference/src/cpp/core.cpp:117: (at
transformers/exporters/runners/runner_openvino.py:108)
Shared by 14 class(es), 20 cell(s) of 6 check(s) (index.json lists them).
"""

import torch
from transformers import (Blip2Config, Blip2ForConditionalGeneration, Blip2QFormerConfig, Blip2VisionConfig, OPTConfig)
from transformers.exporters import OpenVINOExporter, OpenVINOConfig
from transformers.exporters.quantizers import NNCFOpenVINOQuantizer, NNCFQuantizationConfig

CONFIG = Blip2Config(
    vision_config=Blip2VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, initializer_range=0.02),
    qformer_config=Blip2QFormerConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, encoder_hidden_size=64),
    text_config=OPTConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, ffn_dim=128, word_embed_proj_dim=64,
        num_attention_heads=4),
    image_text_hidden_size=64, image_token_index=255)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return Blip2ForConditionalGeneration(CONFIG).eval()


# The inputs exporter_openvino_nncf_openvino_forward fed: token ids literal; pixel_values seeded random of the
# recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[1, 1, 1, 66, 10, 187, 194, 174] + [255] * 32 + [108, 164, 68, 44], [1, 1, 1, 153, 99,
        85, 52] + [255] * 32 + [6, 151, 56, 186, 77]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 41, [0, 0, 0] + [1] * 41], dtype=torch.int64),
    'pixel_values': torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32),
}

model = tiny_model()
quantizer = NNCFOpenVINOQuantizer(NNCFQuantizationConfig())
exporter, config = OpenVINOExporter(), OpenVINOConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
exported.to("cpu", config={'INFERENCE_PRECISION_HINT': 'f32'})
