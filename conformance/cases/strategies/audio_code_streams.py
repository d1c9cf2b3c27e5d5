"""Text and audio-code streams side by side in one `input_ids` (batch, seq, 1 + codebooks).

The shape of streaming speech-to-text LMs over a neural codec (Kyutai STT):
column 0 is the text stream, columns 1..K the codec's codebook indices at
the same time step; left padding fills the text column with the pad id and
the code columns with the audio pad id. The codes are integers, so they are
not perturbable media (`Sample.perturbed` changes floating tensors only):
the sample has no media keys and `build` checks the forward and finite logits.
"""

from __future__ import annotations

import torch

from conformance.cases.samples import BATCH, PAD_LEFT, Sample, pad_id, text_tokens
from conformance.cases.strategies import register

STEPS = (6, 9)  # time steps of the two prompts


def has_code_streams(ctx) -> bool:
    config = ctx.config
    return ("decoder_input_ids" not in ctx.forward_params and "input_values" not in ctx.forward_params
            and all(isinstance(getattr(config, k, None), int)
                    for k in ("num_codebooks", "codebook_vocab_size", "audio_pad_token_id")))


@register("audio_code_streams", when=has_code_streams, priority=55)
def audio_code_streams(ctx) -> Sample:
    config = ctx.config
    gen = ctx.generator()
    codebooks, codes = config.num_codebooks, config.codebook_vocab_size
    width = max(max(STEPS), STEPS[0] + PAD_LEFT)
    ids = torch.full((BATCH, width, 1 + codebooks), config.audio_pad_token_id, dtype=torch.long)
    ids[:, :, 0] = pad_id(config)
    mask = torch.zeros((BATCH, width), dtype=torch.long)
    for row, steps in enumerate(STEPS):
        ids[row, width - steps:, 0] = torch.tensor(text_tokens(config, steps, gen))
        ids[row, width - steps:, 1:] = torch.randint(0, codes - 1, (steps, codebooks), generator=gen)
        mask[row, width - steps:] = 1
    return Sample(inputs={"input_ids": ids, "attention_mask": mask}, strategy="audio_code_streams")
