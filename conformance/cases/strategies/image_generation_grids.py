"""Image generation prompts: a source image as discrete tokens, and the grid of the image to generate.

The shape of autoregressive image generators over a VQ tokenizer (GLM-Image,
image-to-image mode): each prompt is text, ``image_start``, the source image's
placeholders, ``image_end``, text, and a final ``image_start`` from which the
model generates the target image's tokens. The source image comes as
flattened patches with a (temporal, height, width) patch grid, as in
`patches_grid` (the patch layout is found against the model's encoder);
`image_grid_thw` lists, per prompt, the source grid and then the target grid
(the model lays out 3D positions of the tokens it will generate from it), and
`images_per_sample` says how many grids each prompt owns.

The placeholder count is what the model's own path makes of the source
pixels: `get_image_features`, then the model's `get_image_tokens` (the VQ
codes that replace the placeholders). The target grid has as many tokens as
the source, enough for every generate-based check. The pixels are the
sample's media input. Selected by fixture data
(``[samples] strategy = "image_generation_grids"``).
"""

from __future__ import annotations

import torch

from conformance.cases.configs import first_int
from conformance.cases.samples import BATCH, TEXT_TOKENS, Sample, left_pad, pad_id, text_tokens
from conformance.cases.strategies import register
from conformance.cases.strategies._media import pixels, vision_value
from conformance.cases.strategies.patches_grid import merge_size, patch_layouts

START_KEYS = ("image_start_token_id", "boi_token_id")
END_KEYS = ("image_end_token_id", "eoi_token_id")
PLACEHOLDER_KEYS = ("image_token_id", "image_token_index")


def _token(config, keys: tuple[str, ...]) -> int:
    value = first_int((config,), keys)
    if value is not None:
        return value
    raise LookupError(f"config names no {' / '.join(keys)}")


def patches_per_side(ctx) -> tuple[int, int]:
    """Source image patches per side: image_size / patch_size, a multiple of the merge size."""
    size = int(vision_value(ctx, ("image_size",), 32))
    patch = int(vision_value(ctx, ("patch_size",), 8))
    mh, mw = merge_size(ctx)
    side = max(size // patch, 1)
    return max(side // mh, 1) * mh, max(side // mw, 1) * mw


def _image_tokens(ctx, media: dict, source_grids: torch.Tensor) -> int:
    """VQ tokens per source image: the model's image features, tokenized by the model."""
    owner = next(m for m in (ctx.model, getattr(ctx.model, "model", None)) if hasattr(m, "get_image_tokens"))
    with torch.no_grad():
        features = ctx.model.get_image_features(media["pixel_values"], source_grids, return_dict=True)
        tokens = owner.get_image_tokens(features.pooler_output)
    if tokens.numel() % BATCH:
        raise ValueError(f"{tokens.numel()} image tokens do not split into {BATCH} images")
    return tokens.numel() // BATCH


@register("image_generation_grids")
def image_generation_grids(ctx) -> Sample:
    config = ctx.config
    start, end = _token(config, START_KEYS), _token(config, END_KEYS)
    placeholder = _token(config, PLACEHOLDER_KEYS)
    gh, gw = patches_per_side(ctx)
    errors = []
    for grid, shape in patch_layouts(ctx, gh, gw)[:-1]:  # patch-level grids only: the model merges itself
        gen = ctx.generator()
        media = {"pixel_values": pixels(shape, gen)}
        try:
            count = _image_tokens(ctx, media, grid)
        except Exception as exc:  # not this encoder's layout; try the next
            errors.append(exc)
            continue
        target = grid[:1]  # the image to generate: the source's grid, one per prompt
        grids = torch.cat([torch.cat([grid[i:i + 1], target]) for i in range(BATCH)])
        before, after = TEXT_TOKENS
        rows = [text_tokens(config, before - i, gen) + [start] + [placeholder] * count + [end]
                + text_tokens(config, after + i, gen) + [start] for i in range(BATCH)]
        ids, mask = left_pad(rows, pad_id(config))
        inputs = {"input_ids": ids, "attention_mask": mask, **media, "image_grid_thw": grids,
                  "images_per_sample": torch.full((BATCH,), 2, dtype=torch.long)}
        return Sample(inputs=inputs, strategy="image_generation_grids", media_keys=("pixel_values",),
                      notes={"placeholders": count, "layout": shape, "target_grid": target[0].tolist()})
    raise errors[0]
