"""[torch.compile] raises at
transformers.models.vibevoice.generation_vibevoice:VibeVoiceGenerationMixin._build_default_noise_scheduler:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float16). Run: python exception-91b9da23.py
The suite saw: ImportError: The default VibeVoice noise scheduler (`DPMSolverMultistepScheduler`) requires
`diffusers`. Install it with `pip install diffusers`, or pass a custom `noise_scheduler` instance to ...
Shared by 1 class(es), 12 cell(s) of 12 check(s) (index.json lists them).
"""

import torch
from transformers import (Qwen2Config, VibeVoiceAcousticTokenizerConfig, VibeVoiceAcousticTokenizerEncoderConfig,
    VibeVoiceConfig, VibeVoiceDiffusionHeadConfig, VibeVoiceForConditionalGeneration)

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
DTYPE = torch.float16
NEW_TOKENS = 5


def tiny_model():
    torch.manual_seed(0)
    return VibeVoiceForConditionalGeneration(CONFIG).to(DTYPE).eval()


def in_dtype(value):
    """Floating tensors cast to the run's dtype (DTYPE), as the suite cast the inputs it fed."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(DTYPE)
    if isinstance(value, (list, tuple)):
        return type(value)(in_dtype(v) for v in value)
    return value


def sample_inputs():
    """The inputs compile_decode fed: token ids literal."""
    inputs = {
        'input_ids': torch.tensor([[252, 252, 252, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
            dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    }
    return {k: in_dtype(v) for k, v in inputs.items()}


def greedy(model, inputs, new_tokens, **extra):
    """Greedy generate of exactly `new_tokens` tokens (EOS cannot stop it), generate's auto-compile off."""
    with torch.no_grad():
        return model.generate(**inputs, do_sample=False, num_beams=1, max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, disable_compile=True, **extra)


inputs = sample_inputs()
eager = greedy(tiny_model(), inputs, NEW_TOKENS, output_logits=True, return_dict_in_generate=True)
