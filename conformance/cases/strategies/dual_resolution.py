"""One image at two resolutions: `pixel_values` + `<tower>_pixel_values`, one tower each.

The DeepSeek-VL hybrid shape: the same image goes to a low-resolution tower
(`pixel_values`, sized by `vision_config`) and to a high-resolution tower
(`high_res_pixel_values`, sized by `high_res_vision_config`); the model fuses
both into one set of image features that replace the placeholders. Each
extra input `<name>_pixel_values` is sized by the config's
`<name>_vision_config`. Placeholder counts come from the model's encoder.
"""

from __future__ import annotations

from conformance.cases.samples import BATCH, Sample
from conformance.cases.strategies import register
from conformance.cases.strategies._media import channels, count_placeholders, image_hw, pixels
from conformance.cases.strategies.pixels import assemble
from conformance.cases.tiny import IMAGE_SIZE

SUFFIX = "_pixel_values"


def tower_inputs(ctx) -> list[str]:
    """Extra pixel inputs with a vision config of their own (`high_res_pixel_values`, ...)."""
    return sorted(p for p in ctx.forward_params
                  if p.endswith(SUFFIX) and hasattr(ctx.config, p[: -len(SUFFIX)] + "_vision_config"))


def takes_two_resolutions(ctx) -> bool:
    return "pixel_values" in ctx.forward_params and bool(tower_inputs(ctx))


def tower_size(ctx, name: str) -> int:
    tower = getattr(ctx.config, name[: -len(SUFFIX)] + "_vision_config")
    return int(getattr(tower, "image_size", None) or IMAGE_SIZE)


@register("dual_resolution", when=takes_two_resolutions, priority=30)
def dual_resolution(ctx) -> Sample:
    gen = ctx.generator()
    h, w = image_hw(ctx)
    media = {"pixel_values": pixels((BATCH, channels(ctx), h, w), gen)}
    for name in tower_inputs(ctx):
        size = tower_size(ctx, name)
        media[name] = pixels((BATCH, channels(ctx), size, size), gen)
    count = count_placeholders(ctx, media, images=BATCH)
    return assemble(ctx, media, count, gen, "dual_resolution")
