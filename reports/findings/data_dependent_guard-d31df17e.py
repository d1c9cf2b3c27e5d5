"""[transformers.exporters] data-dependent guard at
transformers.models.led.modeling_led:LEDEncoderSelfAttention._chunk: LEDForConditionalGeneration

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-d31df17e.py
The suite saw: export: NNCFOpenVINOQuantizer on openvino: GuardOnDataDependentSymNode: Could not guard on data-
dependent expression Eq(u1, 1) (unhinted: Eq(u1, 1)). (Size-like symbols: none) (at ...
Shared by 1 class(es), 10 cell(s) of 10 check(s) (index.json lists them).
"""

import torch
from transformers import LEDConfig, LEDForConditionalGeneration
from transformers.exporters import OpenVINOExporter, OpenVINOConfig
from transformers.exporters.quantizers import NNCFOpenVINOQuantizer, NNCFQuantizationConfig

CONFIG = LEDConfig(vocab_size=256, encoder_layers=2, encoder_ffn_dim=128, encoder_attention_heads=4,
    decoder_layers=2, decoder_ffn_dim=128, decoder_attention_heads=4, d_model=64, attention_window=[512, 512])
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return LEDForConditionalGeneration(CONFIG).eval()


# The inputs exporter_openvino_nncf_openvino_forward fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[1, 1, 1, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
        dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
    'decoder_input_ids': torch.tensor([[2, 123, 191], [2, 116, 17]], dtype=torch.int64),
}

model = tiny_model()
quantizer = NNCFOpenVINOQuantizer(NNCFQuantizationConfig())
exporter, config = OpenVINOExporter(), OpenVINOConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
