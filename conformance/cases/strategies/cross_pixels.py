"""Pixels without placeholders: the text attends to the image another way.

The shape of captioning and OCR models (BLIP, PP-FormulaNet, UDOP, ...):
the image is encoded separately and read by cross-attention or prepended by
the model itself, so `input_ids` carries no placeholder tokens. An
encoder-decoder gets `decoder_input_ids`; a forward that takes token boxes
(`bbox`, layout models) gets one box per token.
"""

from __future__ import annotations

import torch

from conformance.cases.samples import BATCH, Sample, left_pad, pad_id, text_tokens
from conformance.cases.strategies import register
from conformance.cases.strategies._media import channels, has_encoder_method, image_hw, pixels
from conformance.cases.strategies.text import decoder_inputs, is_encoder_decoder

BOX_SCALE = 1000  # layout models take boxes in [0, 1000]


def has_unplaced_pixels(ctx) -> bool:
    """Pixels in, but no image encoder method to size placeholders with."""
    return "pixel_values" in ctx.forward_params and not has_encoder_method(ctx.model)


def boxes(shape: tuple[int, int], gen: torch.Generator) -> torch.Tensor:
    """(batch, tokens, 4) boxes x0 <= x1, y0 <= y1 inside [0, BOX_SCALE]."""
    corners = torch.randint(0, BOX_SCALE + 1, (*shape, 2, 2), generator=gen)
    low, high = corners.min(dim=-2).values, corners.max(dim=-2).values
    return torch.cat([low, high], dim=-1)


@register("cross_pixels", when=has_unplaced_pixels, priority=60)
def cross_pixels(ctx) -> Sample:
    gen = ctx.generator()
    h, w = image_hw(ctx)
    rows = [text_tokens(ctx.config, n, gen) for n in (6, 9)]
    ids, mask = left_pad(rows, pad_id(ctx.config))
    media = {"pixel_values": pixels((BATCH, channels(ctx), h, w), gen)}
    inputs = {"input_ids": ids, "attention_mask": mask, **media}
    if "bbox" in ctx.forward_params:
        inputs["bbox"] = boxes(tuple(ids.shape), gen)
    if is_encoder_decoder(ctx):
        inputs.update(decoder_inputs(ctx, gen))
    return Sample(inputs=inputs, strategy="cross_pixels", media_keys=tuple(media))
