"""[transformers.exporters] export fails at transformers.exporters.utils:decompose_prefill_decode:
Blip2ForConditionalGeneration (exporter_dynamo_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-eaea847c.py
The suite saw: DynamoExporter.export_for_generation(dynamic=True): RuntimeError: decompose_prefill_decode expected
at least 2 calls to Blip2ForConditionalGeneration.forward() during generate(max_new_tokens=2), but captured 0. ...
Shared by 4 class(es), 68 cell(s) of 17 check(s) (index.json lists them).
"""

import torch
from transformers import (Blip2Config, Blip2ForConditionalGeneration, Blip2QFormerConfig, Blip2VisionConfig, OPTConfig)
from transformers.exporters import DynamoExporter, DynamoConfig

CONFIG = Blip2Config(
    vision_config=Blip2VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, initializer_range=0.02),
    qformer_config=Blip2QFormerConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, encoder_hidden_size=64),
    text_config=OPTConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, ffn_dim=128, word_embed_proj_dim=64,
        num_attention_heads=4),
    image_text_hidden_size=64, image_token_index=255)
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 51, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 1,
}


def tiny_model():
    torch.manual_seed(0)
    return Blip2ForConditionalGeneration(CONFIG).eval()


# The inputs exporter_dynamo_generate fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[153, 99, 85, 52] + [255] * 32 + [6, 151, 56, 186, 77]], dtype=torch.int64),
    'attention_mask': torch.full((1, 41), 1, dtype=torch.int64),
    'pixel_values': torch.randn((1, 3, 32, 32), generator=g, dtype=torch.float32),
}


config = tiny_model().generation_config
config.update(**GENERATION)
exporter, export_config = DynamoExporter(), DynamoConfig(dynamic=True)
exported = exporter.export_for_generation(tiny_model(), dict(inputs), export_config, generation_config=config)
