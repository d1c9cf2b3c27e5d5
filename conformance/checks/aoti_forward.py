"""Check `aoti_forward`: the prefill forward, compiled and packaged by AOTInductor, serves other prompt lengths.

An opt-in column (``opt_in="aoti"``): it runs only when ``--checks`` names it
(``tox -e aoti``); a plain run records it as not run. Each cell compiles C++
(tens of seconds a class on a CPU).

Contract: a freshly built model, wrapped and exported exactly as
`export_dynamic` exports it (its `NamedLogitsModule` over the sample's
tensors, the prefill logits with ``use_cache=False``, ``torch.export.export``
non-strict) with every input dimension that differs between the sample and
its prompt-length variants (`conformance.cases.variants`: a shorter and a
longer prompt) marked ``Dim.AUTO``, keeps the prompt length dynamic; the
program compiles and packages with ``torch._inductor.aoti_compile_and_package``;
the package, loaded by a fresh ``python -I`` process that imports only torch
(`conformance.checks.common.aoti`, which says why a fresh process and not a
reference count), serves the sample and each length variant; each call's
logits match a plain eager forward of another fresh instance within the
inductor tolerance (declared, ``tolerance="inductor"``: float32 1e-4,
`conformance.tolerances`). Batch and image variants are `export_dynamic`'s
question, not this column's.

A failure names its step first, in the reason and in the fingerprint's
``what`` (`common.aoti.STEPS`):

* ``export: ...``: the export failed (the exporter's reason, the dims that
  were dynamic; fingerprint ``export_error`` / ``data_dependent_guard`` at its
  transformers site), or a guard of the model's code specialised the prompt
  length (``specialisation``: the dimension, the guard and its line, as
  `export_dynamic` says it); nothing is compiled then.
* ``compile: ...`` / ``package: ...``: ``aoti_compile_and_package`` raised
  (fingerprint ``backend``: inductor's site, the exception, its masked
  message).
* ``load: ...`` / ``run: call <name>: ...``: the fresh process could not
  load the package (a custom operator defined only in Python: "cannot be run
  via AOTI without Python environment"), or a call raised or the process died
  (fingerprint ``export_error``: the error the process reported, masked).
* ``compare: <variant>: ...``: a call's logits differ from eager
  (``numerical_mismatch``, the masked reason); every call is compared first,
  the first failure is the verdict.

Metrics: `variants` (traced, shorter, longer -> "pass" or why not),
`dynamic` (input -> its dynamic dims in the program), `export_seconds`,
`compile_seconds`, `package_bytes`, `missing_c_shims` and
`proxy_executor_ops` (the operators that fall back to the proxy executor:
what torch's logger said, what the package lists), `load_seconds`,
`serve_seconds`, `fresh_process_imported` ([]: neither transformers nor this
suite was imported where the package served), `max_abs_diff`,
`worst_ratio`, `atol`, `rtol`.
"""

from __future__ import annotations

import tempfile

import torch

from conformance.cases.case import Case
from conformance.cases.variants import LENGTH_VARIANTS
from conformance.checks.common import aoti
from conformance.checks.common.compare import judge_close, logits_of
from conformance.checks.common.export import accepts, split_inputs
from conformance.checks.common.outcome import ContractViolation, NotApplicable
from conformance.checks.common.registry import check, declared_tolerance
from conformance.checks.export_dynamic import (  # its export, so that both columns judge the same program
    TRACED,
    Call,
    NamedLogitsModule,
    _export,
    _not_served,
    _sources,
    _union,
    _variant_calls,
)
from conformance.fingerprints import Fingerprint, mask


def _length_calls(case: Case, tensors: dict, constants: dict, metrics: dict) -> list[Call]:
    """The prompt-length variants one program can take; `metrics["variants"]` says why others cannot."""
    variants = case.variants()
    seen: dict = {}
    calls = [c for c in _variant_calls(case, tensors, constants, {"variants": seen}) if c.name in LENGTH_VARIANTS]
    for name in LENGTH_VARIANTS:
        if name in seen:
            metrics["variants"][name] = seen[name]
        elif name in variants.unavailable:
            metrics["variants"][name] = variants.unavailable[name]
    return calls


def _export_lengths(module: NamedLogitsModule, tensors: dict, calls: list[Call], metrics: dict):
    """The program with the prompt length dynamic, or the `export` step's ContractViolation (see the module)."""
    dims = _union(calls)
    try:
        program, log = _export(module, tensors, dims, metrics)
    except ContractViolation as exc:
        raise aoti.at_step("export", exc) from exc
    dynamic = {key: [d for d in sorted(ds) if not any(log.is_static(s) for s in _sources(key, tensors[key], {d}))]
               for key, ds in dims.items()}
    metrics["dynamic"] = {key: ds for key, ds in dynamic.items() if ds}
    for call in calls:
        served = _not_served(call, {}, log, tensors)
        if served.reason:
            metrics["variants"][call.name] = f"not served: {served.reason}"
            fingerprint = served.fingerprint or Fingerprint("specialisation", what=mask(served.reason))
            raise aoti.violation("export", f"{call.what}: {served.reason}", metrics, fingerprint)
    return program


@check("aoti_forward", column=110, compares=("max_abs_diff",), tolerance="inductor", opt_in="aoti")
def check_aoti_forward(case: Case) -> dict:
    metrics: dict = {"variants": {}}
    if not case.variants().lengths():
        raise NotApplicable(f"no other prompt length can be made: {case.variants().unavailable.get('longer', '')}")
    tensors, constants = split_inputs(case.inputs())
    calls = _length_calls(case, tensors, constants, metrics)
    if not calls:
        raise NotApplicable(f"no program can take another prompt length: {metrics['variants']}")

    model = case.fresh_model().eval()
    fixed = {"use_cache": False} if accepts(model, "use_cache") else {}
    program = _export_lengths(NamedLogitsModule(model, list(tensors), constants, **fixed), tensors, calls, metrics)
    del model
    served = [Call(TRACED, "the traced prompt", tensors)] + calls
    with tempfile.TemporaryDirectory(prefix="conformance-aoti-") as folder:
        package = aoti.compile_and_package(program, folder, metrics)
        del program
        outputs = aoti.serve_in_fresh_process(package, {c.name: c.kwargs for c in served}, folder, metrics)

    reference = case.fresh_model().eval()
    tol = declared_tolerance(case)
    failures = []
    for call in served:
        with torch.no_grad():
            expected = logits_of(reference(**call.kwargs, **constants, **fixed))
        try:
            found = judge_close(logits_of(outputs[call.name]), expected, tol, metrics)
            reason = "" if found.within else f"the package's logits differ from eager by {found.beyond()}"
        except ContractViolation as exc:  # another shape
            reason = f"the package's output: {exc.reason}"
        metrics["variants"][call.name] = reason or "pass"
        if reason:
            failures.append(f"{call.what}: {reason}")
    if failures:
        raise aoti.violation("compare", failures[0], metrics, Fingerprint("numerical_mismatch", what=mask(failures[0])))
    return metrics
