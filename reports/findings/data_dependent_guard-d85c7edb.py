"""[ONNX] data-dependent guard at torch._subclasses.fake_impls:data_dep: ChameleonForConditionalGeneration
(onnx_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python data_dependent_guard-d85c7edb.py
The suite saw: DataDependentOutputException: aten.equal.default (at fake_impls.py:1526)
Shared by 1 class(es), 1 cell(s) of 1 check(s) (index.json lists them).
"""

import os
import tempfile

import torch
from transformers import ChameleonConfig, ChameleonForConditionalGeneration, ChameleonVQVAEConfig

CONFIG = ChameleonConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=4,
    vq_config=ChameleonVQVAEConfig(embed_dim=64, num_embeddings=64, latent_channels=64, base_channels=64,
        channel_multiplier=[1, 1, 1, 1, 1], num_res_blocks=1),
    vocabulary_map={
        '<image>': 200, 'IMGIMGAZ': 100, 'IMGIMGBZ': 101, 'IMGIMGCZ': 102, 'IMGIMGDZ': 103, 'IMGIMGEZ': 104,
        'IMGIMGFZ': 105, 'IMGIMGGZ': 106, 'IMGIMGHZ': 107, 'IMGIMGIZ': 108, 'IMGIMGJZ': 109, 'IMGIMGBAZ': 110,
        'IMGIMGBBZ': 111, 'IMGIMGBCZ': 112, 'IMGIMGBDZ': 113, 'IMGIMGBEZ': 114, 'IMGIMGBFZ': 115, 'IMGIMGBGZ': 116,
        'IMGIMGBHZ': 117, 'IMGIMGBIZ': 118, 'IMGIMGBJZ': 119, 'IMGIMGCAZ': 120, 'IMGIMGCBZ': 121, 'IMGIMGCCZ': 122,
        'IMGIMGCDZ': 123, 'IMGIMGCEZ': 124, 'IMGIMGCFZ': 125, 'IMGIMGCGZ': 126, 'IMGIMGCHZ': 127, 'IMGIMGCIZ': 128,
        'IMGIMGCJZ': 129, 'IMGIMGDAZ': 130, 'IMGIMGDBZ': 131, 'IMGIMGDCZ': 132, 'IMGIMGDDZ': 133, 'IMGIMGDEZ': 134,
        'IMGIMGDFZ': 135, 'IMGIMGDGZ': 136, 'IMGIMGDHZ': 137, 'IMGIMGDIZ': 138, 'IMGIMGDJZ': 139, 'IMGIMGEAZ': 140,
        'IMGIMGEBZ': 141, 'IMGIMGECZ': 142, 'IMGIMGEDZ': 143, 'IMGIMGEEZ': 144, 'IMGIMGEFZ': 145, 'IMGIMGEGZ': 146,
        'IMGIMGEHZ': 147, 'IMGIMGEIZ': 148, 'IMGIMGEJZ': 149, 'IMGIMGFAZ': 150, 'IMGIMGFBZ': 151, 'IMGIMGFCZ': 152,
        'IMGIMGFDZ': 153, 'IMGIMGFEZ': 154, 'IMGIMGFFZ': 155, 'IMGIMGFGZ': 156, 'IMGIMGFHZ': 157, 'IMGIMGFIZ': 158,
        'IMGIMGFJZ': 159, 'IMGIMGGAZ': 160, 'IMGIMGGBZ': 161, 'IMGIMGGCZ': 162, 'IMGIMGGDZ': 163,
    },
    image_token_id=200)


def tiny_model():
    torch.manual_seed(0)
    return ChameleonForConditionalGeneration(CONFIG).eval()


# The inputs onnx_generate fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[153, 99, 85, 52] + [200] * 4 + [6, 151, 56, 186, 77]], dtype=torch.int64),
    'attention_mask': torch.full((1, 13), 1, dtype=torch.int64),
    'pixel_values': torch.randn((1, 3, 32, 32), generator=g, dtype=torch.float32),
}


def image_features(output):
    """Features as [tokens, hidden]: `pooler_output`, a tensor, or a list of them."""
    pooled = getattr(output, "pooler_output", None)
    if isinstance(pooled, (torch.Tensor, list, tuple)):
        output = pooled
    elif not isinstance(output, (torch.Tensor, list, tuple)) and hasattr(output, "last_hidden_state"):
        output = output.last_hidden_state
    if isinstance(output, (list, tuple)):
        return torch.cat([image_features(o) for o in output], dim=0)
    return output.reshape(-1, output.shape[-1])


class VisionPart(torch.nn.Module):
    """Vision encoder + projector: media -> the placeholder features [tokens, hidden]."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.config = model.config  # transformers' exporters read the config of what they export

    def forward(self, **media):
        return image_features(self.model.get_image_features(**media))


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


model, fresh = tiny_model(), tiny_model()  # the same weights (seed 0); `fresh` is never exported
owner, fresh_owner = model, fresh  # the modules generate decodes with
placeholders = inputs["input_ids"] == 200
ids = inputs["input_ids"].masked_fill(placeholders, 0)
media = {k: inputs[k] for k in ['pixel_values']}

def export_then_run(name, part, fresh_part, kwargs):
    """The part exported to ONNX, then run eagerly on the exported model and on a fresh one."""
    onnx_export(part, kwargs, os.path.join(tempfile.mkdtemp(prefix=f"{name}-"), "model.onnx"))
    with torch.no_grad():
        after, before = part(**kwargs), fresh_part(**kwargs)
    after, before = (x[0] if isinstance(x, tuple) else x for x in (after, before))
    if not torch.equal(after, before):  # a tensor the export left fake cannot be compared: raises
        raise AssertionError(f"part {name!r} run eagerly after its export differs from a fresh model's")

export_then_run('vision', VisionPart(model), VisionPart(fresh), dict(media))
