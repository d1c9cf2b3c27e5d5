"""[transformers.exporters] export fails at transformers.exporters.runners.runner_onnx:OnnxModelRunner.from_program:
GradiumPhononTTSForConditionalGeneration (exporter_onnx_nncf_fx_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-95092146.py
The suite saw: load: onnx runners: InvalidGraph: [ONNXRuntimeError] : 10 : INVALID_GRAPH : This is an invalid model.
Type Error: Type 'tensor(int8)' of input parameter (val_2) of operator (MatMul) in node (node_linear) is inval ...
Shared by 7 class(es), 16 cell(s) of 8 check(s) (index.json lists them).
"""

import copy

import torch
from transformers import (GradiumPhononTTSConfig, GradiumPhononTTSFlowHeadConfig,
    GradiumPhononTTSForConditionalGeneration)
from transformers.exporters import OnnxExporter, OnnxConfig
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


# The inputs exporter_onnx_nncf_fx_generate fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[159, 10, 155, 153, 116, 120, 150, 156, 126, 4]], dtype=torch.int64),
    'attention_mask': torch.full((1, 10), 1, dtype=torch.int64),
}

config = tiny_model().generation_config
config.update(**GENERATION)
quantizer = NNCFTorchFXQuantizer(NNCFQuantizationConfig(), calibration_dataset=[copy.deepcopy(inputs)])
exporter, export_config = OnnxExporter(), OnnxConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export_for_generation(tiny_model(), copy.deepcopy(inputs), export_config, generation_config=config)
exported.to("cpu")
