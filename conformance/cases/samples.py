"""Stage 2b, build: real sample inputs for a tiny model, by general strategies.

Contract of `make_sample(tiny, model)`: a batched prefill (batch 2, two
different prompts, the first one left-padded) as the forward kwargs a user
would pass, built by the strategy the model's data selects
(`fixtures/models/<model_type>.toml` ``[samples] strategy``) or, without
one, by `auto_strategy` from the forward signature and config. Placeholder
counts are derived from the model itself (what its encoder emits for the
sample pixels), never typed in per model. Deterministic: the same tiny
config gives the same tensors.

Strategies live in `conformance.cases.strategies`, one module each, and register
themselves by name; each names a shape of the problem (flattened patches and
a grid, tiled images and sizes, cross-attention images, query tokens, ...).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import torch

from conformance.cases.configs import vocabulary_config
from conformance.cases.model_data import model_fixture
from conformance.cases.tiny import TinyModel

BATCH = 2
PAD_LEFT = 3  # pad tokens in front of the first prompt
TEXT_TOKENS = (5, 4)  # text tokens before / after the media placeholder


@dataclass
class Sample:
    """Forward kwargs of a batched prefill, plus what the checks need to know."""

    inputs: dict[str, Any]
    strategy: str
    media_keys: tuple[str, ...] = ()  # inputs carrying pixels/audio (perturbed by `build`)
    notes: dict[str, Any] = field(default_factory=dict)
    # What `generate` takes where it differs from the forward's prefill (None: the same inputs), e.g. a
    # streaming clip longer than the prompt: generate runs on past the prompt for as long as the audio lasts.
    generate_inputs: dict[str, Any] | None = None

    @property
    def input_ids(self) -> torch.Tensor | None:
        return self.inputs.get("input_ids")

    def to(self, device: torch.device | str, dtype: torch.dtype, for_generate: bool = False) -> dict[str, Any]:
        """Inputs moved to `device`; floating tensors cast to `dtype` (`generate_inputs` when asked for and set).

        Every tensor is a new copy: a cell that writes into its inputs cannot change the next cell's."""
        inputs = self.generate_inputs if for_generate and self.generate_inputs is not None else self.inputs
        return {k: _move(v, device, dtype) for k, v in inputs.items()}

    def perturbed(self, seed: int = 1) -> "Sample":
        """The same sample with different media values (same shapes)."""
        gen = torch.Generator().manual_seed(seed)
        inputs = dict(self.inputs)
        for key in self.media_keys:
            value = inputs[key]
            inputs[key] = _perturb(value, gen)
        return Sample(inputs=inputs, strategy=self.strategy, media_keys=self.media_keys, notes=self.notes,
                      generate_inputs=self.generate_inputs)


def _perturb(value: Any, gen: torch.Generator) -> Any:
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return torch.randn(value.shape, generator=gen, dtype=value.dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_perturb(v, gen) for v in value)
    return value


def _move(value: Any, device: torch.device | str, dtype: torch.dtype) -> Any:
    if isinstance(value, torch.Tensor):
        if value.is_floating_point():
            return value.to(device=device, dtype=dtype, copy=True)
        return value.to(device=device, copy=True)
    if isinstance(value, (list, tuple)):
        return type(value)(_move(v, device, dtype) for v in value)
    return value


@dataclass
class SampleContext:
    """What a strategy gets: the tiny config, an eager model, and the recipe data."""

    tiny: TinyModel
    model: torch.nn.Module
    recipe: dict[str, Any]

    @property
    def config(self):
        return self.tiny.config

    @property
    def vocabulary_config(self):
        return vocabulary_config(self.tiny.config)

    @property
    def forward_params(self) -> set[str]:
        return set(inspect.signature(self.model.forward).parameters)

    def generator(self, seed: int = 0) -> torch.Generator:
        return torch.Generator().manual_seed(seed)


def special_ids(config) -> set[int]:
    """Every token id a config names (placeholders, bos/eos/pad...)."""
    from conformance.cases.tiny import TOKEN_ID

    ids: set[int] = set()

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(key, str) and TOKEN_ID.search(key):
                    if isinstance(value, int) and not isinstance(value, bool):
                        ids.add(value)
                    elif isinstance(value, list):
                        ids.update(v for v in value if isinstance(v, int) and not isinstance(v, bool))
                walk(value)

    walk(config.to_dict())
    return ids


def text_tokens(config, count: int, gen: torch.Generator) -> list[int]:
    """`count` ordinary token ids: inside the vocabulary, never a special id."""
    vocab = vocabulary_config(config).vocab_size
    reserved = special_ids(config)
    pool = [t for t in range(3, min(vocab, 200)) if t not in reserved]
    picks = torch.randint(0, len(pool), (count,), generator=gen).tolist()
    return [pool[i] for i in picks]


def pad_id(config) -> int:
    for cfg in (config, vocabulary_config(config)):
        value = getattr(cfg, "pad_token_id", None)
        if isinstance(value, int) and value >= 0:
            return value
    return 0


def left_pad(rows: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack rows of token ids, left-padding the shorter ones; returns (ids, mask).

    Row 0 always carries at least `PAD_LEFT` pad tokens so every sample
    exercises left padding.
    """
    width = max(len(r) for r in rows)
    width = max(width, len(rows[0]) + PAD_LEFT)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, width - len(row):] = torch.tensor(row, dtype=torch.long)
        mask[i, width - len(row):] = 1
    return ids, mask


def recipe_for(tiny: TinyModel) -> dict[str, Any]:
    """The sample recipe of the fixture's ``[samples]``; a checkpoint profile's row has its ``[profile.samples]``
    merged over it (tables key by key: a profile's ``processor.kwargs`` changes the kwargs it names)."""
    fixture = model_fixture(tiny.info.model_type)
    recipe = dict(fixture.samples) if fixture else {}
    profile = tiny.info.profile
    return _merged(recipe, profile.samples) if profile is not None else recipe


def _merged(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def auto_strategy(ctx: SampleContext) -> str:
    """The strategy a model's forward signature and config point to."""
    from conformance.cases.strategies import auto_select

    return auto_select(ctx)


def make_sample(tiny: TinyModel, model: torch.nn.Module, overrides: dict[str, Any] | None = None,
                strategy: str | None = None) -> Sample:
    """The sample of `make_sample`'s contract; `overrides` replace recipe keys and `strategy` names the
    strategy (variants of a sample re-run its strategy with e.g. ``images_per_prompt`` overridden)."""
    from conformance.cases.strategies import get_strategy

    ctx = SampleContext(tiny=tiny, model=model, recipe={**recipe_for(tiny), **(overrides or {})})
    name = strategy or ctx.recipe.get("strategy") or auto_strategy(ctx)
    sample = get_strategy(name)(ctx)
    for key, value in ctx.recipe.get("extra_inputs", {}).items():
        sample.inputs[key] = torch.tensor(value) if isinstance(value, list) else value
        if sample.generate_inputs is not None:
            sample.generate_inputs[key] = sample.inputs[key]
    return sample
