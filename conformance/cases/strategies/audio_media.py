"""Helpers shared by the audio strategies: feature shapes and placeholder counts.

Contract: sizes come from the recipe (``[samples] audio_length``) or the
model's config, never from a model name; `audio_placeholders` asks the
model's own audio path how many embeddings it emits per audio, so a prompt
carries exactly as many placeholder tokens as the model scatters features
into.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from conformance.cases.configs import first_int, with_sub_configs
from conformance.cases.samples import BATCH

DEFAULT_FRAMES = 64  # feature frames when neither recipe nor config says
DEFAULT_SAMPLES = 3200  # raw waveform samples when neither recipe nor config says
MEL_KEYS = ("num_mel_bins", "n_mels", "feature_size", "input_feat_per_channel", "input_dim", "num_mel_filters")
AUDIO_CONFIG_KEYS = ("audio_config", "encoder_config", "audio_encoder_config", "speech_config", "encoder")
TOKEN_KEYS = ("audio_token_id", "audio_token_index", "audio_token")
STACKED_FRAME_KEYS = ("num_stacked_frames", "lfr_m")
FEATURE_MASK_KEYS = ("input_features_mask", "feature_attention_mask")
# A per-audio mask of valid raw samples (not feature frames) beside `input_features`; an audio path that takes it
# only through **kwargs still gets it.
RAW_MASK_KEY = "padding_mask"
HOP_KEYS = ("hop_length",)
DEFAULT_HOP = 160  # raw samples per mel frame of the Whisper-style feature extractors (10 ms at 16 kHz)


def audio_config(config) -> Any:
    """The sub-config that describes the audio encoder (the config itself if none)."""
    for key in AUDIO_CONFIG_KEYS:
        sub = getattr(config, key, None)
        if sub is not None and not isinstance(sub, (int, str, bool, dict)):
            return sub
    return config


def _first_int(configs, keys) -> int | None:
    """The first positive int among `keys` (a count or a size)."""
    return first_int(configs, keys, minimum=1)


def mel_bins(ctx) -> int:
    """Feature channels per frame the audio encoder takes (searched in nested audio sub-configs too)."""
    configs = [*with_sub_configs(audio_config(ctx.config)), ctx.config]
    bins = _first_int(configs, MEL_KEYS)
    if bins is None:
        raise LookupError("config names no mel-bin count (num_mel_bins / feature_size / input_dim)")
    channels = _first_int(configs, ("input_channels",))
    if channels and "input_feat_per_channel" in ctx.config.to_dict():
        bins *= channels
    stacked = _first_int(configs, STACKED_FRAME_KEYS)  # low-frame-rate stacking: frames side by side
    return bins * stacked if stacked else bins


def feature_frames(ctx) -> int:
    """Frames per audio: recipe, else what a Whisper-style encoder requires, else a default.

    Encoders with learned source positions and two stride-2 convs require
    exactly ``2 * max_source_positions`` frames.
    """
    length = ctx.recipe.get("audio_length")
    if length:
        return int(length)
    positions = _first_int((audio_config(ctx.config), ctx.config), ("max_source_positions",))
    return 2 * positions if positions else DEFAULT_FRAMES


def waveform_samples(ctx) -> int:
    return int(ctx.recipe.get("audio_length") or DEFAULT_SAMPLES)


def audio_token_id(ctx) -> int:
    """The placeholder id the model scatters audio embeddings into."""
    for cfg in (ctx.config, ctx.vocabulary_config):
        for key in TOKEN_KEYS:
            value = getattr(cfg, key, None)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    raise LookupError("config names no audio placeholder token (audio_token_id / audio_token_index); "
                      "set one in fixtures/models/<model_type>.toml [config]")


def _numel(features: Any) -> int:
    if isinstance(features, torch.Tensor):
        return features.numel()
    if isinstance(features, (list, tuple)):
        return sum(_numel(f) for f in features)
    for attr in ("pooler_output", "last_hidden_state"):
        value = getattr(features, attr, None)
        if value is not None:
            return _numel(value)
    raise TypeError(f"cannot count audio features of type {type(features).__name__}")


def _owners(model: torch.nn.Module):
    return [m for m in (model, getattr(model, "model", None)) if m is not None]


def _audio_features_fn(model: torch.nn.Module):
    """The model's `get_audio_features` and its parameters (skipping *args/**kwargs wrappers)."""
    for owner in _owners(model):
        fn = getattr(owner, "get_audio_features", None)
        if fn is None:
            continue
        params = inspect.signature(fn).parameters
        if all(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params.values()):
            continue  # a thin wrapper: look at what it forwards to
        return fn, params
    return None, {}


