"""[transformers.exporters] export fails at
transformers.models.vibevoice.generation_vibevoice:VibeVoiceGenerationMixin._build_default_noise_scheduler:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-e062340b.py
The suite saw: OnnxExporter.export_for_generation(dynamic=True): ImportError: The default VibeVoice noise scheduler
(`DPMSolverMultistepScheduler`) requires `diffusers`. Install it with `pip install diffusers`, or pass a custo ...
Shared by 1 class(es), 17 cell(s) of 17 check(s) (index.json lists them).
"""

import torch
from transformers import (Qwen2Config, VibeVoiceAcousticTokenizerConfig, VibeVoiceAcousticTokenizerEncoderConfig,
    VibeVoiceConfig, VibeVoiceDiffusionHeadConfig, VibeVoiceForConditionalGeneration)
from transformers.exporters import OnnxExporter, OnnxConfig

CONFIG = VibeVoiceConfig(
    audio_config=VibeVoiceAcousticTokenizerConfig(initializer_range=0.02, num_filters=4,
        depths=[1, 1, 1, 1, 1, 1, 1]),
    semantic_model_config=VibeVoiceAcousticTokenizerEncoderConfig(initializer_range=0.02, num_filters=4,
        depths=[1, 1, 1, 1, 1, 1, 1]),
    text_config=Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_window_layers=2,
        layer_types=['full_attention', 'full_attention']),
    diffusion_head_config=VibeVoiceDiffusionHeadConfig(hidden_size=64, num_hidden_layers=2, intermediate_size=128),
    pad_token_id=252, eos_token_id=252, audio_bos_token_id=253, audio_eos_token_id=254, audio_token_id=255,
    vocab_size=256)
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 19, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 252,
}


def tiny_model():
    torch.manual_seed(0)
    return VibeVoiceForConditionalGeneration(CONFIG).eval()


# The inputs exporter_onnx_generate fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[37, 107, 92, 39, 189, 180, 10, 29, 23]], dtype=torch.int64),
    'attention_mask': torch.full((1, 9), 1, dtype=torch.int64),
}


config = tiny_model().generation_config
config.update(**GENERATION)
exporter, export_config = OnnxExporter(), OnnxConfig(dynamic=True)
exported = exporter.export_for_generation(tiny_model(), dict(inputs), export_config, generation_config=config)
