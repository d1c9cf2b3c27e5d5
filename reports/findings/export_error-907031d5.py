"""[transformers.exporters] export fails at transformers.masking_utils:_preprocess_mask_arguments:
PaliGemmaForConditionalGeneration:paligemma2 (exporter_dynamo_nncf_fx_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-907031d5.py
The suite saw: export: NNCFTorchFXQuantizer on dynamo: AttributeError: 'dict' object has no attribute 'ndim' (at
transformers/masking_utils.py:834)
Shared by 1 class(es), 13 cell(s) of 13 check(s) (index.json lists them).
"""

import copy

import torch
from transformers import Gemma2Config, PaliGemmaConfig, PaliGemmaForConditionalGeneration, SiglipVisionConfig
from transformers.exporters import DynamoExporter, DynamoConfig
from transformers.exporters.quantizers import NNCFQuantizationConfig, NNCFTorchFXQuantizer

CONFIG = PaliGemmaConfig(
    vision_config=SiglipVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, vision_use_head=False, vocab_size=256,
        projection_dim=64),
    text_config=Gemma2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        layer_types=['sliding_attention', 'full_attention'], use_bidirectional_attention=True,
        cache_implementation='hybrid', num_image_tokens=16),
    image_token_index=255, vocab_size=256, projection_dim=64, hidden_size=64)
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 38, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 0,
}


def tiny_model():
    torch.manual_seed(0)
    return PaliGemmaForConditionalGeneration(CONFIG).eval()


# The inputs exporter_dynamo_nncf_fx_generate fed: token ids literal; pixel_values seeded random of the recorded
# shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([list(range(12, 18)) + [255] * 16 + [2, 18, 19, 20, 21, 22]], dtype=torch.int64),
    'token_type_ids': torch.full((1, 28), 0, dtype=torch.int64),
    'attention_mask': torch.full((1, 28), 1, dtype=torch.int64),
    'pixel_values': (torch.randn((1, 3, 32, 32), generator=g, dtype=torch.float32) * 0.575 + 0.00933),
}

config = tiny_model().generation_config
config.update(**GENERATION)
quantizer = NNCFTorchFXQuantizer(NNCFQuantizationConfig(), calibration_dataset=[copy.deepcopy(inputs)])
exporter, export_config = DynamoExporter(), DynamoConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export_for_generation(tiny_model(), copy.deepcopy(inputs), export_config, generation_config=config)
