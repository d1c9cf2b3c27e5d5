"""[transformers.exporters] export fails at
transformers.models.apertus1p5.modeling_apertus1p5:Apertus1p5Model.get_image_tokens:

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python export_error-d6049bdd.py
The suite saw: export: NNCFOpenVINOQuantizer on openvino: AttributeError: 'list' object has no attribute 'tolist'
(at transformers/models/apertus1p5/modeling_apertus1p5.py:819)
Shared by 1 class(es), 17 cell(s) of 17 check(s) (index.json lists them).
"""

import torch
from transformers import (Apertus1p5Config, Apertus1p5ForConditionalGeneration, Apertus1p5TextConfig,
    Apertus1p5VisionTokenizerConfig, WavTokenizerEncoderConfig)
from transformers.exporters import OpenVINOExporter, OpenVINOConfig
from transformers.exporters.quantizers import NNCFOpenVINOQuantizer, NNCFWeightCompressionConfig

CONFIG = Apertus1p5Config(
    text_config=Apertus1p5TextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4),
    vision_config=Apertus1p5VisionTokenizerConfig(codebook_size=64, embed_dim=64, latent_channels=64,
        base_channels=64, channel_multiplier=[1, 1, 1, 1, 1], num_res_blocks=1),
    audio_config=WavTokenizerEncoderConfig(num_filters=4, hidden_size=64, codebook_size=64, codebook_dim=64,
        decoder_hidden_size=64, decoder_intermediate_size=128, decoder_num_layers=2),
    image_token_id=254, audio_token_id=255, image_token_offset=64, audio_token_offset=128)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return Apertus1p5ForConditionalGeneration(CONFIG).eval()


# The inputs exporter_openvino_nncf_openvino_weights_forward fed: token ids literal; pixel_values seeded random of
# the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[3, 3, 3, 28, 105, 156, 157, 44] + [254] * 4 + [84, 28, 109, 75], [3, 3, 3, 76, 195, 180,
        38] + [254] * 4 + [46, 36, 85, 58, 169]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 13, [0, 0, 0] + [1] * 13], dtype=torch.int64),
    'pixel_values': torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32),
    'image_sizes': torch.full((2, 2), 32, dtype=torch.int64),
}

model = tiny_model()
quantizer = NNCFOpenVINOQuantizer(NNCFWeightCompressionConfig())
exporter, config = OpenVINOExporter(), OpenVINOConfig(dynamic=True, quantizer=quantizer)
exported = exporter.export(model, dict(inputs, **CONSTANTS), config)
