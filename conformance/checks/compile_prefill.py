"""Check `compile_prefill`: the multimodal prefill forward compiles with fullgraph=True.

Contract: `torch.compile(model, fullgraph=True, backend=case.backend)` of a
freshly built model, called on the case's multimodal prefill before any
eager call on that instance (as users who compile right after loading),
runs and its logits match an eager forward of a second fresh instance with
the same weights within `case.tol()`.

Call order must not change the verdict. Checked cheaply: when the compiled
call passed, the same instance is then called eagerly and the compiled
module called again (dynamo retraces, still fullgraph, if the eager call
changed any state its guards depend on) and must still match; when it
failed, the eager reference instance (already called) is compiled and must
fail too. A different verdict fails the cell and the reason says so.

On a graph break the reason names the first break (what, and its
transformers `file:line`), and `graph_breaks` counts all breaks of a
non-fullgraph trace (dynamo's counters). That trace decides nothing and is
often most of the cell's time: with `case.count_graph_breaks` false
(``--no-graph-break-count``) it is not run and a failing cell has no
`graph_breaks` metric. Metrics: `max_abs_diff`, `graph_breaks`,
`first_break` (the first fullgraph failure, when there is one),
`compile_seconds`.
"""

from __future__ import annotations

import torch

from conformance.build.case import Case
from conformance.checks.common.compare import logits_of, max_abs_diff
from conformance.checks.common.dynamo import DynamoWatch, break_reason, count_graph_breaks
from conformance.checks.common.outcome import ContractViolation
from conformance.checks.common.registry import check
from conformance.reasons import one_line


def _compiled_verdict(compiled, inputs: dict, expected: torch.Tensor, tol: float, metrics: dict) -> str:
    """'' when the compiled call runs and matches `expected`, else why not (one line)."""
    try:
        with torch.no_grad():
            actual = logits_of(compiled(**inputs))
    except Exception as exc:  # a graph break, or the model failed while traced
        reason = break_reason(exc)
        metrics.setdefault("first_break", reason)
        return f"fullgraph compile failed: {reason}"
    try:
        diff = max_abs_diff(actual, expected)
    except ContractViolation as exc:
        return exc.reason
    metrics["max_abs_diff"] = max(diff, metrics.get("max_abs_diff", 0.0))
    if not diff <= tol:
        return f"compiled logits differ from eager by {diff:.3g} > {tol:g}"
    return ""


@check("compile_prefill", column=20, observes=("_can_compile_fullgraph",))
def check_compile_prefill(case: Case) -> dict:
    metrics: dict = {"graph_breaks": 0}
    inputs = case.inputs()
    tol = case.tol()

    first = case.fresh_model()
    with DynamoWatch() as watch:
        compiled_first = torch.compile(first, fullgraph=True, backend=case.backend)
        reference = case.fresh_model()
        with torch.no_grad():
            expected = logits_of(reference(**inputs))
        # The compile happens inside the first call; the reference forward above is eager.
        verdict_first = _compiled_verdict(compiled_first, inputs, expected, tol, metrics)
        metrics["compile_seconds"] = watch.compile_seconds

    if not verdict_first:
        with torch.no_grad():
            first(**inputs)  # an eager call on the compiled instance
        verdict_after = _compiled_verdict(compiled_first, inputs, expected, tol, metrics)
    else:
        torch._dynamo.reset()
        verdict_after = _compiled_verdict(torch.compile(reference, fullgraph=True, backend=case.backend),
                                          inputs, expected, tol, metrics)
        if verdict_first.startswith("fullgraph compile failed"):
            if case.count_graph_breaks:
                _count_breaks(first, case.backend, inputs, metrics)
            else:
                del metrics["graph_breaks"]  # at least one; not counted

    if verdict_first == verdict_after == "":
        return metrics
    if bool(verdict_first) != bool(verdict_after):
        raise ContractViolation(
            "call order changes the verdict: compiled before any eager call: "
            f"{verdict_first or 'pass'}; compiled after an eager call: {verdict_after or 'pass'}", metrics)
    raise ContractViolation(verdict_first, metrics)


def _count_breaks(model: torch.nn.Module, backend: str, inputs: dict, metrics: dict) -> None:
    """Record `graph_breaks` from a non-fullgraph trace (at least 1: fullgraph broke)."""
    try:
        with torch.no_grad():
            count, _ = count_graph_breaks(model, backend, **inputs)
    except Exception as exc:  # the non-fullgraph run failed for its own reasons
        metrics["graph_breaks"] = 1
        metrics["graph_break_count_error"] = one_line(exc, limit=160)
        return
    metrics["graph_breaks"] = max(count, 1)
