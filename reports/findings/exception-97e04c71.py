"""[ONNX] raises at onnxruntime.capi.onnxruntime_inference_collection:InferenceSession._create_inference_session:
Mistral3ForConditionalGeneration (export_onnx).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32); needs onnxruntime too. Run: python
exception-97e04c71.py
The suite saw: onnxruntime session: Fail: model does not load: Node (node_squeeze_1) Op (Squeeze)
[ShapeInferenceError] Dimension of input 0 must be 1 instead of 8
Shared by 2 class(es), 4 cell(s) of 2 check(s) (index.json lists them).
"""

import os
import tempfile

import torch
from transformers import Mistral3Config, Mistral3ForConditionalGeneration, MistralConfig, PixtralVisionConfig

CONFIG = Mistral3Config(
    vision_config=PixtralVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, image_size=32, patch_size=8, head_dim=16, vocab_size=256),
    text_config=MistralConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-05,
        rope_parameters={'rope_theta': 1000000000.0, 'rope_type': 'default'}, sliding_window=None))
CONSTANTS = {'use_cache': False}


def tiny_model():
    torch.manual_seed(0)
    return Mistral3ForConditionalGeneration(CONFIG).eval()


# The inputs export_onnx fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[0, 0, 0, 28, 105, 156, 157, 44] + [10] * 4 + [84, 28, 109, 75], [0, 0, 0, 76, 195, 180,
        38] + [10] * 4 + [46, 36, 85, 58, 169]], dtype=torch.int64),
    'attention_mask': torch.tensor([[0, 0, 0] + [1] * 13, [0, 0, 0] + [1] * 13], dtype=torch.int64),
    'pixel_values': torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32),
    'image_sizes': torch.full((2, 2), 32, dtype=torch.int64),
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


class OrtProgram:
    """An ONNX file in an ONNX Runtime CPU session: `program(feed) -> {output name: tensor}`."""

    def __init__(self, path):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, torch.get_num_threads())
        options.log_severity_level = 3
        self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        self.inputs = [spec.name for spec in self.session.get_inputs()]
        self.outputs = [spec.name for spec in self.session.get_outputs()]

    def __call__(self, feed):
        def lookup(name):  # transformers' exporter prefixes an input it also returns (a mutated one) with `input.`
            return feed[name] if name in feed else feed.get(name.removeprefix("input."))

        missing = [name for name in self.inputs if lookup(name) is None]
        if missing:
            raise AssertionError(f"onnxruntime run: the graph takes {missing}, which the inputs {list(feed)} "
                                 "do not hold")
        arrays = {name: lookup(name).detach().cpu().contiguous().numpy() for name in self.inputs}
        values = self.session.run(None, arrays)
        return {name: torch.from_numpy(value) for name, value in zip(self.outputs, values)}


model = tiny_model()
folder = tempfile.mkdtemp()
feed = onnx_export(model, {**inputs, **CONSTANTS}, os.path.join(folder, "model.onnx"))
program = OrtProgram(os.path.join(folder, "model.onnx"))
