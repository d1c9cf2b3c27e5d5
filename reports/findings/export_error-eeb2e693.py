"""[transformers.exporters] export fails at transformers.models.kyutai_speech_to_text.modeling_kyutai_speech_to_text:Ky
utaiSpeechToTextForConditionalGeneration.generate: KyutaiSpeechToTextForConditionalGeneration

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-eeb2e693.py
The suite saw: export: OnnxRuntimeQuantizer on onnx: AttributeError: 'NoneType' object has no attribute 'shape' (at
transformers/models/kyutai_speech_to_text/modeling_kyutai_speech_to_text.py:909)
Shared by 1 class(es), 17 cell(s) of 17 check(s) (index.json lists them).
"""

import copy

import torch
from transformers import KyutaiSpeechToTextConfig, KyutaiSpeechToTextForConditionalGeneration, MimiConfig
from transformers.exporters import OnnxExporter, OnnxConfig
from transformers.exporters.quantizers import OnnxRuntimeDynamicConfig, OnnxRuntimeQuantizer

CONFIG = KyutaiSpeechToTextConfig(codebook_vocab_size=64, vocab_size=256, hidden_size=64, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=4, head_dim=16, ffn_dim=128, audio_bos_token_id=63,
    audio_pad_token_id=2304, bos_token_id=254,
    codec_config=MimiConfig(hidden_size=64, num_filters=4, codebook_size=64,
        vector_quantization_hidden_dimension=64, upsample_groups=64, num_hidden_layers=2, intermediate_size=128,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16))
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 38, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 3,
}


def tiny_model():
    torch.manual_seed(0)
    return KyutaiSpeechToTextForConditionalGeneration(CONFIG).eval()


# The inputs exporter_onnx_ort_dynamic_generate fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[[46, 56, 29, 9, 41, 20, 4, 30, 15, 27, 53, 45, 3, 50, 9, 59, 35, 27, 4, 49, 47, 24, 61,
        61, 36, 27, 43, 16, 57, 57, 33, 28, 59], [33, 4, 22, 58, 40, 52, 27, 44, 50, 20, 25, 54, 9, 21, 55, 21, 55, 28,
        19, 57, 23, 2, 42, 24, 19, 33, 34, 22, 31, 7, 50, 4, 26], [23, 48, 17, 61, 19, 56, 28, 5, 39, 46, 10, 12, 59,
        26, 41, 5, 0, 22, 61, 15, 38, 39, 12, 10, 60, 48, 20, 30, 34, 58, 18, 23, 2], [193, 40, 48, 15, 44, 45, 56, 38,
        11, 1, 42, 55, 62, 41, 23, 48, 13, 44, 48, 10, 51, 27, 33, 16, 33, 52, 36, 37, 3, 50, 49, 25, 29], [65, 17, 58,
        48, 4, 18, 11, 46, 27, 52, 59, 39, 22, 22, 56, 51, 9, 40, 23, 17, 4, 8, 30, 17, 30, 53, 17, 37, 9, 39, 6, 7,
        48], [141, 19, 56, 29, 29, 56, 22, 45, 26, 51, 25, 23, 22, 27, 33, 59, 46, 1, 38, 50, 38, 53, 11, 36, 37, 20, 3,
        12, 15, 10, 0, 18, 49], [58, 49, 20, 53, 21, 62, 32, 57, 13, 14, 46, 16, 62, 39, 13, 12, 30, 19, 5, 1, 58, 49,
        35, 46, 1, 17, 12, 62, 59, 32, 21, 25, 61], [193, 28, 46, 27, 35, 37, 39, 17, 26, 32, 28, 29, 18, 56, 36, 55,
        44, 22, 25, 7, 38, 28, 19, 46, 34, 39, 35, 34, 58, 56, 5, 55, 32], [27, 9, 54, 37, 62, 17, 37, 23, 38, 39, 36,
        58, 53, 25, 57, 17, 18, 55, 24, 41, 46, 40, 1, 59, 26, 10, 5, 34, 34, 27, 48, 39, 12]]], dtype=torch.int64),
    'attention_mask': torch.full((1, 9), 1, dtype=torch.int64),
}

config = tiny_model().generation_config
config.update(**GENERATION)
quantizer = OnnxRuntimeQuantizer(OnnxRuntimeDynamicConfig())
exporter, export_config = OnnxExporter(), OnnxConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export_for_generation(tiny_model(), copy.deepcopy(inputs), export_config, generation_config=config)
