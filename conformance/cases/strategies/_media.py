"""Helpers shared by media strategies: image sizes, pixel tensors, token counts."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch

from conformance.cases.configs import IMAGE_PLACEHOLDERS, first_value, placeholder_id
from conformance.cases.samples import BATCH, Sample
from conformance.cases.tiny import IMAGE_SIZE


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


def images_per_prompt(ctx, default: int = 1) -> int:
    """Images in each prompt: the recipe's ``images_per_prompt``, else `default`."""
    return int(ctx.recipe.get("images_per_prompt", default))


def per_prompt(count: int, images: int) -> int | list[list[int]]:
    """Placeholder counts for `assemble`: `count` per image, `images` images in every prompt."""
    return count if images == 1 else [[count] * images] * BATCH


def scaled(ctx, h: int, w: int) -> tuple[int, int]:
    """An image size (pixels or patches) times the recipe's ``image_scale`` (rows, cols) factors, if any."""
    scale = ctx.recipe.get("image_scale", (1, 1))
    return int(h * scale[0]), int(w * scale[-1])


def channels(ctx) -> int:
    vision = getattr(ctx.config, "vision_config", None)
    return int(getattr(vision, "num_channels", 3) or 3) if vision is not None else 3


def vision_value(ctx, keys: tuple[str, ...], default: Any = None) -> Any:
    """The first of `keys` set on the vision config (else the top config)."""
    value = first_value((getattr(ctx.config, "vision_config", None), ctx.config), keys)
    return default if value is None else value


def pixels(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    return torch.randn(shape, generator=gen)


def image_token_id(ctx, names: tuple[str, ...] = IMAGE_PLACEHOLDERS) -> int:
    """The placeholder id the model scatters image (or, with `names`, video) features into."""
    token = placeholder_id(ctx.config, names, ctx.recipe.get("image_token"))
    if token is None:
        raise LookupError("config names no image placeholder token (image_token_id / image_token_index)")
    return token


def _is_layer_pair(item: Any) -> bool:
    return isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], int)


def feature_rows(features: Any) -> int:
    """How many feature vectors an encoder output holds (tensors' numel / last dim)."""
    if isinstance(features, torch.Tensor):
        return features.numel() // features.shape[-1] if features.dim() else 0
    if isinstance(features, (list, tuple)) and features and all(_is_layer_pair(f) for f in features):
        return feature_rows(features[0][1])  # (layer, features) per target layer: the same tokens each
    if isinstance(features, (list, tuple)):
        return sum(feature_rows(f) for f in features)
    for name in ("pooler_output", "last_hidden_state"):
        if getattr(features, name, None) is not None:
            return feature_rows(getattr(features, name))
    if isinstance(features, dict):  # a ModelOutput whose features live under a model-specific name
        for key, value in features.items():
            if value is not None and key not in ("hidden_states", "attentions"):
                return feature_rows(value)
    raise TypeError(f"cannot count features of type {type(features).__name__}")


def per_image(features: Any, images: int) -> int:
    """Feature vectors per image; ValueError when they do not split evenly."""
    rows = feature_rows(features)
    if rows % images:
        raise ValueError(f"image features ({rows} vectors) do not split into {images} equal images")
    return rows // images


def _get_image_features(model: torch.nn.Module, name: str = "get_image_features"):
    for owner in (model, getattr(model, "model", None)):
        fn = getattr(owner, name, None)
        if fn is not None:
            return fn
    raise LookupError(f"model has no {name}")


def has_encoder_method(model: torch.nn.Module, name: str = "get_image_features") -> bool:
    try:
        _get_image_features(model, name)
        return True
    except LookupError:
        return False


def count_placeholders(ctx, media_kwargs: dict[str, Any], images: int, method: str = "get_image_features") -> int:
    """Placeholder tokens per image: what the model's own encoder emits.

    Calls the model's `get_image_features` (or `method`) with the sample's media inputs and
    divides the number of feature vectors by the number of images.
    """
    fn = _get_image_features(ctx.model, method)
    with torch.no_grad():
        try:
            features = _call_with(fn, media_kwargs)
        except TypeError as exc:
            # A wrapper that hands its base model arguments the base model's method does not take
            # (transformers 4.57: GotOcr2ForConditionalGeneration.get_image_features passes
            # vision_feature_layer to GotOcr2Model.get_image_features): the base model's own method,
            # which is what the forward calls.
            base = getattr(getattr(ctx.model, "model", None), method, None)
            if base is None or base == fn or "unexpected keyword argument" not in str(exc):
                raise
            features = _call_with(base, media_kwargs)
    return per_image(encoder_features(features), images)


