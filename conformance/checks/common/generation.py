"""Generation from exported parts: the split `export_generate` and `executorch` share.

Contracts:

* `single_prompt(inputs, row)` is one row of a batch-2 sample, padding removed
  (batch-aligned tensors sliced, flattened media cut to the row's share via
  its ``*_grid_thw``, sequence-aligned tensors without the masked positions).
* `generation_owner(model)` is the module `generate` decodes with (a
  BLIP-2-style class hands decoding to its `language_model`);
  `vision_owner(model)` the module whose `get_image_features` gives the
  placeholder features.
* The parts: `VisionPart` (media -> features [tokens, hidden]), `EmbedPart`
  (ids -> embeddings), `DecoderPart` (the decoder and its logits head over
  ``inputs_embeds`` and a StaticCache: a fresh cache for the prefill, which
  returns the cache tensors, or given cache tensors updated in place for a
  step; NotApplicable, raised by `carried_only`, when the cache holds layers
  that are not key/value layers, such as linear attention's recurrent
  state); `export_part` exports one, naming it when the exporter fails.
* `ExportedGeneration(model, inputs, max_len=)` exports the parts once
  (`export(shapes)`: per part, the ``dynamic_shapes`` of its keyword inputs,
  none for a static part; each export's `ShapeLog` kept in `logs`) and
  decodes greedily from them (`generate(run, prompt)`, which returns the
  tokens and every step's logits) for the traced prompt or any other
  (`prompt(inputs)`): placeholder merge with a ``masked_scatter`` and the
  argmax are the runner's glue. The cache is a StaticCache of `max_len`
  tokens whatever the prompt; the step's write position is its input (each
  layer's length tensor), so one step program serves every prompt that fits.
  Parts are called by keyword (`PART_INPUTS` names the positional ones); a
  step may update the cache in place (returns the logits) or return the
  updated cache after its logits (ONNX). `greedy_generate(model, inputs, n, **options)`
  is eager greedy ``generate`` itself, `eager_generation(model, inputs, n)`
  its tokens and per-step logits, `eager_tokens` its tokens.
"""

from __future__ import annotations

import functools
import inspect
import time
from dataclasses import dataclass
from typing import Any

import torch

from conformance.cases.configs import placeholder_id
from conformance.checks.common.cache import cache_kwarg, full_static_layers, static_cache
from conformance.checks.common.compare import logits_of
from conformance.checks.common.outcome import ContractViolation, HarnessGap, NotApplicable
from conformance.checks.common.shapes import ShapeLog
from conformance.fingerprints import Fingerprint, kind_of, where_of
from conformance.reasons import one_line

NEW_TOKENS = 8
TEXT_KEYS = {"input_ids", "attention_mask", "token_type_ids", "position_ids", "mm_token_type_ids"}
MEDIA_PARTS = ("vision",)
# Each part's positional inputs, by name: the runner calls parts by keyword.
PART_INPUTS = {"embed_prefill": ("input_ids",), "embed_step": ("input_ids",), "prefill": ("inputs_embeds",),
               "step": ("inputs_embeds", "cache_tensors")}


# --- batch 1 --------------------------------------------------------------------------------------


def single_prompt(inputs: dict[str, Any], row: int = 1) -> dict[str, Any]:
    """Row `row` of a batch-2 sample, padding removed.

    Batch-aligned tensors are sliced; flattened media (first dim = sum over
    rows of the product of a ``*_grid_thw`` row, or one entry per image of a
    list) are cut to that row's share. Sequence-aligned tensors drop the
    positions whose attention mask is 0.
    """
    ids = inputs["input_ids"]
    batch, length = ids.shape[:2]  # (batch, length) or, for multi-stream audio codes, (batch, length, streams)
    keep = inputs["attention_mask"][row].bool() if "attention_mask" in inputs else torch.ones(length, dtype=torch.bool)
    grids = {k: v for k, v in inputs.items() if k.endswith("_grid_thw") and isinstance(v, torch.Tensor)}
    out = {}
    for key, value in inputs.items():
        if isinstance(value, torch.Tensor) and value.dim() >= 2 and value.shape[:2] == (batch, length):
            out[key] = value[row : row + 1][:, keep]
        elif isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape[0] == batch:
            out[key] = value[row : row + 1]
        elif isinstance(value, torch.Tensor) and grids:
            out[key] = _flattened_row(key, value, grids, batch, row)
        elif isinstance(value, (list, tuple)) and len(value) == batch:
            out[key] = type(value)([value[row]])
        else:
            out[key] = value
    return out


