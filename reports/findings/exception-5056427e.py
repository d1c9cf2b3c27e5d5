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
owner = model  # the module generate decodes with
placeholders = torch.zeros_like(inputs["input_ids"], dtype=torch.bool)
ids = inputs["input_ids"].masked_fill(placeholders, 0)
embedding = EmbedPart(owner.get_input_embeddings())
sessions = {}

def onnx_part(name, module, kwargs):
    path = os.path.join(tempfile.mkdtemp(prefix=f"{name}-"), "model.onnx")
    onnx_export(module, kwargs, path)
    sessions[name] = OrtProgram(path)

onnx_part('embed_prefill', embedding, {"input_ids": ids})
