"""[ONNX] raises at onnxruntime.capi.onnxruntime_inference_collection:Session.run: HiggsAudioV2ForConditionalGeneration
(export_onnx).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32); needs onnxruntime too. Run: python
exception-2d3a276e.py
The suite saw: onnxruntime run: InvalidArgument: GatherND node. Name:'node_GatherND_64' Status Message: invalid
index found, index = 0
Shared by 3 class(es), 4 cell(s) of 2 check(s) (index.json lists them).
"""

import os
import tempfile

import torch
from transformers import HiggsAudioV2Config, HiggsAudioV2ForConditionalGeneration

CONFIG = HiggsAudioV2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, pad_token_id=251, eos_token_id=252, head_dim=16, codebook_size=64,
    audio_token_id=255, audio_bos_token_id=253, audio_delay_token_id=254, audio_stream_bos_id=249,
    audio_stream_eos_id=250)
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return HiggsAudioV2ForConditionalGeneration(CONFIG).eval()


# The inputs export_onnx fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[251, 251, 251, 118, 193, 119, 64, 61, 24], [37, 107, 92, 39, 189, 180, 10, 29, 23]],
        dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 6, [1] * 9], dtype=torch.int64),
}


def leaf_feed(kwargs, prefix=""):
    """Tensor leaves of keyword inputs by dotted path (``name``, ``name.0``, ...): the ONNX graph's input names."""
    feed = {}
    for key, value in kwargs.items():
        if isinstance(value, torch.Tensor):
            feed[f"{prefix}{key}"] = value
        elif isinstance(value, (list, tuple, dict)):
            feed.update(leaf_feed(value if isinstance(value, dict) else dict(enumerate(value)), f"{prefix}{key}."))
    return feed


def onnx_export(module, kwargs, path):
    """`module(**kwargs)` to an ONNX file with transformers' OnnxExporter; the feed (input name -> tensor)."""
    from transformers.exporters import OnnxConfig, OnnxExporter

    with torch.no_grad():
        exported = OnnxExporter().export(module, kwargs, OnnxConfig())  # adds the inputs it precomputes
        OnnxExporter.save_program(exported.program, path)
    return leaf_feed(kwargs)


class OrtProgram:
    """An ONNX file in an ONNX Runtime CPU session: `program(feed) -> {output name: tensor}`."""

    def __init__(self, path):
        import onnxruntime as ort

        self.session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])

    def __call__(self, feed):
        # transformers' exporter prefixes an input it also returns (a mutated one) with `input.`
        arrays = {spec.name: feed[spec.name.removeprefix("input.")].detach().contiguous().numpy()
                  for spec in self.session.get_inputs()}
        values = self.session.run(None, arrays)
        return {spec.name: torch.from_numpy(value) for spec, value in zip(self.session.get_outputs(), values)}


model = tiny_model()
folder = tempfile.mkdtemp()
feed = onnx_export(model, {**inputs, **CONSTANTS}, os.path.join(folder, "model.onnx"))
program = OrtProgram(os.path.join(folder, "model.onnx"))
outputs = program(feed)
