"""Check `export_dynamic`: one exported prefill program serves other prompts than the traced one.

An opt-in column (``opt_in="dynamic"``): it runs only when ``--checks`` names
it (``tox -e dynamic``); a plain run records it as not run
(`conformance.checks.common.registry`).

Contract: a freshly built model, wrapped as `export_forward` wraps it
(`LogitsModule`: the sample's tensors as keyword arguments, the prefill
logits with ``use_cache=False``), exports with ``torch.export.export``
(non-strict) with every input dimension that differs between the sample and
its variants (`conformance.cases.variants`: a shorter and a longer prompt,
the batch twice over, another number of images, wider images, those the
class has) marked ``Dim.AUTO``; the program survives ``torch.export.save``
/ ``torch.export.load``; the loaded program is called with the sample and
with every variant, and each call matches a plain eager forward of another
fresh instance within the export tolerance.

Why ``Dim.AUTO`` and not named ``Dim``s or ``Dim.DYNAMIC``: AUTO is what a
user tries first, and it lets the exporter keep each dimension dynamic where
it can and specialise it where the model's code needs a constant, so one
export shows every dimension's fate. Named Dims and DYNAMIC stop at the first
specialisation with a ConstraintViolation that, in non-strict export, names
no source line. Here the shape environment's own log (`ShapeLog`) says which
guard specialised a dimension and at which transformers line.

Which dims must stay dynamic: the prompt length always (a program that
serves one prompt length is the static export, `export_forward`); the image
dims where the class has an images variant; the batch only where the model
allows it: a batch specialised by the model's code, or one whose dynamic
export fails, is recorded (`dynamic_batch`: false, `batch_static`: why) and
is no failure. When the export with every dim fails, it is retried with the
prompt length alone (and then with the batch), so that the reason says
which dims the model cannot take dynamic.

Failure reasons, the first that applies: the exporter's own first line and
transformers location (`exporter_reason`), prefixed with the dims that were
dynamic; ``<variant>: <input> dim <d> specialised to <n> by <guard> (at
transformers/...:<line> in <function>)`` for a dimension the program keeps
static; ``<variant>: loaded program: ...`` for a call that fails or
differs from eager. Prompt lengths are judged first; a class that serves
them but not another number of images says so.

Metrics: `variants` (name -> "pass" or why not; unavailable variants with
the reason they cannot be made), `dynamic` (input -> its dynamic dims in the
program), `dynamic_batch`, `export_seconds`, `exports` (how many exports
ran), `pt2_bytes`, `max_abs_diff` (worst call against eager), `dims` =
"Dim.AUTO".

Compared: `max_abs_diff`, the worst logits difference of a call of the
loaded program (the sample and each variant it serves) against eager,
within the export tolerance (declared, ``tolerance="export"``: float32
1e-4, `conformance.tolerances`).

Fingerprints (`conformance.fingerprints`): ``export_error`` /
``data_dependent_guard`` of an export, save or load that failed (the stage
with the dims that were dynamic, the exception, its transformers site);
``specialisation`` of a variant the program keeps static (the guard that
pinned the dimension: its ``module:qualname``, the dimension, the masked
guard); ``export_error`` of a loaded program that refuses or fails on a
variant (where the guard that bounded the dimension was added, when the
program's input check names one); ``numerical_mismatch`` (the masked
reason).
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.export import Dim

from conformance.cases.case import Case
from conformance.cases.variants import LENGTH_VARIANTS, ORDER
from conformance.checks.common.compare import judge_close, logits_of
from conformance.checks.common.export import LogitsModule, accepts, exporter_reason, failed, save_and_load, split_inputs
from conformance.checks.common.outcome import ContractViolation, NotApplicable
from conformance.checks.common.registry import check, declared_tolerance
from conformance.checks.common.shapes import ShapeLog, dim_name, specialisation_fingerprint, varying_dims
from conformance.fingerprints import Fingerprint, mask, where_of

TRACED = "traced"  # the sample itself, called on the dynamic program too
ONE_TRACED = "the sample has size 1 there, which torch.export always specialises"


@dataclass(eq=False)
class Call:
    """One call of the loaded program: a variant's tensors and the dims it changes."""

    name: str
    what: str
    kwargs: dict[str, Any]
    changes: dict[str, set[int]] = field(default_factory=dict)


@dataclass
class Served:
    """Whether the program serves a call: '' when it does, else why not and the failure's fingerprint."""

    reason: str = ""
    fingerprint: Fingerprint | None = None


