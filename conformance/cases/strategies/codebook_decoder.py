"""Audio codes into the decoder: `decoder_input_ids` of (batch * codebooks, steps).

The shape of text-to-audio encoder-decoders over a neural codec's residual
codebooks (MusicGen, MusicGen-Melody, Dia): an encoder reads the text prompt
(`input_ids` + `attention_mask`, the first prompt left padded, in the
encoder's own vocabulary); the decoder reads K parallel codebook streams,
flattened into the batch dimension batch-major (row ``b * K + k`` is codebook
``k`` of prompt ``b``, the layout these models document and reshape), each
starting with the decoder start token and followed by codes of the codebook
vocabulary (never a special id). K is the decoder config's `num_codebooks`
(or its `num_channels`). Where the model rejects the flattened layout, the
other layout these models document, (batch, steps, codebooks), is used (the
rejection is kept in the sample's notes: a model that documents the flat
layout and fails on it has a bug of its own).

A model that also takes a conditioning feature sequence (`input_features`,
batch x frames x channels, the channel count named by the config: a
melody's chroma) gets one; it is the sample's media input, so `build`
checks that changing it moves the logits. Without it the codes are the only
audio input, integers, so the sample has no media keys and `build` checks
the forward and finite logits. Selected by fixture data
(``[samples] strategy = "codebook_decoder"``).
"""

from __future__ import annotations

import torch

from conformance.cases.configs import first_int, vocabulary_config
from conformance.cases.samples import BATCH, Sample, left_pad, special_ids
from conformance.cases.strategies import register

CODEBOOK_KEYS = ("num_codebooks", "num_channels")
CONDITIONING_CHANNEL_KEYS = ("num_chroma",)
START_KEYS = ("decoder_start_token_id", "bos_token_id")
ENCODER_KEYS = ("text_encoder", "encoder_config", "encoder")
PROMPTS = (6, 9)  # encoder text tokens of the two prompts
CODE_STEPS = 2  # codes after the start token in each stream
CONDITIONING_FRAMES = 8


def codebooks(config) -> int:
    """K: the decoder's number of parallel codebook streams."""
    value = first_int((vocabulary_config(config),), CODEBOOK_KEYS, minimum=1)
    if value:
        return value
    raise LookupError(f"the decoder config names no codebook count ({' / '.join(CODEBOOK_KEYS)})")


def encoder_config(config):
    """The config of the text encoder (its own vocabulary and pad id)."""
    decoder = vocabulary_config(config)
    try:
        found = config.get_text_config(encoder=True)
        if found is not decoder:
            return found
    except (TypeError, ValueError):
        pass
    for key in ENCODER_KEYS:
        sub = getattr(config, key, None)
        if sub is not None and first_int((sub,), ("vocab_size",), minimum=1):
            return sub
    raise LookupError(f"config names no text encoder sub-config ({' / '.join(ENCODER_KEYS)})")


def start_token(config) -> int:
    value = first_int((config, vocabulary_config(config)), START_KEYS)
    if value is not None:
        return value
    raise LookupError("config names no decoder start token (decoder_start_token_id / bos_token_id)")


def code_pool(config) -> list[int]:
    """Codes of the codebook vocabulary: the decoder's ids, special ids left out."""
    decoder = vocabulary_config(config)
    reserved = special_ids(decoder)
    return [t for t in range(decoder.vocab_size) if t not in reserved]


def encoder_prompts(config, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    encoder = encoder_config(config)
    reserved = special_ids(encoder) | special_ids(config)
    pool = [t for t in range(3, min(encoder.vocab_size, 200)) if t not in reserved]
    rows = [[pool[i] for i in torch.randint(0, len(pool), (n,), generator=gen).tolist()] for n in PROMPTS]
    pad = first_int((encoder,), ("pad_token_id",))
    return left_pad(rows, pad if pad is not None else 0)


def code_streams(config, gen: torch.Generator) -> torch.Tensor:
    """(BATCH * K, 1 + CODE_STEPS): each stream is the start token, then codes."""
    k = codebooks(config)
    pool = code_pool(config)
    picks = torch.randint(0, len(pool), (BATCH * k, CODE_STEPS), generator=gen)
    codes = torch.tensor(pool)[picks]
    start = torch.full((BATCH * k, 1), start_token(config), dtype=torch.long)
    return torch.cat([start, codes], dim=1)


def conditioning_channels(config) -> int | None:
    return first_int((config,), CONDITIONING_CHANNEL_KEYS, minimum=1)


def steps_last(streams: torch.Tensor, k: int) -> torch.Tensor:
    """(batch * K, steps) batch-major -> (batch, steps, K)."""
    return streams.reshape(-1, k, streams.shape[-1]).transpose(1, 2).contiguous()


@register("codebook_decoder")
def codebook_decoder(ctx) -> Sample:
    gen = ctx.generator()
    ids, mask = encoder_prompts(ctx.config, gen)
    k = codebooks(ctx.config)
    streams = code_streams(ctx.config, gen)
    inputs = {"input_ids": ids, "attention_mask": mask, "decoder_input_ids": streams}
    media: tuple[str, ...] = ()
    channels = conditioning_channels(ctx.config)
    if channels and "input_features" in ctx.forward_params:
        inputs["input_features"] = torch.randn((BATCH, CONDITIONING_FRAMES, channels), generator=gen)
        media = ("input_features",)
    notes = {"codebooks": k, "layout": "(batch * codebooks, steps)"}
    try:
        with torch.no_grad():
            ctx.model(**inputs)
    except Exception as exc:  # the model rejects the flat layout: its other documented layout
        notes.update(layout="(batch, steps, codebooks)", flat_layout_error=f"{type(exc).__name__}: {exc}"[:300])
        inputs["decoder_input_ids"] = steps_last(streams, k)
    return Sample(inputs=inputs, strategy="codebook_decoder", media_keys=media, notes=notes)
