"""Flattened patches and a grid: `pixel_values` (patches, ...) + `image_grid_thw`.

The Qwen-VL shape (also GLM-4V, Kimi, PaddleOCR-VL, ...): every image is cut
into patches beforehand, all images' patches are concatenated along one axis,
and `image_grid_thw` (images, 3) says how many (temporal, height, width)
patches each image has. Each image's grid is a multiple of the spatial merge
size; its placeholder count is what the model's encoder emits for it.

How one patch is laid out (flat C*T*P*P, flat C*P*P, (C, P, P), channels last, ...) differs
between encoders and is not in the config: the layouts are tried in a fixed
order against the model's own `get_image_features`, and the first one the
encoder accepts is used.
"""

from __future__ import annotations

import torch

from conformance.cases.samples import BATCH, Sample
from conformance.cases.strategies import register
from conformance.cases.strategies._media import (
    channels,
    count_placeholders,
    images_per_prompt,
    per_prompt,
    pixels,
    scaled,
    vision_value,
)
from conformance.cases.strategies.pixels import assemble

MERGE_KEYS = ("spatial_merge_size", "merge_size", "merge_kernel_size", "spatial_merge", "downsample_ratio")
TEMPORAL_KEYS = ("temporal_patch_size", "patch_temporal")
MERGES_PER_SIDE = 2  # each image is (2 * merge) x (2 * merge) patches


def takes_grid(ctx) -> bool:
    return "image_grid_thw" in ctx.forward_params


def merge_size(ctx) -> tuple[int, int]:
    value = vision_value(ctx, MERGE_KEYS, 1)
    if isinstance(value, (list, tuple)):
        return int(value[0]), int(value[-1])
    value = int(value) if isinstance(value, int) and value >= 1 else 1
    return value, value


def patch_layouts(ctx, gh: int, gw: int, images: int = BATCH) -> list[tuple[torch.Tensor, tuple[int, ...]]]:
    """Candidate (grid, pixel shape) pairs for `images` images of gh x gw patches, most common first.

    The grid counts patches, except in the last candidate, where it counts
    merged tokens and each row of pixels is one token's (m*P, m*P, C) block.
    """
    p = int(vision_value(ctx, ("patch_size",), 14))
    t = int(vision_value(ctx, TEMPORAL_KEYS, 1) or 1)
    c = channels(ctx)
    mh, mw = merge_size(ctx)
    n = images * gh * gw
    shapes = [(n, c * t * p * p), (n, c * p * p), (n, c, p, p), (n, c, t, p, p), (1, n, c, p, p), (n * p * p, c)]
    patch_grid = torch.tensor([[1, gh, gw]] * images, dtype=torch.long)
    token_grid = torch.tensor([[1, gh // mh, gw // mw]] * images, dtype=torch.long)
    tokens = images * (gh // mh) * (gw // mw)
    return [(patch_grid, s) for s in dict.fromkeys(shapes)] + [(token_grid, (tokens, mh * p, mw * p, c))]


def grid_inputs(ctx, shape: tuple[int, ...], grid: torch.Tensor, gen: torch.Generator) -> dict:
    return {"pixel_values": pixels(shape, gen), "image_grid_thw": grid}


def extra_grid_inputs(ctx, images: int) -> dict:
    """Per-image side inputs some grid encoders take (merge size per image, images per prompt)."""
    extra = {}
    if "image_merge_sizes" in ctx.forward_params:
        extra["image_merge_sizes"] = torch.full((images,), merge_size(ctx)[0], dtype=torch.long)
    if "images_per_sample" in ctx.forward_params:
        extra["images_per_sample"] = torch.full((BATCH,), images // BATCH, dtype=torch.long)
    return extra


@register("patches_grid", when=takes_grid, priority=20)
def patches_grid(ctx) -> Sample:
    gen = ctx.generator()
    n = images_per_prompt(ctx)
    mh, mw = merge_size(ctx)
    gh, gw = scaled(ctx, MERGES_PER_SIDE * mh, MERGES_PER_SIDE * mw)
    extra = extra_grid_inputs(ctx, BATCH * n)
    errors = []
    for grid, shape in patch_layouts(ctx, gh, gw, BATCH * n):
        media = grid_inputs(ctx, shape, grid, ctx.generator())
        try:
            count = count_placeholders(ctx, {**media, **extra}, images=BATCH * n)
        except Exception as exc:  # this layout is not the encoder's; try the next
            errors.append(exc)
            continue
        media["pixel_values"] = pixels(shape, gen)
        sample = assemble(ctx, {"pixel_values": media["pixel_values"]}, per_prompt(count, n), gen, "patches_grid",
                          image_grid_thw=grid, **extra)
        sample.notes["layout"] = shape
        return sample
    raise errors[0]
