"""Image features placed by a position mask: pixels + `image_embeds_position_mask`.

The Kosmos-2 shape: the prompt reserves one position per image feature
vector, and `image_embeds_position_mask` (batch, seq) marks those positions
(1) instead of a placeholder token id; the model writes the image features
over the embeddings there. The reserved positions hold the config's image
token where it names one, else ordinary text ids (the mask, not the id, is
what the model reads). How many positions: what the model's encoder emits
(`count_slots`).
"""

from __future__ import annotations

import torch

from conformance.cases.samples import BATCH, TEXT_TOKENS, Sample, left_pad, pad_id, text_tokens
from conformance.cases.strategies import register
from conformance.cases.strategies._media import (
    channels,
    count_handed_on,
    count_placeholders,
    image_hw,
    image_token_id,
    pixels,
)

MASK = "image_embeds_position_mask"


def takes_position_mask(ctx) -> bool:
    return {"pixel_values", MASK} <= ctx.forward_params


def reserved_ids(ctx, count: int, gen: torch.Generator) -> list[int]:
    try:
        return [image_token_id(ctx)] * count
    except LookupError:
        return text_tokens(ctx.config, count, gen)


def masked_prompt(ctx, count: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Two left-padded prompts reserving `count` positions each, and the mask marking them."""
    before, after = TEXT_TOKENS
    rows, marks = [], []
    for i in range(BATCH):
        head, tail = text_tokens(ctx.config, before - i, gen), text_tokens(ctx.config, after + i, gen)
        rows.append(head + reserved_ids(ctx, count, gen) + tail)
        marks.append([0] * len(head) + [1] * count + [0] * len(tail))
    ids, attention = left_pad(rows, pad_id(ctx.config))
    placed, _ = left_pad(marks, 0)
    return {"input_ids": ids, "attention_mask": attention, MASK: placed.bool()}


def count_slots(ctx, media: dict[str, torch.Tensor], images: int) -> int:
    """Reserved positions per image: what the model's encoder emits.

    From the model's `get_image_features`; a model without one (Kosmos-2 up
    to transformers 5.23) is probed: its forward runs on the media and an
    empty mask until it hands the image features on (`count_handed_on`).
    """
    try:
        return count_placeholders(ctx, media, images=images)
    except LookupError:
        ids = torch.full((images, 1), pad_id(ctx.config), dtype=torch.long)
        probe = {**media, "input_ids": ids, "attention_mask": torch.ones_like(ids), MASK: torch.zeros_like(ids).bool()}
        return count_handed_on(ctx, {k: v for k, v in probe.items() if k in ctx.forward_params}, images)


@register("position_mask", when=takes_position_mask, priority=25)
def position_mask(ctx) -> Sample:
    gen = ctx.generator()
    h, w = image_hw(ctx)
    media = {"pixel_values": pixels((BATCH, channels(ctx), h, w), gen)}
    count = count_slots(ctx, media, images=BATCH)
    inputs = {**masked_prompt(ctx, count, gen), **media}
    return Sample(inputs=inputs, strategy="position_mask", media_keys=tuple(media), notes={"placeholders": count})
