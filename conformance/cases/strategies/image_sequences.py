"""Image sequences with a pixel mask: `pixel_values` (batch, images, C, H, W) + `pixel_attention_mask`.

The Idefics2/3 and SmolVLM shape: each prompt carries a padded sequence of
images (crops of one image, or several images), and `pixel_attention_mask`
(batch, images, H, W) marks the real pixels (or (batch, images) the real
images, for encoders that mask whole tiles; the model's encoder tells which). The sample gives each prompt one
full image, every pixel real.
"""

from __future__ import annotations

import torch

from conformance.cases.samples import BATCH, Sample
from conformance.cases.strategies import register
from conformance.cases.strategies._media import (
    channels,
    count_placeholders,
    image_hw,
    images_per_prompt,
    pixels,
    scaled,
)
from conformance.cases.strategies.pixels import assemble

IMAGES_PER_PROMPT = 1


def takes_image_sequences(ctx) -> bool:
    params = ctx.forward_params
    return "pixel_attention_mask" in params and "spatial_shapes" not in params


def _masks(n: int, h: int, w: int) -> list[torch.Tensor]:
    """Real-pixel masks: per pixel (batch, images, H, W), else per image (batch, images)."""
    return [torch.ones((BATCH, n, h, w), dtype=torch.bool), torch.ones((BATCH, n), dtype=torch.bool)]


@register("image_sequences", when=takes_image_sequences, priority=40)
def image_sequences(ctx) -> Sample:
    h, w = scaled(ctx, *image_hw(ctx))
    n = images_per_prompt(ctx, IMAGES_PER_PROMPT)
    errors = []
    for mask in _masks(n, h, w):
        gen = ctx.generator()
        media = {"pixel_values": pixels((BATCH, n, channels(ctx), h, w), gen)}
        try:
            count = count_placeholders(ctx, {**media, "pixel_attention_mask": mask}, images=BATCH * n)
        except Exception as exc:  # the encoder wants the other mask granularity
            errors.append(exc)
            continue
        return assemble(ctx, media, [[count] * n] * BATCH, gen, "image_sequences", pixel_attention_mask=mask)
    raise errors[0]
