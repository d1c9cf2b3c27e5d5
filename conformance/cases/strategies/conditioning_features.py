"""Text plus a conditioning spectrogram: `input_ids` and `input_features` (batch, mel bins, frames).

The shape of conditioned speech generators (CLVP, Tortoise-style): a reference
clip's mel spectrogram is reduced by the model itself to conditioning
embeddings that it places before the text, so the prompt carries no audio
placeholder and the clip's length is free. One clip per prompt, mel-major
(batch, mel bins, frames); the mel-bin count is the first mel key set in any
sub-config (breadth first: the conditioning encoder's width may live in the
decoder's config), the frame count the recipe's ``audio_length`` or a default.
The spectrogram is the sample's media input, so `build` checks that changing
it moves the outputs. Selected by fixture data
(``[samples] strategy = "conditioning_features"``).
"""

from __future__ import annotations

import torch

from conformance.cases.configs import first_int, with_sub_configs
from conformance.cases.samples import BATCH, Sample, left_pad, pad_id, text_tokens
from conformance.cases.strategies import register
from conformance.cases.strategies.audio_media import DEFAULT_FRAMES, MEL_KEYS

PROMPTS = (6, 9)  # text tokens of the two prompts


def conditioning_mel_bins(config) -> int:
    bins = first_int(with_sub_configs(config), MEL_KEYS, minimum=1)
    if bins is None:
        raise LookupError(f"no config names a mel-bin count ({' / '.join(MEL_KEYS)})")
    return bins


@register("conditioning_features")
def conditioning_features(ctx) -> Sample:
    gen = ctx.generator()
    rows = [text_tokens(ctx.config, n, gen) for n in PROMPTS]
    ids, mask = left_pad(rows, pad_id(ctx.config))
    frames = int(ctx.recipe.get("audio_length") or DEFAULT_FRAMES)
    features = torch.randn((BATCH, conditioning_mel_bins(ctx.config), frames), generator=gen)
    inputs = {"input_ids": ids, "attention_mask": mask, "input_features": features}
    return Sample(inputs=inputs, strategy="conditioning_features", media_keys=("input_features",))
