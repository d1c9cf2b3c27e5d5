"""Sample strategies on synthetic contexts: shapes, left padding, placeholder counts from the model."""

from types import SimpleNamespace

import torch

from conformance.cases.samples import BATCH, PAD_LEFT, SampleContext, left_pad
from conformance.cases.strategies import auto_select, get_strategy


class _Config(SimpleNamespace):
    def get_text_config(self, *a, **k):
        return self.text

    def to_dict(self):
        return {"image_token_id": self.image_token_id}


class _Encoder(torch.nn.Module):
    """Emits one feature per `group` patches/pixel rows: what a real encoder's count looks like."""

    def __init__(self, group=4):
        super().__init__()
        self.group = group
        self.proj = torch.nn.Linear(1, 8)

    def get_image_features(self, pixel_values, image_grid_thw=None, image_sizes=None, pixel_attention_mask=None):
        if image_grid_thw is not None:
            rows = int(image_grid_thw.prod(-1).sum()) // self.group
        else:
            rows = pixel_values.shape[0] * (pixel_values.shape[1] if pixel_values.dim() == 5 else 1) * 3
        return torch.zeros(rows, 8)


def _ctx(forward_params, group=4, **vision):
    text = SimpleNamespace(vocab_size=256, hidden_size=8, pad_token_id=0)
    vision_config = SimpleNamespace(image_size=16, patch_size=4, num_channels=3, **vision)
    config = _Config(text=text, vision_config=vision_config, image_token_id=250, pad_token_id=0)
    model = _Encoder(group)

    def forward(input_ids=None, attention_mask=None, **kwargs):
        pass

    import inspect
    params = [inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY, default=None) for p in forward_params]
    forward.__signature__ = inspect.Signature(params)
    model.forward = forward
    return SampleContext(tiny=SimpleNamespace(config=config), model=model, recipe={})


def _placeholders(sample, token=250):
    return (sample.inputs["input_ids"] == token).sum(-1).tolist()


def test_left_pad_pads_the_first_row():
    ids, mask = left_pad([[5, 6], [7, 8, 9]], pad=0)
    assert mask[0, :PAD_LEFT].sum() == 0 and mask[0, -2:].tolist() == [1, 1]
    assert mask[1].sum() == 3


def test_plain_pixels_counts_placeholders_from_the_encoder():
    ctx = _ctx(["input_ids", "attention_mask", "pixel_values"])
    assert auto_select(ctx) == "pixels"
    sample = get_strategy("pixels")(ctx)
    assert sample.inputs["pixel_values"].shape == (BATCH, 3, 16, 16)
    assert _placeholders(sample) == [3, 3]
    assert sample.inputs["input_ids"][0].tolist() != sample.inputs["input_ids"][1].tolist()


def test_patches_grid_uses_merge_size_and_token_types():
    ctx = _ctx(["input_ids", "attention_mask", "pixel_values", "image_grid_thw", "mm_token_type_ids"],
               spatial_merge_size=2, temporal_patch_size=2)
    assert auto_select(ctx) == "patches_grid"
    sample = get_strategy("patches_grid")(ctx)
    assert sample.inputs["image_grid_thw"].tolist() == [[1, 4, 4]] * BATCH
    assert sample.inputs["pixel_values"].shape == (BATCH * 16, 3 * 2 * 4 * 4)
    assert _placeholders(sample) == [4, 4]
    assert (sample.inputs["mm_token_type_ids"] == (sample.inputs["input_ids"] == 250)).all()


def test_image_sequences_have_a_pixel_mask():
    ctx = _ctx(["input_ids", "attention_mask", "pixel_values", "pixel_attention_mask"])
    assert auto_select(ctx) == "image_sequences"
    sample = get_strategy("image_sequences")(ctx)
    assert sample.inputs["pixel_values"].shape == (BATCH, 1, 3, 16, 16)
    assert sample.inputs["pixel_attention_mask"].shape[:2] == (BATCH, 1)
    assert _placeholders(sample) == [3, 3]


def test_perturbed_sample_changes_only_media():
    sample = get_strategy("pixels")(_ctx(["input_ids", "attention_mask", "pixel_values"]))
    moved = sample.perturbed()
    assert torch.equal(moved.inputs["input_ids"], sample.inputs["input_ids"])
    assert not torch.equal(moved.inputs["pixel_values"], sample.inputs["pixel_values"])
