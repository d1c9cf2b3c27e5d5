"""Check `compile_dynamic`: the fullgraph-compiled prefill serves other prompt lengths without recompiling.

An opt-in column (``opt_in="dynamic"``): it runs only when ``--checks`` names
it (``tox -e dynamic``); a plain run records it as not run
(`conformance.checks.common.registry`).

Contract: a freshly built model is compiled with
``torch.compile(model, fullgraph=True, backend=case.backend)`` and called,
before any eager call on that instance, with the case's sample whose
sequence dimension is marked dynamic (``torch._dynamo.mark_dynamic`` on the
prompt axis of every sequence-aligned input: `input_ids`, `attention_mask`,
token-type ids, per-token masks...). Then the same compiled model is called
with the sample's other prompt lengths (`conformance.cases.variants`: a
shorter and a longer prompt): no recompile and no graph break, and every
call's logits equal an eager forward of a second fresh instance within
the tolerance of the backend it compiles with.

Why ``mark_dynamic`` and not ``dynamic=True``: it marks exactly the dimension
that differs between two users' prompts and leaves the image and batch dims
static, as a server with a fixed image size would; and when the model's code
specialises that dimension, dynamo stops at the first compile with a
ConstraintViolation, and the shape environment's log (`ShapeLog`) names the
guard and the transformers line that specialised it. With ``dynamic=True``
every dimension is symbolic (including pixel and batch dims the prompts do
not change), the specialisation is silent and the next prompt length only
shows up as a recompile whose failed guard is the input's size
(``size mismatch at index 1. expected 27, actual 32``), not the line that
caused it.

Reasons: ``prompt length cannot be dynamic: <input> dim <d> specialised to
<n> by <guard> (at transformers/...:<line> in <function>)``; ``fullgraph
compile failed: <break>`` (as `compile_prefill`); ``recompiled for the
<variant>: failed guard <guard> (at ...)``; ``<variant>: compiled logits
differ from eager by ...``. Under a code-generating backend (inductor) a
failure raised after dynamo's trace is the backend's when dynamo alone
(backend eager) compiles the same marked call (`conformance.checks.common.backend`).

Compared: `max_abs_diff`, the worst logits difference of a compiled call
(the traced prompt and each other length) against eager, within the
tolerance of the run's backend (it declares none:
`registry.declared_tolerance`; float32 1e-5 for eager and aot_eager, 1e-4
for inductor; `conformance.tolerances`).

Fingerprints (`conformance.fingerprints`): ``specialisation`` (the guard
that pinned the prompt length: its ``module:qualname``, the dimension, the
masked guard), ``recompile`` (the count and the guard that set the bound
the next length failed: ``<masked guard> @ <module:qualname>``),
``graph_break`` / ``data_dependent_guard`` / ``exception`` of a call that
raised (its site), ``backend``, ``numerical_mismatch`` (the masked reason).

Metrics: `max_abs_diff`, `graphs` (compiled graphs, 1 when nothing
recompiled), `recompiles`, `lengths` (prompt lengths called), `marked`
(input -> the marked dim), `compile_seconds`.
"""

from __future__ import annotations

from typing import Any

import torch

from conformance.cases.case import Case
from conformance.cases.variants import prompt_key
from conformance.checks.common.backend import blame_backend
from conformance.checks.common.compare import judge_close, logits_of
from conformance.checks.common.dynamo import DynamoWatch, break_reason, guard_site
from conformance.checks.common.outcome import ContractViolation, NotApplicable
from conformance.checks.common.registry import check, declared_tolerance
from conformance.checks.common.shapes import ShapeLog, dim_name, specialisation_fingerprint, varying_dims
from conformance.fingerprints import Fingerprint, kind_of, mask, where_of
from conformance.tolerances import Tolerance


def _cloned(inputs: dict[str, Any]) -> dict[str, Any]:
    """Fresh tensor objects (mark_dynamic marks the object: the case's own sample must stay unmarked)."""
    def clone(value):
        if isinstance(value, torch.Tensor):
            return value.clone()
        if isinstance(value, (list, tuple)):
            return type(value)(clone(v) for v in value)
        return value

    return {key: clone(value) for key, value in inputs.items()}


def _mark(value: Any, dims: set[int]) -> None:
    if isinstance(value, torch.Tensor):
        for dim in sorted(dims):
            torch._dynamo.mark_dynamic(value, dim)
    else:
        for item in value:
            _mark(item, dims)


def _marked(inputs: dict[str, Any], marked: dict[str, set[int]]) -> dict[str, Any]:
    """A copy of `inputs` with the prompt axis of every sequence-aligned input marked dynamic."""
    inputs = _cloned(inputs)
    for name, dims in marked.items():
        _mark(inputs[name], dims)
    return inputs


def _specialised(log: ShapeLog, marked: dict[str, set[int]]) -> tuple[str, Fingerprint] | None:
    """('input_ids dim 1 specialised to 27 by ... (at ...)', its fingerprint) for the first marked dim the trace
    specialised; None when none was."""
    for source in log.specialised_sources():
        name = dim_name(source)
        if any(name.endswith(f"{key} dim {d}") for key, dims in marked.items() for d in dims):
            found = log.specialisation(source)
            return f"{name} {log.why_static(source)}", specialisation_fingerprint(name, found.guard)
    return None


