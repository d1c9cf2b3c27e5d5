"""Stage 2c, build: variants of a case's sample, the next prompts a deployed program must serve.

Every compiled or exported artefact is traced on one sample; a user's next
prompt has another length, another batch, another number of images. A
variant is the case's sample changed in one such way, made by general rules
(never per model) and checked by an eager forward of the model:

* ``shorter`` / ``longer``: `SHORTER` fewer / `LONGER` more ordinary text
  tokens in every prompt. Tokens are removed from, or inserted after, the last
  columns where every prompt holds ordinary text (attended, not an id the
  config names: no placeholder, pad, bos...). Every sequence-aligned input is
  changed consistently: a tensor with a (batch, length) run in its shape
  (`input_ids`, `attention_mask`, `token_type_ids`, `mm_token_type_ids`,
  per-token masks, `position_ids` (3, batch, length)...) gets the copied
  value of the text column next to the insertion (inputs whose name says
  ``position`` continue counting instead, and shift what follows).
* ``batch``: the sample twice over (prompts 0, 1, 0, 1): every tensor is
  doubled along its batch axis (the axis before the sequence for
  sequence-aligned inputs, else the first; lists are repeated). Prompts and
  their images are ordered alike, so this holds for per-prompt, per-image
  and flattened-patch inputs; the eager logits of the doubled batch must
  repeat the sample's (within the ``batch_repeat`` row of `tolerances` for
  the logits' dtype), or the variant is refused.
* ``images`` / ``image_size``: the class's own strategy run again with a
  recipe override, ``images_per_prompt = 2`` or ``image_scale = (1, 2)``
  (images twice as wide); placeholder counts come from the model's encoder
  as always. Strategies that do not read the key make the same sample: then
  there is no such variant for the class.

Contract of `make_variants(tiny, sample, model) -> Variants`: `available`
maps a variant name to its `Variant` (in `ORDER`), `unavailable` maps every
other name to one line saying why it cannot be made (no prompt ids, no
ordinary text to remove, the strategy does not vary images, the eager
forward rejects it...). Making variants never raises for a model's sake.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from conformance.cases.configs import IMAGE_PLACEHOLDERS, VIDEO_PLACEHOLDERS, placeholder_id
from conformance.cases.samples import Sample, make_sample, recipe_for, special_ids, text_tokens
from conformance.cases.tiny import TinyModel
from conformance.reasons import one_line
from conformance.tolerances import tolerance

SHORTER = 2  # text tokens removed from every prompt
LONGER = 5  # text tokens added to every prompt
ORDER = ("shorter", "longer", "batch", "images", "image_size")
LENGTH_VARIANTS = ("shorter", "longer")
MEDIA_OVERRIDES = {"images": {"images_per_prompt": 2}, "image_size": {"image_scale": (1, 2)}}
MIN_LENGTH = 2  # the shortest prompt a variant leaves (0 and 1 are specialised by dynamic shapes)
PROMPT_KEYS = ("input_ids", "decoder_input_ids")  # the first one present is the prompt that varies


@dataclass
class Variant:
    """One other prompt: its sample and, in words, how it differs from the case's."""

    name: str
    sample: Sample
    what: str


@dataclass
class Variants:
    available: dict[str, Variant] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)

    def lengths(self) -> list[Variant]:
        return [self.available[n] for n in LENGTH_VARIANTS if n in self.available]


# --- sequence alignment ---------------------------------------------------------------------------


def prompt_key(inputs: dict[str, Any]) -> str | None:
    for key in PROMPT_KEYS:
        value = inputs.get(key)
        if isinstance(value, torch.Tensor) and value.dim() == 2:
            return key
    return None


def sequence_axis(value: Any, batch: int, length: int) -> int | None:
    """The axis of `value` that runs along the prompt: the first d with shape[d-1:d+1] == (batch, length)."""
    if not isinstance(value, torch.Tensor) or value.is_floating_point():
        return None
    for axis in range(1, value.dim()):
        if value.shape[axis - 1] == batch and value.shape[axis] == length:
            return axis
    return None


def aligned_inputs(sample: Sample, key: str) -> dict[str, int]:
    """Every input that runs along the prompt `key` -> its sequence axis (the prompt itself included)."""
    batch, length = sample.inputs[key].shape
    aligned = {}
    for name, value in sample.inputs.items():
        if name in sample.media_keys:
            continue
        if name.startswith("decoder_") == key.startswith("decoder_"):  # the encoder's or the decoder's prompt
            axis = sequence_axis(value, batch, length)
            if axis is not None:
                aligned[name] = axis
    return aligned


def reserved_ids(config, recipe: dict[str, Any]) -> set[int]:
    """Ids that are not ordinary text: every id the config names, and the media placeholders."""
    if config is None:
        return set()
    ids = special_ids(config)
    for names in (IMAGE_PLACEHOLDERS, VIDEO_PLACEHOLDERS):
        token = placeholder_id(config, names, recipe.get("image_token") if names is IMAGE_PLACEHOLDERS else None)
        if token is not None:
            ids.add(token)
    return ids


