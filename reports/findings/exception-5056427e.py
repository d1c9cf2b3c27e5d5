"""[ONNX] raises at transformers.models.csm.modeling_csm:CsmBackboneModelEmbeddings.forward:
CsmForConditionalGeneration (onnx_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32); needs onnxruntime too. Run: python
exception-5056427e.py
The suite saw: export of part 'embed_prefill' (transformers.exporters.OnnxExporter): RuntimeError: The size of
tensor a (s70) must match the size of tensor b (32) at non-singleton dimension 1) (at ...
Shared by 1 class(es), 1 cell(s) of 1 check(s) (index.json lists them).
"""

import os
import tempfile

import torch
from transformers import CsmConfig, CsmDepthDecoderConfig, CsmForConditionalGeneration, MimiConfig

CONFIG = CsmConfig(vocab_size=256, text_vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, pad_token_id=254, codebook_pad_token_id=252, bos_token_id=253,
    audio_token_id=254, audio_eos_token_id=255, head_dim=16,
    depth_decoder_config=CsmDepthDecoderConfig(backbone_hidden_size=64, vocab_size=256, hidden_size=64,
        intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, head_dim=16),
    codec_config=MimiConfig(hidden_size=64, num_filters=4, codebook_size=64,
        vector_quantization_hidden_dimension=64, upsample_groups=64, num_hidden_layers=2, intermediate_size=128,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16))


def tiny_model():
    torch.manual_seed(0)
    return CsmForConditionalGeneration(CONFIG).eval()


# The inputs onnx_generate fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[37, 107, 92, 39, 189, 180, 10, 29, 23]], dtype=torch.int64),
    'attention_mask': torch.full((1, 9), 1, dtype=torch.int64),
}


class EmbedPart(torch.nn.Module):
    """The text embedding."""

    def __init__(self, embedding):
        super().__init__()
        self.embedding = embedding

    def forward(self, input_ids):
        return self.embedding(input_ids)


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
owner = model  # the module generate decodes with
placeholders = torch.zeros_like(inputs["input_ids"], dtype=torch.bool)
ids = inputs["input_ids"].masked_fill(placeholders, 0)
embedding = EmbedPart(owner.get_input_embeddings())
folder = tempfile.mkdtemp()
sessions = {}

def onnx_part(name, module, kwargs):
    path = os.path.join(folder, name, "model.onnx")
    os.makedirs(os.path.dirname(path))
    onnx_export(module, kwargs, path)
    sessions[name] = OrtProgram(path)

onnx_part('embed_prefill', embedding, {"input_ids": ids})
