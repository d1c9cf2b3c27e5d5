"""[transformers.exporters] data-dependent guard at
transformers.models.cohere_compass.modeling_cohere_compass:CohereCompassModel.get_rope_index:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-7228bd02.py
The suite saw: DynamoExporter.export(dynamic=True): GuardOnDataDependentSymNode: Could not guard on data-dependent
expression Eq(u19, 0) (unhinted: Eq(u19, 0)). (Size-like symbols: u19) (at ...
Shared by 1 class(es), 18 cell(s) of 18 check(s) (index.json lists them).
"""

import torch
from transformers import (CohereCompassConfig, CohereCompassForConditionalGeneration, CohereCompassTextConfig,
    CohereCompassVisionConfig)
from transformers.exporters import DynamoExporter, DynamoConfig

CONFIG = CohereCompassConfig(
    text_config=CohereCompassTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, eos_token_id=251,
        rope_parameters={'full_attention': {'rope_type': 'default', 'rope_theta': 10000.0, 'mrope_section': [2, 3, 3]}},
        layer_types=['full_attention', 'full_attention'], head_dim=16),
    vision_config=CohereCompassVisionConfig(depth=2, hidden_size=64, intermediate_size=128, num_heads=4,
        patch_size=8, out_hidden_size=64, deepstack_visual_indexes=[0, 1]),
    image_token_id=254, video_token_id=255, vision_start_token_id=252, vision_end_token_id=253)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return CohereCompassForConditionalGeneration(CONFIG).eval()


# The inputs exporter_dynamo_forward fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 84, 132, 183, 74, 193, 252] + [254] * 4 + [253, 9, 186, 37, 189], [0, 0, 0,
        175, 166, 105, 40, 252] + [254] * 4 + [253, 9, 129, 68, 183, 150]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 15, [0, 0, 0] + [1] * 15], dtype=torch.int64),
    'pixel_values': torch.randn((32, 384), generator=g, dtype=torch.float32),
    'image_grid_thw': torch.tensor([[1, 4, 4], [1, 4, 4]], dtype=torch.int64),
    'mm_token_type_ids': torch.tensor([[0] * 9 + [1] * 4 + [0] * 5, [0] * 8 + [1] * 4 + [0] * 6], dtype=torch.int64),
}


model = tiny_model()
exporter, config = DynamoExporter(), DynamoConfig(dynamic=True)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
