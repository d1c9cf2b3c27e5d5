"""[transformers.exporters] export fails at transformers.generation.utils:GenerationMixin._validate_generated_length:
VoxtralRealtimeForConditionalGeneration (exporter_executorch_nncf_fx_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-6be7d227.py
The suite saw: export: NNCFTorchFXQuantizer on executorch: ValueError: Input length of input_ids is 9, but
`max_length` is set to 9. This can lead to unexpected behavior. You should consider increasing `max_length` or ...
Shared by 1 class(es), 17 cell(s) of 17 check(s) (index.json lists them).
"""

import copy

import torch
from transformers import (VoxtralRealtimeConfig, VoxtralRealtimeEncoderConfig, VoxtralRealtimeForConditionalGeneration,
    VoxtralRealtimeTextConfig)
from transformers.exporters import ExecutorchExporter, ExecutorchConfig
from transformers.exporters.quantizers import NNCFTorchFXQuantizer, NNCFWeightCompressionConfig

CONFIG = VoxtralRealtimeConfig(
    audio_config=VoxtralRealtimeEncoderConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_mel_bins=16, head_dim=16),
    text_config=VoxtralRealtimeTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-05,
        rope_parameters={'rope_theta': 1000000.0, 'rope_type': 'default'}, sliding_window=8192,
        tie_word_embeddings=True),
    hidden_size=64)
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 14, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 0,
}


def tiny_model():
    torch.manual_seed(0)
    return VoxtralRealtimeForConditionalGeneration(CONFIG).eval()


# The inputs exporter_executorch_nncf_fx_generate fed: token ids literal; input_features seeded random of the
# recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[37, 107, 92, 39, 189, 180, 10, 29, 23]], dtype=torch.int64),
    'attention_mask': torch.full((1, 9), 1, dtype=torch.int64),
    'input_features': torch.randn((1, 16, 72), generator=g, dtype=torch.float32),
    'num_delay_tokens': 6,
}

config = tiny_model().generation_config
config.update(**GENERATION)
quantizer = NNCFTorchFXQuantizer(NNCFWeightCompressionConfig(), calibration_dataset=[copy.deepcopy(inputs)])
exporter, export_config = ExecutorchExporter(), ExecutorchConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export_for_generation(tiny_model(), copy.deepcopy(inputs), export_config, generation_config=config)
