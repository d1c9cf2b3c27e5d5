"""Plain images: `pixel_values` (images, channels, H, W) and placeholder tokens.

The shape of LLaVA, PaliGemma, Gemma3 and most single-image VLMs: one image
per prompt, each image's placeholder expanded to the number of features the
model's own vision path emits for it.
"""

from __future__ import annotations

import torch

from conformance.samples import BATCH, TEXT_TOKENS, Sample, left_pad, pad_id, text_tokens
from conformance.strategies import register
from conformance.strategies._media import channels, count_placeholders, image_hw, image_token_id, pixels


def has_images(ctx) -> bool:
    return "pixel_values" in ctx.forward_params


def prompts_with_placeholders(ctx, count: int, gen: torch.Generator) -> list[list[int]]:
    """Two prompts of different text, each: text, `count` placeholders, text."""
    image = image_token_id(ctx)
    before, after = TEXT_TOKENS
    return [
        text_tokens(ctx.config, before - i, gen) + [image] * count + text_tokens(ctx.config, after + i, gen)
        for i in range(BATCH)
    ]


def assemble(ctx, media: dict, count: int, gen: torch.Generator, strategy: str, **extra) -> Sample:
    rows = prompts_with_placeholders(ctx, count, gen)
    ids, mask = left_pad(rows, pad_id(ctx.config))
    inputs = {"input_ids": ids, "attention_mask": mask, **media, **extra}
    return Sample(inputs=inputs, strategy=strategy, media_keys=tuple(media), notes={"placeholders": count})


@register("pixels", when=has_images, priority=90)
def plain_pixels(ctx) -> Sample:
    gen = ctx.generator()
    h, w = image_hw(ctx)
    media = {"pixel_values": pixels((BATCH, channels(ctx), h, w), gen)}
    count = count_placeholders(ctx, media, images=BATCH)
    return assemble(ctx, media, count, gen, "pixels")
