"""Plain images: `pixel_values` (images, channels, H, W) and placeholder tokens.

The shape of LLaVA, PaliGemma, Gemma3 and most single-image VLMs: one image
per prompt, each image's placeholder expanded to the number of features the
model's own vision path emits for it.

Also the prompt helpers every image strategy shares: placeholders wrapped in
the config's image start/end tokens where it names them, and
`mm_token_type_ids` (1 on image placeholders) where the forward takes them.
"""

from __future__ import annotations

import torch

from conformance.cases.samples import BATCH, TEXT_TOKENS, Sample, left_pad, pad_id, text_tokens
from conformance.cases.strategies import register
from conformance.cases.strategies._media import (
    channels,
    count_placeholders,
    image_hw,
    image_token_id,
    images_per_prompt,
    per_prompt,
    pixels,
    scaled,
    vision_value,
)
from conformance.cases.strategies.text import decoder_inputs, is_encoder_decoder

# Config attributes naming tokens a processor puts around an image's placeholders.
START_KEYS = ("vision_start_token_id", "image_start_token_id", "boi_token_id", "boi_token_index", "im_start_id")
END_KEYS = ("vision_end_token_id", "image_end_token_id", "eoi_token_id", "eoi_token_index", "im_end_id")


def has_images(ctx) -> bool:
    return "pixel_values" in ctx.forward_params


def _config_id(ctx, keys: tuple[str, ...]) -> int | None:
    for cfg in (ctx.config, ctx.vocabulary_config):
        for key in keys:
            value = getattr(cfg, key, None)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
    return None


def image_span(ctx, count: int, token: int | None = None) -> list[int]:
    """One image's tokens: [start] + `count` placeholders + [end] (start/end where named)."""
    token = image_token_id(ctx) if token is None else token
    start, end = _config_id(ctx, START_KEYS), _config_id(ctx, END_KEYS)
    return ([start] if start is not None else []) + [token] * count + ([end] if end is not None else [])


def prompts_with_placeholders(ctx, counts: int | list[list[int]], gen: torch.Generator,
                              token: int | None = None) -> list[list[int]]:
    """Two prompts of different text, each: text, its images' spans, text.

    `counts` is placeholders per image, either one int (one image per prompt)
    or a list per prompt of per-image counts.
    """
    if isinstance(counts, int):
        counts = [[counts]] * BATCH
    before, after = TEXT_TOKENS
    rows = []
    for i, row_counts in enumerate(counts):
        spans = [t for c in row_counts for t in image_span(ctx, c, token)]
        rows.append(text_tokens(ctx.config, before - i, gen) + spans + text_tokens(ctx.config, after + i, gen))
    return rows


def token_types(ctx, ids: torch.Tensor, type_by_token: dict[int, int]) -> torch.Tensor:
    """`mm_token_type_ids`: the modality type of each placeholder token, 0 for text."""
    types = torch.zeros_like(ids)
    for token, kind in type_by_token.items():
        types[ids == token] = kind
    return types


def assemble(ctx, media: dict, counts, gen: torch.Generator, strategy: str, token: int | None = None,
             token_type: int = 1, **extra) -> Sample:
    """input_ids/attention_mask around the media; `mm_token_type_ids` where the forward takes
    them; `decoder_input_ids` for an encoder-decoder."""
    token = image_token_id(ctx) if token is None else token
    rows = prompts_with_placeholders(ctx, counts, gen, token)
    ids, mask = left_pad(rows, pad_id(ctx.config))
    inputs = {"input_ids": ids, "attention_mask": mask, **media, **extra}
    if "mm_token_type_ids" in ctx.forward_params:
        inputs["mm_token_type_ids"] = token_types(ctx, ids, {token: token_type})
    if is_encoder_decoder(ctx) and "decoder_input_ids" in ctx.forward_params:
        inputs.update(decoder_inputs(ctx, gen))
    return Sample(inputs=inputs, strategy=strategy, media_keys=tuple(media), notes={"placeholders": counts})


def pixel_layouts(ctx, images: int = BATCH) -> list[tuple[int, ...]]:
    """Candidate pixel shapes, most common first: (images, C, H, W), then one
    channels-last clip of T frames of one patch per image (folding encoders)."""
    h, w = scaled(ctx, *image_hw(ctx))
    c = channels(ctx)
    p = vision_value(ctx, ("patch_size",), h)
    p = int(p[0] if isinstance(p, (list, tuple)) else p)
    t = int(vision_value(ctx, ("temporal_patch_size",), 1) or 1)
    return list(dict.fromkeys([(images, c, h, w), (images, t, p, p, c)]))


@register("pixels", when=has_images, priority=90)
def plain_pixels(ctx) -> Sample:
    n = images_per_prompt(ctx)
    errors = []
    for shape in pixel_layouts(ctx, BATCH * n):
        gen = ctx.generator()
        media = {"pixel_values": pixels(shape, gen)}
        try:
            count = count_placeholders(ctx, media, images=BATCH * n)
        except Exception as exc:  # not this encoder's layout; try the next
            errors.append(exc)
            continue
        return assemble(ctx, media, per_prompt(count, n), gen, "pixels")
    raise errors[0]
