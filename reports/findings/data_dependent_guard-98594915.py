"""[torch.export] data-dependent guard at transformers.models.emu3.modeling_emu3:Emu3VQVAE.encode:
Emu3ForConditionalGeneration (export_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-98594915.py
The suite saw: torch.export.export(strict=False): GuardOnDataDependentSymNode: Could not guard on data-dependent
expression zuf0 (unhinted: zuf0). (Size-like symbols: none) (at transformers/models/emu3/modeling_emu3.py:1019)
Shared by 1 class(es), 10 cell(s) of 10 check(s) (index.json lists them).
"""

import torch
from transformers import Emu3Config, Emu3ForConditionalGeneration, Emu3TextConfig, Emu3VQVAEConfig

CONFIG = Emu3Config(
    vq_config=Emu3VQVAEConfig(codebook_size=64, embed_dim=64, latent_channels=64, base_channels=64,
        channel_multiplier=[1, 1, 1, 1], num_res_blocks=1, hidden_size=64),
    text_config=Emu3TextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, pad_token_id=253, bos_token_id=254, eos_token_id=255),
    vocabulary_map={
        '<image>': 200, '<|extra_200|>': 201, '<|visual token000000|>': 100, '<|visual token000001|>': 101,
        '<|visual token000002|>': 102, '<|visual token000003|>': 103, '<|visual token000004|>': 104,
        '<|visual token000005|>': 105, '<|visual token000006|>': 106, '<|visual token000007|>': 107,
        '<|visual token000008|>': 108, '<|visual token000009|>': 109, '<|visual token000010|>': 110,
        '<|visual token000011|>': 111, '<|visual token000012|>': 112, '<|visual token000013|>': 113,
        '<|visual token000014|>': 114, '<|visual token000015|>': 115, '<|visual token000016|>': 116,
        '<|visual token000017|>': 117, '<|visual token000018|>': 118, '<|visual token000019|>': 119,
        '<|visual token000020|>': 120, '<|visual token000021|>': 121, '<|visual token000022|>': 122,
        '<|visual token000023|>': 123, '<|visual token000024|>': 124, '<|visual token000025|>': 125,
        '<|visual token000026|>': 126, '<|visual token000027|>': 127, '<|visual token000028|>': 128,
        '<|visual token000029|>': 129, '<|visual token000030|>': 130, '<|visual token000031|>': 131,
        '<|visual token000032|>': 132, '<|visual token000033|>': 133, '<|visual token000034|>': 134,
        '<|visual token000035|>': 135, '<|visual token000036|>': 136, '<|visual token000037|>': 137,
        '<|visual token000038|>': 138, '<|visual token000039|>': 139, '<|visual token000040|>': 140,
        '<|visual token000041|>': 141, '<|visual token000042|>': 142, '<|visual token000043|>': 143,
        '<|visual token000044|>': 144, '<|visual token000045|>': 145, '<|visual token000046|>': 146,
        '<|visual token000047|>': 147, '<|visual token000048|>': 148, '<|visual token000049|>': 149,
        '<|visual token000050|>': 150, '<|visual token000051|>': 151, '<|visual token000052|>': 152,
        '<|visual token000053|>': 153, '<|visual token000054|>': 154, '<|visual token000055|>': 155,
        '<|visual token000056|>': 156, '<|visual token000057|>': 157, '<|visual token000058|>': 158,
        '<|visual token000059|>': 159, '<|visual token000060|>': 160, '<|visual token000061|>': 161,
        '<|visual token000062|>': 162, '<|visual token000063|>': 163,
    },
    image_token_id=200)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return Emu3ForConditionalGeneration(CONFIG).eval()


# The inputs export_forward fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[253, 253, 254, 0, 1, 2, 3, 4, 252, 248, 250] + [200] * 20 + [249, 251, 5, 6, 7, 8],
        [254] + list(range(9, 15)) + [252, 248, 250] + [200] * 20 + [249, 251, 15, 16, 17, 18, 19]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0] + [1] * 35, [1] * 37], dtype=torch.int64),
    'pixel_values': (torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32) * 1.09 + 0.192),
    'image_sizes': torch.full((2, 2), 32, dtype=torch.int64),
}

with torch.no_grad():
    torch.export.export(tiny_model(), (), kwargs=dict(inputs, **CONSTANTS), strict=False)
