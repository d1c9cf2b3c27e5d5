"""Check `export_forward_strict`: the prefill forward exports with torch.export, strict=True.

Contract: the contract of `export_forward` (its docstring, and
`conformance.checks.common.export.export_forward`), with
``torch.export.export(strict=True)``: dynamo traces the forward symbolically,
so Python constructs that non-strict export runs eagerly (data-dependent
control flow, unsupported builtins) fail here. Metrics: those of
`export_forward`, with `strict` true.
"""

from __future__ import annotations

from conformance.cases.case import Case
from conformance.checks.common.export import export_forward
from conformance.checks.common.registry import check


@check("export_forward_strict", column=70, compares=("max_abs_diff", "repeat_diff"), tolerance="export")
def check_export_forward_strict(case: Case) -> dict:
    return export_forward(case, strict=True)
