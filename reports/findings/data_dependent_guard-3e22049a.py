"""[transformers.exporters] data-dependent guard at transformers.models.glm4v.modeling_glm4v:Glm4vModel.get_rope_index:
Glm4vForConditionalGeneration (exporter_dynamo_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-3e22049a.py
The suite saw: DynamoExporter.export(dynamic=True): GuardOnDataDependentSymNode: Could not guard on data-dependent
expression Eq(u15, 0) (unhinted: Eq(u15, 0)). (Size-like symbols: u15) (at ...
Shared by 1 class(es), 18 cell(s) of 18 check(s) (index.json lists them).
"""

import torch
from transformers import Glm4vConfig, Glm4vForConditionalGeneration, Glm4vTextConfig, Glm4vVisionConfig
from transformers.exporters import DynamoExporter, DynamoConfig

CONFIG = Glm4vConfig(
    text_config=Glm4vTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4,
        rope_parameters={'rope_theta': 10000.0, 'rope_type': 'default', 'mrope_section': [2, 3, 3]}),
    vision_config=Glm4vVisionConfig(depth=2, hidden_size=64, num_heads=4, image_size=32, patch_size=8,
        out_hidden_size=64, intermediate_size=128),
    image_token_id=254, video_token_id=255, image_start_token_id=250, image_end_token_id=251,
    video_start_token_id=252, video_end_token_id=253)
CONSTANTS = {}


def tiny_model():
    torch.manual_seed(0)
    return Glm4vForConditionalGeneration(CONFIG).eval()


# The inputs exporter_dynamo_forward fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 154, 175, 161, 48, 73, 250] + [254] * 4 + [251, 132, 54, 43, 99], [0, 0, 0, 13,
        185, 190, 125, 250] + [254] * 4 + [251, 81, 143, 70, 68, 177]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 15, [0, 0, 0] + [1] * 15], dtype=torch.int64),
    'pixel_values': torch.randn((32, 384), generator=g, dtype=torch.float32),
    'image_grid_thw': torch.tensor([[1, 4, 4], [1, 4, 4]], dtype=torch.int64),
    'mm_token_type_ids': torch.tensor([[0] * 9 + [1] * 4 + [0] * 5, [0] * 8 + [1] * 4 + [0] * 6], dtype=torch.int64),
}


model = tiny_model()
exporter, config = DynamoExporter(), DynamoConfig(dynamic=True)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
