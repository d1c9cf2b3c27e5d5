"""[torch.export] data-dependent guard at transformers.models.fsmt.modeling_fsmt:make_padding_mask:
FSMTForConditionalGeneration (export_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float16). Run: python data_dependent_guard-f2bf2404.py
The suite saw: torch.export.export(strict=False): GuardOnDataDependentSymNode: Could not guard on data-dependent
expression Eq(u0, 1) (unhinted: Eq(u0, 1)). (Size-like symbols: none) (at ...
Shared by 1 class(es), 23 cell(s) of 23 check(s) (index.json lists them).
"""

import torch
from transformers import FSMTConfig, FSMTForConditionalGeneration

CONFIG = FSMTConfig(src_vocab_size=256, tgt_vocab_size=256, d_model=64, encoder_ffn_dim=128, encoder_layers=2,
    encoder_attention_heads=4, decoder_ffn_dim=128, decoder_layers=2, decoder_attention_heads=4)
DTYPE = torch.float16
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return FSMTForConditionalGeneration(CONFIG).to(DTYPE).eval()


def in_dtype(value):
    """Floating tensors cast to the run's dtype (DTYPE), as the suite cast the inputs it fed."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(DTYPE)
    if isinstance(value, (list, tuple)):
        return type(value)(in_dtype(v) for v in value)
    return value


def sample_inputs():
    """The inputs export_forward fed: token ids literal."""
    inputs = {
        'input_ids': torch.tensor([[1, 1, 1, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
            dtype=torch.int64),
        'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
        'decoder_input_ids': torch.tensor([[2, 123, 191], [2, 116, 17]], dtype=torch.int64),
    }
    return {k: in_dtype(v) for k, v in inputs.items()}


inputs = sample_inputs()
with torch.no_grad():
    torch.export.export(tiny_model(), (), kwargs=dict(inputs, **CONSTANTS), strict=False)