class NamedLogitsModule(LogitsModule):
    """`LogitsModule` whose forward names its tensor inputs (keyword-only parameters).

    torch 2.13's non-strict export cannot match a `dynamic_shapes` spec to a
    ``forward(**tensors)`` ("Must provide a tree_name when there might be a
    mismatch"); with named parameters the spec is keyed by input name.
    """

    def __init__(self, model: torch.nn.Module, names, constants: dict | None = None, **fixed: Any):
        super().__init__(model, constants, **fixed)

        def forward(**tensors: Any) -> torch.Tensor:
            return LogitsModule.forward(self, **tensors)

        forward.__signature__ = inspect.Signature(
            [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY) for name in names])
        self.forward = forward


def _spec(value: Any, dims: set[int]) -> Any:
    """`dynamic_shapes` entry of one input: {dim: Dim.AUTO} per tensor (a list of them for a list of tensors)."""
    if isinstance(value, torch.Tensor):
        return {d: Dim.AUTO for d in sorted(dims) if d < value.dim()} or None
    return type(value)(_spec(v, dims) for v in value)


def _sources(key: str, value: Any, dims: set[int]) -> list[str]:
    """Shape-env source strings of the marked dims of input `key` (``L['key'].size()[d]``, list items indexed)."""
    if isinstance(value, torch.Tensor):
        return [f"L['{key}'].size()[{d}]" for d in sorted(dims) if d < value.dim()]
    return [s for i, v in enumerate(value) for s in _sources(f"{key}'][{i}", v, dims)]


def _union(calls: list[Call]) -> dict[str, set[int]]:
    dims: dict[str, set[int]] = {}
    for call in calls:
        for key, ds in call.changes.items():
            dims.setdefault(key, set()).update(ds)
    return dims


def _export(module, tensors: dict, dims: dict[str, set[int]], metrics: dict):
    """(program, shape log) of a non-strict export with `dims` marked Dim.AUTO; raises ContractViolation (the
    exporter's reason, an export_error or data_dependent_guard fingerprint naming the stage and its dims)."""
    shapes = {key: _spec(value, dims.get(key, set())) for key, value in tensors.items()}
    log = ShapeLog()
    metrics["exports"] = metrics.get("exports", 0) + 1
    started = time.perf_counter()
    try:
        with log, torch.no_grad():
            program = torch.export.export(module, args=(), kwargs=tensors, dynamic_shapes=shapes, strict=False)
    except Exception as exc:
        named = ", ".join(f"{k} dim {d}" for k, ds in sorted(dims.items()) for d in sorted(ds))
        raise failed(exc, f"torch.export.export(strict=False) with {named} dynamic", metrics) from exc
    finally:
        metrics["export_seconds"] = round(metrics.get("export_seconds", 0.0) + time.perf_counter() - started, 3)
    return program, log


def _export_what_serves(module, tensors: dict, calls: list[Call], metrics: dict):
    """Export with every varying dim dynamic; when that fails, with fewer, to tell which dims the model refuses.

    Returns (program, shape log, the dims marked dynamic, refused: variant name -> the ContractViolation of the
    export with its dims). The export with the prompt length alone must succeed (else its ContractViolation is
    the verdict).
    """
    lengths = [c for c in calls if c.name in LENGTH_VARIANTS]
    extra = [c for c in calls if c.name not in LENGTH_VARIANTS]
    try:
        program, log = _export(module, tensors, _union(calls), metrics)
        return program, log, _union(calls), {}
    except ContractViolation as exc:
        if not extra:
            raise
        refused = {c.name: exc for c in extra}
    batch = [c for c in extra if c.name == "batch"]
    if batch and len(extra) > 1:  # is it the images? try the batch without them
        dims = _union(lengths + batch)
        try:
            program, log = _export(module, tensors, dims, metrics)
            del refused["batch"]
            return program, log, dims, refused
        except ContractViolation as exc:
            refused["batch"] = exc
    dims = _union(lengths)
    program, log = _export(module, tensors, dims, metrics)
    return program, log, dims, refused


def _variant_calls(case: Case, tensors: dict, constants: dict, metrics: dict) -> list[Call]:
    variants = case.variants()
    calls = []
    for name in ORDER:
        variant = variants.available.get(name)
        if variant is None:
            continue
        their_tensors, their_constants = split_inputs(case.inputs(variant.sample))
        try:
            if their_constants != constants:
                raise ValueError("its non-tensor inputs differ, and a program bakes them in")
            changes = varying_dims(tensors, [their_tensors])
        except ValueError as exc:
            metrics["variants"][name] = f"no single program takes it: {exc}"
            continue
        calls.append(Call(name, variant.what, their_tensors, changes))
    return calls


