"""Synthetic models with planted bugs, for the adversarial self-tests of every check (`test_planted_bugs.py`).

`TinyLM` is a one-layer causal LM small enough to export in a second: a
transformers `PreTrainedModel` + `GenerationMixin` (so `generate`, dynamic
and static caches, `torch.compile` and `torch.export` all run through the
library's own machinery), an absolute position embedding (so a key written
to the wrong cache slot changes the result), one attention head over the
cache and an optional image path (`pixel_values` added to the placeholder
positions). Its forward takes the cache as ``cache`` and ``past_key_values``,
builds its own mask from a 2D mask (or takes generate's 4D one), and takes
its positions from ``cache_position`` or the cache's length.

Each subclass plants one bug (`BUGS` names them); `case_for(model_class)`
makes a Case whose fresh models are that class with the same weights (`PlantedCase`; `FactoryCase`, its base,
is the other meta tests' synthetic case: any factory, the sample and variants the test gives).
`Exportable` is the smallest module the export checks pass on (ids and a
mask in, logits out): the export and ONNX meta tests subclass it for theirs.
`judged_as_declared(check_id, metrics)` says whether a cell recorded the
tolerance its check declares.
Nothing here is a transformers model build: a case is ready in milliseconds.
"""

from __future__ import annotations

import inspect
import math
import threading
from dataclasses import dataclass
from typing import Callable

import pytest
import torch
import transformers
from transformers import GenerationMixin, LlamaConfig, LlamaForCausalLM, PreTrainedModel
from transformers.cache_utils import DynamicCache, StaticCache
from transformers.modeling_outputs import CausalLMOutputWithPast

from conformance.cases.case import Case
from conformance.cases.samples import Sample
from conformance.cases.tiny import TinyModel
from conformance.cases.variants import Variants, make_variants
from conformance.discover import ModelInfo
from conformance.tolerances import tolerance

# The planted models are written against transformers 5's cache and generate API (lazily initialized StaticCache
# layers, cache positions generate passes); on 4.x they do not model a 4.x model, so their verdicts say nothing.
NEEDS_TRANSFORMERS_5 = pytest.mark.skipif(
    int(transformers.__version__.split(".")[0]) < 5,
    reason=f"transformers {transformers.__version__}: the planted models need transformers 5's StaticCache and "
           "generate API (planted.py); the checks' own 4.x paths are covered by the version matrix's CI classes")

IMAGE_TOKEN = 5
VOCAB = 48
HIDDEN = 16


def tiny_config() -> LlamaConfig:
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=1, num_key_value_heads=1, head_dim=HIDDEN, max_position_embeddings=64,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2)
    config.image_token_id = IMAGE_TOKEN
    return config


# The cache keyword of the installed transformers' models (5.24: `cache`; earlier: `past_key_values`). generate puts
# its cache under that name, and `forward` below shows only that one in its signature, as a real model does.
CACHE_ARG = "cache" if "cache" in inspect.signature(LlamaForCausalLM.forward).parameters else "past_key_values"


def _one_cache_keyword(forward):
    signature = inspect.signature(forward)
    other = "past_key_values" if CACHE_ARG == "cache" else "cache"
    forward.__signature__ = signature.replace(parameters=[p for n, p in signature.parameters.items() if n != other])
    return forward


