"""[transformers.exporters] export fails at transformers.utils.import_utils:torch_compilable_check:
VoxtralForConditionalGeneration (exporter_dynamo_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-a29f84cd.py
The suite saw: DynamoExporter.export(dynamic=True): AssertionError: tgt_bound=VR[2048, 9223372036854775808] not a
subset of src_bound=VR[2048, 9223372036854775806] (at transformers/utils/import_utils.py:1995)
Shared by 2 class(es), 35 cell(s) of 18 check(s) (index.json lists them).
"""

import torch
from transformers import LlamaConfig, VoxtralConfig, VoxtralEncoderConfig, VoxtralForConditionalGeneration
from transformers.exporters import DynamoExporter, DynamoConfig

CONFIG = VoxtralConfig(
    audio_config=VoxtralEncoderConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_mel_bins=16, max_source_positions=32),
    text_config=LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=131072, rms_norm_eps=1e-05,
        rope_parameters={'rope_theta': 100000000.0, 'rope_type': 'default'}, head_dim=16),
    audio_token_id=24, hidden_size=64)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return VoxtralForConditionalGeneration(CONFIG).eval()


# The inputs exporter_dynamo_forward fed: token ids literal; input_features seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 52, 197, 68, 52, 120] + [24] * 16 + [33, 177, 164, 117], [0, 0, 0, 116, 127,
        74, 133] + [24] * 16 + [120, 172, 59, 132, 190]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 25, [0, 0, 0] + [1] * 25], dtype=torch.int64),
    'input_features': torch.randn((2, 16, 64), generator=g, dtype=torch.float32),
}


model = tiny_model()
exporter, config = DynamoExporter(), DynamoConfig(dynamic=True)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
