"""Images packed into one strip of patches: `pixel_values` (1, C, P, patches*P) + `target_sizes`.

The MiniCPM-V (NaViT-packed) shape: every image is cut into a rows x cols
grid of P x P patches, the patches of all images are laid side by side
(row-major within an image, image after image) into one strip of height P,
and `target_sizes` (images, 2) gives each image's (rows, cols) in patches.
Grids are multiples of 4 patches a side: such encoders merge 2 x 2 windows
and then 2 x 2 tokens. The two sample images have different grids;
placeholder counts come from the model's encoder, one image at a time.
"""

from __future__ import annotations

import torch

from conformance.cases.samples import BATCH, Sample
from conformance.cases.strategies import register
from conformance.cases.strategies._media import channels, count_placeholders, pixels, vision_value
from conformance.cases.strategies.pixels import assemble

GRIDS = ((4, 4), (4, 8))  # (rows, cols) in patches of the two sample images


def takes_target_sizes(ctx) -> bool:
    return {"pixel_values", "target_sizes"} <= ctx.forward_params


def strip(ctx, patches: int, gen: torch.Generator) -> torch.Tensor:
    p = vision_value(ctx, ("patch_size",), 14)
    p = int(p[0] if isinstance(p, (list, tuple)) else p)
    return pixels((1, channels(ctx), p, patches * p), gen)


@register("patch_strip", when=takes_target_sizes, priority=30)
def patch_strip(ctx) -> Sample:
    gen = ctx.generator()
    grids = GRIDS[:BATCH]
    strips = [strip(ctx, rows * cols, gen) for rows, cols in grids]
    sizes = torch.tensor(grids, dtype=torch.int32)
    counts = [[count_placeholders(ctx, {"pixel_values": s, "target_sizes": sizes[i:i + 1]}, images=1)]
              for i, s in enumerate(strips)]
    media = {"pixel_values": torch.cat(strips, dim=-1)}
    sample = assemble(ctx, media, counts, gen, "patch_strip", target_sizes=sizes)
    sample.notes["grids"] = grids
    return sample