class TinyLM(PreTrainedModel, GenerationMixin):
    """The correct model: every check passes on it."""

    config_class = LlamaConfig
    base_model_prefix = "tiny"
    _supports_sdpa = False
    _can_compile_fullgraph = True

    def __init__(self, config: LlamaConfig | None = None):
        super().__init__(config or tiny_config())
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.positions = torch.nn.Embedding(64, HIDDEN)
        self.qkv = torch.nn.Linear(HIDDEN, 3 * HIDDEN)
        self.image = torch.nn.Linear(12, HIDDEN)
        self.head = torch.nn.Linear(HIDDEN, VOCAB)
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
            torch.nn.init.normal_(module.weight, std=0.5)
        if isinstance(module, torch.nn.Linear) and module.bias is not None:
            torch.nn.init.zeros_(module.bias)

    def get_input_embeddings(self):
        return self.embed

    def get_image_features(self, pixel_values):
        return self.image(pixel_values.flatten(1)).unsqueeze(1)

    # --- hooks the planted bugs override -----------------------------------------------------------

    def image_embeds(self, embeds, input_ids, pixel_values):
        features = self.get_image_features(pixel_values).to(embeds.dtype)
        return embeds + (input_ids == IMAGE_TOKEN).unsqueeze(-1) * features

    def write(self, cache, keys, values, decode: bool):
        return cache.update(keys, values, 0)

    def adjust(self, logits, decode: bool, cache):
        return logits

    # --- forward ------------------------------------------------------------------------------------

    @_one_cache_keyword
    def forward(self, input_ids=None, attention_mask=None, cache=None, past_key_values=None, inputs_embeds=None,
                pixel_values=None, use_cache=None, cache_position=None, logits_to_keep=0, **kwargs):
        cache = cache if cache is not None else past_key_values
        if inputs_embeds is None:
            inputs_embeds = self.embed(input_ids)
            if pixel_values is not None:
                inputs_embeds = self.image_embeds(inputs_embeds, input_ids, pixel_values)
        batch, length = inputs_embeds.shape[:2]
        if use_cache and cache is None:
            cache = DynamicCache()
        if cache_position is None:
            past = cache.get_seq_length() if cache is not None else 0
            cache_position = torch.arange(length, device=inputs_embeds.device) + past
        hidden = inputs_embeds + self.positions(cache_position)
        query, key, value = self.qkv(hidden).unsqueeze(1).chunk(3, dim=-1)
        decode = length == 1
        if cache is not None:
            key, value = self.write(cache, key, value, decode)
        allowed = self.allowed(attention_mask, cache_position, key.shape[2], batch)
        scores = (query @ key.transpose(-1, -2)) / math.sqrt(HIDDEN)
        scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        hidden = hidden + (scores.softmax(-1) @ value).squeeze(1)
        logits = self.adjust(self.head(hidden), decode, cache)
        return CausalLMOutputWithPast(logits=logits, past_key_values=cache if use_cache else None)

    def allowed(self, mask, cache_position, kv_length: int, batch: int) -> torch.Tensor:
        """[batch, 1, queries, keys]: causal over the slots, and the 2D mask's padding (or generate's 4D mask)."""
        if mask is not None and mask.dim() == 4:
            return mask if mask.dtype == torch.bool else mask == 0
        slots = torch.arange(kv_length, device=cache_position.device)
        allowed = (slots[None, :] <= cache_position[:, None])[None, None].expand(batch, 1, -1, -1)
        if mask is not None:
            padded = torch.nn.functional.pad(mask, (0, kv_length - mask.shape[-1]), value=1).bool()
            allowed = allowed & padded[:, None, None, :]
        return allowed


# --- planted bugs -----------------------------------------------------------------------------------


def _static(cache) -> bool:
    return isinstance(cache, StaticCache)


class WrongSlotLM(TinyLM):
    """Decode steps into a StaticCache write their key one slot early, over the previous token's."""

    def write(self, cache, keys, values, decode):
        if decode and _static(cache):
            cache.layers[0].cumulative_length.sub_(1)
            full = super().write(cache, keys, values, decode)
            cache.layers[0].cumulative_length.add_(1)
            return full
        return super().write(cache, keys, values, decode)


class StaleCacheLM(TinyLM):
    """Decode steps into a StaticCache read the new key but never keep it: the cache stays stale."""

    def write(self, cache, keys, values, decode):
        if not (decode and _static(cache)):
            return super().write(cache, keys, values, decode)
        layer = cache.layers[0]
        saved_keys, saved_values = layer.keys.clone(), layer.values.clone()
        full_keys, full_values = super().write(cache, keys, values, decode)
        full_keys, full_values = full_keys.clone(), full_values.clone()
        layer.keys.copy_(saved_keys)
        layer.values.copy_(saved_values)
        return full_keys, full_values


class StaticNumericsLM(TinyLM):
    """Decode steps over a StaticCache are silently off by 1e-3 (tokens unchanged)."""

    def adjust(self, logits, decode, cache):
        return logits + 1e-3 if decode and _static(cache) else logits


class CompiledNumericsLM(TinyLM):
    """Compiled code is silently off by 1e-3."""

    def adjust(self, logits, decode, cache):
        return logits + 1e-3 if torch.compiler.is_compiling() and not torch.compiler.is_exporting() else logits


class ExportedNumericsLM(TinyLM):
    """Exported programs are silently off by 1e-3."""

    def adjust(self, logits, decode, cache):
        return logits + 1e-3 if torch.compiler.is_exporting() else logits


class ExportedDecodeNumericsLM(TinyLM):
    """Exported decode steps are silently off by 1e-3 (the prefill is right)."""

    def adjust(self, logits, decode, cache):
        return logits + 1e-3 if decode and torch.compiler.is_exporting() else logits


class HalvingCacheLM(TinyLM):
    """Every decode step halves the stored keys, in any cache: static and dynamic agree, both are wrong."""

    def write(self, cache, keys, values, decode):
        full_keys, full_values = super().write(cache, keys, values, decode)
        if decode:
            cache.layers[0].keys.mul_(0.5)
        return full_keys, full_values


