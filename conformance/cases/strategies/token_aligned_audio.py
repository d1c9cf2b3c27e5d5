"""Audio summed onto the tokens: `input_features` whose embeddings are added one per prompt position.

The shape of streaming speech LMs (Voxtral Realtime): the prompt has no audio
placeholder; the audio encoder emits one embedding per text position
(``audio_length_per_tok`` feature frames each), which the model adds to that
position's token embedding. Both prompts are left padded to one width W and
each clip is W positions long (mel-major, batch x mel bins x W * frames per
token); the audio under a prompt's padding is masked out with it, as the
attention mask covers both. The embedding count per clip is cross-checked
against the model's own `get_audio_features` (it must equal W). The features
are the sample's media input.

Such a model's generate runs on for as long as the audio lasts (it stops at
the clip's end), so `generate` gets the same prompts with clips
`GENERATE_POSITIONS` positions longer (`Sample.generate_inputs`): the
prefill reads the prompt's part, each new token the next part. Selected by
fixture data (``[samples] strategy = "token_aligned_audio"``).
"""

from __future__ import annotations

import torch

from conformance.cases.configs import first_int
from conformance.cases.samples import BATCH, Sample, left_pad, pad_id, text_tokens
from conformance.cases.strategies import register
from conformance.cases.strategies.audio_media import audio_placeholders, mel_bins

FRAMES_PER_TOKEN_KEYS = ("audio_length_per_tok",)
PROMPTS = (6, 9)  # text tokens of the two prompts
GENERATE_POSITIONS = 16  # audio positions past the prompt for generate (more than any check's new tokens)


def frames_per_token(config) -> int:
    value = first_int((config,), FRAMES_PER_TOKEN_KEYS, minimum=1)
    if value:
        return value
    raise LookupError(f"config names no feature frames per token ({' / '.join(FRAMES_PER_TOKEN_KEYS)})")


@register("token_aligned_audio")
def token_aligned_audio(ctx) -> Sample:
    gen = ctx.generator()
    ids, mask = left_pad([text_tokens(ctx.config, n, gen) for n in PROMPTS], pad_id(ctx.config))
    width = ids.shape[1]
    features = torch.randn((BATCH, mel_bins(ctx), width * frames_per_token(ctx.config)), generator=gen)
    per_clip = audio_placeholders(ctx, {"input_features": features}, audios=BATCH, frames_mask=None)
    if per_clip != width:
        raise ValueError(f"{features.shape[-1]} feature frames give {per_clip} audio embeddings per clip, "
                         f"not one per prompt position ({width})")
    inputs = {"input_ids": ids, "attention_mask": mask, "input_features": features}
    longer = torch.randn((BATCH, features.shape[1], GENERATE_POSITIONS * frames_per_token(ctx.config)), generator=gen)
    generate = {**inputs, "input_features": torch.cat([features, longer], dim=-1)}
    return Sample(inputs=inputs, strategy="token_aligned_audio", media_keys=("input_features",),
                  notes={"positions": width}, generate_inputs=generate)
