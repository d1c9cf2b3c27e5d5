"""[transformers.exporters] export fails at transformers.integrations.sdpa_attention:sdpa_attention_forward:
Kosmos2ForConditionalGeneration (exporter_dynamo_nncf_fx_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-84b54e01.py
The suite saw: export: NNCFTorchFXQuantizer on dynamo: RuntimeError: The size of tensor a (83) must match the size
of tensor b (73) at non-singleton dimension 3 (at transformers/integrations/sdpa_attention.py:182)
Shared by 2 class(es), 20 cell(s) of 20 check(s) (index.json lists them).
"""

import copy

import torch
from transformers import Kosmos2Config, Kosmos2ForConditionalGeneration, Kosmos2TextConfig, Kosmos2VisionConfig
from transformers.exporters import DynamoExporter, DynamoConfig
from transformers.exporters.quantizers import NNCFQuantizationConfig, NNCFTorchFXQuantizer

CONFIG = Kosmos2Config(
    text_config=Kosmos2TextConfig(vocab_size=256, embed_dim=64, layers=2, ffn_dim=128, attention_heads=4),
    vision_config=Kosmos2VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8))
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 83, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 1,
}


def tiny_model():
    torch.manual_seed(0)
    return Kosmos2ForConditionalGeneration(CONFIG).eval()


# The inputs exporter_dynamo_nncf_fx_generate fed: token ids literal; pixel_values seeded random of the recorded
# shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[144, 128, 75, 64, 118, 95, 16, 24, 38, 70, 81, 127, 93, 96, 73, 86, 55, 20, 109, 52,
        175, 23, 32, 80, 197, 56, 99, 38, 98, 133, 44, 112, 61, 135, 5, 120, 3, 46, 86, 46, 111, 32, 17, 154, 136, 84,
        143, 104, 75, 157, 122, 138, 181, 71, 133, 179, 82, 36, 120, 103, 148, 33, 90, 117, 65, 53, 119, 195, 187, 160,
        196, 38, 138]], dtype=torch.int64),
    'attention_mask': torch.full((1, 73), 1, dtype=torch.int64),
    'image_embeds_position_mask': torch.tensor([[False] * 4 + [True] * 64 + [False] * 5], dtype=torch.bool),
    'pixel_values': torch.randn((1, 3, 32, 32), generator=g, dtype=torch.float32),
}

config = tiny_model().generation_config
config.update(**GENERATION)
quantizer = NNCFTorchFXQuantizer(NNCFQuantizationConfig(), calibration_dataset=[copy.deepcopy(inputs)])
exporter, export_config = DynamoExporter(), DynamoConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export_for_generation(tiny_model(), copy.deepcopy(inputs), export_config, generation_config=config)
