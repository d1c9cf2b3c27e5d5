"""[transformers.exporters] export fails at
transformers.models.minicpmv4_7.modeling_minicpmv4_7:MiniCPMV4_7VisionEmbeddings.forward:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-2ef814ca.py
The suite saw: OnnxExporter.export_for_generation(dynamic=True): RuntimeError: The size of tensor a (48) must match
the size of tensor b (32) at non-singleton dimension 1 (at ...
Shared by 1 class(es), 17 cell(s) of 17 check(s) (index.json lists them).
"""

import torch
from transformers import (MiniCPMV4_7Config, MiniCPMV4_7ForConditionalGeneration, MiniCPMV4_7VisionConfig,
    Qwen3_5TextConfig)
from transformers.exporters import OnnxExporter, OnnxConfig

CONFIG = MiniCPMV4_7Config(
    text_config=Qwen3_5TextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2,
        rope_parameters={'rope_theta': 10000.0, 'partial_rotary_factor': 0.25, 'rope_type': 'default',
            'mrope_section': [1, 1, 1]},
        head_dim=24, linear_key_head_dim=16, linear_value_head_dim=16,
        layer_types=['linear_attention', 'full_attention']),
    vision_config=MiniCPMV4_7VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8),
    image_size=32, image_token_id=255, video_token_id=254, patch_size=8)
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 21, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 0,
}


def tiny_model():
    torch.manual_seed(0)
    return MiniCPMV4_7ForConditionalGeneration(CONFIG).eval()


# The inputs exporter_onnx_generate fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[119, 119, 88, 144, 255, 255, 5, 181, 169, 129, 67]], dtype=torch.int64),
    'attention_mask': torch.full((1, 11), 1, dtype=torch.int64),
    'pixel_values': torch.randn((1, 3, 8, 384), generator=g, dtype=torch.float32),
    'target_sizes': torch.tensor([[4, 8]], dtype=torch.int32),
    'mm_token_type_ids': torch.tensor([[0] * 4 + [1, 1] + [0] * 5], dtype=torch.int64),
}


config = tiny_model().generation_config
config.update(**GENERATION)
exporter, export_config = OnnxExporter(), OnnxConfig(dynamic=True)
exported = exporter.export_for_generation(tiny_model(), dict(inputs), export_config, generation_config=config)