def text_columns(sample: Sample, key: str, reserved: set[int]) -> list[int]:
    """Columns where every prompt holds an attended ordinary text token."""
    ids = sample.inputs[key]
    ok = torch.ones(ids.shape[1], dtype=torch.bool)
    mask_key = "attention_mask" if key == "input_ids" else "decoder_attention_mask"
    mask = sample.inputs.get(mask_key)
    if isinstance(mask, torch.Tensor) and mask.shape == ids.shape:
        ok &= mask.bool().all(dim=0)
    for token in reserved:
        ok &= ~(ids == token).any(dim=0)
    return [int(c) for c in torch.nonzero(ok).flatten()]


# --- shorter / longer -----------------------------------------------------------------------------


def _is_position(name: str) -> bool:
    return "position" in name and "mask" not in name


def _insert(value: torch.Tensor, axis: int, column: int, new: torch.Tensor) -> torch.Tensor:
    before, after = value.narrow(axis, 0, column + 1), value.narrow(axis, column + 1, value.shape[axis] - column - 1)
    return torch.cat([before, new, after], dim=axis)


def _inserted_values(name: str, value: torch.Tensor, axis: int, column: int, count: int) -> torch.Tensor:
    here = value.narrow(axis, column, 1)
    if _is_position(name):
        steps = torch.arange(1, count + 1, dtype=value.dtype).view([-1 if d == axis else 1 for d in range(value.dim())])
        return here + steps
    return here.repeat_interleave(count, dim=axis)


def longer(sample: Sample, config, recipe: dict, count: int = LONGER, seed: int = 7) -> Sample:
    """`sample` with `count` ordinary text tokens inserted after the last all-text column."""
    key = prompt_key(sample.inputs)
    if key is None:
        raise LookupError("the sample has no prompt ids (input_ids / decoder_input_ids) to lengthen")
    columns = text_columns(sample, key, reserved_ids(config, recipe))
    if not columns:
        raise LookupError(f"no column of {key} holds ordinary text in every prompt")
    column = columns[-1]
    gen = torch.Generator().manual_seed(seed)
    inputs = dict(sample.inputs)
    for name, axis in aligned_inputs(sample, key).items():
        value = sample.inputs[name]
        if name == key:
            rows = [text_tokens(config, count, gen) for _ in range(value.shape[0])] if config is not None else \
                torch.randint(3, 16, (value.shape[0], count), generator=gen).tolist()
            new = torch.tensor(rows, dtype=value.dtype)
        else:
            new = _inserted_values(name, value, axis, column, count)
        grown = _insert(value, axis, column, new)
        if _is_position(name):
            tail = grown.narrow(axis, column + 1 + count, value.shape[axis] - column - 1)
            tail += count
        inputs[name] = grown
    return Sample(inputs=inputs, strategy=sample.strategy, media_keys=sample.media_keys, notes=dict(sample.notes))


def shorter(sample: Sample, config, recipe: dict, count: int = SHORTER) -> Sample:
    """`sample` without its last `count` all-text columns."""
    key = prompt_key(sample.inputs)
    if key is None:
        raise LookupError("the sample has no prompt ids (input_ids / decoder_input_ids) to shorten")
    length = sample.inputs[key].shape[1]
    count = min(count, length - MIN_LENGTH)
    columns = text_columns(sample, key, reserved_ids(config, recipe))
    if count < 1 or not columns:
        raise LookupError(f"{key} has {len(columns)} columns of ordinary text in every prompt, {length} in all: "
                          f"none can go (a dynamic length is at least {MIN_LENGTH})")
    count = min(count, len(columns))
    drop = set(columns[-count:])
    keep = torch.tensor([c for c in range(length) if c not in drop])
    removed_before = torch.tensor([sum(1 for d in drop if d < c) for c in range(length)])[keep]
    inputs = dict(sample.inputs)
    for name, axis in aligned_inputs(sample, key).items():
        kept = sample.inputs[name].index_select(axis, keep)
        if _is_position(name):
            kept = kept - removed_before.view([-1 if d == axis else 1 for d in range(kept.dim())]).to(kept.dtype)
        inputs[name] = kept
    return Sample(inputs=inputs, strategy=sample.strategy, media_keys=sample.media_keys, notes=dict(sample.notes))


# --- batch ----------------------------------------------------------------------------------------


def _doubled(value: Any, axis: int) -> Any:
    if isinstance(value, torch.Tensor):
        return torch.cat([value, value], dim=axis) if value.dim() else value
    if isinstance(value, list):
        return value + value
    if isinstance(value, tuple):
        return value + value
    return value


