"""Check `static_cache`: greedy generate with a static cache equals the dynamic cache, step by step.

Contract: greedy `generate(cache_implementation="static")` of `NEW_TOKENS`
(>= 10) new tokens on the case's batch-2, left-padded multimodal prefill is
compared with greedy `generate` with the default dynamic cache (two fresh
instances with the same weights; `min_new_tokens` so EOS cannot stop either
run early; generate's auto-compile off: compile is `compile_decode`'s
business). What is compared to what:

* the generated tokens of both runs, step by step, which define the first
  divergence (the first new token where any row differs);
* at every step before the first divergence, the scores (generate's
  `output_scores`) of the static run against those of the dynamic run: they
  must agree within the eager tolerance (declared, ``tolerance="eager"``),
  or the cell fails even though the tokens agree (tiny random models have
  flat logits, so equal greedy tokens prove little);
* at the first divergence, the scores of both runs: within the tolerance it
  is a tie (greedy picked between near-equal candidates), recorded as
  `tie_at_step`; beyond it the cell fails. Steps after a divergence are not
  compared (the runs continue different sequences).

When the scores differ, both runs are repeated in float64 as a witness
(`float64_witness`, the same comparison's worst difference, or
`float64_witness_error`): a witness near 0 says float32 rounding, a witness
as large as the float32 difference says the static cache computes something
else. The witness is information only: it never turns a failure into a pass.

Not applicable when the model has no generate() or takes no KV cache, or its
generate returns no token `sequences` (a scoring output such as CLVP's).
Metrics: `max_abs_diff` (the worst score difference over the compared steps),
`new_tokens`, `compared_steps`, `tie_at_step` (when there is a tie),
`float64_witness`, and `static_cache_ignored` (the cache classes the static
run's forwards got, when none was a StaticCache: generate ignored
`cache_implementation`, so the comparison says nothing about a static cache;
recorded, not gated). `compare_static_dynamic` is the same comparison on any
inputs, for the property test over prompt length, batch size and token count;
it takes both tolerances (the scores', the cache contents') from its caller,
who asks the table for the run's dtype (the check: `declared_tolerance`): it
has no default, so that no caller compares a half-precision cache at
float32's.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from conformance.cases.case import Case
from conformance.checks.common.cache import generate_inputs, greedy, has_kv_cache
from conformance.checks.common.cache_contents import CacheContents, compare_contents
from conformance.checks.common.compare import judge_close
from conformance.checks.common.outcome import ContractViolation, NotApplicable
from conformance.checks.common.registry import check, declared_tolerance
from conformance.reasons import one_line
from conformance.tolerances import Tolerance

NEW_TOKENS = 10


def _generate(model: torch.nn.Module, inputs: dict, new_tokens: int, **extra):
    with torch.no_grad():
        return model.generate(**inputs, **greedy(new_tokens), output_scores=True, return_dict_in_generate=True,
                              **extra)


def score_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """Max abs difference of two score tensors; equal entries (also both -inf) count as 0."""
    a, b = a.double(), b.double()
    same = a == b
    delta = torch.where(same, torch.zeros_like(a), (a - b).abs())
    return float(delta.max()) if delta.numel() else 0.0


class _CacheTypes:
    """The cache classes the forwards of a model (and its generating sub-models) receive."""

    def __init__(self, model: torch.nn.Module):
        from transformers import GenerationMixin
        from transformers.cache_utils import Cache, StaticCache

        self.names: set[str] = set()
        self.static = False
        modules = [model] + [m for m in model.modules() if m is not model and isinstance(m, GenerationMixin)]

        def record(_module, _args, kwargs):
            for value in kwargs.values():
                if isinstance(value, Cache):
                    inner = getattr(value, "self_attention_cache", value)
                    self.names.add(type(value).__name__ + (f"({type(inner).__name__})" if inner is not value else ""))
                    self.static = self.static or isinstance(inner, StaticCache)

        self.handles = [m.register_forward_pre_hook(record, with_kwargs=True) for m in modules]

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def _runs(make_model: Callable[[], torch.nn.Module], inputs: dict, new_tokens: int, metrics: dict):
    """(static, dynamic, held) generate outputs, checked to be comparable, and what each cache held after
    each forward (`CacheContents`: static first); records `static_cache_ignored`."""
    dynamic_model = make_model()
    dynamic_held = CacheContents(dynamic_model)
    try:
        dynamic = _generate(dynamic_model, inputs, new_tokens)
    finally:
        dynamic_held.remove()
    if not hasattr(dynamic, "sequences"):
        raise NotApplicable(f"generate returns a {type(dynamic).__name__} without token `sequences` (a scoring "
                            "output): no decoded tokens to compare")
    model = make_model()
    seen = _CacheTypes(model)
    static_held = CacheContents(model)
    try:
        static = _generate(model, inputs, new_tokens, cache_implementation="static")
    finally:
        seen.remove()
        static_held.remove()
    if seen.names and not seen.static:  # recorded, not gated: the comparison then says nothing about a StaticCache
        metrics["static_cache_ignored"] = ", ".join(sorted(seen.names))
    if static.sequences.shape != dynamic.sequences.shape:
        raise ContractViolation(f"static cache generated shape {tuple(static.sequences.shape)}, dynamic "
                                f"{tuple(dynamic.sequences.shape)}", metrics)
    if len(static.scores) != len(dynamic.scores):
        raise ContractViolation(f"static cache gave {len(static.scores)} score steps, dynamic "
                                f"{len(dynamic.scores)}", metrics)
    steps = len(dynamic.scores)
    if not torch.equal(static.sequences[:, :-steps], dynamic.sequences[:, :-steps]):
        raise ContractViolation("static and dynamic runs returned different prompts", metrics)
    return static, dynamic, (static_held, dynamic_held)


def _differing_rows(static: torch.Tensor, dynamic: torch.Tensor) -> torch.Tensor:
    """Per row (dim 0), whether two token tensors differ anywhere else (a step's tokens, or its codebooks)."""
    return (static != dynamic).reshape(static.shape[0], -1).any(dim=1)


def _first_divergence(static, dynamic) -> int:
    """The first new token where any row differs (the number of steps when none does). Sequences are
    (batch, tokens) or, for models that emit several codebooks a step, (batch, tokens, codebooks)."""
    steps = len(dynamic.scores)
    new_static, new_dynamic = static.sequences[:, -steps:], dynamic.sequences[:, -steps:]
    differs = _differing_rows(new_static.transpose(0, 1), new_dynamic.transpose(0, 1))
    return int(differs.nonzero()[0, 0]) if differs.any() else steps


def _worst_agreeing_step(static, dynamic) -> tuple[int, float]:
    """(step, score difference) of the worst step up to and including the first divergence."""
    first = _first_divergence(static, dynamic)
    compared = range(min(first + 1, len(dynamic.scores)))
    diffs = [score_diff(static.scores[s], dynamic.scores[s]) for s in compared]
    worst = max(range(len(diffs)), key=diffs.__getitem__, default=0)
    return worst, (diffs[worst] if diffs else 0.0)


def _as_float64(inputs: dict) -> dict:
    def cast(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.double()
        if isinstance(value, (list, tuple)):
            return type(value)(cast(v) for v in value)
        return value

    return {k: cast(v) for k, v in inputs.items()}


def float64_witness(make_model: Callable[[], torch.nn.Module], inputs: dict, new_tokens: int, metrics: dict) -> None:
    """Record the same comparison run in float64 (`float64_witness`), or why it could not run."""
    try:
        static, dynamic, _ = _runs(lambda: make_model().double(), _as_float64(inputs), new_tokens, {})
        metrics["float64_witness"] = _worst_agreeing_step(static, dynamic)[1]
    except Exception as exc:  # e.g. a float32-only kernel; the witness is information, never a verdict
        metrics["float64_witness_error"] = one_line(exc, limit=160)


def _witness_note(metrics: dict) -> str:
    if "float64_witness" in metrics:
        return f" (float64 witness: {metrics['float64_witness']:.3g})"
    return ""


def compare_static_dynamic(make_model: Callable[[], torch.nn.Module], inputs: dict, new_tokens: int,
                           tol: Tolerance, contents: Tolerance, witness: bool = True) -> dict:
    """Greedy static-cache vs dynamic-cache generate, as the module says; metrics, or ContractViolation.
    `tol` judges the scores, `contents` the cache contents (``tolerance(dtype, "cache_contents")``)."""
    metrics: dict = {"new_tokens": new_tokens, "max_abs_diff": 0.0}
    static, dynamic, held = _runs(make_model, inputs, new_tokens, metrics)
    steps = len(dynamic.scores)
    first = _first_divergence(static, dynamic)
    metrics["compared_steps"] = min(first + 1, steps)
    for step in range(first):
        found = judge_close(static.scores[step], dynamic.scores[step], tol, metrics)
        if not found.within:
            if witness:
                float64_witness(make_model, inputs, new_tokens, metrics)
            raise ContractViolation(
                f"static cache scores differ from the dynamic cache's at new token {step} by {found.beyond()} "
                f"while the tokens agree{_witness_note(metrics)}", metrics)
    if first < steps:
        new_static, new_dynamic = static.sequences[:, -steps:], dynamic.sequences[:, -steps:]
        found = judge_close(static.scores[first], dynamic.scores[first], tol, metrics)
        if not found.within:
            if witness:
                float64_witness(make_model, inputs, new_tokens, metrics)
            rows = _differing_rows(new_static[:, first], new_dynamic[:, first]).nonzero().flatten().tolist()
            raise ContractViolation(
                f"static cache diverges from the dynamic cache at new token {first} (rows {rows}: static "
                f"{new_static[rows, first].tolist()} vs dynamic {new_dynamic[rows, first].tolist()}); scores "
                f"there differ by {found.beyond()}{_witness_note(metrics)}", metrics)
        metrics["tie_at_step"] = first
    compare_contents(held, inputs, first, contents, metrics)
    return metrics


def uses_kv_cache(model: torch.nn.Module) -> bool:
    """Its forward takes a cache, or it generates through a sub-model that may."""
    from transformers import GenerationMixin

    return has_kv_cache(model) or any(isinstance(m, GenerationMixin) for m in model.modules() if m is not model)


@check("static_cache", column=40, observes=("_supports_static_cache",), compares=("max_abs_diff",),
       tolerance="eager")
def check_static_cache(case: Case) -> dict:
    first = case.fresh_model()
    if not hasattr(first, "generate"):
        raise NotApplicable("the model has no generate()")
    if not uses_kv_cache(first):
        raise NotApplicable("the model takes no KV cache")
    models = iter([first])
    return compare_static_dynamic(lambda: next(models, None) or case.fresh_model(),
                                  generate_inputs(first, case.generate_inputs()), NEW_TOKENS, declared_tolerance(case),
                                  declared_tolerance(case, "cache_contents"))
