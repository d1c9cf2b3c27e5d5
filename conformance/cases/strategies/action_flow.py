"""One flow-matching step of a vision-language-action model: camera images, prompt, robot state, noisy actions.

The PI0 shape: the forward encodes a prefix (camera images whose features
replace image placeholders in the prompt) into a cache, then an action
expert reads it and predicts the velocity of a noisy action chunk at a
denoising `timestep`, given the robot `state`. Its "logits" are that
velocity (batch, chunk, action dim). `noise` and `timestep` are given
explicitly: left out, the forward draws them at random, and no two calls
(eager vs compiled, original vs perturbed pixels) would be comparable.
`pixel_values` is (batch, cameras, C, H, W) and `pixel_attention_mask`
(batch, cameras) marks the real cameras; one camera per prompt here. The
prompt's tokens come from the vision-language backbone's config (the top
config of such a model has no vocabulary of its own).
"""

from __future__ import annotations

from dataclasses import replace

import torch

from conformance.cases.samples import BATCH, Sample, SampleContext
from conformance.cases.strategies import register
from conformance.cases.strategies._media import channels, feature_rows, image_hw, pixels
from conformance.cases.strategies.pixels import assemble

CAMERAS = 1
TIMESTEPS = (0.3, 0.7)  # one denoising time per prompt, inside (0, 1)
ACTION_INPUTS = {"state", "noise", "timestep"}


def takes_actions(ctx) -> bool:
    return ACTION_INPUTS | {"pixel_values"} <= ctx.forward_params


def sub_config_value(config, name: str):
    """`name` on the config or on its first sub-config that sets it."""
    if getattr(config, name, None) is not None:
        return getattr(config, name)
    for key in config.sub_configs:
        value = getattr(getattr(config, key, None), name, None)
        if value is not None:
            return value
    raise LookupError(f"no sub-config of {type(config).__name__} sets {name}")


def backbone_context(ctx) -> SampleContext:
    """`ctx` seen through the first sub-config that has a vocabulary (the prompt's tokens live there)."""
    for key in ctx.config.sub_configs:
        sub = getattr(ctx.config, key, None)
        if sub is not None and getattr(sub.get_text_config(), "vocab_size", None):
            return SampleContext(tiny=replace(ctx.tiny, config=sub), model=ctx.model, recipe=ctx.recipe)
    raise LookupError(f"no sub-config of {type(ctx.config).__name__} has a vocabulary")


def image_encoder(model: torch.nn.Module):
    """The vision-language backbone's `get_image_features` (the model's, or a nested one's)."""
    for module in model.modules():
        if module is not model and callable(getattr(module, "get_image_features", None)):
            return module.get_image_features
    raise LookupError("model has no module with get_image_features")


def action_inputs(ctx, gen: torch.Generator) -> dict[str, torch.Tensor]:
    chunk, action_dim = int(ctx.config.chunk_size), int(ctx.config.max_action_dim)
    return {
        "state": torch.randn((BATCH, int(ctx.config.max_state_dim)), generator=gen),
        "noise": torch.randn((BATCH, chunk, action_dim), generator=gen),
        "timestep": torch.tensor(TIMESTEPS[:BATCH]),
    }


@register("action_flow", when=takes_actions, priority=15)
def action_flow(ctx) -> Sample:
    gen = ctx.generator()
    h, w = image_hw(ctx)
    values = pixels((BATCH, CAMERAS, channels(ctx), h, w), gen)
    with torch.no_grad():
        rows = feature_rows(image_encoder(ctx.model)(pixel_values=values.flatten(0, 1)))
    token = int(sub_config_value(ctx.config, "image_token_id"))
    cameras = torch.ones((BATCH, CAMERAS), dtype=torch.bool)
    counts = [[rows // (BATCH * CAMERAS)] * CAMERAS] * BATCH
    sample = assemble(backbone_context(ctx), {"pixel_values": values}, counts, gen, "action_flow", token=token,
                      pixel_attention_mask=cameras, **action_inputs(ctx, gen))
    sample.notes["cameras"] = CAMERAS
    return sample
