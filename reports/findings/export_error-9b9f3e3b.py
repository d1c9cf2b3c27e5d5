"""[transformers.exporters] export fails at transformers.exporters.quantizers.utils:traced_inputs:
Qwen3ASRForConditionalGeneration (exporter_openvino_pt2e_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-9b9f3e3b.py
The suite saw: calibrate: PT2EQuantizer on openvino component 'audio_encoder': ValueError: A calibration sample
lacks the traced inputs ['cu_seqlens', 'max_seqlen'] (it has ['input_features', 'input_features_mask']). Calib ...
Shared by 1 class(es), 7 cell(s) of 7 check(s) (index.json lists them).
"""

import copy

import torch
from transformers import Qwen3ASRConfig, Qwen3ASREncoderConfig, Qwen3ASRForConditionalGeneration, Qwen3Config
from transformers.exporters import OpenVINOExporter, OpenVINOConfig
from transformers.exporters.quantizers import PT2EQuantizer
from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
    X86InductorQuantizer, get_default_x86_inductor_quantization_config)

CONFIG = Qwen3ASRConfig(
    audio_config=Qwen3ASREncoderConfig(num_mel_bins=16, encoder_layers=2, encoder_attention_heads=4,
        encoder_ffn_dim=128, d_model=64, downsample_hidden_size=64),
    text_config=Qwen3Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=65536,
        tie_word_embeddings=True, max_window_layers=2, layer_types=['full_attention', 'full_attention']),
    audio_token_id=254, timestamp_token_id=255, pad_token_id=253, eos_token_id=[252, 253])
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 747, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 253,
}


def tiny_model():
    torch.manual_seed(0)
    return Qwen3ASRForConditionalGeneration(CONFIG).eval()


# The inputs exporter_openvino_pt2e_generate fed: token ids literal; input_features seeded random of the recorded
# shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[69, 22, 34, 124] + [254] * 728 + [112, 101, 37, 161, 141]], dtype=torch.int64),
    'attention_mask': torch.full((1, 737), 1, dtype=torch.int64),
    'input_features': torch.randn((1, 16, 100), generator=g, dtype=torch.float32),
    'input_features_mask': torch.full((1, 100), 1, dtype=torch.int64),
}

config = tiny_model().generation_config
config.update(**GENERATION)
quantizer = PT2EQuantizer(X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config()),
    calibration_dataset=[copy.deepcopy(inputs)])
exporter, export_config = OpenVINOExporter(), OpenVINOConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export_for_generation(tiny_model(), copy.deepcopy(inputs), export_config, generation_config=config)
