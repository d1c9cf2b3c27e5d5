"""[transformers.exporters] data-dependent guard at torch.fx.experimental.symbolic_shapes:ShapeEnv._evaluate_expr:
Molmo2ForConditionalGeneration (exporter_executorch_nncf_fx_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-ff4473f6.py
The suite saw: lower: NNCFTorchFXQuantizer on executorch: GuardOnDataDependentSymNode: Could not extract specialized
integer from data-dependent expression u58 (unhinted: u58). (Size-like symbols: none) (at symbolic_shapes.py:8459)
Shared by 12 class(es), 21 cell(s) of 3 check(s) (index.json lists them).
"""

import torch
from transformers import (Molmo2AdapterConfig, Molmo2Config, Molmo2ForConditionalGeneration, Molmo2TextConfig,
    Molmo2VisionConfig)
from transformers.exporters import ExecutorchExporter, ExecutorchConfig
from transformers.exporters.quantizers import NNCFTorchFXQuantizer, NNCFWeightCompressionConfig

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
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return Molmo2ForConditionalGeneration(CONFIG).eval()


# The inputs exporter_executorch_nncf_fx_forward fed: token ids literal; pixel_values seeded random of the recorded
# shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 66, 10, 187, 194, 174, 250] + [252] * 4 + [251, 108, 164, 68, 44], [0, 0, 0,
        153, 99, 85, 52, 250] + [252] * 4 + [251, 6, 151, 56, 186, 77]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 15, [0, 0, 0] + [1] * 15], dtype=torch.int64),
    'pixel_values': torch.randn((2, 16, 192), generator=g, dtype=torch.float32),
    'image_token_pooling': torch.tensor([[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15], [16, 17, 20, 21],
        [18, 19, 22, 23], [24, 25, 28, 29], [26, 27, 30, 31]], dtype=torch.int64),
    'image_grids': torch.tensor([[2, 2, 0, 0], [2, 2, 0, 0]], dtype=torch.int64),
    'mm_token_type_ids': torch.tensor([[0] * 9 + [1] * 4 + [0] * 5, [0] * 8 + [1] * 4 + [0] * 6], dtype=torch.int64),
}

model = tiny_model()
quantizer = NNCFTorchFXQuantizer(NNCFWeightCompressionConfig())
exporter, config = ExecutorchExporter(), ExecutorchConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
