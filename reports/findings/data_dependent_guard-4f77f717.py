"""[transformers.exporters] data-dependent guard at
transformers.models.glm46v.modeling_glm46v:Glm46VModel.get_rope_index: Glm46VForConditionalGeneration

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-4f77f717.py
The suite saw: export: PT2EQuantizer on openvino: GuardOnDataDependentSymNode: Could not guard on data-dependent
expression Eq(u15, 0) (unhinted: Eq(u15, 0)). (Size-like symbols: u15) (at ...
Shared by 1 class(es), 18 cell(s) of 18 check(s) (index.json lists them).
"""

import torch
from transformers import Glm46VConfig, Glm46VForConditionalGeneration, Glm4vTextConfig, Glm4vVisionConfig
from transformers.exporters import OpenVINOExporter, OpenVINOConfig
from transformers.exporters.quantizers import PT2EQuantizer
from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
    X86InductorQuantizer, get_default_x86_inductor_quantization_config)

CONFIG = Glm46VConfig(
    text_config=Glm4vTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4,
        rope_parameters={'rope_theta': 10000.0, 'rope_type': 'default', 'mrope_section': [2, 3, 3]}),
    vision_config=Glm4vVisionConfig(depth=2, hidden_size=64, num_heads=4, image_size=32, patch_size=8,
        out_hidden_size=64, intermediate_size=128),
    image_token_id=252, video_token_id=253, image_start_token_id=250, image_end_token_id=251,
    video_start_token_id=254, video_end_token_id=255)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return Glm46VForConditionalGeneration(CONFIG).eval()


# The inputs exporter_openvino_pt2e_forward fed: token ids literal; pixel_values seeded random of the recorded
# shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 154, 175, 161, 48, 73, 250] + [252] * 4 + [251, 132, 54, 43, 99], [0, 0, 0, 13,
        185, 190, 125, 250] + [252] * 4 + [251, 81, 143, 70, 68, 177]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 15, [0, 0, 0] + [1] * 15], dtype=torch.int64),
    'pixel_values': torch.randn((32, 384), generator=g, dtype=torch.float32),
    'image_grid_thw': torch.tensor([[1, 4, 4], [1, 4, 4]], dtype=torch.int64),
    'mm_token_type_ids': torch.tensor([[0] * 9 + [1] * 4 + [0] * 5, [0] * 8 + [1] * 4 + [0] * 6], dtype=torch.int64),
}

model = tiny_model()
quantizer = PT2EQuantizer(X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config()))
exporter, config = OpenVINOExporter(), OpenVINOConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
