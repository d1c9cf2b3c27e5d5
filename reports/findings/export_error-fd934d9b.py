"""[transformers.exporters] export fails at
transformers.exporters.exporter_executorch:ExecutorchExporter.export_program: UnlimitedOcrForConditionalGeneration

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-fd934d9b.py
The suite saw: ExecutorchExporter.export_for_generation(dynamic=True) component 'decode': RuntimeError: Expected
!size_bytes_is_heap_allocated_ to be true, but got false. (Could this error message be improved? If so, please ...
Shared by 10 class(es), 17 cell(s) of 4 check(s) (index.json lists them).
"""

import torch
from transformers import (UnlimitedOcrConfig, UnlimitedOcrForConditionalGeneration, UnlimitedOcrSamVisionConfig,
    UnlimitedOcrTextConfig, UnlimitedOcrVisionConfig, UnlimitedOcrVisionEncoderConfig)
from transformers.exporters import ExecutorchExporter, ExecutorchConfig

CONFIG = UnlimitedOcrConfig(
    vision_config=UnlimitedOcrVisionConfig(
        sam_config=UnlimitedOcrSamVisionConfig(hidden_size=64, output_channels=64, num_hidden_layers=2,
            num_attention_heads=4, image_size=32, patch_size=8, initializer_range=0.02, global_attn_indexes=[0, 1],
            mlp_dim=128, downsample_channels=[64, 64]),
        encoder_config=UnlimitedOcrVisionEncoderConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, image_size=32, patch_size=8)),
    text_config=UnlimitedOcrTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16, n_routed_experts=4, n_shared_experts=1,
        num_experts_per_tok=2, moe_intermediate_size=128, mlp_layer_types=['dense', 'sparse'],
        layer_types=['reference_sliding_attention', 'reference_sliding_attention']),
    image_token_id=255)
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 22, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 0,
}


def tiny_model():
    torch.manual_seed(0)
    return UnlimitedOcrForConditionalGeneration(CONFIG).eval()


# The inputs exporter_executorch_generate fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[153, 99, 85, 52, 255, 255, 255, 6, 151, 56, 186, 77]], dtype=torch.int64),
    'attention_mask': torch.full((1, 12), 1, dtype=torch.int64),
    'pixel_values': torch.randn((1, 3, 32, 32), generator=g, dtype=torch.float32),
}


config = tiny_model().generation_config
config.update(**GENERATION)
exporter, export_config = ExecutorchExporter(), ExecutorchConfig(dynamic=True)
exported = exporter.export_for_generation(tiny_model(), dict(inputs), export_config, generation_config=config)
