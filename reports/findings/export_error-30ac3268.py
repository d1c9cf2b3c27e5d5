"""[transformers.exporters] export fails at
transformers.exporters.runners.runner_executorch:ExecutorchModelRunner.__init__:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-30ac3268.py
The suite saw: load: executorch runners: RuntimeError: Failed to load method forward, error: 0x:21 (at
transformers/exporters/runners/runner_executorch.py:39)
Shared by 23 class(es), 23 cell(s) of 5 check(s) (index.json lists them).
"""

import torch
from transformers import (Qwen2Config, VibeVoiceAcousticTokenizerEncoderConfig, VibeVoiceAsrConfig,
    VibeVoiceAsrForConditionalGeneration)
from transformers.exporters import ExecutorchExporter, ExecutorchConfig
from transformers.exporters.quantizers import NNCFTorchFXQuantizer, NNCFWeightCompressionConfig

CONFIG = VibeVoiceAsrConfig(
    acoustic_tokenizer_encoder_config=VibeVoiceAcousticTokenizerEncoderConfig(initializer_range=0.02, num_filters=4,
        depths=[1, 1, 1, 1, 1, 1, 1]),
    semantic_tokenizer_encoder_config=VibeVoiceAcousticTokenizerEncoderConfig(initializer_range=0.02, num_filters=4,
        depths=[1, 1, 1, 1, 1, 1, 1]),
    text_config=Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_window_layers=2,
        layer_types=['full_attention', 'full_attention']),
    audio_token_id=255, audio_bos_token_id=253, audio_eos_token_id=254)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return VibeVoiceAsrForConditionalGeneration(CONFIG).eval()


# The inputs exporter_executorch_nncf_fx_forward fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
        dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
}

model = tiny_model()
quantizer = NNCFTorchFXQuantizer(NNCFWeightCompressionConfig())
exporter, config = ExecutorchExporter(), ExecutorchConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
exported.to("cpu")
