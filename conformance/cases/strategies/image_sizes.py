"""Images with their sizes: `pixel_values` + `image_sizes` (images, 2) as (height, width).

Two shapes of the problem:

* `pixels_sizes` (Pixtral, Mistral3, LightOnOCR): plain (images, C, H, W)
  pixels whose encoder needs each image's true size.
* `tiles_sizes` (LLaVA-NeXT, OneVision, Granite vision): any-resolution
  tiling. Each image is a base tile plus the tiles of the grid pinpoint that
  best fits its size, passed as (images, tiles, C, S, S); the model unpads
  the tiles' features back to the image size. The sample image is 2x1 tiles
  large so the grid is not trivial.
"""

from __future__ import annotations

import inspect

import torch

from conformance.cases.samples import BATCH, Sample
from conformance.cases.strategies import register
from conformance.cases.strategies._media import (
    _get_image_features,
    channels,
    count_placeholders,
    image_hw,
    images_per_prompt,
    per_prompt,
    pixels,
    scaled,
)
from conformance.cases.strategies.pixels import assemble


def needs_image_sizes(ctx) -> bool:
    """The model's image encoder requires `image_sizes` (no default)."""
    try:
        params = inspect.signature(_get_image_features(ctx.model)).parameters
    except LookupError:
        return False
    param = params.get("image_sizes")
    return param is not None and param.default is inspect.Parameter.empty


def is_tiled(ctx) -> bool:
    return needs_image_sizes(ctx) and bool(getattr(ctx.config, "image_grid_pinpoints", None))


def _sizes(h: int, w: int, images: int = BATCH) -> torch.Tensor:
    return torch.tensor([[h, w]] * images, dtype=torch.long)


def _side_inputs(ctx) -> dict:
    extra = {}
    if "batch_num_images" in ctx.forward_params:
        extra["batch_num_images"] = torch.ones(BATCH, dtype=torch.long)
    return extra


@register("pixels_sizes", when=needs_image_sizes, priority=40)
def pixels_sizes(ctx) -> Sample:
    gen = ctx.generator()
    n = images_per_prompt(ctx)
    h, w = scaled(ctx, *image_hw(ctx))
    media = {"pixel_values": pixels((BATCH * n, channels(ctx), h, w), gen)}
    sizes = _sizes(h, w, BATCH * n)
    count = count_placeholders(ctx, {**media, "image_sizes": sizes}, images=BATCH * n)
    return assemble(ctx, media, per_prompt(count, n), gen, "pixels_sizes", image_sizes=sizes)


@register("tiles_sizes", when=is_tiled, priority=30)
def tiles_sizes(ctx) -> Sample:
    from transformers.models.llava_next.modeling_llava_next import image_size_to_num_patches

    gen = ctx.generator()
    tile_h, tile_w = image_hw(ctx)
    height, width = scaled(ctx, tile_h, 2 * tile_w)  # a 1x2 tiles image (by default)
    tiles = image_size_to_num_patches((height, width), ctx.config.image_grid_pinpoints, tile_h)
    media = {"pixel_values": pixels((BATCH, tiles, channels(ctx), tile_h, tile_w), gen)}
    sizes = _sizes(height, width)
    extra = _side_inputs(ctx)
    count = count_placeholders(ctx, {**media, "image_sizes": sizes, **extra}, images=BATCH)
    sample = assemble(ctx, media, count, gen, "tiles_sizes", image_sizes=sizes, **extra)
    sample.notes["tiles"] = tiles
    return sample
