"""Check `static_cache`: greedy generate with a static cache equals the dynamic cache.

Contract: greedy `generate(cache_implementation="static")` of `NEW_TOKENS`
(>= 10) new tokens on the case's batch-2, left-padded multimodal prefill
gives the same tokens as greedy `generate` with the default dynamic cache
(two fresh instances with the same weights; `min_new_tokens` so EOS cannot
stop either run early; generate's auto-compile off: compile is
`compile_decode`'s business). Where the tokens diverge, the scores of both
runs at the first divergence must agree within `case.tol()`: then it is a
tie (greedy picked between near-equal candidates), recorded as
`tie_at_step`, not a failure.

Not applicable when the model has no generate() or takes no KV cache, or its
generate returns no token `sequences` (a scoring output such as CLVP's).
Metrics: `max_abs_diff` (scores over the steps where both runs agree so
far), `new_tokens`, `tie_at_step` (when there is a tie), and
`static_cache_ignored` (the cache classes the static run's forwards got,
when none was a StaticCache: generate ignored `cache_implementation`, so the
comparison says nothing about a static cache; recorded, not gated).
`compare_static_dynamic` is the same comparison on any inputs, for the
property test over prompt length, batch size and token count.
"""

from __future__ import annotations

from typing import Callable

import torch

from conformance.build.case import Case
from conformance.checks.common.cache import generate_inputs, greedy, has_kv_cache
from conformance.checks.common.outcome import ContractViolation, NotApplicable
from conformance.checks.common.registry import check

NEW_TOKENS = 10


def _generate(model: torch.nn.Module, inputs: dict, new_tokens: int, **extra):
    with torch.no_grad():
        return model.generate(**inputs, **greedy(new_tokens), output_scores=True, return_dict_in_generate=True,
                              **extra)


def score_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """Max abs difference of two score tensors; equal entries (also both -inf) count as 0."""
    a, b = a.float(), b.float()
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


def compare_static_dynamic(make_model: Callable[[], torch.nn.Module], inputs: dict, new_tokens: int,
                           tol: float) -> dict:
    """Greedy static-cache vs dynamic-cache generate; metrics, or ContractViolation."""
    dynamic = _generate(make_model(), inputs, new_tokens)
    if not hasattr(dynamic, "sequences"):
        raise NotApplicable(f"generate returns a {type(dynamic).__name__} without token `sequences` (a scoring "
                            "output): no decoded tokens to compare")
    model = make_model()
    seen = _CacheTypes(model)
    try:
        static = _generate(model, inputs, new_tokens, cache_implementation="static")
    finally:
        seen.remove()
    metrics: dict = {"new_tokens": new_tokens, "max_abs_diff": 0.0}
    if seen.names and not seen.static:  # recorded, not gated: the comparison then says nothing about a StaticCache
        metrics["static_cache_ignored"] = ", ".join(sorted(seen.names))
    if static.sequences.shape != dynamic.sequences.shape:
        raise ContractViolation(f"static cache generated shape {tuple(static.sequences.shape)}, dynamic "
                                f"{tuple(dynamic.sequences.shape)}", metrics)
    if len(static.scores) != len(dynamic.scores):
        raise ContractViolation(f"static cache gave {len(static.scores)} score steps, dynamic "
                                f"{len(dynamic.scores)}", metrics)
    steps = len(dynamic.scores)
    new_static = static.sequences[:, -steps:]
    new_dynamic = dynamic.sequences[:, -steps:]
    prompt_static = static.sequences[:, :-steps]
    if not torch.equal(prompt_static, dynamic.sequences[:, :-steps]):
        raise ContractViolation("static and dynamic runs returned different prompts", metrics)
    differs = (new_static != new_dynamic).any(dim=0)
    first = int(differs.nonzero()[0]) if differs.any() else steps
    for step in range(first):
        metrics["max_abs_diff"] = max(metrics["max_abs_diff"], score_diff(static.scores[step], dynamic.scores[step]))
    if first == steps:
        return metrics
    diff = score_diff(static.scores[first], dynamic.scores[first])
    if not diff <= tol:
        rows = (new_static[:, first] != new_dynamic[:, first]).nonzero().flatten().tolist()
        raise ContractViolation(
            f"static cache diverges from the dynamic cache at new token {first} (rows {rows}: static "
            f"{new_static[rows, first].tolist()} vs dynamic {new_dynamic[rows, first].tolist()}); scores "
            f"there differ by {diff:.3g} > {tol:g}", metrics)
    metrics["tie_at_step"] = first
    metrics["max_abs_diff"] = max(metrics["max_abs_diff"], diff)
    return metrics


def uses_kv_cache(model: torch.nn.Module) -> bool:
    """Its forward takes a cache, or it generates through a sub-model that may."""
    from transformers import GenerationMixin

    return has_kv_cache(model) or any(isinstance(m, GenerationMixin) for m in model.modules() if m is not model)


@check("static_cache", column=40, observes=("_supports_static_cache",))
def check_static_cache(case: Case) -> dict:
    first = case.fresh_model()
    if not hasattr(first, "generate"):
        raise NotApplicable("the model has no generate()")
    if not uses_kv_cache(first):
        raise NotApplicable("the model takes no KV cache")
    models = iter([first])
    return compare_static_dynamic(lambda: next(models, None) or case.fresh_model(),
                                  generate_inputs(first, case.generate_inputs()), NEW_TOKENS, case.tol())
