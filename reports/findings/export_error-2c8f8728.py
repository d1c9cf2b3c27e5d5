"""[transformers.exporters] export fails at
transformers.models.higgs_audio_v2.generation_higgs_audio_v2:HiggsAudioV2GenerationMixin._get_logits_processor:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-2c8f8728.py
The suite saw: export: NNCFTorchFXQuantizer on dynamo: ValueError: HiggsAudioV2 generates audio codebook logits, not
text logits. The following logits processors are not compatible: ['MinLengthLogitsProcessor', ...
Shared by 1 class(es), 17 cell(s) of 17 check(s) (index.json lists them).
"""

import copy

import torch
from transformers import HiggsAudioV2Config, HiggsAudioV2ForConditionalGeneration
from transformers.exporters import DynamoExporter, DynamoConfig
from transformers.exporters.quantizers import NNCFQuantizationConfig, NNCFTorchFXQuantizer

CONFIG = HiggsAudioV2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, pad_token_id=251, eos_token_id=252, head_dim=16, codebook_size=64,
    audio_token_id=255, audio_bos_token_id=253, audio_delay_token_id=254, audio_stream_bos_id=249,
    audio_stream_eos_id=250)
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 19, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 251,
}


def tiny_model():
    torch.manual_seed(0)
    return HiggsAudioV2ForConditionalGeneration(CONFIG).eval()


# The inputs exporter_dynamo_nncf_fx_generate fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[37, 107, 92, 39, 189, 180, 10, 29, 23]], dtype=torch.int64),
    'attention_mask': torch.full((1, 9), 1, dtype=torch.int64),
}

config = tiny_model().generation_config
config.update(**GENERATION)
quantizer = NNCFTorchFXQuantizer(NNCFQuantizationConfig(), calibration_dataset=[copy.deepcopy(inputs)])
exporter, export_config = DynamoExporter(), DynamoConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export_for_generation(tiny_model(), copy.deepcopy(inputs), export_config, generation_config=config)
