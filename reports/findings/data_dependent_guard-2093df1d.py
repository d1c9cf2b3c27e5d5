"""[transformers.exporters] data-dependent guard at
transformers.models.paddleocr_vl.modeling_paddleocr_vl:PaddleOCRVLModel.get_rope_index:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-2093df1d.py
The suite saw: DynamoExporter.export(dynamic=True): GuardOnDataDependentSymNode: Could not guard on data-dependent
expression Eq(u29, 0) (unhinted: Eq(u29, 0)). (Size-like symbols: u29) (at ...
Shared by 1 class(es), 18 cell(s) of 18 check(s) (index.json lists them).
"""

import torch
from transformers import (PaddleOCRTextConfig, PaddleOCRVLConfig, PaddleOCRVLForConditionalGeneration,
    PaddleOCRVisionConfig)
from transformers.exporters import DynamoExporter, DynamoConfig

CONFIG = PaddleOCRVLConfig(
    text_config=PaddleOCRTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4,
        rope_parameters={'rope_theta': 500000.0, 'rope_type': 'default', 'mrope_section': [2, 3, 3]}, head_dim=16),
    vision_config=PaddleOCRVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8),
    image_token_id=252, video_token_id=253, vision_start_token_id=254, vision_end_token_id=255)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return PaddleOCRVLForConditionalGeneration(CONFIG).eval()


# The inputs exporter_dynamo_forward fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 3, 4, 5, 6, 7, 252, 8, 9, 10, 11], list(range(12, 18)) + [252, 18, 19, 20, 21,
        22]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0] + [1] * 10, [1] * 12], dtype=torch.int64),
    'mm_token_type_ids': torch.tensor([[0] * 7 + [1] + [0] * 4, [0] * 6 + [1] + [0] * 5], dtype=torch.int64),
    'pixel_values': (torch.randn((8, 3, 8, 8), generator=g, dtype=torch.float32) * 0.46 + 0.193),
    'image_grid_thw': torch.tensor([[1, 2, 2], [1, 2, 2]], dtype=torch.int64),
}


model = tiny_model()
exporter, config = DynamoExporter(), DynamoConfig(dynamic=True)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
