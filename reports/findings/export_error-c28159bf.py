"""[torch.export] export fails at transformers.models.nllb_moe.modeling_nllb_moe:NllbMoeTop2Router._cast_classifier:
NllbMoeForConditionalGeneration (export_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-c28159bf.py
The suite saw: torch.export.export(strict=False): RuntimeError: _apply(): Couldn't swap Linear.weight (at
transformers/models/nllb_moe/modeling_nllb_moe.py:198)
Shared by 1 class(es), 4 cell(s) of 4 check(s) (index.json lists them).
"""

import torch
from transformers import NllbMoeConfig, NllbMoeForConditionalGeneration

CONFIG = NllbMoeConfig(vocab_size=256, encoder_layers=2, encoder_ffn_dim=128, encoder_attention_heads=4,
    decoder_layers=2, decoder_ffn_dim=128, decoder_attention_heads=4, d_model=64, num_experts=4,
    decoder_sparse_step=1)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return NllbMoeForConditionalGeneration(CONFIG).eval()


# The inputs export_forward fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[1, 1, 1, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
        dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    'decoder_input_ids': torch.tensor([[2, 123, 191], [2, 116, 17]], dtype=torch.int64),
}

with torch.no_grad():
    torch.export.export(tiny_model(), (), kwargs=dict(inputs, **CONSTANTS), strict=False)
