"""Check `export_forward`: the prefill forward exports with torch.export (non-strict).

Contract: a freshly built model, wrapped in a module that takes the sample's
tensors as keyword arguments and returns the logits of the prefill forward
with ``use_cache=False``, exports with ``torch.export.export(strict=False)``
(before any eager call of the model); the program survives
``torch.export.save`` / ``torch.export.load`` through a temporary .pt2; the
loaded program, called twice, matches a plain eager forward of another fresh
instance (not the module it was traced from) within the export tolerance,
both times, and the two calls agree with each other within it. On failure
the reason is the exporter's own first line and the transformers
``file:line`` it points at.
Metrics: `max_abs_diff` (worst of the two calls against eager),
`repeat_diff` (second call against first), `export_seconds`, `pt2_bytes`,
`graph_nodes`, `strict`.
"""

from __future__ import annotations

from conformance.cases.case import Case
from conformance.checks.common.export import export_forward
from conformance.checks.common.registry import check


@check("export_forward", column=60, compares=("max_abs_diff", "repeat_diff"), tolerance="export")
def check_export_forward(case: Case) -> dict:
    return export_forward(case, strict=False)
