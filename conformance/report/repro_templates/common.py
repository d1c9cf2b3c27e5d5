"""What the reproducer templates share: the suite's tolerances and where a sub-module sits in a model.

Contracts:

* `tolerance_constants(ctx, backend)` is the script's ``ATOL`` and ``RTOL``: the suite's tolerance table's row for the
  run's dtype and `backend` (`conformance.tolerances`).
* `module_path(model, module)` is ``.a.b`` of a sub-module (``model.a.b`` in the script), "" for the model
  itself; `NoTemplate` when `module` is not one of the model's.
"""

from __future__ import annotations

import torch

from conformance import tolerances
from conformance.report.repro_templates.steps import Context, NoTemplate


def tolerance_constants(ctx: Context, backend: str) -> dict[str, str]:
    """The script's ``ATOL`` and ``RTOL`` constants: the table's row for the run's dtype and `backend`."""
    tol = tolerances.tolerance(ctx.dtype, backend)
    return {"ATOL": repr(tol.atol), "RTOL": repr(tol.rtol)}


def module_path(model: torch.nn.Module, module: torch.nn.Module) -> str:
    """`.a.b` of a sub-module (`model.a.b` in the script), "" for the model itself."""
    if module is model:
        return ""
    for name, found in model.named_modules():
        if found is module:
            return "." + name
    raise NoTemplate(f"the decoding module ({type(module).__name__}) is not a sub-module of the model")
