"""Audio features into a decoder-only LM: `input_features` and audio placeholders.

The shape of Qwen2-Audio, Voxtral, AudioFlamingo, Granite Speech and most
speech LLMs: one (mel bins x frames) feature map per prompt, a frame mask
where the forward takes one, and each prompt's audio placeholder expanded to
the number of embeddings the model's own audio path emits for it. A forward
that also takes a raw-audio `padding_mask` (each audio's valid raw samples,
as the processors of chunked Whisper-window encoders return it) gets one
(`audio_media.raw_samples_mask`).
"""

from __future__ import annotations

import torch

from conformance.cases.samples import BATCH, TEXT_TOKENS, Sample, left_pad, pad_id, text_tokens
from conformance.cases.strategies import register
from conformance.cases.strategies.audio_media import (
    audio_placeholders,
    audio_token_id,
    feature_frames,
    feature_mask_key,
    frame_mask_consumed,
    mel_bins,
    raw_samples_mask,
    time_major,
)


def takes_audio_features(ctx) -> bool:
    return "input_features" in ctx.forward_params and "decoder_input_ids" not in ctx.forward_params


def feature_media(ctx, gen: torch.Generator) -> tuple[dict, torch.Tensor, int]:
    """`input_features`, its frame mask where the forward takes one, and the placeholder count.

    The features are mel-major (batch, mel, frames) or time-major, whichever
    the model's audio path accepts (frames differ from mel bins, so an
    encoder with fixed input channels accepts only one layout).
    """
    frames = feature_frames(ctx)
    features = torch.randn((BATCH, mel_bins(ctx), frames), generator=gen)
    mask = torch.ones((BATCH, frames), dtype=torch.long)
    key = feature_mask_key(ctx)
    key = key if key and frame_mask_consumed(ctx, key) else None
    raw = raw_samples_mask(ctx, frames)
    first_error = None
    for layout in (features, time_major(features)):
        media = {"input_features": layout, **({key: mask} if key else {}), **raw}
        try:
            return media, mask, audio_placeholders(ctx, media, audios=BATCH, frames_mask=mask)
        except Exception as exc:
            first_error = first_error or exc
    raise first_error


def prompts_with_audio(ctx, count: int, gen: torch.Generator) -> list[list[int]]:
    """Two prompts of different text, each: text, `count` audio placeholders, text."""
    token = audio_token_id(ctx)
    before, after = TEXT_TOKENS
    return [
        text_tokens(ctx.config, before - i, gen) + [token] * count + text_tokens(ctx.config, after + i, gen)
        for i in range(BATCH)
    ]


@register("audio_features", when=takes_audio_features, priority=60)
def audio_features(ctx) -> Sample:
    gen = ctx.generator()
    media, _, count = feature_media(ctx, gen)
    ids, attention = left_pad(prompts_with_audio(ctx, count, gen), pad_id(ctx.config))
    inputs = {"input_ids": ids, "attention_mask": attention, **media}
    return Sample(inputs=inputs, strategy="audio_features", media_keys=("input_features",),
                  notes={"placeholders": count})
