"""Checks `export_forward` (strict=False) and `export_forward_strict` (strict=True).

Contract: a freshly built model, wrapped in a module that takes the sample's
tensors as keyword arguments and returns the logits of the prefill forward
with ``use_cache=False``, exports with ``torch.export.export`` (before any
eager call of the model); the program survives ``torch.export.save`` /
``torch.export.load`` through a temporary .pt2; the loaded program, called
twice, matches a plain eager forward of another fresh instance (not the
module it was traced from) within the export tolerance, both times.
On failure the reason is the exporter's own first line and the transformers
``file:line`` it points at.
Metrics: `max_abs_diff` (worst of the two calls against eager),
`repeat_diff` (second call against first), `export_seconds`, `pt2_bytes`,
`graph_nodes`.
"""

from __future__ import annotations

import time

import torch

from conformance.checks import _export
from conformance.checks.base import Case, assert_close, check, logits_of


def export_forward(case: Case, strict: bool) -> dict:
    metrics: dict = {"strict": strict}
    tensors, constants = _export.split_inputs(case.inputs())
    model = case.fresh_model().eval()
    fixed = {"use_cache": False} if _export.accepts(model, "use_cache") else {}
    started = time.perf_counter()
    program = _export.export(_export.LogitsModule(model, constants, **fixed), tensors, strict, metrics)
    metrics["export_seconds"] = round(time.perf_counter() - started, 3)
    metrics["graph_nodes"] = len(program.graph.nodes)
    del model
    loaded = _export.save_and_load(program, metrics)
    first, second = _export.run_twice(loaded, tensors, metrics)

    reference_model = case.fresh_model().eval()
    with torch.no_grad():
        expected = logits_of(reference_model(**tensors, **constants, **fixed))
    metrics["repeat_diff"] = float((first.float() - second.float()).abs().max()) if first.numel() else 0.0
    tol = case.tol("export")
    assert_close(first, expected, tol, "loaded program (first call)", metrics)
    assert_close(second, expected, tol, "loaded program (second call)", metrics)
    return metrics


@check("export_forward")
def check_export_forward(case: Case) -> dict:
    return export_forward(case, strict=False)


@check("export_forward_strict")
def check_export_forward_strict(case: Case) -> dict:
    return export_forward(case, strict=True)
