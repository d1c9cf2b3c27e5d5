"""[transformers.exporters] export fails at
transformers.exporters.quantizers.quantizer_nncf:_NNCFQuantizer._quantize_with_nncf:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-ef737683.py
The suite saw: convert: NNCFTorchFXQuantizer on onnx component 'audio_encoder': TypeError: 'NoneType' object is not
iterable (at transformers/exporters/quantizers/quantizer_nncf.py:134)
Shared by 133 class(es), 597 cell(s) of 11 check(s) (index.json lists them).
"""

import copy

import torch
from transformers import Qwen2AudioConfig, Qwen2AudioEncoderConfig, Qwen2AudioForConditionalGeneration, Qwen2Config
from transformers.exporters import OnnxExporter, OnnxConfig
from transformers.exporters.quantizers import NNCFQuantizationConfig, NNCFTorchFXQuantizer

CONFIG = Qwen2AudioConfig(
    audio_config=Qwen2AudioEncoderConfig(num_mel_bins=16, encoder_layers=2, encoder_attention_heads=4,
        encoder_ffn_dim=128, d_model=64, max_source_positions=32),
    text_config=Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_window_layers=2,
        layer_types=['full_attention', 'full_attention']),
    audio_token_index=255)
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 35, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 0,
}


def tiny_model():
    torch.manual_seed(0)
    return Qwen2AudioForConditionalGeneration(CONFIG).eval()


# The inputs exporter_onnx_nncf_fx_generate fed: token ids literal; input_features seeded random of the recorded
# shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[29, 174, 59, 116] + [255] * 16 + [154, 119, 112, 71, 192]], dtype=torch.int64),
    'attention_mask': torch.full((1, 25), 1, dtype=torch.int64),
    'input_features': torch.randn((1, 16, 64), generator=g, dtype=torch.float32),
    'feature_attention_mask': torch.full((1, 64), 1, dtype=torch.int64),
}

config = tiny_model().generation_config
config.update(**GENERATION)
quantizer = NNCFTorchFXQuantizer(NNCFQuantizationConfig(), calibration_dataset=[copy.deepcopy(inputs)])
exporter, export_config = OnnxExporter(), OnnxConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export_for_generation(tiny_model(), copy.deepcopy(inputs), export_config, generation_config=config)