def _flattened_row(key: str, value: torch.Tensor, grids: dict, batch: int, row: int) -> torch.Tensor:
    for grid in grids.values():
        sizes = grid.prod(-1).tolist()
        if grid.shape[0] == batch and sum(sizes) == value.shape[0]:
            start = int(sum(sizes[:row]))
            return value[start : start + int(sizes[row])]
    raise NotApplicable(f"cannot cut input {key!r} of shape {tuple(value.shape)} to one prompt")


# --- the parts ------------------------------------------------------------------------------------


def generation_owner(model: torch.nn.Module) -> torch.nn.Module:
    """The module whose forward `generate` runs token by token.

    A class that overrides `generate` and owns a `language_model` that can
    generate on its own (BLIP-2 style) hands the decoding to it.
    """
    from transformers.generation.utils import GenerationMixin

    if not hasattr(model, "generate"):
        raise NotApplicable(f"{type(model).__name__} has no generate(): nothing to decode token by token")
    overrides = type(model).generate is not GenerationMixin.generate
    language_model = getattr(model, "language_model", None)
    if overrides and language_model is not None and hasattr(language_model, "generate") and hasattr(
        language_model, "get_input_embeddings"
    ):
        return language_model
    return model


def vision_owner(model: torch.nn.Module) -> torch.nn.Module | None:
    """The module whose `get_image_features` gives the placeholder features: the model or its base model."""
    for owner in (model, getattr(model, "model", None)):
        if owner is not None and hasattr(owner, "get_image_features"):
            return owner
    return None


def _accepted(fn, names) -> set[str]:
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return set(names)
    return {n for n in names if n in params}


def image_features(output: Any) -> torch.Tensor:
    """Features as [tokens, hidden]: `pooler_output` of a ModelOutput, a tensor, or a list of them."""
    pooled = getattr(output, "pooler_output", None)
    if isinstance(pooled, (torch.Tensor, list, tuple)):
        output = pooled
    elif not isinstance(output, (torch.Tensor, list, tuple)) and hasattr(output, "last_hidden_state"):
        output = output.last_hidden_state
    if isinstance(output, (list, tuple)):
        return torch.cat([image_features(o) for o in output], dim=0)
    return output.reshape(-1, output.shape[-1])