def encoder_features(output: Any) -> Any:
    """The image features in what an encoder method returns.

    transformers 5 returns a ModelOutput (the features are its `pooler_output`
    or first field). 4.x returns extra outputs next to the features in a plain
    tuple: ``(features, visual_indicator_features)`` (Ovis2),
    ``(per-image features, deepstack features)`` (Qwen3-VL). Such a tuple, whose
    items are not tensors of one rank, holds the features first; a tuple of
    tensors of one rank is one tensor per image (Qwen2-VL's split) and counts whole.
    """
    if isinstance(output, tuple) and len(output) > 1:
        ranks = {item.dim() if isinstance(item, torch.Tensor) else None for item in output}
        if None in ranks or len(ranks) > 1:
            return output[0]
    return output


def _call_with(fn, media_kwargs: dict[str, Any]) -> Any:
    """`fn` over the media kwargs its signature takes (all of them when it takes **kwargs)."""
    import inspect

    params = inspect.signature(fn).parameters
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in params.values())
    return fn(**{k: v for k, v in media_kwargs.items() if k in params or takes_kwargs})


class _Captured(Exception):
    """Stops a probing forward once the tensor it looks for was seen."""


def count_handed_on(ctx, inputs: dict[str, Any], images: int, kwarg: str = "image_embeds") -> int:
    """Placeholder tokens per image, for a model with no encoder method: the rows of `kwarg`.

    Runs the model's forward on `inputs` and stops it at the first submodule
    call that receives a `kwarg` tensor (the image features the model hands
    to its language model); their rows divided by `images` is the count.
    Raises LookupError when no submodule receives one.
    """
    seen: list[torch.Tensor] = []

    def grab(_module, _args, kwargs):
        value = kwargs.get(kwarg)
        if isinstance(value, torch.Tensor):
            seen.append(value)
            raise _Captured

    handles = [module.register_forward_pre_hook(grab, with_kwargs=True) for module in ctx.model.modules()]
    try:
        with torch.no_grad():
            ctx.model(**inputs)
    except _Captured:
        pass
    finally:
        for handle in handles:
            handle.remove()
    if not seen:
        raise LookupError(f"model has no get_image_features and its forward hands no submodule `{kwarg}`")
    return per_image(seen[0], images)


def supported_ratio_id(ratios: list, tiles: tuple[int, int]) -> int:
    """1-based id of `tiles` (rows, cols) in a supported aspect-ratio list; 0 is padding."""
    for index, ratio in enumerate(ratios):
        if tuple(ratio) == tuple(tiles):
            return index + 1
    raise LookupError(f"aspect ratio {list(tiles)} is not among the supported ones {ratios}")



@dataclass
class MaskedMediaSample(Sample):
    """A sample whose media tensors hold non-pixel parts next to the pixel values.

    Some media inputs carry indices or padding beside the pixels (a patch's
    row/column ids, all-zero padding patches). `perturbed` changes only the
    entries where `perturb_masks[key]` is True (a bool tensor of the input's
    shape) and keeps the others, so indices stay valid and padding stays padding.
    """

    perturb_masks: dict[str, torch.Tensor] = field(default_factory=dict)

    def perturbed(self, seed: int = 1) -> "MaskedMediaSample":
        moved = Sample.perturbed(self, seed).inputs
        for key, mask in self.perturb_masks.items():
            moved[key] = torch.where(mask, moved[key], self.inputs[key])
        return replace(self, inputs=moved)


def masked_media(sample: Sample, masks: dict[str, torch.Tensor]) -> MaskedMediaSample:
    """`sample` whose perturbation only touches the entries `masks` mark."""
    return MaskedMediaSample(inputs=sample.inputs, strategy=sample.strategy, media_keys=sample.media_keys,
                             notes=sample.notes, perturb_masks=masks)
