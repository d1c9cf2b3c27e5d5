"""[eager] raises at
transformers.integrations.heterogeneity.configuration_utils:HeterogeneousConfigMixin.__getattribute__:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python exception-2d60a8c8.py
The suite saw: the class cannot be built from its own default config (transformers bug): AttributeError:
'Qwen3OmniMoeTalkerTextConfig' object has no attribute 'shared_expert_intermediate_size' (at ...
Shared by 3 class(es), 9 cell(s) of 6 check(s) (index.json lists them).
"""

import torch
from transformers import (Qwen3OmniMoeAudioEncoderConfig, Qwen3OmniMoeConfig, Qwen3OmniMoeForConditionalGeneration,
    Qwen3OmniMoeTalkerCodePredictorConfig, Qwen3OmniMoeTalkerConfig, Qwen3OmniMoeTalkerTextConfig,
    Qwen3OmniMoeTextConfig, Qwen3OmniMoeThinkerConfig, Qwen3OmniMoeVisionEncoderConfig)
from transformers.models.qwen3_omni_moe.configuration_qwen3_omni_moe import Qwen3OmniMoeCode2WavConfig

CONFIG = Qwen3OmniMoeConfig(
    thinker_config=Qwen3OmniMoeThinkerConfig(
        audio_config=Qwen3OmniMoeAudioEncoderConfig(num_mel_bins=16, encoder_layers=2, encoder_attention_heads=4,
            encoder_ffn_dim=128, d_model=64, max_source_positions=32, downsample_hidden_size=64),
        vision_config=Qwen3OmniMoeVisionEncoderConfig(depth=2, hidden_size=64, intermediate_size=128, num_heads=4,
            patch_size=8, out_hidden_size=64, deepstack_visual_indexes=[0, 1]),
        text_config=Qwen3OmniMoeTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            rope_parameters={'rope_theta': 1000000.0, 'rope_type': 'default', 'mrope_section': [2, 3, 3]},
            moe_intermediate_size=128, num_experts_per_tok=2, num_experts=4),
        audio_start_token_id=248, user_token_id=236, audio_token_id=247, image_token_id=250, video_token_id=251),
    talker_config=Qwen3OmniMoeTalkerConfig(
        code_predictor_config=Qwen3OmniMoeTalkerCodePredictorConfig(vocab_size=256, hidden_size=64,
            intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            max_window_layers=2, layer_types=['full_attention', 'full_attention']),
        text_config=Qwen3OmniMoeTalkerTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
            num_hidden_layers=2, num_attention_heads=4, moe_intermediate_size=128, num_experts_per_tok=2,
            num_local_experts=4),
        thinker_hidden_size=64, codec_eos_token_id=239, codec_nothink_id=240, codec_think_bos_id=241,
        codec_think_eos_id=242, codec_pad_id=237, codec_bos_id=238, audio_token_id=247, image_token_id=250,
        video_token_id=251, vision_start_token_id=249, audio_start_token_id=252),
    code2wav_config=Qwen3OmniMoeCode2WavConfig(codebook_size=64, hidden_size=64, num_attention_heads=4,
        num_key_value_heads=4, intermediate_size=128, num_hidden_layers=2),
    im_start_token_id=245, im_end_token_id=246, tts_pad_token_id=253, tts_bos_token_id=254, tts_eos_token_id=255,
    system_token_id=243, user_token_id=236, assistant_token_id=244)


def tiny_model():
    torch.manual_seed(0)
    return Qwen3OmniMoeForConditionalGeneration(CONFIG).eval()


tiny_model()  # building the tiny model raises
