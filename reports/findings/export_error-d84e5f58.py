"""[transformers.exporters] export fails at
transformers.models.qianfan_ocr.modeling_qianfan_ocr:QianfanOCRModel.pixel_shuffle:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-d84e5f58.py
The suite saw: export: NNCFOpenVINOQuantizer on openvino: ValueRangeError: Invalid ranges
[0.500000000000000:-0.500000000000000] (at transformers/models/qianfan_ocr/modeling_qianfan_ocr.py:684)
Shared by 1 class(es), 17 cell(s) of 17 check(s) (index.json lists them).
"""

import torch
from transformers import QianfanOCRConfig, QianfanOCRForConditionalGeneration, QianfanOCRVisionConfig, Qwen3Config
from transformers.exporters import OpenVINOExporter, OpenVINOConfig
from transformers.exporters.quantizers import NNCFOpenVINOQuantizer, NNCFQuantizationConfig

CONFIG = QianfanOCRConfig(
    vision_config=QianfanOCRVisionConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128),
    text_config=Qwen3Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16, max_window_layers=2,
        layer_types=['full_attention', 'full_attention']),
    image_token_id=255)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return QianfanOCRForConditionalGeneration(CONFIG).eval()


# The inputs exporter_openvino_nncf_openvino_forward fed: token ids literal; pixel_values seeded random of the
# recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 113, 47, 149, 159, 9] + [255] * 256 + [102, 167, 77, 96], [0, 0, 0, 198, 145,
        143, 105] + [255] * 256 + [33, 96, 93, 11, 82]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 265, [0, 0, 0] + [1] * 265], dtype=torch.int64),
    'pixel_values': torch.randn((2, 3, 448, 448), generator=g, dtype=torch.float32),
}

model = tiny_model()
quantizer = NNCFOpenVINOQuantizer(NNCFQuantizationConfig())
exporter, config = OpenVINOExporter(), OpenVINOConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