class RecompilingLM(TinyLM):
    """Every call bumps a Python int that the logits read: a guard on it recompiles each decode step."""

    def adjust(self, logits, decode, cache):
        self.calls = getattr(self, "calls", 0) + 1
        return logits + 0 * self.calls


class DecodeGraphBreakLM(TinyLM):
    """A decode step calls print(): a graph break."""

    def adjust(self, logits, decode, cache):
        if decode:
            print("", end="")
        return logits


class BakedPositionLM(TinyLM):
    """Under a StaticCache the write position comes from a Python int the model counts: export bakes it."""

    def write(self, cache, keys, values, decode):
        if _static(cache):
            written = getattr(self, "written", 0)
            cache.layers[0].cumulative_length.fill_(written)
            self.written = written + keys.shape[2]
        return super().write(cache, keys, values, decode)


class DetachedCacheLM(TinyLM):
    """Under a StaticCache the model swaps the cache's tensors for copies before writing: the program's buffers
    never change."""

    def write(self, cache, keys, values, decode):
        layer = cache.layers[0] if _static(cache) else None
        if layer is not None and getattr(layer, "keys", None) is not None:
            layer.keys, layer.values = layer.keys.clone(), layer.values.clone()
        return super().write(cache, keys, values, decode)


class PrefillCounterLM(TinyLM):
    """A prefill into a StaticCache writes from a counter tensor the model keeps (not a buffer, not an input):
    export keeps it as program state, so the program's second prefill continues where the first ended."""

    def __init__(self, config=None):
        super().__init__(config)
        self.counter = torch.zeros((), dtype=torch.long)

    def write(self, cache, keys, values, decode):
        if _static(cache) and not decode:
            cache.layers[0].cumulative_length.copy_(self.counter)
            self.counter.add_(keys.shape[2])
        return super().write(cache, keys, values, decode)


class TupleDroppingLM(TinyLM):
    """A raw legacy tuple passed as the cache is silently dropped (decoding as if there were no past)."""

    def forward(self, *args, **kwargs):
        for name in ("cache", "past_key_values"):
            if isinstance(kwargs.get(name), tuple):
                kwargs[name] = None
        return super().forward(*args, **kwargs)


class ConvertedCacheNumericsLM(TinyLM):
    """Continues from its own cache exactly, from a cache rebuilt from legacy tuples 1e-3 off."""

    def forward(self, *args, **kwargs):
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        rebuilt = isinstance(cache, DynamicCache) and not getattr(cache, "own", False)
        if kwargs.get("use_cache") and cache is None:
            kwargs["cache"] = DynamicCache()
            kwargs["cache"].own = True
        output = super().forward(*args, **kwargs)
        if rebuilt:
            output.logits = output.logits + 1e-3
        return output


class SetupOnFirstCallLM(TinyLM):
    """One-time setup on the first call that dynamo cannot trace: only a compile-first trace breaks."""

    ready = False

    def adjust(self, logits, decode, cache):
        if not self.ready:
            print("", end="")  # stands for untraceable one-time setup (a lock, a hook installation)
            self.ready = True
        return logits


class RaisingLM(TinyLM):
    """Its forward raises on the sample."""

    def adjust(self, logits, decode, cache):
        raise RuntimeError("the planted model cannot run")


class StatefulLM(TinyLM):
    """A buffer counts the calls and shifts the logits: a second call of the same program differs."""

    def __init__(self, config=None):
        super().__init__(config)
        self.register_buffer("calls", torch.zeros(()), persistent=False)

    def adjust(self, logits, decode, cache):
        self.calls.add_(1)
        return logits + (self.calls - 1)


class LockedLM(TinyLM):
    """Holds a lock around its forward (as transformers' output capturing does): strict export cannot trace it."""

    lock = threading.Lock()

    def forward(self, *args, **kwargs):
        with self.lock:
            return super().forward(*args, **kwargs)


class DataDependentLM(TinyLM):
    """Branches on a tensor's value: dynamo breaks the graph, export cannot trace it."""

    def adjust(self, logits, decode, cache):
        if logits.sum() > 0:
            return logits * 1.0
        return logits


class LengthSpecialisedLM(TinyLM):
    """A Python branch on its prompt length (`input_ids.shape[1]`, a fast path for prompts of the planted
    length that computes the same values): a trace on such a prompt specialises the length to it, so a
    compile with the length marked dynamic cannot keep it symbolic and an exported program serves that length
    only. Every check that traces one prompt passes."""

    def forward(self, *args, **kwargs):
        output = super().forward(*args, **kwargs)
        input_ids = kwargs.get("input_ids")
        if input_ids is not None and input_ids.shape[1] == PROMPT_LENGTH:  # the planted specialisation
            output.logits = output.logits * 1.0
        return output


