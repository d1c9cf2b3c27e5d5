"""[transformers.exporters] export fails at transformers.models.molmo2.modeling_molmo2:Molmo2Adapter.forward:
Molmo2ForConditionalGeneration (exporter_dynamo_nncf_fx_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-78ad2f6d.py
The suite saw: export: NNCFTorchFXQuantizer on dynamo: IndexError: index 16 is out of bounds for dimension 0 with
size 16 (at transformers/models/molmo2/modeling_molmo2.py:612)
Shared by 1 class(es), 17 cell(s) of 17 check(s) (index.json lists them).
"""

import copy

import torch
from transformers import (Molmo2AdapterConfig, Molmo2Config, Molmo2ForConditionalGeneration, Molmo2TextConfig,
    Molmo2VisionConfig)
from transformers.exporters import DynamoExporter, DynamoConfig
from transformers.exporters.quantizers import NNCFQuantizationConfig, NNCFTorchFXQuantizer

CONFIG = Molmo2Config(
    vision_config=Molmo2VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16, image_size=[32, 32], patch_size=8,
        num_position_embeddings=16),
    adapter_config=Molmo2AdapterConfig(vision_feature_layer=[1, 0], hidden_size=64, num_attention_heads=4,
        num_key_value_heads=4, head_dim=16, intermediate_size=128, text_hidden_size=64),
    text_config=Molmo2TextConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        vocab_size=256, num_hidden_layers=2, intermediate_size=128, rope_scaling_layers=[0, 1]),
    image_start_token_id=250, low_res_image_start_token_id=253, image_end_token_id=251, image_patch_id=252,
    frame_start_token_id=254, frame_end_token_id=255)
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 25, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 0,
}


def tiny_model():
    torch.manual_seed(0)
    return Molmo2ForConditionalGeneration(CONFIG).eval()


# The inputs exporter_dynamo_nncf_fx_generate fed: token ids literal; pixel_values seeded random of the recorded
# shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[153, 99, 85, 52, 250] + [252] * 4 + [251, 6, 151, 56, 186, 77]], dtype=torch.int64),
    'attention_mask': torch.full((1, 15), 1, dtype=torch.int64),
    'pixel_values': torch.randn((1, 16, 192), generator=g, dtype=torch.float32),
    'image_token_pooling': torch.tensor([[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15], [16, 17, 20, 21],
        [18, 19, 22, 23], [24, 25, 28, 29], [26, 27, 30, 31]], dtype=torch.int64),
    'image_grids': torch.tensor([[2, 2, 0, 0]], dtype=torch.int64),
    'mm_token_type_ids': torch.tensor([[0] * 5 + [1] * 4 + [0] * 6], dtype=torch.int64),
}

config = tiny_model().generation_config
config.update(**GENERATION)
quantizer = NNCFTorchFXQuantizer(NNCFQuantizationConfig(), calibration_dataset=[copy.deepcopy(inputs)])
exporter, export_config = DynamoExporter(), DynamoConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export_for_generation(tiny_model(), copy.deepcopy(inputs), export_config, generation_config=config)
