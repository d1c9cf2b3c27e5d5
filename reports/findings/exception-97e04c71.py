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