class PrefillGraphBreakLM(TinyLM):
    """The prefill calls print(): a graph break."""

    def adjust(self, logits, decode, cache):
        if not decode:
            print("", end="")
        return logits


class MediaUnusedLM(TinyLM):
    """Takes pixel_values and ignores them."""

    def image_embeds(self, embeds, input_ids, pixel_values):
        return embeds


class NonFiniteLM(TinyLM):
    """A division by zero in the head: the logits are not finite."""

    def adjust(self, logits, decode, cache):
        return logits / 0.0


@torch.library.custom_op("conformance_planted::column_major", mutates_args=())
def column_major(x: torch.Tensor) -> torch.Tensor:
    """A copy of `x` laid out column-major (its last two dims' strides swapped)."""
    return x.transpose(-1, -2).contiguous().transpose(-1, -2).clone(memory_format=torch.preserve_format)


@column_major.register_fake
def _column_major_fake(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)  # the planted lie: row-major strides


class WrongFakeStridesLM(TinyLM):
    """Its head runs a custom op whose fake kernel claims row-major strides while the op returns column-major
    ones: dynamo runs the real op after tracing (backend eager passes); inductor's generated code asserts the
    strides the fake kernel promised and fails (the size/stride assertion users meet)."""

    def adjust(self, logits, decode, cache):
        rows = logits.reshape(-1, logits.shape[-1])  # two dims longer than 1, in decode steps too
        return column_major(rows).reshape(logits.shape)


# --- exportable modules ---------------------------------------------------------------------------


class Exportable(torch.nn.Module):
    """The smallest module the export checks pass on (no transformers model): token ids and a 2D mask in,
    ``{"logits": ...}`` out. The export and ONNX meta tests plant their bugs in its subclasses."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(16, 8)
        self.head = torch.nn.Linear(8, 16)

    def forward(self, input_ids, attention_mask=None):
        hidden = self.embed(input_ids) * attention_mask.unsqueeze(-1)
        return {"logits": self.head(hidden)}


# --- cases ------------------------------------------------------------------------------------------


@dataclass
class FactoryCase(Case):
    """A Case whose fresh models are `factory()` with the same weights every time (seeded by the case's seed);
    its sample and variants are whatever the test gives it. The meta tests' synthetic cases are this."""

    factory: Callable[[], torch.nn.Module] | None = None

    def fresh_model(self) -> torch.nn.Module:
        torch.manual_seed(self.seed)
        return self.factory().eval()


@dataclass
class PlantedCase(FactoryCase):
    """A FactoryCase whose variants are made from its sample by a forward of the planted model itself."""

    def variants(self) -> Variants:
        """The sample's variants (`build.variants`), checked by a forward of the planted model itself."""
        if self._variants is None:
            self._variants = make_variants(self.tiny, self.sample, self.fresh_model())
        return self._variants


PROMPT_LENGTH = 8  # the length of `prompt()`'s rows


def prompt(media: bool = False) -> Sample:
    """Batch 2, the first row left-padded; with `media`, one image placeholder per row and its pixels."""
    ids = torch.tensor([[0, 0, 0, 1, 9, 11, 13, 8], [1, 7, 3, 8, 12, 4, 6, 10]])
    assert ids.shape[1] == PROMPT_LENGTH
    inputs = {"input_ids": ids, "attention_mask": (ids != 0).long()}
    if not media:
        return Sample(inputs=inputs, strategy="planted")
    ids[:, 5] = IMAGE_TOKEN
    inputs["pixel_values"] = torch.randn(2, 3, 2, 2, generator=torch.Generator().manual_seed(0))
    return Sample(inputs=inputs, strategy="planted", media_keys=("pixel_values",))


def case_for(model_class: type[TinyLM], media: bool = False) -> PlantedCase:
    info = ModelInfo(name=model_class.__name__, model_class=model_class, config_class=LlamaConfig,
                     model_type="planted", module=__name__, modalities=("image", "text") if media else ("text",),
                     tasks=(), kind="synthetic", declared={})
    return PlantedCase(info=info, tiny=TinyModel(info=info, config=tiny_config(), source="planted"),
                       sample=prompt(media), factory=model_class)


def judged_as_declared(check_id: str, metrics: dict) -> bool:
    """Whether a planted case's cell (float32, eager) records the tolerance its check declares (`compare.record`:
    ``atol``, ``rtol``); True for a check that compares nothing."""
    from conformance.checks.common.registry import get

    spec = get(check_id)
    if not spec.compares:
        return True
    declared = tolerance("float32", spec.tolerance or "eager")
    return (metrics.get("atol"), metrics.get("rtol")) == (declared.atol, declared.rtol)
