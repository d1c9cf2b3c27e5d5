"""[torch.export] data-dependent guard at transformers.image_processing_utils:select_best_resolution:
LlavaNextForConditionalGeneration:llava-next-llama3 (export_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float16). Run: python data_dependent_guard-320b65b2.py
The suite saw: torch.export.export(strict=False): GuardOnDataDependentSymNode: Could not guard on data-dependent
expression (IntTrueDiv(32, u0)) < (IntTrueDiv(64, u1)) (unhinted: (IntTrueDiv(32, u0)) < (IntTrueDiv(64, u1))) ...
Shared by 5 class(es), 83 cell(s) of 23 check(s) (index.json lists them).
"""

import torch
from transformers import CLIPVisionConfig, LlamaConfig, LlavaNextConfig, LlavaNextForConditionalGeneration

CONFIG = LlavaNextConfig(
    vision_config=CLIPVisionConfig(hidden_size=64, intermediate_size=128, projection_dim=64, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, vocab_size=256),
    text_config=LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, bos_token_id=253, eos_token_id=254, head_dim=16),
    image_token_index=255, image_grid_pinpoints=[[32, 64], [64, 32], [64, 64], [96, 32], [32, 96]])
DTYPE = torch.float16
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return LlavaNextForConditionalGeneration(CONFIG).to(DTYPE).eval()


def in_dtype(value):
    """Floating tensors cast to the run's dtype (DTYPE), as the suite cast the inputs it fed."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(DTYPE)
    if isinstance(value, (list, tuple)):
        return type(value)(in_dtype(v) for v in value)
    return value


def sample_inputs():
    """The inputs export_forward fed: token ids literal; pixel_values seeded random of the recorded shape."""
    g = torch.Generator().manual_seed(0)
    inputs = {
        'input_ids': torch.tensor([[0, 0, 1, 2, 3, 4, 5] + [255] * 44 + [6, 7, 8, 9], list(range(10,
            16)) + [255] * 44 + [16, 17, 18, 19, 20]], dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0] + [1] * 53, [1] * 55], dtype=torch.int64),
        'pixel_values': (torch.randn((2, 3, 3, 32, 32), generator=g, dtype=torch.float32) * 1.14 + -0.123),
        'image_sizes': torch.tensor([[32, 48], [32, 48]], dtype=torch.int64),
    }
    return {k: in_dtype(v) for k, v in inputs.items()}


inputs = sample_inputs()
with torch.no_grad():
    torch.export.export(tiny_model(), (), kwargs=dict(inputs, **CONSTANTS), strict=False)
