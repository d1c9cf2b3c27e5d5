"""Check `aoti_generate`: the generation parts, each compiled and packaged by AOTInductor, serve the next prompt.

An opt-in column (``opt_in="aoti"``, ``tox -e aoti``): a C++ build per part.

Contract: the model is split and exported exactly as `export_generate` does
it (`conformance.checks.common.generation`: ``vision`` where the class has
media, ``embed_prefill``, ``embed_step``, ``prefill`` from a fresh StaticCache
of one size, ``step`` over that cache with its write position as an input,
updated in place; the prompt length dynamic in the prompt parts, the image
dims where an image request exists, the step static); each part's program
is compiled and packaged by ``torch._inductor.aoti_compile_and_package``;
one long-lived fresh ``python -I`` that imports only torch
(`common.aoti.Worker`) loads the packages and answers each part call over a
pipe. The cache lives in that process, as in a C++ server: the prefill's
cache outputs stay there and the step package updates them in place, so a
package that does not write its mutated input back decodes from a stale
cache. Greedy decoding from those calls (the placeholder merge and the
argmax are the runner's glue, in the suite's process) serves the requests
of `export_generate` (`conformance.checks.common.served`: the sample's
prompt, another prompt length, another image size where the class takes
one); each request's first `NEW_TOKENS` tokens equal eager
``generate(do_sample=False)`` of a fresh model and every step's logits
match within the inductor tolerance (declared, ``tolerance="inductor"``).

A failure's reason and fingerprint ``what`` start with its step
(`common.aoti.STEPS`) and name the part:

* ``export: part <name>: ...``: a part failed to export, or (another
  request) a dimension it changes was kept static or the step bakes a value
  of the traced prompt (``specialisation``, as `export_generate` says it);
* ``compile: part <name>: ...`` / ``package: part <name>: ...``:
  AOTInductor raised on that part's program (fingerprint ``backend``);
* ``load: part <name>: ...`` / ``run: part <name>: ...``: the worker could
  not load a package, or a call raised or the process died;
* ``compare: ...``: the tokens or a step's logits differ from eager.

When the dynamic parts fail to export, the traced prompt alone is built
static (`served.serve`'s ``static_export``); when they fail later, that
costs a C++ build per part again and is not tried (``static_export`` says so).

Metrics: `requests`, `served`, `requests_unavailable`, `static_export`,
`max_len`, `new_tokens`, `parts`, `dynamic_parts`, `export_seconds`,
`compile_seconds` (all parts) and `compile_seconds_per_part`,
`package_bytes` (all parts) and `package_bytes_per_part`,
`missing_c_shims` and `proxy_executor_ops` (all parts, as `aoti_forward`
records them) and `proxy_executor_ops_per_part` (the parts with any),
`load_seconds`, `serve_seconds`, `calls`, `fresh_process_imported`,
`max_abs_diff`, `worst_ratio`, `atol`, `rtol`.
"""

from __future__ import annotations

import contextlib
import os
import tempfile

from conformance.cases.case import Case
from conformance.checks.common import aoti
from conformance.checks.common.generation import NEW_TOKENS, PART_INPUTS, ExportedGeneration, eager_generation
from conformance.checks.common.outcome import ContractViolation
from conformance.checks.common.registry import check, declared_tolerance
from conformance.checks.common.served import serve
from conformance.checks.common.shapes import dynamic_inputs
from conformance.checks.export_generate import not_decoder_only
from conformance.fingerprints import Fingerprint, kind_of, where_of
from conformance.reasons import one_line

CACHE_INPUT = "cache_tensors"  # the step's keyword for the cache the prefill leaves in the worker


def export_parts(generation: ExportedGeneration, shapes: dict, metrics: dict) -> None:
    """`generation.export(shapes)`, its failure restated at the ``export`` step with the part it reached."""
    try:
        generation.export(shapes)
    except ContractViolation as exc:
        raise aoti.at_step("export", exc) from exc
    except Exception as exc:  # the model raised between exports (the eager prefill that gives the step its inputs)
        after = f"after part {list(generation.logs)[-1]}" if generation.logs else "before the first part"
        raise aoti.violation("export", f"preparing the parts ({after}): {one_line(exc)}", metrics, Fingerprint(
            kind_of(exc, "export_error"), where=where_of(exc), error=type(exc).__name__,
            what=f"preparing the parts {after}")) from exc
    metrics["parts"] = sorted(generation.programs)
    metrics["export_seconds"] = round(generation.export_seconds, 3)
    metrics["dynamic_parts"] = sorted(n for n, p in generation.programs.items() if dynamic_inputs(p))


