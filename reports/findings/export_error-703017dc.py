"""[transformers.exporters] export fails at
transformers.models.moonshine_streaming.modeling_moonshine_streaming:MoonshineStreamingEncoder.forward:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-703017dc.py
The suite saw: lower: PT2EQuantizer on dynamo: RuntimeError: Either your tensor may have escaped from inside a
function being vmapped and this is a user error (see https://pytorch.org/functorch/stable/ux_limitations.html) ...
Shared by 1 class(es), 1 cell(s) of 1 check(s) (index.json lists them).
"""

import torch
from transformers import (MoonshineStreamingConfig, MoonshineStreamingEncoderConfig,
    MoonshineStreamingForConditionalGeneration)
from transformers.exporters import DynamoExporter, DynamoConfig
from transformers.exporters.quantizers import PT2EQuantizer
from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
    X86InductorQuantizer, get_default_x86_inductor_quantization_config)

CONFIG = MoonshineStreamingConfig(
    encoder_config=MoonshineStreamingEncoderConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, sliding_windows=[[16, 4], [16, 4]], head_dim=16),
    vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, head_dim=16,
    num_key_value_heads=4)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return MoonshineStreamingForConditionalGeneration(CONFIG).eval()


# The inputs exporter_dynamo_pt2e_forward fed: token ids literal; input_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_values': torch.randn((2, 3200), generator=g, dtype=torch.float32),
    'attention_mask': torch.full((2, 3200), 1, dtype=torch.int64),
    'decoder_input_ids': torch.tensor([[0, 157, 100], [0, 104, 128]], dtype=torch.int64),
}

model = tiny_model()
quantizer = PT2EQuantizer(X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config()))
exporter, config = DynamoExporter(), DynamoConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
