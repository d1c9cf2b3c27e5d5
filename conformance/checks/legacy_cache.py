"""Check `legacy_cache`: the legacy tuple-of-(key, value) cache contract of the installed version.

Contract. The cache owner is the model itself when its forward takes a cache,
else its ``language_model`` (models whose generate delegates to it, e.g. a
Q-Former VLM over OPT). A fresh owner runs the sample's prefill with
``use_cache=True``; its cache is turned into the legacy format: per layer
``(key, value)``, or ``(self_key, self_value, cross_key, cross_value)`` for an
EncoderDecoderCache (``to_legacy_cache()`` where the installed version has
it). Then:

1. converted back with the installed API (``from_legacy_cache`` where it
   exists, else the constructor: ``DynamicCache(tuples)``), decoding
   `DECODE_STEPS` tokens from it gives the same logits as decoding the same
   tokens from the original cache (eager tolerance); where ``to_legacy_cache``
   exists the round trip returns the same tensors;
2. the raw tuples passed to forward are recorded as `raw_tuple`:
   ``rejected_clear`` (ValueError/TypeError naming the cache),
   ``rejected_unclear`` (any other error, e.g. an AttributeError deep inside),
   ``accepted_equal`` or ``accepted_wrong``. ``accepted_wrong`` (a raw tuple
   silently accepted with wrong results) is a violation.

Decode steps feed ordinary prompt tokens (the last tokens of the prompt, never
a placeholder) with the attention mask grown by one, as generate does; both
continuations get identical inputs, so any difference is the cache's.
Not applicable: no cache anywhere; a cache whose layers hold recurrent state
(linear attention), which the (key, value) format cannot hold.
Metrics: `max_abs_diff`, `raw_tuple`, `raw_tuple_error`, `conversion`,
`cache_class`, `cache_owner`, `layers`.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import torch

from conformance.cases.case import Case
from conformance.checks.common.cache import cache_kwarg, cache_owner
from conformance.checks.common.compare import assert_close, closeness, logits_of, record
from conformance.checks.common.outcome import ContractViolation, HarnessGap, NotApplicable
from conformance.checks.common.registry import check, declared_tolerance
from conformance.reasons import one_line
from conformance.tolerances import Tolerance

DECODE_STEPS = 2
CLEAR_REJECTION = re.compile(r"cache|past_key_values", re.IGNORECASE)


def owner_inputs(inputs: dict[str, Any], owner_name: str) -> dict[str, Any]:
    """Prefill kwargs for the owner: the whole sample, or its text part for a language model."""
    if owner_name == "model":
        return dict(inputs)
    keys = ("input_ids", "attention_mask", "decoder_input_ids")
    return {k: inputs[k] for k in keys if k in inputs}


def cache_of(output: Any):
    for name in ("cache", "past_key_values"):
        value = getattr(output, name, None) if not isinstance(output, dict) else output.get(name)
        if value is not None:
            return value
    return None


def to_legacy(cache) -> tuple:
    """The legacy tuples of a cache (cloned): per layer (k, v) or (k, v, cross_k, cross_v)."""
    if hasattr(cache, "to_legacy_cache"):
        legacy = cache.to_legacy_cache()
    elif hasattr(cache, "self_attention_cache"):
        legacy = tuple(pair_a + pair_b for pair_a, pair_b in
                       zip(_pairs(cache.self_attention_cache), _pairs(cache.cross_attention_cache)))
    else:
        legacy = _pairs(cache)
    return tuple(tuple(_clone(t) for t in layer) for layer in legacy)


def _pairs(cache) -> tuple:
    from transformers.cache_utils import CacheLayerMixin

    layers = getattr(cache, "layers", None)
    if layers is None:
        raise NotApplicable(f"{type(cache).__name__} has neither to_legacy_cache nor per-layer keys/values")
    for layer in layers:
        if not isinstance(layer, CacheLayerMixin) and not _is_placeholder(layer):
            raise NotApplicable(
                f"{type(cache).__name__} holds {type(layer).__name__} layers (recurrent state), "
                "which the legacy tuple-of-(key, value) format cannot hold")
    return tuple((getattr(layer, "keys", None), getattr(layer, "values", None)) for layer in layers)


def _is_placeholder(layer) -> bool:
    """A layer that never stores anything (e.g. a KV-sharing consumer)."""
    return getattr(layer, "keys", None) is None and not hasattr(layer, "conv_states") \
        and not hasattr(layer, "recurrent_states")


def _clone(value):
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


def from_legacy(cache, legacy: tuple) -> tuple[Any, str]:
    """The installed API's conversion of legacy tuples back into a cache object."""
    from transformers.cache_utils import DynamicCache

    kind = type(cache) if hasattr(cache, "self_attention_cache") else DynamicCache
    if hasattr(kind, "from_legacy_cache"):
        return kind.from_legacy_cache(legacy), f"{kind.__name__}.from_legacy_cache"
    return kind(legacy), f"{kind.__name__}(tuples)"


