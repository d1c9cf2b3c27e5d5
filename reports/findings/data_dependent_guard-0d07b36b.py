"""[transformers.exporters] data-dependent guard at transformers.models.ernie4_5_vl_moe.modeling_ernie4_5_vl_moe:Ernie4
_5_VLMoeVariableResolutionResamplerModel._temporal_slicing: Ernie4_5_VLMoeForConditionalGeneration

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-0d07b36b.py
The suite saw: DynamoExporter.export(dynamic=True): GuardOnDataDependentSymNode: Could not extract specialized
integer from data-dependent expression u11 (unhinted: u11). (Size-like symbols: none) (at ...
Shared by 2 class(es), 38 cell(s) of 19 check(s) (index.json lists them).
"""

import torch
from transformers import (Ernie4_5_VLMoeConfig, Ernie4_5_VLMoeForConditionalGeneration, Ernie4_5_VLMoeTextConfig,
    Ernie4_5_VLMoeVisionConfig)
from transformers.exporters import DynamoExporter, DynamoConfig

CONFIG = Ernie4_5_VLMoeConfig(
    text_config=Ernie4_5_VLMoeTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2,
        rope_parameters={'rope_theta': 500000.0, 'rope_type': 'default', 'mrope_section': [3, 3, 2]},
        moe_intermediate_size=[128, 128], moe_k=2, moe_num_experts=4, mlp_layer_types=['dense', 'sparse']),
    vision_config=Ernie4_5_VLMoeVisionConfig(depth=2, hidden_size=64, num_heads=4, patch_size=8,
        intermediate_size=128),
    image_start_token_id=251, image_end_token_id=252, image_token_id=250, video_start_token_id=253,
    video_end_token_id=254, video_token_id=255)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return Ernie4_5_VLMoeForConditionalGeneration(CONFIG).eval()


# The inputs exporter_dynamo_forward fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 66, 10, 187, 194, 174, 251] + [250] * 4 + [252, 108, 164, 68, 44], [0, 0, 0,
        153, 99, 85, 52, 251] + [250] * 4 + [252, 6, 151, 56, 186, 77]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 15, [0, 0, 0] + [1] * 15], dtype=torch.int64),
    'pixel_values': torch.randn((32, 192), generator=g, dtype=torch.float32),
    'image_grid_thw': torch.tensor([[1, 4, 4], [1, 4, 4]], dtype=torch.int64),
    'mm_token_type_ids': torch.tensor([[0] * 9 + [1] * 4 + [0] * 5, [0] * 8 + [1] * 4 + [0] * 6], dtype=torch.int64),
}


model = tiny_model()
exporter, config = DynamoExporter(), DynamoConfig(dynamic=True)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
