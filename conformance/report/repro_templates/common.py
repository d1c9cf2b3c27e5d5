"""What the reproducer templates share: the suite's tolerances and where a sub-module sits in a model.

Contracts:

* `atol(backend)` / `rtol()` are the suite's float32 tolerances (`conformance.tolerances`).
* `module_path(model, module)` is ``.a.b`` of a sub-module (``model.a.b`` in the script), "" for the model
  itself; `NoTemplate` when `module` is not one of the model's.
"""

from __future__ import annotations

import torch

from conformance import tolerances
from conformance.report.repro_templates.steps import NoTemplate


def atol(backend: str) -> float:
    return tolerances.tolerance("float32", backend).atol


def rtol() -> float:
    return tolerances.tolerance("float32", "eager").rtol


def module_path(model: torch.nn.Module, module: torch.nn.Module) -> str:
    """`.a.b` of a sub-module (`model.a.b` in the script), "" for the model itself."""
    if module is model:
        return ""
    for name, found in model.named_modules():
        if found is module:
            return "." + name
    raise NoTemplate(f"the decoding module ({type(module).__name__}) is not a sub-module of the model")
