"""Text prompts that end at the first audio position: what a continuous-latent text-to-speech `generate` takes.

The Pocket TTS shape: the processor writes the text, then `audio_bos_token_id`,
the position the first audio frame is generated from; rows are left-padded so
that every row ends there (its `generate` refuses any other prompt). No voice
prompt: the model then speaks in its default voice.
"""

from __future__ import annotations

from conformance.cases.samples import Sample, left_pad, pad_id, text_tokens
from conformance.cases.strategies import register


@register("speech_start")
def speech_start(ctx) -> Sample:
    start = ctx.config.audio_bos_token_id
    gen = ctx.generator()
    rows = [text_tokens(ctx.config, n, gen) + [start] for n in (6, 9)]
    ids, mask = left_pad(rows, pad_id(ctx.config))
    return Sample(inputs={"input_ids": ids, "attention_mask": mask}, strategy="speech_start")
