"""[transformers.exporters] raises at transformers.exporters.exporter_dynamo:DynamoExporter.save_program:
GraniteSpeechForConditionalGeneration (exporter_dynamo_pt2e_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python exception-43018586.py
The suite saw: SerializeError: Failed serializing node ceil_24 in graph: %ceil_24 : [num_users=9] =
call_function[target=math.ceil](args = (%truediv_24,), kwargs = {}) Original exception Traceback (most recent  ...
Shared by 2 class(es), 4 cell(s) of 2 check(s) (index.json lists them).
"""

import copy
import os
import tempfile

import torch
from transformers import (Blip2QFormerConfig, GraniteConfig, GraniteSpeechConfig, GraniteSpeechEncoderConfig,
    GraniteSpeechForConditionalGeneration)
from transformers.exporters import DynamoExporter, DynamoConfig
from transformers.exporters.quantizers import PT2EQuantizer
from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
    X86InductorQuantizer, get_default_x86_inductor_quantization_config)

CONFIG = GraniteSpeechConfig(
    text_config=GraniteConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4),
    encoder_config=GraniteSpeechEncoderConfig(num_layers=2, hidden_dim=64, num_heads=4, dim_head=128),
    projector_config=Blip2QFormerConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, encoder_hidden_size=64),
    audio_token_index=255)
GENERATION = {
    'max_new_tokens': 4, 'min_new_tokens': 4, 'do_sample': False, 'num_beams': 1, 'cache_implementation': 'static',
    'max_cache_len': 34, 'output_logits': True, 'return_dict_in_generate': True, 'pad_token_id': 0,
}


def tiny_model():
    torch.manual_seed(0)
    return GraniteSpeechForConditionalGeneration(CONFIG).eval()


# The inputs exporter_dynamo_pt2e_generate fed: token ids literal; input_features seeded random of the recorded
# shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[95, 141, 90, 126] + [255] * 15 + [75, 171, 133, 122, 124]], dtype=torch.int64),
    'attention_mask': torch.full((1, 24), 1, dtype=torch.int64),
    'input_features': torch.randn((1, 64, 160), generator=g, dtype=torch.float32),
}

def artifact_bytes(exported):
    """The bytes of an export's saved programs, its JSON files left out (`checks.common.quantized.artifact_bytes`)."""
    with tempfile.TemporaryDirectory() as folder:
        exported.save_pretrained(folder)
        return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(folder)
                   for name in names if not name.endswith(".json"))


config = tiny_model().generation_config
config.update(**GENERATION)
quantizer = PT2EQuantizer(X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config()),
    calibration_dataset=[copy.deepcopy(inputs)])
exporter, export_config = DynamoExporter(), DynamoConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export_for_generation(tiny_model(), copy.deepcopy(inputs), export_config, generation_config=config)
artifact_bytes(exported)  # save_pretrained, as the check sizes it
