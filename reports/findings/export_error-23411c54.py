"""[transformers.exporters] export fails at transformers.models.internvl.modeling_internvl:InternVLModel.pixel_shuffle:
InternVLForConditionalGeneration (exporter_dynamo_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-23411c54.py
The suite saw: DynamoExporter.export(dynamic=True): ValueRangeError: Invalid ranges
[0.500000000000000:-0.500000000000000] (at transformers/models/internvl/modeling_internvl.py:677)
Shared by 1 class(es), 17 cell(s) of 17 check(s) (index.json lists them).
"""

import torch
from transformers import InternVLConfig, InternVLForConditionalGeneration, InternVLVisionConfig, Qwen2Config
from transformers.exporters import DynamoExporter, DynamoConfig

CONFIG = InternVLConfig(
    vision_config=InternVLVisionConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128),
    text_config=Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_window_layers=2,
        layer_types=['full_attention', 'full_attention']),
    image_token_id=255)
CONSTANTS = {}


def tiny_model():
    torch.manual_seed(0)
    return InternVLForConditionalGeneration(CONFIG).eval()


# The inputs exporter_dynamo_forward fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 113, 47, 149, 159, 9] + [255] * 256 + [102, 167, 77, 96], [0, 0, 0, 198, 145,
        143, 105] + [255] * 256 + [33, 96, 93, 11, 82]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 265, [0, 0, 0] + [1] * 265], dtype=torch.int64),
    'pixel_values': torch.randn((2, 3, 448, 448), generator=g, dtype=torch.float32),
}


model = tiny_model()
exporter, config = DynamoExporter(), DynamoConfig(dynamic=True)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