@check("export_dynamic", column=65, compares=("max_abs_diff",), tolerance="export", opt_in="dynamic")
def check_export_dynamic(case: Case) -> dict:
    variants = case.variants()
    metrics: dict = {"dims": "Dim.AUTO", "variants": dict(variants.unavailable)}
    if not variants.lengths():
        raise NotApplicable(f"no other prompt length can be made: {variants.unavailable.get('longer', '')}")
    tensors, constants = split_inputs(case.inputs())
    calls = _variant_calls(case, tensors, constants, metrics)
    if not any(c.name in LENGTH_VARIANTS for c in calls):
        raise NotApplicable(f"no program can take another prompt length: {metrics['variants']}")

    model = case.fresh_model().eval()
    fixed = {"use_cache": False} if accepts(model, "use_cache") else {}
    module = NamedLogitsModule(model, list(tensors), constants, **fixed)
    program, log, marked, refused = _export_what_serves(module, tensors, calls, metrics)
    del model, module
    loaded = save_and_load(program, metrics).module()
    dynamic = {key: [d for d in sorted(ds) if not any(log.is_static(s) for s in _sources(key, tensors[key], {d}))]
               for key, ds in marked.items()}
    metrics["dynamic"] = {key: ds for key, ds in dynamic.items() if ds}

    reference = case.fresh_model().eval()
    tol = declared_tolerance(case)
    failures: list[tuple[str, Fingerprint | None]] = []
    for call in [Call(TRACED, "the traced prompt", tensors)] + calls:
        served = _not_served(call, refused, log, tensors)
        if served.reason.startswith(ONE_TRACED):  # no program traced on one image serves two: the sample's limit
            metrics["variants"][call.name] = f"not served: {served.reason}"
            continue
        if call.name == "batch":
            metrics["dynamic_batch"] = not served.reason
            if served.reason:  # the batch is dynamic only where the model allows: recorded, not a failure
                metrics["batch_static"] = served.reason
                metrics["variants"][call.name] = f"not served, the batch is static: {served.reason}"
                continue
        if not served.reason:
            served = _compare(loaded, reference, call.kwargs, constants, fixed, tol, log, metrics)
        metrics["variants"][call.name] = served.reason or "pass"
        if served.reason:
            failures.append((f"{call.what}: {served.reason}", served.fingerprint))
    if failures:
        lengths = [c.name for c in calls if c.name in LENGTH_VARIANTS]
        all_served = all(metrics["variants"][n] == "pass" for n in lengths + [TRACED])
        reason, fingerprint = failures[0]
        raise ContractViolation(("prompt lengths served; " if all_served else "") + reason, metrics, fingerprint)
    return metrics


def _not_served(call: Call, refused: dict[str, ContractViolation], log: ShapeLog, tensors: dict) -> Served:
    """Why the program cannot take `call`'s shapes (an empty reason when every dim it changes is dynamic)."""
    if call.name in refused:
        return Served(f"exporting its dims dynamic fails: {refused[call.name].reason}", refused[call.name].fingerprint)
    for key, dims in call.changes.items():
        for dim in sorted(dims):
            if _size(tensors[key], dim) == 1:
                return Served(f"{ONE_TRACED} ({key} dim {dim})")
        for source in _sources(key, tensors[key], dims):
            if log.is_static(source):
                found = log.specialisation(source)
                fingerprint = specialisation_fingerprint(dim_name(source), found.guard) if found else \
                    Fingerprint("specialisation", what=dim_name(source))
                return Served(f"{dim_name(source)} {log.why_static(source)}", fingerprint)
    return Served()


def _size(value: Any, dim: int) -> int | None:
    if isinstance(value, torch.Tensor):
        return value.shape[dim] if dim < value.dim() else None
    return next((_size(v, dim) for v in value), None)


def _compare(loaded, reference, kwargs, constants, fixed, tol, log: ShapeLog, metrics) -> Served:
    """Whether the loaded program's logits for `kwargs` match eager within `tol` (see `Served`)."""
    try:
        with torch.no_grad():
            actual = logits_of(loaded(**kwargs)).detach()
    except Exception as exc:
        reason = exporter_reason(exc, "loaded program")
        bound = log.bounding(reason) if "Guard failed: " in reason else None
        if bound is not None:  # the program's input check: which guard of the model's code set that bound?
            reason = f"{reason.split(' (at ', 1)[0]}, set by {bound}"
        return Served(reason, Fingerprint("export_error", where=bound.place.site if bound else where_of(exc),
                                          error=type(exc).__name__, what="loaded program",
                                          guard=bound.site if bound else ""))
    with torch.no_grad():
        expected = logits_of(reference(**kwargs, **constants, **fixed))
    try:
        found = judge_close(actual, expected, tol, metrics)
    except ContractViolation as exc:
        reason = f"loaded program: {exc.reason}"
        return Served(reason, Fingerprint("numerical_mismatch", what=mask(reason)))
    if not found.within:
        reason = f"loaded program: logits differ from eager by {found.beyond()}"
        return Served(reason, Fingerprint("numerical_mismatch", what=mask(reason)))
    return Served()
