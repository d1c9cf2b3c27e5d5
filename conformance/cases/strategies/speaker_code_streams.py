"""A text stream beside per-speaker audio code streams: `input_ids` (batch, steps) and, for each
`*audio_codes` forward input, codes of shape (batch, codebooks, steps).

The shape of full-duplex speech LMs over a neural codec (Moshi): at every
time step the model reads one text token and, for each audio stream (the
model's own voice, the user's), one code per codebook; the streams are
time-aligned with the text. Left padding fills the text with the pad id
and masks the position; the audio streams hold ordinary codes there too (a
batch of clips is padded in time as audio, so its codes stay codes: the id
past the codebook vocabulary, ``audio_vocab_size``, is the models' internal
delay-pattern fill, which their generate filters out, not user padding).
Codes are drawn from the codebook vocabulary.

The codes are integers, not perturbable media (`Sample.perturbed` changes
floating tensors only): the sample has no media keys and `build` checks the
forward and finite logits. Auto-selected for a forward that takes
``*_audio_codes`` inputs when the config names `num_codebooks` and
`audio_vocab_size`.
"""

from __future__ import annotations

import torch

from conformance.cases.configs import first_int
from conformance.cases.samples import BATCH, PAD_LEFT, Sample, pad_id, text_tokens
from conformance.cases.strategies import register

STEPS = (6, 9)  # time steps of the two prompts
CODES_SUFFIX = "audio_codes"


def code_keys(ctx) -> list[str]:
    return sorted(p for p in ctx.forward_params if p.endswith(CODES_SUFFIX))


def _int(config, key: str) -> int | None:
    return first_int((config,), (key,), minimum=1)


def takes_speaker_codes(ctx) -> bool:
    return (bool(code_keys(ctx)) and "input_ids" in ctx.forward_params
            and all(_int(ctx.config, k) for k in ("num_codebooks", "audio_vocab_size")))


@register("speaker_code_streams", when=takes_speaker_codes, priority=55)
def speaker_code_streams(ctx) -> Sample:
    config = ctx.config
    gen = ctx.generator()
    codebooks, vocab = _int(config, "num_codebooks"), _int(config, "audio_vocab_size")
    width = max(max(STEPS), STEPS[0] + PAD_LEFT)
    ids = torch.full((BATCH, width), pad_id(config), dtype=torch.long)
    mask = torch.zeros((BATCH, width), dtype=torch.long)
    streams = {key: torch.randint(0, vocab, (BATCH, codebooks, width), generator=gen) for key in code_keys(ctx)}
    for row, steps in enumerate(STEPS):
        ids[row, width - steps:] = torch.tensor(text_tokens(config, steps, gen))
        mask[row, width - steps:] = 1
    return Sample(inputs={"input_ids": ids, "attention_mask": mask, **streams}, strategy="speaker_code_streams",
                  notes={"codebooks": codebooks, "streams": list(streams)})