def same_tensors(a: tuple, b: tuple) -> bool:
    if len(a) != len(b):
        return False
    for layer_a, layer_b in zip(a, b):
        if len(layer_a) < 2 or len(layer_b) < 2:
            return False
        for x, y in zip(layer_a[:4], layer_b[:4]):
            if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
                return False
            if isinstance(x, torch.Tensor) and (x.shape != y.shape or not torch.equal(x, y)):
                return False
    return True


class Decoder:
    """Decode steps after a prefill, with the inputs generate would pass.

    A decoder-only owner gets its step inputs from its own generation code
    (`_update_model_kwargs_for_generation` then `prepare_inputs_for_generation`:
    grown attention mask, token types, positions, dropped media); an
    encoder-decoder owner gets the prefill's encoder inputs and one new
    decoder token per step.
    """

    def __init__(self, owner: torch.nn.Module, prefill: dict[str, Any]):
        self.owner = owner
        self.cache_name = cache_kwarg(owner)
        self.encoder_decoder = "decoder_input_ids" in prefill
        self.ids_key = "decoder_input_ids" if self.encoder_decoder else "input_ids"
        ids = prefill.get(self.ids_key)
        if ids is None:
            raise NotApplicable(f"the sample has no {self.ids_key} to continue decoding from")
        self.ids = ids
        # The last prompt tokens are ordinary text tokens (never a media placeholder).
        self.tokens = [ids[:, ids.shape[1] - 1 - step:ids.shape[1] - step] for step in range(DECODE_STEPS)]
        self.generation_code = not self.encoder_decoder and all(
            hasattr(owner, name) for name in ("prepare_inputs_for_generation", "_update_model_kwargs_for_generation"))
        self.prefill = self.with_generate_positions(dict(prefill))
        self.prefill_output = None

    def with_generate_positions(self, prefill: dict[str, Any]) -> dict[str, Any]:
        """The prefill with the position ids generate computes up front (where the installed version does)."""
        prepare = getattr(self.owner, "_prepare_position_ids_for_generation", None)
        if not self.generation_code or prepare is None or "position_ids" in prefill:
            return prefill
        if "position_ids" not in inspect.signature(self.owner.forward).parameters:
            return prefill
        kwargs = {k: v for k, v in prefill.items() if k != "input_ids"}
        prefill["position_ids"] = prepare(self.ids, kwargs)
        return prefill

    def run_prefill(self):
        """The owner's prefill forward with use_cache=True; returns its output."""
        with torch.no_grad():
            self.prefill_output = self.owner(**self.prefill, use_cache=True)
        return self.prefill_output

    def continue_from(self, cache) -> list[torch.Tensor]:
        """Logits of each decode step, feeding back the cache each step returns."""
        logits = []
        state = self.start()
        for step in range(DECODE_STEPS):
            inputs, state = self.step_inputs(step, cache, state)
            with torch.no_grad():
                try:
                    output = self.owner(**inputs)
                except Exception as exc:
                    if self.prepares_own_inputs():
                        raise HarnessGap(
                            f"decode step {step + 1} fails, and the model's generate() first turns its inputs into "
                            "others with its own _prepare_model_inputs, which this check's decoder does not "
                            f"reproduce: {one_line(exc, limit=200)}") from exc
                    raise
            logits.append(logits_of(output).detach().clone())
            cache = cache_of(output)
            state = self.advance(state, output)
        return logits

    def prepares_own_inputs(self) -> bool:
        """Whether the owner's generate() rewrites its inputs before the prefill (an own _prepare_model_inputs)."""
        from transformers import GenerationMixin

        own = getattr(type(self.owner), "_prepare_model_inputs", None)
        return own is not None and own is not GenerationMixin._prepare_model_inputs

    def first_inputs(self, cache) -> dict[str, Any]:
        return self.step_inputs(0, cache, self.start())[0]

    def start(self) -> dict[str, Any]:
        kwargs = {k: v for k, v in self.prefill.items() if k != self.ids_key}
        if self.generation_code and self.takes_cache_position:  # 4.x generate tracks it in its kwargs
            kwargs["cache_position"] = torch.arange(self.ids.shape[1], device=self.ids.device)
        return self.advance({"ids": self.ids, "kwargs": kwargs}, self.prefill_output)

    @property
    def takes_cache_position(self) -> bool:
        return "cache_position" in inspect.signature(self.owner.prepare_inputs_for_generation).parameters

    def advance(self, state: dict[str, Any], output: Any) -> dict[str, Any]:
        if self.generation_code:
            # As generate calls it: some owners take `is_encoder_decoder` without a default (Mllama).
            kwargs = self.owner._update_model_kwargs_for_generation(
                output, dict(state["kwargs"]), is_encoder_decoder=self.encoder_decoder)
            state = {**state, "kwargs": kwargs}
        return state

    def step_inputs(self, step: int, cache, state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        token = self.tokens[step]
        ids = torch.cat([state["ids"], token], dim=1)
        state = {**state, "ids": ids}
        if self.encoder_decoder:
            inputs = dict(state["kwargs"])
            inputs.pop("decoder_attention_mask", None)
            inputs["decoder_input_ids"] = token
        elif self.generation_code:
            inputs = self.prepare(ids, cache, state["kwargs"])
        else:
            inputs = {"input_ids": token}
            mask = state["kwargs"].get("attention_mask")
            if mask is not None:
                inputs["attention_mask"] = torch.cat([mask, mask.new_ones((mask.shape[0], step + 1))], dim=1)
        inputs[self.cache_name] = cache
        inputs["use_cache"] = True
        return inputs, state

    def prepare(self, ids: torch.Tensor, cache, kwargs: dict[str, Any]) -> dict[str, Any]:
        params = inspect.signature(self.owner.prepare_inputs_for_generation).parameters
        kwargs = {k: v for k, v in kwargs.items() if k not in ("cache", "past_key_values")}
        extra: dict[str, Any] = {self.cache_name: cache, "use_cache": True}
        if takes_generate_kwarg(params, "next_sequence_length"):
            extra["next_sequence_length"] = 1
        if takes_generate_kwarg(params, "is_first_iteration"):
            extra["is_first_iteration"] = False
        try:
            inputs = self.owner.prepare_inputs_for_generation(ids, **kwargs, **extra)
        except Exception as exc:  # it needs state only the model's own generate() sets up
            raise HarnessGap("the model's prepare_inputs_for_generation rejects the generation state this check "
                             f"reproduces (its own generate() sets up more): {one_line(exc, limit=200)}") from exc
        return dict(inputs)


def takes_generate_kwarg(params, name: str) -> bool:
    """Whether generate passes `name` to this prepare_inputs_for_generation: it names it, or it forwards
    **kwargs to the installed GenerationMixin's, which takes it (generate passes it whenever that one does)."""
    from transformers import GenerationMixin

    if name in params:
        return True
    forwards = any(p.kind is p.VAR_KEYWORD for p in params.values())
    return forwards and name in inspect.signature(GenerationMixin.prepare_inputs_for_generation).parameters


def classify_raw_tuple(decoder: Decoder, probe, legacy: tuple, expected: torch.Tensor, tol: Tolerance,
                      metrics: dict) -> None:
    """Record what forward does with the raw legacy tuples (`raw_tuple`)."""
    try:
        with torch.no_grad():
            output = decoder.owner(**{**decoder.first_inputs(probe), decoder.cache_name: legacy})
    except Exception as exc:
        clear = isinstance(exc, (ValueError, TypeError)) and bool(CLEAR_REJECTION.search(str(exc)))
        metrics["raw_tuple"] = "rejected_clear" if clear else "rejected_unclear"
        metrics["raw_tuple_error"] = one_line(exc, limit=200)
        return
    returned = cache_of(output)
    metrics["raw_tuple_returns"] = type(returned).__name__
    found = closeness(logits_of(output), expected, tol)
    if found.within:
        metrics["raw_tuple"] = "accepted_equal"
        return
    metrics["raw_tuple"] = "accepted_wrong"
    record(metrics, found, tol)
    raise ContractViolation(
        f"a raw legacy tuple passed as `{decoder.cache_name}` is accepted silently but the logits differ "
        f"from the original cache's by {found.beyond()}", metrics)


@check("legacy_cache", column=50, lists=("raw_tuple", "what a raw legacy tuple passed to forward does"),
       compares=("max_abs_diff",), tolerance="eager")
def check_legacy_cache(case: Case) -> dict:
    model = case.fresh_model().eval()
    owner, owner_name = cache_owner(model)
    decoder = Decoder(owner, owner_inputs(case.inputs(), owner_name))
    cache = cache_of(decoder.run_prefill())
    if cache is None:
        raise NotApplicable(f"the {owner_name}'s prefill with use_cache=True returns no cache")
    metrics: dict = {"cache_owner": owner_name, "cache_class": type(cache).__name__}
    legacy = to_legacy(cache)
    metrics["layers"] = len(legacy)
    converted, metrics["conversion"] = from_legacy(cache, legacy)
    if hasattr(converted, "to_legacy_cache") and not same_tensors(to_legacy(converted), legacy):
        raise ContractViolation("to_legacy_cache(from_legacy_cache(tuples)) does not return the same tensors", metrics)

    tol = declared_tolerance(case)
    expected = decoder.continue_from(cache)
    actual = decoder.continue_from(converted)
    for step, (got, want) in enumerate(zip(actual, expected)):
        assert_close(got, want, tol, f"decode step {step + 1} from {metrics['conversion']}", metrics)
    probe, _ = from_legacy(cache, to_legacy_input(legacy))  # only shapes the step inputs
    classify_raw_tuple(decoder, probe, to_legacy_input(legacy), expected[0], tol, metrics)
    return metrics


def to_legacy_input(legacy: tuple) -> tuple:
    """Fresh copies of the legacy tuples (forward may not mutate the ones compared above)."""
    return tuple(tuple(_clone(t) for t in layer) for layer in legacy)