class VisionPart(torch.nn.Module):
    """Vision encoder + projector: media kwargs -> features [tokens, hidden]."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model
        # transformers' exporters read `model.config` of what they export (their input preparers for NaViT-style
        # encoders do), as its own components, PreTrainedModels, have it: the part carries its model's.
        self.config = model.config

    def forward(self, **media):
        return image_features(self.model.get_image_features(**media))


class EmbedPart(torch.nn.Module):
    def __init__(self, embedding: torch.nn.Module):
        super().__init__()
        self.embedding = embedding

    def forward(self, input_ids):
        return self.embedding(input_ids)


class DecoderPart(torch.nn.Module):
    """The decoder over `inputs_embeds` and a StaticCache of `max_len` tokens.

    Without `cache_tensors` (prefill) the cache is fresh, as in `generate`,
    and the outputs are the last logits followed by the cache tensors (keys,
    values, length per layer). With them (step), they back the cache and are
    updated in place; the output is the last logits.
    """

    def __init__(self, owner: torch.nn.Module, max_len: int):
        super().__init__()
        self.owner = owner
        self.max_len = max_len
        self.kwarg = cache_kwarg(owner)
        # transformers 4.x: a static cache layer keeps no length of its own; the positions it writes come from
        # the `cache_position` input, which generate passes at every step (and which 5.x no longer takes).
        self.positions = "cache_position" in inspect.signature(owner.forward).parameters and not _layers_count_length()

    def new_cache(self):
        # A window holding the whole generation behaves as a full layer; the
        # sliding layer's python-int bookkeeping would be frozen by export.
        return full_static_layers(static_cache(self.owner, self.max_len, batch_size=1), self.max_len)

    def forward(self, inputs_embeds, cache_tensors: list[torch.Tensor] | None = None, **text):
        cache = self.new_cache()
        carried_only(cache)
        layers = [layer for layer in cache.layers if hasattr(layer, "lazy_initialization")]
        if cache_tensors is not None:
            for layer, (keys, values, length) in zip(layers, _triples(cache_tensors)):
                _install(layer, keys, values, length)
        else:
            for layer in layers:
                layer.cumulative_length = inputs_embeds.new_zeros((), dtype=torch.long)
        if self.positions:
            start = layers[0].cumulative_length if layers else 0
            text = {**text, "cache_position": torch.arange(inputs_embeds.shape[1], device=inputs_embeds.device) + start}
        output = self.owner(inputs_embeds=inputs_embeds, use_cache=True, **{self.kwarg: cache}, **text)
        logits = logits_of(output)[:, -1, :]
        if self.positions:  # the layers kept no length: count the written tokens here, as 5.x layers do
            for layer in layers:
                layer.cumulative_length.add_(inputs_embeds.shape[1])
        if cache_tensors is not None:
            return logits
        state = [t for layer in layers for t in (layer.keys, layer.values, layer.cumulative_length)]
        return (logits, *state)


def carried_only(cache) -> None:
    """NotApplicable when `cache` holds layers these parts cannot carry between exported calls: the parts pass
    each layer's keys, values and length as tensors, and a layer without them (linear attention's recurrent
    state, kept with Python-side bookkeeping such as `has_previous_state`) has state they would drop."""
    others = sorted({type(layer).__name__ for layer in getattr(cache, "layers", [])
                     if not (hasattr(layer, "keys") and hasattr(layer, "values"))})
    if others:
        raise NotApplicable(f"the decoder's static cache holds {', '.join(others)} layers (a recurrent state, not "
                            "keys and values), which these generation parts do not carry between exported calls: "
                            "not split by this check")


@functools.lru_cache(maxsize=1)
def _layers_count_length() -> bool:
    """Whether a StaticCache layer keeps its own length tensor (`cumulative_length`, transformers 5)."""
    from transformers.cache_utils import StaticLayer

    return isinstance(getattr(StaticLayer(1), "cumulative_length", None), torch.Tensor)


def _triples(flat: list[torch.Tensor]):
    return [flat[i : i + 3] for i in range(0, len(flat), 3)]


def _install(layer, keys: torch.Tensor, values: torch.Tensor, length: torch.Tensor) -> None:
    layer.keys, layer.values, layer.cumulative_length = keys, values, length
    layer.device = keys.device
    layer.batch_size, layer.num_heads = keys.shape[:2]
    layer.k_head_dim, layer.v_head_dim = keys.shape[-1], values.shape[-1]
    layer.is_initialized = True


class NamedInputs(torch.nn.Module):
    """`module` called with keyword inputs whose names its forward declares (keyword-only parameters).

    torch 2.13's non-strict export cannot match a `dynamic_shapes` spec to a
    ``forward(**text)``; with named parameters the spec is keyed by input name.
    """

    def __init__(self, module: torch.nn.Module, names):
        super().__init__()
        self.module = module

        def forward(**inputs: Any):
            return self.module(**inputs)

        forward.__signature__ = inspect.Signature(
            [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY) for name in names])
        self.forward = forward


def export_part(name: str, module: torch.nn.Module, kwargs: dict, shapes: dict | None = None,
                log: ShapeLog | None = None):
    """torch.export a part (non-strict) over keyword inputs, `shapes` its ``dynamic_shapes`` by input name (None:
    static), inside `log` when given; ContractViolation naming the part and the exporter's reason."""
    try:
        with (log if log is not None else _nothing()), torch.no_grad():
            if shapes:
                full = {key: shapes.get(key) for key in kwargs}
                return torch.export.export(NamedInputs(module, list(kwargs)), (), dict(kwargs), dynamic_shapes=full,
                                           strict=False)
            return torch.export.export(module, (), dict(kwargs), strict=False)
    except NotApplicable:  # the part said so while traced (`carried_only`)
        raise
    except Exception as exc:
        dynamic = f" with {', '.join(sorted(shapes))} dynamic" if shapes else ""
        fingerprint = Fingerprint(kind_of(exc, "export_error"), where=where_of(exc), error=type(exc).__name__,
                                  what=f"export of part {name}")
        raise ContractViolation(f"export of part {name!r}{dynamic} failed: {one_line(exc)}",
                                fingerprint=fingerprint) from exc


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return None


# --- generation -----------------------------------------------------------------------------------


def greedy_generate(model: torch.nn.Module, inputs: dict[str, Any], new_tokens: int, **options):
    """Eager greedy `generate` of exactly `new_tokens` tokens (end-of-sequence ignored); `options` go to it."""
    config = model.generation_config
    config.eos_token_id = None
    if config.pad_token_id is None:
        config.pad_token_id = 0
    with torch.no_grad():
        return model.generate(**inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                              num_beams=1, **options)


