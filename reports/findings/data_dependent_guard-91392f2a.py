"""[transformers.exporters] data-dependent guard at
transformers.exporters.quantizers.quantizer_pt2e:PT2EQuantizer.quantize: HiggsAudioV2ForConditionalGeneration

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-91392f2a.py
The suite saw: prepare: PT2EQuantizer on openvino: GuardOnDataDependentSymNode: Could not guard on data-dependent
expression Eq(u0, 64) (unhinted: Eq(u0, 64)). (Size-like symbols: u0) (at ...
Shared by 4 class(es), 12 cell(s) of 3 check(s) (index.json lists them).
"""

import torch
from transformers import HiggsAudioV2Config, HiggsAudioV2ForConditionalGeneration
from transformers.exporters import OpenVINOExporter, OpenVINOConfig
from transformers.exporters.quantizers import PT2EQuantizer
from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
    X86InductorQuantizer, get_default_x86_inductor_quantization_config)

CONFIG = HiggsAudioV2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, pad_token_id=251, eos_token_id=252, head_dim=16, codebook_size=64,
    audio_token_id=255, audio_bos_token_id=253, audio_delay_token_id=254, audio_stream_bos_id=249,
    audio_stream_eos_id=250)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return HiggsAudioV2ForConditionalGeneration(CONFIG).eval()


# The inputs exporter_openvino_pt2e_forward fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[251, 251, 251, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
        dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
}

model = tiny_model()
quantizer = PT2EQuantizer(X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config()))
exporter, config = OpenVINOExporter(), OpenVINOConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
