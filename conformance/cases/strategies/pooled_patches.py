"""Patch crops pooled into tokens by index: `pixel_values` + `image_token_pooling` + `image_grids`.

The Molmo-2 shape: each image is one crop of flattened patches
(crops, patches, C*P*P); every image token attention-pools a 2x2 block of
patch positions given as indices into the flattened patches of all crops
(`image_token_pooling`, (tokens, 4), -1 = padding), and `image_grids` gives
per image the token grid(s) [rows, cols, rows2, cols2] whose sizes add up to
its token count. Placeholders per image: what the model's encoder emits.
"""

from __future__ import annotations

import torch

from conformance.cases.samples import BATCH
from conformance.cases.strategies import register
from conformance.cases.strategies._media import channels, count_placeholders, image_hw, pixels, vision_value
from conformance.cases.strategies.pixels import assemble

POOL = 2  # patches per token along each side


def takes_pooling_indices(ctx) -> bool:
    return {"pixel_values", "image_token_pooling", "image_grids"} <= ctx.forward_params


def pooling_indices(side: int, crops: int) -> torch.Tensor:
    """(tokens, POOL*POOL) indices of each token's patch block, over `crops` crops of side x side patches."""
    blocks = []
    for crop in range(crops):
        base = crop * side * side
        for row in range(0, side, POOL):
            for col in range(0, side, POOL):
                blocks.append([base + (row + i) * side + (col + j) for i in range(POOL) for j in range(POOL)])
    return torch.tensor(blocks, dtype=torch.long)


@register("pooled_patches", when=takes_pooling_indices, priority=15)
def pooled_patches(ctx):
    gen = ctx.generator()
    h, _ = image_hw(ctx)
    patch = vision_value(ctx, ("patch_size",), 8)
    patch = int(patch[0] if isinstance(patch, (list, tuple)) else patch)
    side = h // patch
    media = {"pixel_values": pixels((BATCH, side * side, channels(ctx) * patch * patch), gen)}
    tokens_side = side // POOL
    extra = {
        "image_token_pooling": pooling_indices(side, BATCH),
        "image_grids": torch.tensor([[tokens_side, tokens_side, 0, 0]] * BATCH, dtype=torch.long),
    }
    count = count_placeholders(ctx, {**media, **extra}, images=BATCH)
    return assemble(ctx, media, count, gen, "pooled_patches", **extra)