def doubled_batch(sample: Sample) -> Sample:
    """The sample twice over: prompts 0, 1, 0, 1 (see the module)."""
    key = prompt_key(sample.inputs)
    aligned = aligned_inputs(sample, key) if key else {}
    inputs = {name: _doubled(value, aligned[name] - 1 if name in aligned else 0)
              for name, value in sample.inputs.items()}
    return Sample(inputs=inputs, strategy=sample.strategy, media_keys=sample.media_keys, notes=dict(sample.notes))


# --- checking a variant against the model ---------------------------------------------------------


def _logits_of(output: Any) -> torch.Tensor:
    if isinstance(output, torch.Tensor):
        return output
    logits = output.get("logits") if isinstance(output, dict) else getattr(output, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    raise TypeError(f"no logits in output of type {type(output).__name__}")


def eager_logits(model: torch.nn.Module, sample: Sample) -> torch.Tensor:
    with torch.no_grad():
        return _logits_of(model(**sample.inputs))


def _shapes(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return tuple(value.shape)
    if isinstance(value, (list, tuple)):
        return [_shapes(v) for v in value]
    return repr(value)


def same_shapes(a: Sample, b: Sample) -> bool:
    return a.inputs.keys() == b.inputs.keys() and all(_shapes(a.inputs[k]) == _shapes(b.inputs[k]) for k in a.inputs)


# --- making them ----------------------------------------------------------------------------------


def make_variants(tiny: TinyModel, sample: Sample, model: torch.nn.Module,
                  names: tuple[str, ...] = ORDER) -> Variants:
    """The variants of `sample` the eager `model` accepts, and why the others cannot be made."""
    config = tiny.config
    recipe = recipe_for(tiny) if tiny.info is not None and config is not None else {}
    makers: dict[str, tuple[Callable[[], Sample], str]] = {
        "shorter": (lambda: shorter(sample, config, recipe), "fewer text tokens per prompt"),
        "longer": (lambda: longer(sample, config, recipe), f"{LONGER} text tokens more per prompt"),
        "batch": (lambda: doubled_batch(sample), "the batch twice over (4 prompts)"),
        "images": (lambda: _media_variant(tiny, sample, model, "images"), "2 images per prompt"),
        "image_size": (lambda: _media_variant(tiny, sample, model, "image_size"), "images twice as wide"),
    }
    variants = Variants()
    base_logits = None
    for name in names:
        make, what = makers[name]
        try:
            made = make()
        except (LookupError, NotImplementedError) as exc:
            variants.unavailable[name] = str(exc)
            continue
        except Exception as exc:  # the strategy could not make it for this model
            variants.unavailable[name] = f"the strategy cannot make it: {one_line(exc, limit=200)}"
            continue
        try:
            logits = eager_logits(model, made)
        except Exception as exc:
            variants.unavailable[name] = f"the eager forward rejects it: {one_line(exc, limit=200)}"
            continue
        if name == "batch":
            base_logits = eager_logits(model, sample) if base_logits is None else base_logits
            reason = _batch_repeats(base_logits, logits)
            if reason:
                variants.unavailable[name] = reason
                continue
        variants.available[name] = Variant(name, made, what)
    return variants


def _batch_repeats(base: torch.Tensor, doubled: torch.Tensor) -> str:
    """'' when the doubled batch's logits repeat the sample's, else why not."""
    batch = base.shape[0]
    if doubled.shape[0] != 2 * batch or doubled.shape[1:] != base.shape[1:]:
        return f"doubling every input along its batch axis gives logits {tuple(doubled.shape)}, not 2 x {tuple(base.shape)}"
    tol = tolerance(str(base.dtype), "batch_repeat")  # the row of the dtype the logits were computed in
    halves = (doubled[:batch], doubled[batch:])
    diff = max(float((half - base).abs().max()) for half in halves)
    # NaN, and two equal infinities (inf - inf), repeat nothing: the comparison fails on them, as it always did.
    if not all(bool(((half - base).abs() <= tol.atol + tol.rtol * base.abs()).all()) for half in halves):
        return f"doubling every input along its batch axis does not repeat the prompts (logits differ by {diff:.3g})"
    return ""


def _media_variant(tiny: TinyModel, sample: Sample, model: torch.nn.Module, name: str) -> Sample:
    if not sample.media_keys:
        raise LookupError("the sample has no media inputs")
    overrides = MEDIA_OVERRIDES[name]
    key = next(iter(overrides))
    # The sample's own strategy again; a sample that fell back from its processor (its strategy names the
    # fallback) is made again the same way, by the recipe.
    from conformance.cases.strategies import STRATEGIES, _load

    _load()
    strategy = sample.strategy if sample.strategy in STRATEGIES else None
    made = make_sample(tiny, model, overrides=overrides, strategy=strategy)
    if same_shapes(made, sample):
        raise NotImplementedError(f"strategy {sample.strategy!r} makes the same shapes with `{key}` overridden")
    return made
