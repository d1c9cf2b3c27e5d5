"""[transformers.exporters] export fails at torch.utils:swap_tensors: SwitchTransformersForConditionalGeneration
(exporter_openvino_nncf_fx_forward).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-d2fd5d86.py
The suite saw: export: NNCFTorchFXQuantizer on openvino: RuntimeError: Cannot swap t1 because it has weakref
associated with it (at __init__.py:45)
Shared by 1 class(es), 17 cell(s) of 17 check(s) (index.json lists them).
"""

import torch
from transformers import SwitchTransformersConfig, SwitchTransformersForConditionalGeneration
from transformers.exporters import OpenVINOExporter, OpenVINOConfig
from transformers.exporters.quantizers import NNCFQuantizationConfig, NNCFTorchFXQuantizer

CONFIG = SwitchTransformersConfig(vocab_size=256, d_model=64, d_ff=128, num_layers=2, num_sparse_encoder_layers=2,
    num_decoder_layers=2, num_sparse_decoder_layers=2, num_heads=4, num_experts=4, encoder_sparse_step=4,
    decoder_sparse_step=1, decoder_start_token_id=0)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return SwitchTransformersForConditionalGeneration(CONFIG).eval()


# The inputs exporter_openvino_nncf_fx_forward fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
        dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    'decoder_input_ids': torch.tensor([[0, 123, 191], [0, 116, 17]], dtype=torch.int64),
}

model = tiny_model()
quantizer = NNCFTorchFXQuantizer(NNCFQuantizationConfig())
exporter, config = OpenVINOExporter(), OpenVINOConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
