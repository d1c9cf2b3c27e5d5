"""[transformers.exporters] data-dependent guard at
transformers.models.qwen3_vl.modeling_qwen3_vl:Qwen3VLModel.get_rope_index: Qwen3VLForConditionalGeneration

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-10909522.py
The suite saw: DynamoExporter.export(dynamic=True): GuardOnDataDependentSymNode: Could not guard on data-dependent
expression Eq(u19, 0) (unhinted: Eq(u19, 0)). (Size-like symbols: u19) (at ...
Shared by 1 class(es), 18 cell(s) of 18 check(s) (index.json lists them).
"""

import torch
from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration, Qwen3VLTextConfig, Qwen3VLVisionConfig
from transformers.exporters import DynamoExporter, DynamoConfig

CONFIG = Qwen3VLConfig(
    text_config=Qwen3VLTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16,
        rope_parameters={'rope_theta': 500000.0, 'rope_type': 'default', 'mrope_section': [2, 3, 3]}),
    vision_config=Qwen3VLVisionConfig(depth=2, hidden_size=64, intermediate_size=128, num_heads=4, patch_size=8,
        out_hidden_size=64, deepstack_visual_indexes=[0, 1]),
    image_token_id=254, video_token_id=255, vision_start_token_id=252, vision_end_token_id=253)
CONSTANTS = {}


def tiny_model():
    torch.manual_seed(0)
    return Qwen3VLForConditionalGeneration(CONFIG).eval()


# The inputs exporter_dynamo_forward fed: token ids literal; pixel_values seeded random of the recorded shape.
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
exporter, config = DynamoExporter(), DynamoConfig(dynamic=True)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
