"""Tiled images read by cross-attention, with a per-token mask instead of placeholders' features.

The Mllama shape: `pixel_values` (batch, images, max_tiles, C, H, W) are
tiles of each image (padding tiles are zero), `aspect_ratio_ids` (batch,
images) name each image's tile layout in the config's supported aspect
ratios (0 is padding), `aspect_ratio_mask` (batch, images, max_tiles) marks
the real tiles, and `cross_attention_mask` (batch, seq, images, max_tiles)
says which text tokens attend to which image's tiles. The text holds one
image token per image, as a processor writes it; from that token on, the
prompt's tokens attend to the image (tokens before it and padding attend to
none). The sample image is 1x2 tiles where the config supports that layout,
so the tile mask is not trivial.
"""

from __future__ import annotations

import torch

from conformance.cases.samples import BATCH, Sample
from conformance.cases.strategies import register
from conformance.cases.strategies._media import (
    channels,
    image_hw,
    image_token_id,
    masked_media,
    pixels,
    supported_ratio_id,
    vision_value,
)
from conformance.cases.strategies.pixels import assemble

PREFERRED_TILES = ((1, 2), (1, 1))  # (rows, cols) of the sample image, first supported wins


def takes_cross_attention_mask(ctx) -> bool:
    return {"pixel_values", "cross_attention_mask"} <= ctx.forward_params


def tile_layout(ctx) -> tuple[int, int, int]:
    """(aspect ratio id, real tiles, max tiles) of the sample image."""
    ratios = vision_value(ctx, ("supported_aspect_ratios",), [[1, 1]])
    max_tiles = int(vision_value(ctx, ("max_num_tiles",), 1))
    for rows, cols in PREFERRED_TILES:
        if rows * cols <= max_tiles:
            try:
                return supported_ratio_id(ratios, (rows, cols)), rows * cols, max_tiles
            except LookupError:
                continue
    raise LookupError(f"no 1x2 or 1x1 tile layout among the supported aspect ratios {ratios}")


def token_image_mask(ids: torch.Tensor, attention: torch.Tensor, token: int | None, tiles: int,
                     max_tiles: int) -> torch.Tensor:
    """(batch, seq, 1, max_tiles): real tokens from the image token on attend to the real tiles."""
    if token is None:
        reads = attention.bool()
    else:
        reads = (ids == token).long().cumsum(dim=1).bool() & attention.bool()
    mask = torch.zeros((*ids.shape, 1, max_tiles), dtype=torch.long)
    mask[..., :tiles] = reads[..., None, None].long()
    return mask


@register("cross_attention", when=takes_cross_attention_mask, priority=25)
def cross_attention(ctx) -> Sample:
    gen = ctx.generator()
    ratio_id, tiles, max_tiles = tile_layout(ctx)
    h, w = image_hw(ctx)
    values = torch.zeros((BATCH, 1, max_tiles, channels(ctx), h, w))
    values[:, :, :tiles] = pixels((BATCH, 1, tiles, channels(ctx), h, w), gen)
    tile_mask = torch.zeros((BATCH, 1, max_tiles), dtype=torch.long)
    tile_mask[..., :tiles] = 1
    extra = {}
    if "aspect_ratio_ids" in ctx.forward_params:
        extra["aspect_ratio_ids"] = torch.full((BATCH, 1), ratio_id, dtype=torch.long)
    if "aspect_ratio_mask" in ctx.forward_params:
        extra["aspect_ratio_mask"] = tile_mask
    try:
        token = image_token_id(ctx)
    except LookupError:
        token = None
    sample = assemble(ctx, {"pixel_values": values}, 1 if token is not None else 0, gen, "cross_attention",
                      token=token if token is not None else -1, **extra)
    ids, attention = sample.inputs["input_ids"], sample.inputs["attention_mask"]
    sample.inputs["cross_attention_mask"] = token_image_mask(ids, attention, token, tiles, max_tiles)
    sample.notes.update(tiles=tiles, aspect_ratio_id=ratio_id)
    real_tiles = tile_mask.bool()[..., None, None, None].expand(values.shape)
    return masked_media(sample, {"pixel_values": real_tiles})
