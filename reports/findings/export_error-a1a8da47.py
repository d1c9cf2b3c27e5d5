"""[transformers.exporters] export fails at transformers.exporters.quantizers.quantizer_pt2e:PT2EQuantizer.quantize:
MoshiForConditionalGeneration (exporter_executorch_pt2e_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-a1a8da47.py
The suite saw: calibrate: PT2EQuantizer on executorch component 'language_model': RuntimeError: Tensor dtype
mismatch! Expected: Long, Got: float (at transformers/exporters/quantizers/quantizer_pt2e.py:81)
Shared by 106 class(es), 191 cell(s) of 8 check(s) (index.json lists them).
"""

import copy

import torch
from transformers import MimiConfig, MoshiConfig, MoshiDepthConfig, MoshiForConditionalGeneration
from transformers.exporters import ExecutorchExporter, ExecutorchConfig
from transformers.exporters.quantizers import PT2EQuantizer
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
    XNNPACKQuantizer, get_symmetric_quantization_config)

CONFIG = MoshiConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=4, audio_vocab_size=64, head_dim=16, ffn_dim=128,
    audio_encoder_config=MimiConfig(hidden_size=64, num_filters=4, codebook_size=64, codebook_dim=64,
        vector_quantization_hidden_dimension=64, upsample_groups=64, num_hidden_layers=2, intermediate_size=128,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16),
    depth_decoder_config=MoshiDepthConfig(vocab_size=256, hidden_size=64, input_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, audio_vocab_size=64, head_dim=16, ffn_dim=128))
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 14, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 0,
}


def tiny_model():
    torch.manual_seed(0)
    return MoshiForConditionalGeneration(CONFIG).eval()


# The inputs exporter_executorch_pt2e_generate fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[60, 16, 194, 167, 192, 21, 137, 100, 140]], dtype=torch.int64),
    'attention_mask': torch.full((1, 9), 1, dtype=torch.int64),
    'moshi_audio_codes': torch.tensor([[[38, 40, 52, 17, 15, 4, 41, 42, 58], [31, 56, 1, 1, 39, 41, 57, 35, 38], [55,
        11, 46, 18, 27, 0, 14, 35, 53], [12, 57, 42, 20, 11, 4, 6, 4, 47], [63, 52, 3, 12, 36, 52, 40, 14, 15], [20, 35,
        58, 23, 15, 13, 53, 21, 48], [49, 5, 41, 35, 0, 31, 5, 30, 0], [49, 50, 36, 34, 48, 29, 3, 34, 42]]],
        dtype=torch.int64),
    'user_audio_codes': torch.tensor([[[52, 3, 44, 61, 14, 32, 4, 3, 45], [11, 60, 22, 13, 57, 45, 11, 56, 16], [24, 29,
        21, 46, 25, 16, 60, 57, 54], [53, 61, 19, 33, 40, 32, 36, 59, 59], [57, 6, 21, 31, 13, 7, 56, 24, 15], [41, 18,
        40, 54, 15, 11, 38, 47, 29], [57, 1, 31, 54, 44, 24, 61, 24, 3], [18, 47, 3, 42, 12, 38, 35, 22, 62]]],
        dtype=torch.int64),
}

config = tiny_model().generation_config
config.update(**GENERATION)
quantizer = PT2EQuantizer(XNNPACKQuantizer().set_global(get_symmetric_quantization_config()),
    calibration_dataset=[copy.deepcopy(inputs)])
exporter, export_config = ExecutorchExporter(), ExecutorchConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export_for_generation(tiny_model(), copy.deepcopy(inputs), export_config, generation_config=config)
