"""[transformers.exporters] export fails at transformers.cache_utils:StaticLayer.update: BlipForConditionalGeneration
(exporter_onnx_ort_dynamic_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-d82d7e04.py
The suite saw: export: OnnxRuntimeQuantizer on onnx: IndexError: index_copy_(): index 19 is out of bounds for
dimension 2 with size 19 (at transformers/cache_utils.py:487)
Shared by 1 class(es), 17 cell(s) of 17 check(s) (index.json lists them).
"""

import copy

import torch
from transformers import BlipConfig, BlipForConditionalGeneration, BlipTextConfig, BlipVisionConfig
from transformers.exporters import OnnxExporter, OnnxConfig
from transformers.exporters.quantizers import OnnxRuntimeDynamicConfig, OnnxRuntimeQuantizer

CONFIG = BlipConfig(
    text_config=BlipTextConfig(vocab_size=256, hidden_size=64, encoder_hidden_size=64, intermediate_size=128,
        projection_dim=64, num_hidden_layers=2, num_attention_heads=4, bos_token_id=255, sep_token_id=254),
    vision_config=BlipVisionConfig(hidden_size=64, intermediate_size=128, projection_dim=64, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, initializer_range=0.02),
    projection_dim=64, image_text_hidden_size=64)
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 19, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 0,
}


def tiny_model():
    torch.manual_seed(0)
    return BlipForConditionalGeneration(CONFIG).eval()


# The inputs exporter_onnx_ort_dynamic_generate fed: token ids literal; pixel_values seeded random of the recorded
# shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[37, 107, 92, 39, 189, 180, 10, 29, 23]], dtype=torch.int64),
    'attention_mask': torch.full((1, 9), 1, dtype=torch.int64),
    'pixel_values': torch.randn((1, 3, 32, 32), generator=g, dtype=torch.float32),
}

config = tiny_model().generation_config
config.update(**GENERATION)
quantizer = OnnxRuntimeQuantizer(OnnxRuntimeDynamicConfig())
exporter, export_config = OnnxExporter(), OnnxConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export_for_generation(tiny_model(), copy.deepcopy(inputs), export_config, generation_config=config)
