"""Speech encoder-decoder: audio into the encoder, text prompts into the decoder.

The shape of Whisper, Speech2Text, Canary and Moonshine: the encoder takes
mel features (`input_features`, batch x mel x frames, or time-major where the
encoder wants that: found by which layout the model accepts) or a raw waveform
(`input_values`, batch x samples) with a mask where the forward takes one;
the decoder takes `decoder_input_ids` starting with the decoder start token.
There are no placeholders: the decoder cross-attends to the encoder.
"""

from __future__ import annotations

import torch

from conformance.cases.samples import BATCH, Sample
from conformance.cases.strategies import register
from conformance.cases.strategies.audio_media import (
    feature_frames,
    feature_mask_key,
    first_that_runs,
    mel_bins,
    time_major,
    waveform_samples,
)
from conformance.cases.strategies.text import decoder_inputs

MASK_KEYS = ("attention_mask", "padding_mask")


def _is_seq2seq(ctx) -> bool:
    return "decoder_input_ids" in ctx.forward_params and "input_ids" not in ctx.forward_params


def takes_speech_features(ctx) -> bool:
    return _is_seq2seq(ctx) and "input_features" in ctx.forward_params


def takes_speech_waveform(ctx) -> bool:
    return _is_seq2seq(ctx) and "input_values" in ctx.forward_params


def _with_mask(ctx, media: dict, frames: int) -> dict:
    key = feature_mask_key(ctx) or next((k for k in MASK_KEYS if k in ctx.forward_params), None)
    if key:
        media[key] = torch.ones((BATCH, frames), dtype=torch.long)
    return media


@register("speech_features_seq2seq", when=takes_speech_features, priority=60)
def speech_features_seq2seq(ctx) -> Sample:
    gen = ctx.generator()
    frames = feature_frames(ctx)
    features = torch.randn((BATCH, mel_bins(ctx), frames), generator=gen)
    text = decoder_inputs(ctx, gen)
    candidates = [_with_mask(ctx, {"input_features": layout}, frames) | text
                  for layout in (features, time_major(features))]
    inputs = first_that_runs(ctx, candidates)
    return Sample(inputs=inputs, strategy="speech_features_seq2seq", media_keys=("input_features",))


@register("speech_waveform_seq2seq", when=takes_speech_waveform, priority=60)
def speech_waveform_seq2seq(ctx) -> Sample:
    gen = ctx.generator()
    samples = waveform_samples(ctx)
    media = {"input_values": torch.randn((BATCH, samples), generator=gen)}
    inputs = {**_with_mask(ctx, dict(media), samples), **decoder_inputs(ctx, gen)}
    return Sample(inputs=inputs, strategy="speech_waveform_seq2seq", media_keys=tuple(media))
