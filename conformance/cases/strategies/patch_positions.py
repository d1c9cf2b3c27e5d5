"""Patches with explicit 2-D positions: `pixel_values` (images, max patches, C*P*P) + `image_position_ids`.

The Gemma 4 shape: each image keeps its aspect ratio as a rows x cols grid
of P x P patches, flattened row by row into patch vectors; the sequences are
padded to the longest, and `image_position_ids` (images, max patches, 2)
gives each patch's (x, y) = (column, row), (-1, -1) for padding. The
encoder pools k x k patches into one soft token (`pooling_kernel_size`), so
grids are multiples of k. An encoder whose config names a `model_patch_size`
takes patches already merged to that size (Gemma 4 unified): then each patch
is one soft token and k is 1. The two sample images have different grids, so
the first is padded; placeholder counts come from the model's encoder.
"""

from __future__ import annotations

import torch

from conformance.cases.samples import BATCH, Sample
from conformance.cases.strategies import register
from conformance.cases.strategies._media import channels, count_placeholders, masked_media, pixels, vision_value
from conformance.cases.strategies.pixels import assemble

GRIDS_IN_POOLS = ((1, 2), (2, 2))  # per image, (rows, cols) in pooling blocks; the first gets padding
PADDING = -1


def takes_patch_positions(ctx) -> bool:
    return {"pixel_values", "image_position_ids"} <= ctx.forward_params


def positioned_patches(grids, width: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(pixels, positions): zero-padded patch rows and their (x, y) ids, (-1, -1) on padding."""
    longest = max(r * c for r, c in grids)
    values = torch.zeros((len(grids), longest, width))
    positions = torch.full((len(grids), longest, 2), PADDING, dtype=torch.long)
    for i, (rows, cols) in enumerate(grids):
        n = rows * cols
        index = torch.arange(n)
        values[i, :n] = pixels((n, width), gen)
        positions[i, :n, 0] = index % cols
        positions[i, :n, 1] = index // cols
    return values, positions


def patch_geometry(ctx) -> tuple[int, int]:
    """(k, P): patches per pooled token side, and the pixel size of one input patch."""
    merged = vision_value(ctx, ("model_patch_size",))
    if merged:
        return 1, int(merged)
    p = vision_value(ctx, ("patch_size",), 16)
    p = int(p[0] if isinstance(p, (list, tuple)) else p)
    return int(vision_value(ctx, ("pooling_kernel_size",), 1) or 1), p


@register("patch_positions", when=takes_patch_positions, priority=30)
def patch_positions(ctx) -> Sample:
    gen = ctx.generator()
    k, p = patch_geometry(ctx)
    grids = [(rows * k, cols * k) for rows, cols in GRIDS_IN_POOLS][:BATCH]
    values, positions = positioned_patches(grids, channels(ctx) * p * p, gen)
    counts = [[count_placeholders(ctx, {"pixel_values": values[i:i + 1], "image_position_ids": positions[i:i + 1]},
                                  images=1)] for i in range(BATCH)]
    sample = assemble(ctx, {"pixel_values": values}, counts, gen, "patch_positions", image_position_ids=positions)
    sample.notes["grids"] = grids
    real = (positions != PADDING).all(dim=-1)
    return masked_media(sample, {"pixel_values": real[..., None].expand(values.shape)})
