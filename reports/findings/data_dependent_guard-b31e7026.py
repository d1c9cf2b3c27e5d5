"""[transformers.exporters] data-dependent guard at
transformers.models.video_llama_3.modeling_video_llama_3:VideoLlama3VisionModel.pixel_unshuffle:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-b31e7026.py
The suite saw: export: NNCFTorchFXQuantizer on dynamo: GuardOnDataDependentSymNode: Could not guard on data-
dependent expression 64*u13*u19*u20 < 2 (unhinted: 64*u13*u19*u20 < 2). (Size-like symbols: none) (at ...
Shared by 1 class(es), 8 cell(s) of 8 check(s) (index.json lists them).
"""

import torch
from transformers import (Qwen2Config, VideoLlama3Config, VideoLlama3ForConditionalGeneration, VideoLlama3VisionConfig)
from transformers.exporters import DynamoExporter, DynamoConfig
from transformers.exporters.quantizers import NNCFQuantizationConfig, NNCFTorchFXQuantizer

CONFIG = VideoLlama3Config(
    text_config=Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_window_layers=2,
        layer_types=['full_attention', 'full_attention']),
    vision_config=VideoLlama3VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, patch_size=8),
    image_token_id=254, video_token_id=255)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return VideoLlama3ForConditionalGeneration(CONFIG).eval()


# The inputs exporter_dynamo_nncf_fx_forward fed: token ids literal; pixel_values seeded random of the recorded
# shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 142, 82, 189, 195, 37] + [254] * 4 + [195, 49, 32, 173], [0, 0, 0, 164, 20, 88,
        101] + [254] * 4 + [88, 107, 143, 80, 18]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 13, [0, 0, 0] + [1] * 13], dtype=torch.int64),
    'pixel_values': torch.randn((8, 192), generator=g, dtype=torch.float32),
    'image_grid_thw': torch.tensor([[1, 2, 2], [1, 2, 2]], dtype=torch.int64),
    'image_merge_sizes': torch.full((2,), 1, dtype=torch.int64),
}

model = tiny_model()
quantizer = NNCFTorchFXQuantizer(NNCFQuantizationConfig())
exporter, config = DynamoExporter(), DynamoConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
