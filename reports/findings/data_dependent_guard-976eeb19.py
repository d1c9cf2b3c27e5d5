"""[torch.compile] data-dependent guard at
transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe:Qwen3OmniMoeVisionAttention.forward:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-976eeb19.py
The suite saw: fullgraph compile failed: GuardOnDataDependentSymNode: Could not guard on data-dependent expression
Eq(u12, 0) (unhinted: Eq(u12, 0)). (Size-like symbols: u12) (at ...
Shared by 1 class(es), 9 cell(s) of 9 check(s) (index.json lists them).
"""

import torch
from transformers import (Qwen3OmniMoeAudioEncoderConfig, Qwen3OmniMoeTextConfig, Qwen3OmniMoeThinkerConfig,
    Qwen3OmniMoeThinkerForConditionalGeneration, Qwen3OmniMoeVisionEncoderConfig)

CONFIG = Qwen3OmniMoeThinkerConfig(
    audio_config=Qwen3OmniMoeAudioEncoderConfig(num_mel_bins=16, encoder_layers=2, encoder_attention_heads=4,
        encoder_ffn_dim=128, d_model=64, max_source_positions=32, downsample_hidden_size=64),
    vision_config=Qwen3OmniMoeVisionEncoderConfig(depth=2, hidden_size=64, intermediate_size=128, num_heads=4,
        patch_size=8, out_hidden_size=64, deepstack_visual_indexes=[0, 1]),
    text_config=Qwen3OmniMoeTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2,
        rope_parameters={'rope_theta': 1000000.0, 'rope_type': 'default', 'mrope_section': [2, 3, 3]},
        moe_intermediate_size=128, num_experts_per_tok=2, num_experts=4),
    audio_start_token_id=253, user_token_id=251, audio_token_id=252, image_token_id=254, video_token_id=255,
    vision_start_token_id=248, vision_end_token_id=249)
BACKEND = 'eager'
MARKED = {'attention_mask': [1], 'input_ids': [1]}


def tiny_model():
    torch.manual_seed(0)
    return Qwen3OmniMoeThinkerForConditionalGeneration(CONFIG).eval()


# The inputs compile_dynamic fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 154, 175, 161, 48, 73, 248] + [254] * 4 + [249, 132, 54, 43, 99], [0, 0, 0, 13,
        185, 190, 125, 248] + [254] * 4 + [249, 81, 143, 70, 68, 177]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 15, [0, 0, 0] + [1] * 15], dtype=torch.int64),
    'pixel_values': torch.randn((32, 384), generator=g, dtype=torch.float32),
    'image_grid_thw': torch.tensor([[1, 4, 4], [1, 4, 4]], dtype=torch.int64),
}

for name, dims in MARKED.items():  # the prompt axis of every sequence-aligned input
    for value in inputs[name] if isinstance(inputs[name], (list, tuple)) else [inputs[name]]:
        for dim in dims:
            torch._dynamo.mark_dynamic(value, dim)
model = tiny_model()
compiled = torch.compile(model, fullgraph=True, backend=BACKEND)
with torch.no_grad():
    compiled(**inputs)  # before any eager call, the prompt length dynamic
