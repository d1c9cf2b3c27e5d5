"""[torch.export] export fails at transformers.models.csm.modeling_csm:CsmBackboneModelEmbeddings.forward:
CsmForConditionalGeneration (export_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-9c3d50e4.py
The suite saw: export of part 'embed_prefill' with input_ids dynamic failed: RuntimeError: The size of tensor a
(s70) must match the size of tensor b (32) at non-singleton dimension 1) (at ...
Shared by 1 class(es), 5 cell(s) of 5 check(s) (index.json lists them).
"""

import torch
from transformers import CsmConfig, CsmDepthDecoderConfig, CsmForConditionalGeneration, MimiConfig

CONFIG = CsmConfig(vocab_size=256, text_vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, pad_token_id=254, codebook_pad_token_id=252, bos_token_id=253,
    audio_token_id=254, audio_eos_token_id=255, head_dim=16,
    depth_decoder_config=CsmDepthDecoderConfig(backbone_hidden_size=64, vocab_size=256, hidden_size=64,
        intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, head_dim=16),
    codec_config=MimiConfig(hidden_size=64, num_filters=4, codebook_size=64,
        vector_quantization_hidden_dimension=64, upsample_groups=64, num_hidden_layers=2, intermediate_size=128,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16))


def tiny_model():
    torch.manual_seed(0)
    return CsmForConditionalGeneration(CONFIG).eval()


# The inputs export_generate fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[37, 107, 92, 39, 189, 180, 10, 29, 23]], dtype=torch.int64),
    'attention_mask': torch.full((1, 9), 1, dtype=torch.int64),
}


class EmbedPart(torch.nn.Module):
    """The text embedding."""

    def __init__(self, embedding):
        super().__init__()
        self.embedding = embedding

    def forward(self, input_ids):
        return self.embedding(input_ids)


def export_part(module, args=(), kwargs=None):
    """torch.export.export(strict=False) of one generation part."""
    with torch.no_grad():
        return torch.export.export(module, args, kwargs or {}, strict=False)


model = tiny_model()
owner = model  # the module generate decodes with
placeholders = torch.zeros_like(inputs["input_ids"], dtype=torch.bool)
ids = inputs["input_ids"].masked_fill(placeholders, 0)
embedding = EmbedPart(owner.get_input_embeddings())
export_part(embedding, (ids,))
