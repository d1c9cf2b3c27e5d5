"""[transformers.exporters] data-dependent guard at
transformers.models.qwen3_5.modeling_qwen3_5:Qwen3_5Model.get_rope_index: Qwen3_5ForConditionalGeneration

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-eece239c.py
The suite saw: export: NNCFTorchFXQuantizer on openvino: GuardOnDataDependentSymNode: Could not guard on data-
dependent expression Eq(u19, 0) (unhinted: Eq(u19, 0)). (Size-like symbols: u19) (at ...
Shared by 1 class(es), 18 cell(s) of 18 check(s) (index.json lists them).
"""

import torch
from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration, Qwen3_5TextConfig, Qwen3_5VisionConfig
from transformers.exporters import OpenVINOExporter, OpenVINOConfig
from transformers.exporters.quantizers import NNCFQuantizationConfig, NNCFTorchFXQuantizer

CONFIG = Qwen3_5Config(
    text_config=Qwen3_5TextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2,
        rope_parameters={'rope_theta': 10000.0, 'partial_rotary_factor': 0.25, 'rope_type': 'default',
            'mrope_section': [1, 1, 1]},
        head_dim=24, linear_key_head_dim=16, linear_value_head_dim=16,
        layer_types=['linear_attention', 'full_attention']),
    vision_config=Qwen3_5VisionConfig(depth=2, hidden_size=64, intermediate_size=128, num_heads=4, patch_size=8,
        out_hidden_size=64),
    image_token_id=254, video_token_id=255, vision_start_token_id=252, vision_end_token_id=253)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return Qwen3_5ForConditionalGeneration(CONFIG).eval()


# The inputs exporter_openvino_nncf_fx_forward fed: token ids literal; pixel_values seeded random of the recorded
# shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 154, 175, 161, 48, 73, 252] + [254] * 4 + [253, 132, 54, 43, 99], [0, 0, 0, 13,
        185, 190, 125, 252] + [254] * 4 + [253, 81, 143, 70, 68, 177]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 15, [0, 0, 0] + [1] * 15], dtype=torch.int64),
    'pixel_values': torch.randn((32, 384), generator=g, dtype=torch.float32),
    'image_grid_thw': torch.tensor([[1, 4, 4], [1, 4, 4]], dtype=torch.int64),
    'mm_token_type_ids': torch.tensor([[0] * 9 + [1] * 4 + [0] * 5, [0] * 8 + [1] * 4 + [0] * 6], dtype=torch.int64),
}

model = tiny_model()
quantizer = NNCFTorchFXQuantizer(NNCFQuantizationConfig())
exporter, config = OpenVINOExporter(), OpenVINOConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