def _logits(module, inputs: dict) -> torch.Tensor:
    with torch.no_grad():
        return logits_of(module(**inputs))


def _raised(exc: BaseException) -> Fingerprint:
    kind = kind_of(exc)
    return Fingerprint("graph_break" if kind == "unsupported" else kind, where=where_of(exc), error=type(exc).__name__)


@check("compile_dynamic", column=25, compares=("max_abs_diff",), opt_in="dynamic", backend_columns=True)
def check_compile_dynamic(case: Case) -> dict:
    variants = case.variants()
    lengths = variants.lengths()
    if not lengths:
        raise NotApplicable(f"no other prompt length can be made: {variants.unavailable.get('longer', '')}")
    sample = case.inputs()
    others = [(v, case.inputs(v.sample)) for v in lengths]
    marked = varying_dims(sample, [inputs for _, inputs in others])
    key = prompt_key(sample)
    metrics: dict = {"marked": {k: sorted(ds) for k, ds in marked.items()}, "recompiles": 0,
                     "lengths": [int(sample[key].shape[1])] + [int(inputs[key].shape[1]) for _, inputs in others]}
    base = _marked(sample, marked)
    tol = declared_tolerance(case)

    model = case.fresh_model()
    reference = case.fresh_model()
    with DynamoWatch() as watch, ShapeLog() as log:
        compiled = torch.compile(model, fullgraph=True, backend=case.backend)
        try:
            actual = _logits(compiled, base)
        except Exception as exc:
            metrics["compile_seconds"] = watch.compile_seconds
            pinned = _specialised(log, marked)
            if pinned:
                raise ContractViolation(f"prompt length cannot be dynamic: {pinned[0]}", metrics, pinned[1]) from exc
            reason, fingerprint = _backend_or(case, sample, marked, exc)
            raise ContractViolation(f"fullgraph compile failed: {reason}", metrics, fingerprint) from exc
        graphs = watch.graphs
        _compare("the traced prompt", actual, _logits(reference, base), tol, metrics)
        for variant, inputs in others:
            try:
                actual = _logits(compiled, inputs)
            except Exception as exc:
                reason, fingerprint = _backend_or(case, sample, marked, exc)
                raise ContractViolation(f"{variant.what}: fullgraph compile failed: {reason}", metrics,
                                        fingerprint) from exc
            if watch.graphs > graphs:
                metrics["recompiles"] = watch.graphs - graphs
                metrics["graphs"] = watch.graphs
                reason, fingerprint = _recompiled(watch, log, metrics["recompiles"])
                raise ContractViolation(f"recompiled for the prompt with {variant.what}: {reason}", metrics,
                                        fingerprint)
            _compare(variant.what, actual, _logits(reference, inputs), tol, metrics)
        metrics["graphs"] = watch.graphs
        metrics["compile_seconds"] = watch.compile_seconds
    return metrics


def _backend_or(case: Case, sample: dict, marked: dict[str, set[int]], exc: BaseException) -> tuple[str, Fingerprint]:
    """(reason, fingerprint) of a compiled call that raised: the backend's own failure where dynamo alone compiles
    the same marked call fullgraph, else the break or exception dynamo met."""
    def compile_alone(backend: str) -> None:
        with torch.no_grad():
            torch.compile(case.fresh_model(), fullgraph=True, backend=backend)(**_marked(sample, marked))

    (own,) = blame_backend(case.backend, [exc], compile_alone)
    return own or (break_reason(exc), _raised(exc))


def _recompiled(watch: DynamoWatch, log: ShapeLog, recompiles: int) -> tuple[str, Fingerprint]:
    """('failed guard <guard>, set by <bound> (at file:line in fn)', its fingerprint) for the first recompile."""
    reasons = watch.guard_failure_reasons
    if not reasons:
        return "no failed guard recorded", Fingerprint("recompile", recompiles=recompiles)
    guard = watch.guard_failures[0].split(" (at ", 1)[0]
    origin = log.bounding(guard)
    if origin is not None:  # dynamo places a size guard at the value's first use; the shape log knows the line
        return (f"failed guard {guard}, set by {origin}",
                Fingerprint("recompile", where=origin.place.site, recompiles=recompiles, guard=origin.site))
    return (f"failed guard {watch.guard_failures[0]}",
            Fingerprint("recompile", recompiles=recompiles, guard=guard_site(reasons[0])))


def _compare(what: str, actual: torch.Tensor, expected: torch.Tensor, tol: Tolerance, metrics: dict) -> None:
    found = judge_close(actual, expected, tol, metrics)
    if not found.within:
        reason = f"{what}: compiled logits differ from eager by {found.beyond()}"
        raise ContractViolation(reason, metrics, Fingerprint("numerical_mismatch", what=mask(reason)))
