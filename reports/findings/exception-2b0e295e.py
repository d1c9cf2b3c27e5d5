"""[StaticCache] raises at transformers.generation.utils:GenerationMixin.generate: PPFormulaNetForConditionalGeneration
(static_cache).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float16). Run: python exception-2b0e295e.py
The suite saw: TypeError: transformers.generation.utils.GenerationMixin._expand_inputs_for_generation() got multiple
values for keyword argument 'input_ids' (at transformers/generation/utils.py:2928)
Shared by 1 class(es), 9 cell(s) of 9 check(s) (index.json lists them).
"""

import torch
from transformers import (PPFormulaNetConfig, PPFormulaNetForConditionalGeneration, PPFormulaNetTextConfig,
    PPFormulaNetVisionConfig)

CONFIG = PPFormulaNetConfig(
    text_config=PPFormulaNetTextConfig(vocab_size=256, encoder_layers=2, encoder_attention_heads=4,
        decoder_layers=2, decoder_ffn_dim=128, decoder_attention_heads=4, d_model=64),
    vision_config=PPFormulaNetVisionConfig(hidden_size=64, output_channels=64, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, initializer_range=0.02, global_attn_indexes=[0, 1],
        mlp_dim=128, post_conv_in_channels=64, post_conv_out_channels=64, post_conv_mid_channels=64,
        decoder_hidden_size=64))
DTYPE = torch.float16
NEW_TOKENS = 10


def tiny_model():
    torch.manual_seed(0)
    return PPFormulaNetForConditionalGeneration(CONFIG).to(DTYPE).eval()


def in_dtype(value):
    """Floating tensors cast to the run's dtype (DTYPE), as the suite cast the inputs it fed."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(DTYPE)
    if isinstance(value, (list, tuple)):
        return type(value)(in_dtype(v) for v in value)
    return value


def sample_inputs():
    """The inputs static_cache fed: token ids literal; pixel_values seeded random of the recorded shape."""
    g = torch.Generator().manual_seed(0)
    inputs = {
        'input_ids': torch.tensor([[1, 1, 1, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
            dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
        'pixel_values': torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32),
        'decoder_input_ids': torch.tensor([[2, 56, 186], [2, 77, 83]], dtype=torch.int64),
    }
    return {k: in_dtype(v) for k, v in inputs.items()}


def greedy(model, inputs, new_tokens, **extra):
    """Greedy generate of exactly `new_tokens` tokens (EOS cannot stop it), generate's auto-compile off."""
    with torch.no_grad():
        return model.generate(**inputs, do_sample=False, num_beams=1, max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, disable_compile=True, **extra)


inputs = sample_inputs()
dynamic = greedy(tiny_model(), inputs, NEW_TOKENS, output_scores=True, return_dict_in_generate=True)
