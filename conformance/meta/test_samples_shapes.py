"""New input shapes on synthetic contexts: one test per strategy (no real model is built)."""

import inspect
from types import SimpleNamespace

import torch

from conformance.cases.samples import BATCH, SampleContext
from conformance.cases.strategies import auto_select, get_strategy
from conformance.cases.strategies.action_flow import action_inputs, takes_actions
from conformance.cases.strategies.patch_positions import positioned_patches

TOKEN = 250


class _Config(SimpleNamespace):
    sub_configs = {}

    def get_text_config(self, *a, **k):
        return self.text

    def to_dict(self):
        return {"image_token_id": self.image_token_id}


class _Model(torch.nn.Module):
    """A stand-in whose image encoder emits `features(**inputs)` feature vectors."""

    def __init__(self, features):
        super().__init__()
        self.features = features

    def get_image_features(self, **inputs):
        return torch.zeros(int(self.features(**inputs)), 8)


def _ctx(params, features=lambda **k: 1, config=None, **vision):
    text = SimpleNamespace(vocab_size=256, hidden_size=8, pad_token_id=0)
    vision_config = SimpleNamespace(image_size=16, patch_size=4, num_channels=3, **vision)
    config = config or {}
    config = _Config(text=text, vision_config=vision_config, image_token_id=TOKEN, pad_token_id=0, **config)
    model = _Model(features)

    def forward(**kwargs):
        pass

    forward.__signature__ = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY, default=None) for p in params])
    model.forward = forward
    return SampleContext(tiny=SimpleNamespace(config=config), model=model, recipe={})


def _sample(ctx, name):
    assert auto_select(ctx) == name
    return get_strategy(name)(ctx)


def test_cross_attention_masks_tokens_from_the_image_token_on_and_keeps_padding_tiles():
    ctx = _ctx(["input_ids", "attention_mask", "pixel_values", "aspect_ratio_ids", "aspect_ratio_mask",
                "cross_attention_mask"], max_num_tiles=4, supported_aspect_ratios=[[1, 1], [1, 2]])
    sample = _sample(ctx, "cross_attention")
    ids, inputs = sample.inputs["input_ids"], sample.inputs
    assert inputs["pixel_values"].shape == (BATCH, 1, 4, 3, 16, 16)
    assert inputs["aspect_ratio_ids"].tolist() == [[2]] * BATCH
    assert inputs["aspect_ratio_mask"].tolist() == [[[1, 1, 0, 0]]] * BATCH
    reads = inputs["cross_attention_mask"][..., 0, 0].bool()
    after_image = (ids == TOKEN).long().cumsum(1).bool() & inputs["attention_mask"].bool()
    assert (reads == after_image).all() and not reads[:, 0].any()
    assert (inputs["cross_attention_mask"][..., 2:] == 0).all()
    moved = sample.perturbed().inputs["pixel_values"]
    assert (moved[:, :, 2:] == 0).all() and not torch.equal(moved[:, :, :2], inputs["pixel_values"][:, :, :2])


def test_flattened_patches_keep_positions_and_padding_when_perturbed():
    ctx = _ctx(["flattened_patches", "attention_mask", "decoder_input_ids"], patch_embed_hidden_size=12)
    sample = _sample(ctx, "flattened_patches")
    patches, mask = sample.inputs["flattened_patches"], sample.inputs["attention_mask"]
    assert patches.shape == (BATCH, 6, 2 + 12) and mask.sum(-1).tolist() == [4, 6]
    assert patches[1, :, 0].tolist() == [1, 1, 1, 2, 2, 2] and patches[1, :, 1].tolist() == [1, 2, 3] * 2
    moved = sample.perturbed().inputs["flattened_patches"]
    assert torch.equal(moved[..., :2], patches[..., :2]) and (moved[0, 4:] == 0).all()
    assert not torch.equal(moved[..., 2:], patches[..., 2:])
    assert "decoder_input_ids" in sample.inputs and "input_ids" not in sample.inputs


def test_position_mask_marks_one_position_per_feature():
    ctx = _ctx(["input_ids", "attention_mask", "pixel_values", "image_embeds_position_mask"],
               features=lambda pixel_values, **k: 5 * pixel_values.shape[0])
    sample = _sample(ctx, "position_mask")
    marks = sample.inputs["image_embeds_position_mask"]
    assert marks.shape == sample.inputs["input_ids"].shape and marks.sum(-1).tolist() == [5, 5]
    assert (sample.inputs["input_ids"][marks] == TOKEN).all()


