"""Check `compile_prefill`: the multimodal prefill forward compiles with fullgraph=True.

Contract: `torch.compile(model, fullgraph=True, backend=case.backend)` of a
freshly built model, called on the case's multimodal prefill before any
eager call on that instance (as users who compile right after loading),
runs and its logits match an eager forward of a second fresh instance with
the same weights within the tolerance of the backend it compiles with (it
declares none: `registry.declared_tolerance`).

Call order must not change the verdict, so the check also compiles *warm*:
when the cold compile passed, the same instance is called eagerly and the
compiled module called again (dynamo retraces, still fullgraph, if the eager
call changed any state its guards depend on) and must still match; when it
failed, the eager reference instance (already called) is traced once by
dynamo without fullgraph (`dynamo.trace_breaks`): that one trace gives every
graph-break site and the count. With no break and the eager backend, the
trace is the warm verdict (its logits compared); otherwise a fullgraph
compile of that instance decides it (breaks without fullgraph do not prove
that fullgraph fails: a `torch._check` on a tensor breaks at `.item()`
without fullgraph and traces with it). A warm verdict that differs from the
cold one fails the cell, and the reason says so.

Under a code-generating backend (inductor), a failure raised after dynamo's
trace (lowering, code generation, the generated code's size/stride
assertions) is the backend's when dynamo alone (backend eager) compiles a
fresh instance fullgraph: the reason says so and the kind is `backend`
(`conformance.checks.common.backend`).

The fingerprint of a failure (`conformance.fingerprints`) is its kind (graph
break, data-dependent guard, an exception of the model, numerical mismatch,
the backend's own failure, call order), the cold failure's site (``module:qualname``), every graph-break
site with its count and the total, and the cold and warm verdicts: what the
gate compares, so a second graph break or a new failure site is a change even
in a cell already known to fail.

Metrics: `max_abs_diff`, `graph_breaks` (the total of the warm trace when it
ran, 0 for a pass), `first_break` (the cold failure), `compile_seconds`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from conformance.cases.case import Case
from conformance.checks.common.backend import blame_backend
from conformance.checks.common.compare import judge_close, logits_of
from conformance.checks.common.dynamo import DynamoWatch, break_reason, break_site, trace_breaks
from conformance.checks.common.outcome import ContractViolation
from conformance.checks.common.registry import check, declared_tolerance
from conformance.fingerprints import Fingerprint, kind_of, mask, where_of
from conformance.tolerances import Tolerance


@dataclass
class Attempt:
    """One compiled call: '' when it ran and matched, else why not; the exception that decided, if one did."""

    failure: str = ""
    error: BaseException | None = None
    numerical: bool = False
    backend: Fingerprint | None = None  # the backend's own failure (dynamo alone traces fullgraph)

    @property
    def passed(self) -> bool:
        return not self.failure


def _attempt(compiled, inputs: dict, expected: torch.Tensor, tol: Tolerance, metrics: dict) -> Attempt:
    try:
        with torch.no_grad():
            actual = logits_of(compiled(**inputs))
    except Exception as exc:  # a graph break, or the model failed while traced
        reason = break_reason(exc)
        metrics.setdefault("first_break", reason)
        return Attempt(f"fullgraph compile failed: {reason}", exc)
    return _compare(actual, expected, tol, metrics)


def _compare(actual: torch.Tensor, expected: torch.Tensor, tol: Tolerance, metrics: dict) -> Attempt:
    try:
        found = judge_close(actual, expected, tol, metrics)
    except ContractViolation as exc:
        return Attempt(exc.reason, numerical=True)
    if not found.within:
        return Attempt(f"compiled logits differ from eager by {found.beyond()}", numerical=True)
    return Attempt()


@check("compile_prefill", column=20, observes=("_can_compile_fullgraph",), backend_columns=True)
def check_compile_prefill(case: Case) -> dict:
    metrics: dict = {}
    inputs = case.inputs()
    tol = declared_tolerance(case)

    first = case.fresh_model()
    with DynamoWatch() as watch:
        compiled_first = torch.compile(first, fullgraph=True, backend=case.backend)
        reference = case.fresh_model()
        with torch.no_grad():
            expected = logits_of(reference(**inputs))
        # The compile happens inside the first call; the reference forward above is eager.
        cold = _attempt(compiled_first, inputs, expected, tol, metrics)
        metrics["compile_seconds"] = watch.compile_seconds

    sites: dict[str, int] | None = None
    if cold.passed:
        with torch.no_grad():
            first(**inputs)  # an eager call on the compiled instance
        warm = _attempt(compiled_first, inputs, expected, tol, metrics)
        if warm.error is not None:  # it broke only once called eagerly: where else does it break?
            sites = trace_breaks(first, **inputs).sites
    else:
        sites, warm = _warm(reference, case, inputs, expected, tol, metrics)
    metrics["graph_breaks"] = sum(sites.values()) if sites is not None else 0

    if cold.passed and warm.passed:
        return metrics
    cold, warm = _blame_backend(case, inputs, cold, warm)
    fingerprint = _fingerprint(cold, warm, sites)
    if cold.passed != warm.passed:
        raise ContractViolation(
            "call order changes the verdict: compiled before any eager call: "
            f"{cold.failure or 'pass'}; compiled after an eager call: {warm.failure or 'pass'}", metrics, fingerprint)
    raise ContractViolation(cold.failure, metrics, fingerprint)


def _warm(reference, case: Case, inputs: dict, expected: torch.Tensor, tol: Tolerance,
          metrics: dict) -> tuple[dict[str, int], Attempt]:
    """The warm verdict of an eagerly-called instance, and its graph-break sites, from one dynamo trace."""
    trace = trace_breaks(reference, **inputs)
    if trace.error is not None:
        return trace.sites, Attempt(f"compile failed: {break_reason(trace.error)}", trace.error)
    if not trace.sites and case.backend == "eager":  # one graph, traced by dynamo alone: what fullgraph runs
        return trace.sites, _compare(logits_of(trace.output), expected, tol, metrics)
    # Breaks without fullgraph do not prove that fullgraph fails (torch._check on a tensor breaks at .item()
    # without fullgraph, and traces with it), so the warm verdict is the fullgraph compile's own.
    torch._dynamo.reset()
    return trace.sites, _attempt(torch.compile(reference, fullgraph=True, backend=case.backend), inputs, expected,
                                 tol, metrics)


def _blame_backend(case: Case, inputs: dict, cold: Attempt, warm: Attempt) -> tuple[Attempt, Attempt]:
    """Under a code-generating backend, a failure raised after dynamo's trace is the backend's when dynamo
    alone compiles a fresh instance fullgraph: such attempts say so (reason and fingerprint)."""
    def compile_alone(backend: str) -> None:
        with torch.no_grad():
            torch.compile(case.fresh_model(), fullgraph=True, backend=backend)(**inputs)

    def said(attempt: Attempt, own: tuple[str, Fingerprint] | None) -> Attempt:
        if own is None:
            return attempt
        reason, fingerprint = own
        return Attempt(f"fullgraph compile failed: {reason}", attempt.error, backend=fingerprint)

    cold_own, warm_own = blame_backend(case.backend, [cold.error, warm.error], compile_alone)
    return said(cold, cold_own), said(warm, warm_own)


def _fingerprint(cold: Attempt, warm: Attempt, sites: dict[str, int] | None) -> Fingerprint:
    failed = cold if not cold.passed else warm
    if failed.backend is not None:  # dynamo traced fullgraph: the breaks of a trace without it are not the story
        found = failed.backend
        return Fingerprint("call_order" if cold.passed != warm.passed else found.kind, where=found.where,
                           error=found.error, what=found.what, cold="pass" if cold.passed else "fail",
                           warm="pass" if warm.passed else "fail")
    if failed.error is not None:
        kind = kind_of(failed.error)
        kind = "graph_break" if kind == "unsupported" else kind
        where, error = where_of(failed.error), type(failed.error).__name__
        if sites is None or (not sites and not warm.passed):
            sites = {break_site(failed.error): 1}
    elif failed.numerical:
        kind, where, error = "numerical_mismatch", "", ""
    else:
        kind, where, error = "graph_break", "", ""
    what = mask(failed.failure) if kind == "numerical_mismatch" else ""
    if cold.passed != warm.passed:
        kind = "call_order"
    return Fingerprint(kind, where=where, error=error, what=what, sites=dict(sites or {}),
                       breaks=sum((sites or {}).values()), cold="pass" if cold.passed else "fail",
                       warm="pass" if warm.passed else "fail")
