"""Helpers shared by media strategies: image sizes, pixel tensors, token counts."""

from __future__ import annotations

from typing import Any

import torch

from conformance.tiny import IMAGE_SIZE


def image_hw(ctx) -> tuple[int, int]:
    """Pixel size of sample images: recipe, else the vision config's image_size."""
    size = ctx.recipe.get("image_size")
    if size is None:
        vision = getattr(ctx.config, "vision_config", None)
        size = getattr(vision, "image_size", None) if vision is not None else None
        size = size if size is not None else getattr(ctx.config, "image_size", IMAGE_SIZE)
    if isinstance(size, dict):
        size = (size.get("height", IMAGE_SIZE), size.get("width", IMAGE_SIZE))
    if isinstance(size, (list, tuple)):
        return int(size[0]), int(size[-1])
    return int(size), int(size)


def channels(ctx) -> int:
    vision = getattr(ctx.config, "vision_config", None)
    return int(getattr(vision, "num_channels", 3) or 3) if vision is not None else 3


def pixels(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    return torch.randn(shape, generator=gen)


def image_token_id(ctx) -> int:
    """The placeholder id the model scatters image features into."""
    attr = ctx.recipe.get("image_token")
    names = (attr,) if attr else ("image_token_id", "image_token_index", "image_token")
    for cfg in (ctx.config, ctx.text_config):
        for name in names:
            value = getattr(cfg, name, None)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    raise LookupError("config names no image placeholder token (image_token_id / image_token_index)")


def _numel(features: Any) -> int:
    if isinstance(features, torch.Tensor):
        return features.numel()
    if isinstance(features, (list, tuple)):
        return sum(_numel(f) for f in features)
    if hasattr(features, "pooler_output") and features.pooler_output is not None:
        return _numel(features.pooler_output)
    if hasattr(features, "last_hidden_state"):
        return _numel(features.last_hidden_state)
    raise TypeError(f"cannot count features of type {type(features).__name__}")


def _get_image_features(model: torch.nn.Module):
    for owner in (model, getattr(model, "model", None)):
        fn = getattr(owner, "get_image_features", None)
        if fn is not None:
            return fn
    raise LookupError("model has no get_image_features")


def count_placeholders(ctx, media_kwargs: dict[str, Any], images: int) -> int:
    """Placeholder tokens per image: what the model's own encoder emits.

    Calls the model's `get_image_features` with the sample's media inputs and
    divides the number of feature values by the text width and the number of
    images.
    """
    import inspect

    fn = _get_image_features(ctx.model)
    params = inspect.signature(fn).parameters
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in params.values())
    kwargs = {k: v for k, v in media_kwargs.items() if k in params or takes_kwargs}
    with torch.no_grad():
        features = fn(**kwargs)
    width = ctx.text_config.hidden_size
    total = _numel(features)
    if total % (width * images):
        raise ValueError(f"image features ({total} values) do not split into {images} images of width {width}")
    return total // (width * images)