def compile_parts(generation: ExportedGeneration, folder: str, metrics: dict) -> dict[str, str]:
    """part -> its package under `folder/<part>/`; the per-part and summed metrics (see the module)."""
    packages, each = {}, {}
    for name, program in generation.programs.items():
        os.makedirs(os.path.join(folder, name))
        each[name] = {}
        try:
            packages[name] = aoti.compile_and_package(program, os.path.join(folder, name), each[name])
        except ContractViolation as exc:
            raise aoti.in_part(name, exc, metrics) from exc
        finally:
            metrics["compile_seconds_per_part"] = {n: m["compile_seconds"] for n, m in each.items()}
            metrics["compile_seconds"] = round(sum(metrics["compile_seconds_per_part"].values()), 3)
    metrics["package_bytes_per_part"] = {n: m["package_bytes"] for n, m in each.items()}
    metrics["package_bytes"] = sum(metrics["package_bytes_per_part"].values())
    for key in ("missing_c_shims", "proxy_executor_ops"):
        metrics[key] = sorted({op for m in each.values() for op in m[key]})
    metrics["proxy_executor_ops_per_part"] = {n: m["proxy_executor_ops"] for n, m in each.items()
                                              if m["proxy_executor_ops"]}
    return packages


def worker_runner(worker: aoti.Worker):
    """`run(name, *args, **inputs)` for `ExportedGeneration.generate`: each part call answered by the worker; the
    prefill's cache outputs stay in the worker (`aoti.Held`), and the step updates them there."""
    def run(name, *args, **kwargs):
        inputs = dict(zip(PART_INPUTS.get(name, ()), args), **kwargs)
        held = CACHE_INPUT if isinstance(inputs.pop(CACHE_INPUT, None), list) else None
        outputs = worker.call(name, inputs, keep=1 if name == "prefill" else None, held=held)
        return tuple(outputs) if name == "prefill" else outputs[0] if len(outputs) == 1 else outputs
    return run


def at_its_step(exc: ContractViolation, metrics: dict) -> ContractViolation:
    """A request's failure (`served.judge_requests`) restated at its step: one the worker or a build stated keeps
    its own; a dimension kept static or a baked step is the export's (``specialisation``); else ``compare``."""
    reason = exc.reason
    if any(reason.startswith(f"{step}: ") for step in aoti.STEPS):
        return exc
    worker_step = next((s for s in ("load", "run") if f": {s}: part " in reason), None)
    fingerprint = exc.fingerprint or Fingerprint("numerical_mismatch", what="generation")
    step = worker_step or ("export" if fingerprint.kind == "specialisation" else "compare")
    return aoti.violation(step, reason, metrics, fingerprint)


@check("aoti_generate", column=111, compares=("max_abs_diff",), tolerance="inductor", opt_in="aoti")
def check_aoti_generate(case: Case) -> dict:
    not_decoder_only(case)
    metrics: dict = {"new_tokens": NEW_TOKENS}
    failed_after_export: list[str] = []
    with tempfile.TemporaryDirectory(prefix="conformance-aoti-generate-") as folder, \
            contextlib.ExitStack() as workers:
        def build(generation: ExportedGeneration, shapes: dict):
            if failed_after_export and not shapes:  # served.serve's static retry: another C++ build per part
                raise ContractViolation(f"not tried: the dynamic parts exported and then failed at "
                                        f"{failed_after_export[0]}, which a static export would not avoid")
            export_parts(generation, shapes, metrics)
            target = tempfile.mkdtemp(dir=folder)
            try:
                packages = compile_parts(generation, target, metrics)
                worker = workers.enter_context(aoti.Worker(packages, target, metrics))
            except ContractViolation as exc:
                failed_after_export.append(exc.reason.split(":", 1)[0])
                raise
            return worker_runner(worker)

        try:
            serve(case, build, NEW_TOKENS, lambda model, inputs: eager_generation(model, inputs, NEW_TOKENS),
                  declared_tolerance(case), metrics)
        except ContractViolation as exc:
            raise at_its_step(exc, metrics) from exc
    return metrics
