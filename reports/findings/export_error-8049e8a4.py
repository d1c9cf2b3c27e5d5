"""[transformers.exporters] export fails at torch._refs:t: Kosmos2_5ForConditionalGeneration
(exporter_executorch_nncf_fx_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-8049e8a4.py
The suite saw: lower: NNCFTorchFXQuantizer on executorch component 'image_encoder': RuntimeError: t() expects a
tensor with <= 2 dimensions, but self is 3D (at __init__.py:4830)
Shared by 18 class(es), 19 cell(s) of 2 check(s) (index.json lists them).
"""

import copy

import torch
from transformers import (Kosmos2_5Config, Kosmos2_5ForConditionalGeneration, Kosmos2_5TextConfig,
    Kosmos2_5VisionConfig)
from transformers.exporters import ExecutorchExporter, ExecutorchConfig
from transformers.exporters.quantizers import NNCFTorchFXQuantizer, NNCFWeightCompressionConfig

CONFIG = Kosmos2_5Config(
    text_config=Kosmos2_5TextConfig(vocab_size=256, embed_dim=64, layers=2, ffn_dim=128, attention_heads=4),
    vision_config=Kosmos2_5VisionConfig(hidden_size=64, intermediate_size=128, head_dim=16, num_hidden_layers=2,
        num_attention_heads=4),
    latent_query_num=16)
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 35, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 1,
}


def tiny_model():
    torch.manual_seed(0)
    return Kosmos2_5ForConditionalGeneration(CONFIG).eval()


# The inputs exporter_executorch_nncf_fx_generate fed: token ids literal; flattened_patches (after its first 2
# column(s), which are exact) seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'flattened_patches': torch.cat([torch.tensor([[[1.0, 1.0], [1.0, 2.0], [1.0, 3.0], [2.0, 1.0], [2.0, 2.0], [2.0,
        3.0]]], dtype=torch.float32), torch.randn((1, 6, 768), generator=g, dtype=torch.float32)], dim=-1),
    'input_ids': torch.tensor([[155, 100, 155, 54, 72, 42, 130, 199, 93, 72, 162, 96, 110, 40, 91, 181, 26, 128, 152,
        190, 114, 40, 141, 125, 101]], dtype=torch.int64),
    'attention_mask': torch.full((1, 25), 1, dtype=torch.int64),
    'image_embeds_position_mask': torch.tensor([[False] * 4 + [True] * 16 + [False] * 5], dtype=torch.bool),
}

config = tiny_model().generation_config
config.update(**GENERATION)
quantizer = NNCFTorchFXQuantizer(NNCFWeightCompressionConfig(), calibration_dataset=[copy.deepcopy(inputs)])
exporter, export_config = ExecutorchExporter(), ExecutorchConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export_for_generation(tiny_model(), copy.deepcopy(inputs), export_config, generation_config=config)
