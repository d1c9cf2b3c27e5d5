"""Variable-resolution images as flattened patches with their positions: `flattened_patches`.

The Pix2Struct shape: each image is cut into a rows x cols grid of patches
that keeps its aspect ratio; every patch is one row of
[row id, column id, C*P*P pixel values] (ids 1-based), the rows of an image
are padded with all-zero patches up to the batch's longest, and
`attention_mask` (batch, patches) marks the real ones. There is no image
placeholder: the decoder reads the encoded patches by cross-attention and
gets `decoder_input_ids`. The two sample images have different grids, so
the first one is padded.

A decoder-only model that takes flattened patches with a prompt (Kosmos-2.5)
reads the encoded patches at positions its `image_embeds_position_mask`
marks: then the sample is that prompt (see `position_mask`) plus the patches,
and the text `attention_mask` is the prompt's.
"""

from __future__ import annotations

import torch

from conformance.cases.samples import Sample
from conformance.cases.strategies import register
from conformance.cases.strategies._media import channels, masked_media, pixels, vision_value
from conformance.cases.strategies.position_mask import MASK, count_slots, masked_prompt
from conformance.cases.strategies.text import decoder_inputs

GRIDS = ((2, 2), (2, 3))  # (rows, cols) of patches per sample image; the first gets padding
POSITION_COLUMNS = 2  # row id, column id


def takes_flattened_patches(ctx) -> bool:
    return "flattened_patches" in ctx.forward_params


def patch_width(ctx) -> int:
    """Pixel values per patch: the encoder's patch-embedding input width."""
    width = vision_value(ctx, ("patch_embed_hidden_size",))
    if width is None:
        p = vision_value(ctx, ("patch_size",), 16)
        p = int(p[0] if isinstance(p, (list, tuple)) else p)
        width = channels(ctx) * p * p
    return int(width)


def flattened(grids, width: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(patches, mask): (images, max patches, 2 + width) rows of [row, col, pixels], and the real-patch mask."""
    longest = max(r * c for r, c in grids)
    patches = torch.zeros((len(grids), longest, POSITION_COLUMNS + width))
    mask = torch.zeros((len(grids), longest), dtype=torch.long)
    for i, (rows, cols) in enumerate(grids):
        n = rows * cols
        ids = torch.arange(n)
        patches[i, :n, 0] = (ids // cols + 1).float()
        patches[i, :n, 1] = (ids % cols + 1).float()
        patches[i, :n, POSITION_COLUMNS:] = pixels((n, width), gen)
        mask[i, :n] = 1
    return patches, mask


@register("flattened_patches", when=takes_flattened_patches, priority=20)
def flattened_patches(ctx) -> Sample:
    gen = ctx.generator()
    patches, mask = flattened(GRIDS, patch_width(ctx), gen)
    if {"input_ids", MASK} <= ctx.forward_params:
        count = count_slots(ctx, {"flattened_patches": patches}, images=len(GRIDS))
        inputs = {"flattened_patches": patches, **masked_prompt(ctx, count, gen)}
    else:
        inputs = {"flattened_patches": patches, "attention_mask": mask, **decoder_inputs(ctx, gen)}
    sample = Sample(inputs=inputs, strategy="flattened_patches", media_keys=("flattened_patches",),
                    notes={"grids": GRIDS})
    pixel_part = mask.bool()[..., None].expand(patches.shape).clone()
    pixel_part[..., :POSITION_COLUMNS] = False
    return masked_media(sample, {"flattened_patches": pixel_part})