def frame_mask_consumed(ctx, key: str) -> bool:
    """Whether a mask kwarg masks feature frames: the audio path takes it, or there is no audio path to ask.

    Where `get_audio_features` does not take the forward's mask, the forward
    applies it to the audio embeddings instead; the sample omits it (all valid).
    """
    fn, params = _audio_features_fn(ctx.model)
    return fn is None or key in params


def _call_audio_features(model: torch.nn.Module, media: dict[str, Any]) -> Any | None:
    fn, params = _audio_features_fn(model)
    if fn is not None:
        var_keyword = any(p.kind == p.VAR_KEYWORD for p in params.values())
        kwargs = {k: v for k, v in media.items() if k in params or (var_keyword and k == RAW_MASK_KEY)}
        required = {n for n, p in params.items()
                    if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
        if required - set(kwargs):
            return None  # it needs more than the media (e.g. the prompt): count another way
        with torch.no_grad():
            return fn(**kwargs)
    return None


def _output_lengths(model: torch.nn.Module, lengths: torch.Tensor) -> torch.Tensor | None:
    for owner in _owners(model):
        tower = getattr(owner, "audio_tower", None)
        fn = getattr(tower, "_get_feat_extract_output_lengths", None)
        if fn is not None:
            out = fn(lengths)
            return out[-1] if isinstance(out, tuple) else out
    return None


def audio_placeholders(ctx, media: dict[str, Any], audios: int, frames_mask: torch.Tensor | None) -> int:
    """Placeholder tokens per audio: what the model's own audio path emits.

    Calls the model's `get_audio_features` with the sample's media inputs and
    divides the number of values by the text width and the number of audios;
    without one, asks the audio tower's `_get_feat_extract_output_lengths`.
    """
    features = _call_audio_features(ctx.model, media)
    if features is not None:
        width = ctx.vocabulary_config.hidden_size
        total = _numel(features)
        if total % (width * audios):
            raise ValueError(f"audio features ({total} values) do not split into {audios} audios of width {width}")
        return total // (width * audios)
    if frames_mask is not None:
        lengths = _output_lengths(ctx.model, frames_mask.sum(-1))
        if lengths is not None:
            if len(set(lengths.tolist())) != 1:
                raise ValueError(f"audios of equal length give unequal output lengths {lengths.tolist()}")
            return int(lengths[0])
    raise LookupError("model has neither get_audio_features nor audio_tower._get_feat_extract_output_lengths")


def raw_samples_mask(ctx, frames: int) -> dict[str, torch.Tensor]:
    """`padding_mask` (audios, raw samples), all valid, where the forward takes one beside `input_features`.

    The processors of such models return each audio's valid raw-sample mask
    next to its mel features; a full window of `frames` feature frames is
    ``frames * hop`` raw samples (`hop_length` from the config, else the
    Whisper-style 160).
    """
    if RAW_MASK_KEY not in ctx.forward_params or "input_features" not in ctx.forward_params:
        return {}
    hop = _first_int((audio_config(ctx.config), ctx.config), HOP_KEYS) or DEFAULT_HOP
    return {RAW_MASK_KEY: torch.ones((BATCH, frames * hop), dtype=torch.long)}


def feature_mask_key(ctx) -> str | None:
    """Name of the forward kwarg that masks feature frames, if any."""
    return next((k for k in FEATURE_MASK_KEYS if k in ctx.forward_params), None)


def first_that_runs(ctx, candidates: list[dict[str, Any]]) -> dict[str, Any]:
    """The first candidate inputs the model's forward accepts (else the first).

    Used where a feature layout is a property of the model's encoder
    (mel-major ``(batch, mel, frames)`` vs time-major ``(batch, frames, mel)``):
    the frame count differs from the mel-bin count, so an encoder with fixed
    input channels accepts only one of the layouts.
    """
    for inputs in candidates:
        try:
            with torch.no_grad():
                ctx.model(**inputs)
            return inputs
        except Exception:
            continue
    return candidates[0]


def time_major(features: torch.Tensor) -> torch.Tensor:
    """(batch, mel, frames) -> (batch, frames, mel), contiguous."""
    return features.transpose(1, 2).contiguous()
