"""[transformers.exporters] data-dependent guard at
transformers.models.hunyuan_vl.modeling_hunyuan_vl:HunYuanVLVisionAttention.forward:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-c30ce7ce.py
The suite saw: export: NNCFOpenVINOQuantizer on openvino: GuardOnDataDependentSymNode: Could not guard on data-
dependent expression Eq(u6, 0) (unhinted: Eq(u6, 0)). (Size-like symbols: u6) (at ...
Shared by 1 class(es), 29 cell(s) of 29 check(s) (index.json lists them).
"""

import torch
from transformers import (HunYuanVLConfig, HunYuanVLForConditionalGeneration, HunYuanVLTextConfig,
    HunYuanVLVisionConfig)
from transformers.exporters import OpenVINOExporter, OpenVINOConfig
from transformers.exporters.quantizers import NNCFOpenVINOQuantizer, NNCFQuantizationConfig

CONFIG = HunYuanVLConfig(
    text_config=HunYuanVLTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4,
        rope_parameters={'rope_theta': 10000.0, 'rope_type': 'default', 'mrope_section': [2, 3, 3]}, head_dim=16),
    vision_config=HunYuanVLVisionConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4,
        num_key_value_heads=4, num_hidden_layers=2, out_hidden_size=64, patch_size=8, text_hidden_size=64),
    image_token_id=254, im_start_id=252, im_end_id=253, im_newline_id=255)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return HunYuanVLForConditionalGeneration(CONFIG).eval()


# The inputs exporter_openvino_nncf_openvino_forward fed: token ids literal; pixel_values seeded random of the
# recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 5, 6, 7, 8, 9, 255] + [254] * 4 + [253, 10, 11, 12, 13], list(range(14,
        20)) + [255] + [254] * 4 + [253, 20, 21, 22, 23, 24]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0] + [1] * 15, [1] * 17], dtype=torch.int64),
    'mm_token_type_ids': torch.tensor([[0] * 8 + [1] * 4 + [0] * 5, [0] * 7 + [1] * 4 + [0] * 6], dtype=torch.int64),
    'pixel_values': (torch.randn((8, 192), generator=g, dtype=torch.float32) * 0.46 + 0.193),
    'image_grid_thw': torch.tensor([[1, 2, 2], [1, 2, 2]], dtype=torch.int64),
}

model = tiny_model()
quantizer = NNCFOpenVINOQuantizer(NNCFQuantizationConfig())
exporter, config = OpenVINOExporter(), OpenVINOConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
