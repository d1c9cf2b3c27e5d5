"""[ONNX] data-dependent guard at transformers.models.qwen3_asr.modeling_qwen3_asr:get_audio_cu_seqlens:
Qwen3ASRForConditionalGeneration (export_onnx).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32); needs onnxruntime too. Run: python
data_dependent_guard-9cf5c128.py
The suite saw: export (transformers.exporters.OnnxExporter): GuardOnDataDependentSymNode: Could not extract
specialized integer from data-dependent expression u1 (unhinted: u1). (Size-like symbols: none) (at ...
Shared by 1 class(es), 16 cell(s) of 16 check(s) (index.json lists them).
"""

import os
import tempfile

import torch
from transformers import Qwen3ASRConfig, Qwen3ASREncoderConfig, Qwen3ASRForConditionalGeneration, Qwen3Config

CONFIG = Qwen3ASRConfig(
    audio_config=Qwen3ASREncoderConfig(num_mel_bins=16, encoder_layers=2, encoder_attention_heads=4,
        encoder_ffn_dim=128, d_model=64, downsample_hidden_size=64),
    text_config=Qwen3Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=65536,
        tie_word_embeddings=True, max_window_layers=2, layer_types=['full_attention', 'full_attention']),
    audio_token_id=254, timestamp_token_id=255, pad_token_id=253, eos_token_id=[252, 253])
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return Qwen3ASRForConditionalGeneration(CONFIG).eval()


# The inputs export_onnx fed: token ids literal; input_features seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[253, 253, 253, 130, 168, 51, 60, 6] + [254] * 728 + [64, 111, 24, 190], [253, 253, 253,
        69, 22, 34, 124] + [254] * 728 + [112, 101, 37, 161, 141]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 737, [0, 0, 0] + [1] * 737], dtype=torch.int64),
    'input_features': torch.randn((2, 16, 100), generator=g, dtype=torch.float32),
    'input_features_mask': torch.full((2, 100), 1, dtype=torch.int64),
}


def leaf_feed(kwargs):
    """Tensor leaves of keyword inputs by dotted path (``name``, ``name.0``, ...): the ONNX graph's input names."""
    feed = {}

    def walk(value, prefix):
        if isinstance(value, torch.Tensor):
            feed[prefix] = value
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                walk(item, f"{prefix}.{index}")
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{prefix}.{key}")

    for key, value in kwargs.items():
        walk(value, key)
    return feed


def onnx_export(module, kwargs, path):
    """`module(**kwargs)` to an ONNX file (weights beside it) with transformers' OnnxExporter; the feed (input
    name -> tensor) the graph was traced with."""
    from transformers.exporters import OnnxConfig, OnnxExporter

    with torch.no_grad():
        exported = OnnxExporter().export(module, kwargs, OnnxConfig())  # adds the inputs it precomputes
        OnnxExporter.save_program(exported.program, path)
    return leaf_feed(kwargs)


model = tiny_model()
folder = tempfile.mkdtemp()
feed = onnx_export(model, {**inputs, **CONSTANTS}, os.path.join(folder, "model.onnx"))