class _HandsOnModel(torch.nn.Module):
    """No get_image_features: the forward computes 7 features per image and hands them to its text model."""

    def __init__(self):
        super().__init__()
        self.text_model = torch.nn.Identity()

    def forward(self, input_ids=None, attention_mask=None, pixel_values=None, image_embeds_position_mask=None):
        features = torch.zeros(pixel_values.shape[0], 7, 8)
        self.text_model(input_ids, image_embeds=features)
        raise AssertionError("the probe stops the forward before this")


def test_position_mask_counts_what_the_forward_hands_on_without_an_encoder_method():
    ctx = _ctx(["input_ids", "attention_mask", "pixel_values", "image_embeds_position_mask"])
    ctx = SampleContext(tiny=ctx.tiny, model=_HandsOnModel(), recipe={})
    sample = _sample(ctx, "position_mask")
    assert sample.inputs["image_embeds_position_mask"].sum(-1).tolist() == [7, 7]
    assert not any(module._forward_pre_hooks for module in ctx.model.modules())  # the probe cleaned up


def test_patch_sequences_count_each_image_alone():
    ctx = _ctx(["input_ids", "attention_mask", "pixel_values", "spatial_shapes", "pixel_attention_mask"],
               features=lambda pixel_attention_mask, **k: pixel_attention_mask.sum() // 4, downsample_factor=2)
    sample = _sample(ctx, "patch_sequences")
    assert sample.inputs["spatial_shapes"].tolist() == [[2, 4], [4, 4]]
    assert sample.inputs["pixel_values"].shape == (BATCH, 16, 3 * 4 * 4)
    assert sample.inputs["pixel_attention_mask"].sum(-1).tolist() == [8, 16]
    assert (sample.inputs["input_ids"] == TOKEN).sum(-1).tolist() == [2, 4]
    assert (sample.perturbed().inputs["pixel_values"][0, 8:] == 0).all()


def test_patch_strip_packs_patches_side_by_side():
    ctx = _ctx(["input_ids", "attention_mask", "pixel_values", "target_sizes"],
               features=lambda target_sizes, **k: target_sizes.prod(-1).sum() // 16)
    sample = _sample(ctx, "patch_strip")
    assert sample.inputs["pixel_values"].shape == (1, 3, 4, (16 + 32) * 4)
    assert sample.inputs["target_sizes"].tolist() == [[4, 4], [4, 8]]
    assert (sample.inputs["input_ids"] == TOKEN).sum(-1).tolist() == [1, 2]


def test_dual_resolution_sizes_each_tower_by_its_config():
    ctx = _ctx(["input_ids", "attention_mask", "pixel_values", "high_res_pixel_values"],
               features=lambda pixel_values, high_res_pixel_values, **k: 3 * pixel_values.shape[0],
               config={"high_res_vision_config": SimpleNamespace(image_size=32)})
    sample = _sample(ctx, "dual_resolution")
    assert sample.inputs["pixel_values"].shape == (BATCH, 3, 16, 16)
    assert sample.inputs["high_res_pixel_values"].shape == (BATCH, 3, 32, 32)
    assert set(sample.media_keys) == {"pixel_values", "high_res_pixel_values"}


def test_patch_positions_are_column_row_with_padding():
    values, positions = positioned_patches([(2, 3), (1, 1)], width=5, gen=torch.Generator().manual_seed(0))
    assert positions[0, :, 0].tolist() == [0, 1, 2, 0, 1, 2] and positions[0, :, 1].tolist() == [0, 0, 0, 1, 1, 1]
    assert (positions[1, 1:] == -1).all() and (values[1, 1:] == 0).all()
    ctx = _ctx(["input_ids", "attention_mask", "pixel_values", "image_position_ids"],
               features=lambda image_position_ids, **k: (image_position_ids != -1).all(-1).sum() // 4,
               pooling_kernel_size=2)
    sample = _sample(ctx, "patch_positions")
    assert (sample.inputs["input_ids"] == TOKEN).sum(-1).tolist() == [2, 4]


def test_action_flow_gives_noise_and_timestep_explicitly():
    ctx = _ctx(["input_ids", "attention_mask", "pixel_values", "pixel_attention_mask", "state", "noise", "timestep"],
               config={"chunk_size": 3, "max_action_dim": 5, "max_state_dim": 7})
    assert takes_actions(ctx) and auto_select(ctx) == "action_flow"
    first, again = action_inputs(ctx, ctx.generator()), action_inputs(ctx, ctx.generator())
    assert first["state"].shape == (BATCH, 7) and first["noise"].shape == (BATCH, 3, 5)
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert ((first["timestep"] > 0) & (first["timestep"] < 1)).all()
