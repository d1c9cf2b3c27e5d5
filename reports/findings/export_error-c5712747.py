"""[transformers.exporters] export fails at
executorch.backends.xnnpack._passes.convert_to_linear:ConvertToLinearPass.create_linear:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-c5712747.py
The suite saw: lower: NNCFTorchFXQuantizer on executorch: AssertionError: Unexpected number of outputs for a
torch.nn.Linear module, expecting 1 but got [aten_bmm_default, aten_clone_default, aten_clone_default_1] (at ...
Shared by 1 class(es), 1 cell(s) of 1 check(s) (index.json lists them).
"""

import torch
from transformers import ProphetNetConfig, ProphetNetForConditionalGeneration
from transformers.exporters import ExecutorchExporter, ExecutorchConfig
from transformers.exporters.quantizers import NNCFTorchFXQuantizer, NNCFWeightCompressionConfig

CONFIG = ProphetNetConfig(vocab_size=256, hidden_size=64, encoder_ffn_dim=128, num_encoder_layers=2,
    num_encoder_attention_heads=4, decoder_ffn_dim=128, num_decoder_layers=2, num_decoder_attention_heads=4)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return ProphetNetForConditionalGeneration(CONFIG).eval()


# The inputs exporter_executorch_nncf_fx_forward fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
        dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    'decoder_input_ids': torch.tensor([[0, 123, 191], [0, 116, 17]], dtype=torch.int64),
}

model = tiny_model()
quantizer = NNCFTorchFXQuantizer(NNCFWeightCompressionConfig())
exporter, config = ExecutorchExporter(), ExecutorchConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
