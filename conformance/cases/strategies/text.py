"""Text-only prompts: decoder-only, or encoder-decoder with decoder inputs."""

from __future__ import annotations

import torch

from conformance.cases.configs import vocabulary_config
from conformance.cases.samples import BATCH, Sample, left_pad, pad_id, text_tokens
from conformance.cases.strategies import register

DECODER_START = 2  # decoder tokens given to an encoder-decoder prefill


def decoder_inputs(ctx, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """decoder_input_ids starting with the config's decoder start token."""
    config = ctx.config
    start = getattr(config, "decoder_start_token_id", None)
    if start is None:
        start = getattr(vocabulary_config(config), "decoder_start_token_id", None)
    if start is None:
        start = pad_id(config)
    rows = [[start] + text_tokens(config, DECODER_START, gen) for _ in range(BATCH)]
    return {"decoder_input_ids": torch.tensor(rows, dtype=torch.long)}


def is_encoder_decoder(ctx) -> bool:
    """Whether the model (or the language model it wraps, e.g. BLIP-2 over T5) is an encoder-decoder.

    A forward that merely accepts `decoder_input_ids` is not enough: BLIP-2
    accepts them for its T5 variants and must not get them over OPT.
    """
    return any(bool(getattr(cfg, "is_encoder_decoder", False)) for cfg in (ctx.config, vocabulary_config(ctx.config)))


@register("text")
def text(ctx) -> Sample:
    gen = ctx.generator()
    rows = [text_tokens(ctx.config, n, gen) for n in (6, 9)]
    ids, mask = left_pad(rows, pad_id(ctx.config))
    inputs = {"input_ids": ids, "attention_mask": mask}
    if is_encoder_decoder(ctx):
        inputs.update(decoder_inputs(ctx, gen))
    return Sample(inputs=inputs, strategy="text")
