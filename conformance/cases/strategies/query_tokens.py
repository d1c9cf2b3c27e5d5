"""Learned query tokens: pixels + `qformer_input_ids`, one placeholder per query output.

The BLIP-2 / InstructBLIP shape: a Q-Former turns each image into
`num_query_tokens` vectors (InstructBLIP conditions it on its own text,
`qformer_input_ids`); in 5.x those vectors replace image placeholder tokens
in `input_ids`. The video variant does the same per frame, its features
coming from `get_video_features` and its placeholder being the video token.
"""

from __future__ import annotations

import torch

from conformance.cases.samples import BATCH, Sample
from conformance.cases.strategies import register
from conformance.cases.strategies._media import (
    channels,
    count_placeholders,
    has_encoder_method,
    image_hw,
    image_token_id,
    pixels,
)
from conformance.cases.strategies.pixels import assemble

QFORMER_TOKENS = 4
FRAMES = 2


def uses_query_tokens(ctx) -> bool:
    return "pixel_values" in ctx.forward_params and hasattr(ctx.config, "num_query_tokens")


def qformer_inputs(ctx, gen: torch.Generator) -> dict:
    if "qformer_input_ids" not in ctx.forward_params:
        return {}
    vocab = getattr(getattr(ctx.config, "qformer_config", None), "vocab_size", 100)
    ids = torch.randint(3, min(vocab, 100), (BATCH, QFORMER_TOKENS), generator=gen)
    return {"qformer_input_ids": ids, "qformer_attention_mask": torch.ones_like(ids)}


def is_video_model(ctx) -> bool:
    """Frames through `get_video_features`: the model has that method and no image encoder, or its config
    names a video placeholder and no image one (transformers 4.57's InstructBLIP-Video keeps an empty
    `get_image_features` stub that returns None next to its real `get_video_features`)."""
    if not has_encoder_method(ctx.model, "get_video_features"):
        return False
    if not has_encoder_method(ctx.model):
        return True
    names = set(ctx.config.to_dict())
    return bool(names & {"video_token_id", "video_token_index"}) and not names & {"image_token_id", "image_token_index"}


@register("query_tokens", when=uses_query_tokens, priority=30)
def query_tokens(ctx) -> Sample:
    gen = ctx.generator()
    h, w = image_hw(ctx)
    video = is_video_model(ctx)
    frames = int(ctx.recipe.get("frames", FRAMES)) if video else 1
    shape = (BATCH, frames, channels(ctx), h, w) if video else (BATCH, channels(ctx), h, w)
    media = {"pixel_values": pixels(shape, gen)}
    qformer = qformer_inputs(ctx, gen)
    method = "get_video_features" if video else "get_image_features"
    count = count_placeholders(ctx, {**media, **qformer}, images=BATCH, method=method)
    names = ("video_token_id", "video_token_index") if video else ("image_token_id", "image_token_index")
    token = image_token_id(ctx, names)
    return assemble(ctx, media, count, gen, "query_tokens", token=token, **qformer)
