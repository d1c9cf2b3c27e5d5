"""Check `export_onnx`: the prefill forward exported to ONNX and run in ONNX Runtime.

Contract: a freshly built model, over the same tensor inputs as
`export_forward` (its plain values baked in, ``use_cache=False``), exports to
an ONNX file through the supported path of the installed versions
(`common.onnx.exporter_name`: transformers' ``OnnxExporter`` where transformers has
one, else ``torch.onnx.export(dynamo=True)``), before any eager call of the
model; the file (weights in a sidecar) loads in an ONNX Runtime CPU session,
and the logits it computes match a plain eager forward of another fresh
instance within the export tolerance on every non-padding position (where
the sample's ``attention_mask`` is 1; all positions when the logits are not
aligned with it).

Optional: it requires ``onnx``, ``onnxscript`` and ``onnxruntime`` (extra
``[onnx]``); where they are not installed the column is not run.
Failure: the exporter's (or ONNX Runtime's) first line and the transformers
``file:line`` it points at, or the size of the numerical difference.
Metrics: `exporter`, `graph_nodes` (main graph), `model_bytes` (.onnx and its
weights), `export_seconds`, `ort_seconds` (session + run), `max_abs_diff`,
`compared_positions`, `graph_outputs`, `dynamic_inputs` (the graph inputs
with a symbolic dimension: [] for a graph that serves only the traced shapes;
`export_dynamic` is the dynamic question); `cache_outputs` when the graph returns
cache tensors although ``use_cache=False`` was passed (transformers' exporter
sets the flag only on a config that declares it), and on a failure then
`use_cache_true_diff` (ONNX against eager with ``use_cache=True``), which the
reason states. On a numerical failure `program_diff` (the torch.export program
the ONNX graph was translated from, against eager: the exporter's rewrites) and
`onnx_vs_program_diff` (ONNX Runtime against that program: translation and
runtime) say which step the difference comes from.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from typing import Any

import torch

from conformance.cases.case import Case
from conformance.checks.common import export as _export
from conformance.checks.common.exporters import compare_logits, non_padding
from conformance.checks.common import onnx as _onnx
from conformance.checks.common.compare import logits_of
from conformance.checks.common.outcome import ContractViolation
from conformance.checks.common.registry import check, declared_tolerance


def exported_module(model: torch.nn.Module, constants: dict, fixed: dict, tensors: dict):
    """(module, kwargs) the exporter is given: the model itself for transformers' exporter (it reads the
    model's own attributes), the logits wrapper of `export_forward` for torch.onnx."""
    if _onnx.exporter_name() == _onnx.TRANSFORMERS_EXPORTER:
        return model, {**tensors, **constants, **fixed}
    return _export.LogitsModule(model, constants, **fixed), dict(tensors)


@check("export_onnx", column=93, tolerance="export", requires=_onnx.PACKAGES, extra=_onnx.EXTRA)
def check_export_onnx(case: Case) -> dict:
    metrics: dict = {}
    tensors, constants = _export.split_inputs(case.inputs())
    model = case.fresh_model().eval()
    fixed = {"use_cache": False} if _export.accepts(model, "use_cache") else {}
    module, kwargs = exported_module(model, constants, fixed, tensors)
    with tempfile.TemporaryDirectory(prefix="conformance-onnx-") as folder:
        path = os.path.join(folder, "model.onnx")
        started = time.perf_counter()
        keep: dict = {}
        feed = _onnx.export_onnx_file(module, kwargs, path, metrics, keep=keep)
        metrics["export_seconds"] = round(time.perf_counter() - started, 3)
        del model, module
        metrics["graph_nodes"] = _onnx.graph_nodes(path)
        metrics["model_bytes"] = _onnx.model_bytes(path)
        metrics["dynamic_inputs"] = _onnx.dynamic_inputs(path)
        started = time.perf_counter()
        program = _onnx.OrtProgram(path, metrics)
        outputs = program(feed)
        metrics["ort_seconds"] = round(time.perf_counter() - started, 3)
        del program
    actual = _onnx.logits_output(outputs)
    metrics["graph_outputs"] = len(outputs)
    cache_outputs = [name for name in outputs if CACHE_OUTPUT.search(name)]
    if fixed.get("use_cache") is False and cache_outputs:
        metrics["cache_outputs"] = len(cache_outputs)

    reference = case.fresh_model().eval()
    with torch.no_grad():
        expected = logits_of(reference(**tensors, **constants, **fixed))
    mask = non_padding(expected, tensors)
    try:
        compare_logits(actual, expected, mask, declared_tolerance(case), "ONNX Runtime logits", metrics)
    except ContractViolation as exc:
        exc.reason += which_step(_onnx.program_logits(keep), actual, expected, mask, metrics)
        if "cache_outputs" in metrics:
            exc.reason += ignored_use_cache(reference, tensors, constants, actual, mask, metrics)
        raise
    return metrics


def which_step(program: torch.Tensor | None, actual: torch.Tensor, expected: torch.Tensor, keep, metrics: dict) -> str:
    """Where the difference comes from: the torch.export program ONNX translated, or ONNX (translation + runtime)."""
    if program is None or program.shape != actual.shape:
        return ""
    if keep is not None:
        program, actual, expected = program[keep], actual[keep], expected[keep]
    metrics["program_diff"] = float((program.float() - expected.float()).abs().max()) if program.numel() else 0.0
    metrics["onnx_vs_program_diff"] = float((actual.float() - program.float()).abs().max()) if program.numel() else 0.0
    return (f" (the torch.export program ONNX was translated from differs from eager by {metrics['program_diff']:.3g}, "
            f"the ONNX Runtime logits from that program by {metrics['onnx_vs_program_diff']:.3g})")


CACHE_OUTPUT = re.compile(r"(^|\.)(cache|past_key_values)(\.|$)")


def ignored_use_cache(model, tensors: dict, constants: dict, actual: torch.Tensor, keep, metrics: dict) -> str:
    """Why the logits may differ: the graph was traced with the cache on. Compares with eager use_cache=True."""
    with torch.no_grad():
        cached = logits_of(model(**tensors, **constants, use_cache=True))
    if cached.shape != actual.shape:
        return ""
    a, b = (actual[keep], cached[keep]) if keep is not None else (actual, cached)
    diff = float((a.float() - b.float()).abs().max()) if a.numel() else 0.0
    metrics["use_cache_true_diff"] = diff
    return (f"; the graph returns {metrics['cache_outputs']} cache tensors although use_cache=False was passed "
            f"(the exporter dropped the flag), and eager with use_cache=True is within {diff:.3g} of its logits")
