"""Native-resolution patch sequences: `pixel_values` (images, max patches, C*P*P) + `spatial_shapes` + a patch mask.

The SigLIP2 "naflex" shape (LFM2-VL): each image keeps its aspect ratio as
a rows x cols grid of patches, flattened row by row into one sequence of
patch vectors; the sequences are padded with zero patches to the longest,
`spatial_shapes` (images, 2) gives each image's (rows, cols) and
`pixel_attention_mask` (images, max patches) marks the real patches. Grids
are multiples of the model's downsample factor (its projector merges
factor x factor patches); the two sample images have different grids, so
the first one is padded. Placeholder counts come from the model's encoder.
"""

from __future__ import annotations

import torch

from conformance.cases.samples import BATCH, Sample
from conformance.cases.strategies import register
from conformance.cases.strategies._media import channels, count_placeholders, masked_media, pixels, vision_value
from conformance.cases.strategies.pixels import assemble

GRIDS_IN_BLOCKS = ((1, 2), (2, 2))  # per image, (rows, cols) in downsample blocks; the first gets padding
FACTOR_KEYS = ("downsample_factor", "spatial_merge_size", "merge_size")


def takes_patch_sequences(ctx) -> bool:
    return {"pixel_values", "spatial_shapes", "pixel_attention_mask"} <= ctx.forward_params


def grids(ctx) -> list[tuple[int, int]]:
    factor = int(vision_value(ctx, FACTOR_KEYS, 1) or 1)
    return [(rows * factor, cols * factor) for rows, cols in GRIDS_IN_BLOCKS][:BATCH]


def patch_sequences(grid_shapes, width: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(pixels, mask): zero-padded (images, max patches, width) patch rows and the real-patch mask."""
    longest = max(r * c for r, c in grid_shapes)
    values = torch.zeros((len(grid_shapes), longest, width))
    mask = torch.zeros((len(grid_shapes), longest), dtype=torch.long)
    for i, (rows, cols) in enumerate(grid_shapes):
        values[i, : rows * cols] = pixels((rows * cols, width), gen)
        mask[i, : rows * cols] = 1
    return values, mask


@register("patch_sequences", when=takes_patch_sequences, priority=30)
def patch_sequences_sample(ctx) -> Sample:
    gen = ctx.generator()
    p = vision_value(ctx, ("patch_size",), 16)
    p = int(p[0] if isinstance(p, (list, tuple)) else p)
    shapes = grids(ctx)
    values, mask = patch_sequences(shapes, channels(ctx) * p * p, gen)
    side = {"spatial_shapes": torch.tensor(shapes, dtype=torch.long), "pixel_attention_mask": mask}
    media = {"pixel_values": values}
    counts = []
    for i in range(BATCH):  # images differ in size: count each one's features alone
        one = {"pixel_values": values[i:i + 1], "spatial_shapes": side["spatial_shapes"][i:i + 1],
               "pixel_attention_mask": mask[i:i + 1]}
        counts.append([count_placeholders(ctx, one, images=1)])
    sample = assemble(ctx, media, counts, gen, "patch_sequences", **side)
    sample.notes["grids"] = shapes
    return masked_media(sample, {"pixel_values": mask.bool()[..., None].expand(values.shape)})
