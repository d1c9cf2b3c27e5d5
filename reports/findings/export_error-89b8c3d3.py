"""[torch.export] export fails at transformers.models.udop.modeling_udop:combine_image_text_embeddings:
UdopForConditionalGeneration (export_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float16). Run: python export_error-89b8c3d3.py
The suite saw: torch.export.export(strict=False): RuntimeError: The tensor has a non-zero number of elements, but
its data is not allocated yet. (at transformers/models/udop/modeling_udop.py:220)
Shared by 1 class(es), 25 cell(s) of 25 check(s) (index.json lists them).
"""

import torch
from transformers import UdopConfig, UdopForConditionalGeneration

CONFIG = UdopConfig(vocab_size=256, d_model=64, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4,
    image_size=32, patch_size=8, decoder_start_token_id=0)
DTYPE = torch.float16
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return UdopForConditionalGeneration(CONFIG).to(DTYPE).eval()


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
        'input_ids': torch.tensor([[0, 0, 0, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
            dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
        'pixel_values': torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32),
        'bbox': torch.tensor([[[116, 698, 319, 957], [145, 96, 388, 570], [532, 164, 939, 844], [279, 45, 398, 597],
            [185, 901, 742, 989], [567, 156, 745, 922], [94, 15, 958, 461], [614, 420, 976, 962], [204, 143, 787, 969]],
            [[297, 37, 656, 83], [463, 426, 713, 980], [341, 932, 596, 993], [238, 343, 267, 683], [560, 328, 718, 362],
            [224, 169, 584, 881], [13, 291, 945, 711], [793, 29, 994, 355], [863, 74, 914, 404]]], dtype=torch.int64),
        'decoder_input_ids': torch.tensor([[0, 70, 81], [0, 127, 93]], dtype=torch.int64),
    }
    return {k: in_dtype(v) for k, v in inputs.items()}


inputs = sample_inputs()
with torch.no_grad():
    torch.export.export(tiny_model(), (), kwargs=dict(inputs, **CONSTANTS), strict=False)
