"""[transformers.exporters] export fails at transformers.exporters.exporter_openvino:_convert_to_openvino:
GradiumPhononTTSForConditionalGeneration (exporter_openvino_nncf_fx_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-7ae02881.py
The suite saw: lower: NNCFTorchFXQuantizer on openvino component 'decode': OpConversionFailure: Check 'false' failed
at src/frontends/common_translators/src/unconverted_ops_report.cpp:151: (at ...
Shared by 2 class(es), 2 cell(s) of 1 check(s) (index.json lists them).
"""

import copy

import torch
from transformers import (GradiumPhononTTSConfig, GradiumPhononTTSFlowHeadConfig,
    GradiumPhononTTSForConditionalGeneration)
from transformers.exporters import OpenVINOExporter, OpenVINOConfig
from transformers.exporters.quantizers import NNCFQuantizationConfig, NNCFTorchFXQuantizer

CONFIG = GradiumPhononTTSConfig(
    flow_head_config=GradiumPhononTTSFlowHeadConfig(hidden_size=64, num_hidden_layers=2, condition_dim=64,
        loss_weighting_num_layers=2),
    vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, head_dim=16,
    intermediate_size=128, audio_prompt_dim=64)
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 20, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 3,
}


def tiny_model():
    torch.manual_seed(0)
    return GradiumPhononTTSForConditionalGeneration(CONFIG).eval()


# The inputs exporter_openvino_nncf_fx_generate fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[159, 10, 155, 153, 116, 120, 150, 156, 126, 4]], dtype=torch.int64),
    'attention_mask': torch.full((1, 10), 1, dtype=torch.int64),
}

config = tiny_model().generation_config
config.update(**GENERATION)
quantizer = NNCFTorchFXQuantizer(NNCFQuantizationConfig(), calibration_dataset=[copy.deepcopy(inputs)])
exporter, export_config = OpenVINOExporter(), OpenVINOConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export_for_generation(tiny_model(), copy.deepcopy(inputs), export_config, generation_config=config)
