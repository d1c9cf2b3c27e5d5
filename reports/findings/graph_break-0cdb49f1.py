"""[torch.compile] graph break under fullgraph at
transformers.models.pix2struct.modeling_pix2struct:Pix2StructTextBlock.forward: Pix2StructForConditionalGeneration

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float16). Run: python graph_break-0cdb49f1.py
The suite saw: fullgraph compile failed: Unsupported: Data-dependent branching: Detected data-dependent branching
(e.g. `if my_tensor.sum() > 0:`). Dynamo does not support tracing dynamic control flow. (at ...
Shared by 1 class(es), 2 cell(s) of 2 check(s) (index.json lists them).
"""

import torch
from transformers import (Pix2StructConfig, Pix2StructForConditionalGeneration, Pix2StructTextConfig,
    Pix2StructVisionConfig)

CONFIG = Pix2StructConfig(
    text_config=Pix2StructTextConfig(is_encoder_decoder=True, vocab_size=256, hidden_size=64, d_kv=16, d_ff=128,
        num_layers=2, num_heads=4, initializer_range=0.02),
    vision_config=Pix2StructVisionConfig(hidden_size=64, d_ff=128, d_kv=16, num_hidden_layers=2,
        num_attention_heads=4, initializer_range=0.02))
DTYPE = torch.float16
BACKEND = 'eager'


def tiny_model():
    torch.manual_seed(0)
    return Pix2StructForConditionalGeneration(CONFIG).to(DTYPE).eval()


def in_dtype(value):
    """Floating tensors cast to the run's dtype (DTYPE), as the suite cast the inputs it fed."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(DTYPE)
    if isinstance(value, (list, tuple)):
        return type(value)(in_dtype(v) for v in value)
    return value


def sample_inputs():
    """The inputs compile_prefill fed: token ids literal; flattened_patches (after its first 2 column(s), which are
    exact) seeded random of the recorded shape.
    """
    g = torch.Generator().manual_seed(0)
    inputs = {
        'flattened_patches': torch.cat([torch.tensor([[[1.0, 1.0], [1.0, 2.0], [2.0, 1.0], [2.0, 2.0], [0.0, 0.0], [0.0,
            0.0]], [[1.0, 1.0], [1.0, 2.0], [1.0, 3.0], [2.0, 1.0], [2.0, 2.0], [2.0, 3.0]]], dtype=torch.float32),
            torch.randn((2, 6, 768), generator=g, dtype=torch.float32)], dim=-1),
        'attention_mask': torch.tensor([[1] * 4 + [0, 0], [1] * 6], dtype=torch.int64),
        'decoder_input_ids': torch.tensor([[0, 143, 91], [0, 62, 180]], dtype=torch.int64),
    }
    return {k: in_dtype(v) for k, v in inputs.items()}


inputs = sample_inputs()
compiled = torch.compile(tiny_model(), fullgraph=True, backend=BACKEND)
with torch.no_grad():
    compiled(**inputs)  # compiled before any eager call on this instance
