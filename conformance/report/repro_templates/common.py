"""What the reproducer templates share: the suite's tolerances and where a sub-module sits in a model.

Contracts:

* `tolerance_constants(ctx, backend)` is the script's ``ATOL`` and ``RTOL``: the suite's tolerance table's row for the
  run's dtype and `backend` (`conformance.tolerances`).
* `baked_constants(value)` is the source of the plain inputs a check bakes into its program (`NoTemplate` when one
  cannot be written); `forward_inputs(ctx)` is (tensors, constants) as export_forward passes a sample: plain values
  baked in, ``use_cache=False`` where the model takes it.
* `module_path(model, module)` is ``.a.b`` of a sub-module (``model.a.b`` in the script), "" for the model
  itself; `NoTemplate` when `module` is not one of the model's.
"""

from __future__ import annotations

import torch

from conformance import tolerances
from conformance.report.repro_templates.steps import Context, NoTemplate
from conformance.report.repro_values import literal


def tolerance_constants(ctx: Context, backend: str) -> dict[str, str]:
    """The script's ``ATOL`` and ``RTOL`` constants: the table's row for the run's dtype and `backend`."""
    tol = tolerances.tolerance(ctx.dtype, backend)
    return {"ATOL": repr(tol.atol), "RTOL": repr(tol.rtol)}


def baked_constants(value: dict) -> str:
    try:
        return literal(value)
    except ValueError as exc:
        raise NoTemplate(f"an input the check bakes into the program cannot be written: {exc}") from None


def forward_inputs(ctx: Context, inputs: dict | None = None) -> tuple[dict, dict]:
    """(tensors, constants) as export_forward passes them: plain values baked in, use_cache=False."""
    from conformance.checks.common.export import accepts, split_inputs

    tensors, constants = split_inputs(ctx.case.inputs() if inputs is None else inputs)
    if accepts(ctx.case.fresh_model(), "use_cache"):
        constants = {**constants, "use_cache": False}
    return tensors, constants


def module_path(model: torch.nn.Module, module: torch.nn.Module) -> str:
    """`.a.b` of a sub-module (`model.a.b` in the script), "" for the model itself."""
    if module is model:
        return ""
    for name, found in model.named_modules():
        if found is module:
            return "." + name
    raise NoTemplate(f"the decoding module ({type(module).__name__}) is not a sub-module of the model")
