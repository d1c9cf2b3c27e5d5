"""[transformers.exporters] export fails at
transformers.models.prophetnet.modeling_prophetnet:ProphetNetNgramSelfAttention.forward:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-e07380ec.py
The suite saw: lower: NNCFTorchFXQuantizer on dynamo: RuntimeError: expected scalar type torch.float32 but found
torch.int8 (at transformers/models/prophetnet/modeling_prophetnet.py:681)
Shared by 1 class(es), 3 cell(s) of 3 check(s) (index.json lists them).
"""

import torch
from transformers import ProphetNetConfig, ProphetNetForConditionalGeneration
from transformers.exporters import DynamoExporter, DynamoConfig
from transformers.exporters.quantizers import NNCFQuantizationConfig, NNCFTorchFXQuantizer

CONFIG = ProphetNetConfig(vocab_size=256, hidden_size=64, encoder_ffn_dim=128, num_encoder_layers=2,
    num_encoder_attention_heads=4, decoder_ffn_dim=128, num_decoder_layers=2, num_decoder_attention_heads=4)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return ProphetNetForConditionalGeneration(CONFIG).eval()


# The inputs exporter_dynamo_nncf_fx_forward fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
        dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    'decoder_input_ids': torch.tensor([[0, 123, 191], [0, 116, 17]], dtype=torch.int64),
}

model = tiny_model()
quantizer = NNCFTorchFXQuantizer(NNCFQuantizationConfig())
exporter, config = DynamoExporter(), DynamoConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