def require_token_scores(step_logits) -> list[torch.Tensor]:
    """`generate`'s per-step logits, each with a vocabulary axis ((batch, vocabulary), or per codebook); HarnessGap
    when a step scores only the batch.

    A continuous-frame generator (a text-to-speech model whose `generate` samples a latent frame per step from a
    flow head and scores only end-of-speech, shape (batch,)) emits no token from a vocabulary: the checks that
    emulate greedy token decoding (forcing, argmax, comparing tokens) cannot set themselves up for it.
    """
    steps = list(step_logits)
    odd = next((t for t in steps if t.dim() < 2), None)
    if odd is not None:
        raise HarnessGap(f"generate scores each step with shape {tuple(odd.shape)}, with no vocabulary axis: it emits "
                         "continuous frames, not tokens, and this check emulates greedy token decoding")
    return steps


def eager_generation(model: torch.nn.Module, inputs: dict[str, Any], new_tokens: int
                     ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """(the `new_tokens` greedy tokens, the raw logits of each step) of eager `generate` (end-of-sequence
    ignored); HarnessGap for a generator that scores no vocabulary (`require_token_scores`)."""
    out = greedy_generate(model, inputs, new_tokens, output_logits=True, return_dict_in_generate=True)
    return out.sequences[:, -new_tokens:], require_token_scores(out.logits)


def eager_tokens(model: torch.nn.Module, inputs: dict[str, Any], new_tokens: int) -> torch.Tensor:
    """The `new_tokens` greedy tokens of eager `generate` (end-of-sequence ignored)."""
    return eager_generation(model, inputs, new_tokens)[0]


@dataclass
class Prompt:
    """One request as the runner feeds it: prompt ids (placeholders zeroed), where the placeholders are, the
    vision part's media inputs and the decoder's text inputs."""

    ids: torch.Tensor
    placeholders: torch.Tensor
    media: dict[str, Any]
    text: dict[str, Any]


def _allocated(view: torch.Tensor) -> torch.Tensor:
    """A copy of `view` with the strides of a freshly allocated tensor, as a runner allocates each new token and its
    embedding: a compiled program (AOTInductor) checks its inputs' strides, even those of a dimension of size 1."""
    return view.clone(memory_format=torch.contiguous_format)


class ExportedGeneration:
    """The exported parts of one model, and greedy decoding from them for any prompt that fits the cache."""

    def __init__(self, model: torch.nn.Module, inputs: dict[str, Any], new_tokens: int = NEW_TOKENS,
                 max_len: int | None = None):
        self.owner = generation_owner(model)
        self.config = model.config
        self.inputs = inputs
        self.new_tokens = new_tokens
        ids = inputs["input_ids"]
        if ids.dim() != 2:
            raise NotApplicable(f"multi-stream prompt: input_ids of shape {tuple(ids.shape)} (batch, length, "
                                "streams), whose other streams each step must be fed from outside the model (an "
                                "audio frame's codes); the greedy loop of these parts feeds one generated token")
        media = [k for k, v in inputs.items() if k not in TEXT_KEYS and isinstance(v, torch.Tensor)]
        self.vision_model = vision_owner(model) if media else None
        if media and self.vision_model is None:
            raise NotApplicable("the sample's media reach the model by another route than placeholder features "
                                "(no get_image_features on the model or its base model): not split by this check")
        self.traced = self.prompt(inputs)
        if self.traced.media and not bool(self.traced.placeholders.any()):
            raise NotApplicable("the sample's media reach the model by another route than placeholder tokens (the "
                                "prompt holds no placeholder of the config's image token; a position mask or "
                                "embeddings the model places itself): not split by this check")
        self.placeholders, self.media, self.text = self.traced.placeholders, self.traced.media, self.traced.text
        self.max_len = max_len or ids.shape[1] + new_tokens
        self.programs: dict[str, torch.export.ExportedProgram] = {}
        self._callables: dict[str, torch.nn.Module] = {}
        self._eager_parts: dict[str, torch.nn.Module] = {}
        self.logs: dict[str, ShapeLog] = {}
        self.refused: dict[str, ContractViolation] = {}  # media parts exported static: why not dynamic
        self.export_seconds = 0.0

    def prompt(self, inputs: dict[str, Any]) -> Prompt:
        """`inputs` (batch 1) as the parts take them."""
        ids = inputs["input_ids"]
        token = placeholder_id(self.config)
        placeholders = (ids == token) if token is not None else torch.zeros_like(ids, dtype=torch.bool)
        media = {k: v for k, v in inputs.items() if k not in TEXT_KEYS and isinstance(v, torch.Tensor)}
        if self.vision_model is not None:
            media = {k: media[k] for k in _accepted(self.vision_model.get_image_features, media)}
        text = {k: v for k, v in inputs.items() if k in TEXT_KEYS - {"input_ids"}}
        text = {k: text[k] for k in _accepted(self.owner.forward, text)}
        return Prompt(ids.masked_fill(placeholders, 0), placeholders, media, text)

    def prompt_ids(self) -> torch.Tensor:
        return self.traced.ids

    def part_inputs(self):
        """Each part's name and keyword inputs for the traced prompt, in export order; the decoder's step inputs
        come from an eager prefill, run only once the parts before it are taken (exported)."""
        embedding = EmbedPart(self.owner.get_input_embeddings())
        ids = self.traced.ids
        if self.vision_model is not None:
            yield "vision", dict(self.traced.media)
        yield "embed_prefill", {"input_ids": ids}
        yield "embed_step", {"input_ids": _allocated(ids[:, -1:])}
        with torch.no_grad():
            embeds = embedding(ids)
        yield "prefill", {"inputs_embeds": embeds, **self.traced.text}
        with torch.no_grad():
            _, *state = DecoderPart(self.owner, self.max_len)(embeds, **self.traced.text)
        yield "step", {"inputs_embeds": _allocated(embeds[:, -1:]), "cache_tensors": state}

    def modules(self) -> dict[str, torch.nn.Module]:
        embedding = EmbedPart(self.owner.get_input_embeddings())
        modules = {"vision": VisionPart(self.vision_model)} if self.vision_model is not None else {}
        modules.update(embed_prefill=embedding, embed_step=embedding, prefill=DecoderPart(self.owner, self.max_len),
                       step=DecoderPart(self.owner, self.max_len))
        return modules

    def export(self, shapes: dict[str, dict] | None = None) -> dict[str, torch.export.ExportedProgram]:
        """Export every part once; `shapes` maps a part to the ``dynamic_shapes`` of its inputs (absent: static).

        A media part whose dynamic export fails is exported static, the failure kept in `refused` (the image
        requests it cannot serve say so); any other part's failure is raised.
        """
        started = time.perf_counter()
        modules = self.modules()
        for name, kwargs in self.part_inputs():
            self.logs[name] = ShapeLog()
            shape = (shapes or {}).get(name)
            try:
                self.programs[name] = export_part(name, modules[name], kwargs, shape, self.logs[name])
            except ContractViolation as exc:
                if name not in MEDIA_PARTS or not shape:
                    raise
                self.refused[name] = exc
                self.programs[name] = export_part(name, modules[name], kwargs)
        self.export_seconds = time.perf_counter() - started
        return self.programs

    def prefill_embeds(self, run, prompt: Prompt | None = None) -> torch.Tensor:
        """The prompt embeddings with the image features scattered into the placeholders."""
        prompt = prompt or self.traced
        embeds = run("embed_prefill", input_ids=prompt.ids)
        if self.vision_model is not None:
            features = run("vision", **prompt.media).to(embeds.dtype)
            count = int(prompt.placeholders.sum())
            if features.numel() != count * embeds.shape[-1]:
                raise ContractViolation(f"vision part gives {tuple(features.shape)} features for {count} placeholders")
            embeds = embeds.masked_scatter(prompt.placeholders.unsqueeze(-1), features)
        return embeds

    def generate(self, run=None, prompt: Prompt | None = None) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """(new tokens [1, new_tokens], the logits of every step, prefill first) greedily from the programs
        (or `run(name, **inputs)`) for `prompt` (the traced one by default)."""
        run = run or self.run_program
        prompt = prompt or self.traced
        with torch.no_grad():
            logits, *state = run("prefill", inputs_embeds=self.prefill_embeds(run, prompt), **prompt.text)
            steps = [logits.float()]
            tokens = [logits.argmax(-1, keepdim=True)]
            for _ in range(self.new_tokens - 1):
                out = run("step", inputs_embeds=run("embed_step", input_ids=tokens[-1]), cache_tensors=list(state))
                if isinstance(out, (list, tuple)):  # a functional step returns the updated cache after its logits
                    out, *state = out
                steps.append(out.float())
                tokens.append(out.argmax(-1, keepdim=True))
        return torch.cat(tokens, dim=1), steps

    def run_program(self, name: str, *args, **kwargs):
        named = dict(zip(PART_INPUTS.get(name, ()), args), **kwargs)
        if name not in self._callables:
            self._callables[name] = self.programs[name].module()
        return self._callables[name](**named)

    def run_eager(self, name: str, *args, **kwargs):
        """A part run as the eager module it is exported from (`modules`): what the exported program must match.
        `generate(self.run_eager, prompt)` is the suite's decomposition itself, with no exporter involved."""
        if not self._eager_parts:
            self._eager_parts.update(self.modules())
        return self._eager_parts[name](**dict(zip(PART_INPUTS.get(name, ()), args), **kwargs))
