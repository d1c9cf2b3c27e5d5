"""torch.export plumbing shared by the export checks.

Contracts:

* `split_inputs(inputs)` separates what an exported program takes as inputs
  (tensors, and lists/tuples of tensors) from plain values (ints, strings,
  None), which a wrapper bakes in as constants.
* `LogitsModule(model, constants, **fixed)` is the module users export: it
  takes the sample's tensors as keyword arguments and returns the logits of
  ``model(**tensors, **constants, **fixed)``.
* `export(module, kwargs, strict)` runs ``torch.export.export``; on failure it
  raises ContractViolation whose reason is the exporter's own first line and
  the transformers ``file:line`` it points at (`exporter_reason`).
* `save_and_load(program)` round-trips a program through a temporary .pt2
  file and returns the loaded program.
* `run_twice(program, kwargs)` calls the loaded program twice and returns
  both logits, so a check can compare each with a plain eager forward.
* `export_forward(case, strict)` is the whole contract of the two forward
  export checks (see `conformance.checks.export_forward`): each call of the
  loaded program against eager, then the two calls against each other, all
  within the export tolerance.
"""

from __future__ import annotations

import inspect
import os
import re
import tempfile
import time
from typing import Any

import torch

from conformance.checks.common.compare import assert_close, judge_close, logits_of
from conformance.checks.common.outcome import ContractViolation
from conformance.checks.common.registry import declared_tolerance
from conformance.fingerprints import Fingerprint, kind_of, where_of
from conformance.reasons import package_path, where

TRANSFORMERS_FRAME = re.compile(r'File "([^"]*/transformers/[^"]+)", line (\d+)')
REASON_LIMIT = 240


def split_inputs(inputs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tensor inputs, constant inputs) of a sample's forward kwargs."""
    tensors, constants = {}, {}
    for key, value in inputs.items():
        if _is_tensor_tree(value):
            tensors[key] = value
        else:
            constants[key] = value
    return tensors, constants


def _is_tensor_tree(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (list, tuple)) and value:
        return all(_is_tensor_tree(v) for v in value)
    return False


def accepts(model: torch.nn.Module, name: str) -> bool:
    """Whether `model.forward` takes keyword `name` (explicitly or through **kwargs)."""
    params = inspect.signature(model.forward).parameters
    if name in params:
        return True
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


class LogitsModule(torch.nn.Module):
    """`forward(**tensors)` -> logits of the wrapped model, constants baked in."""

    def __init__(self, model: torch.nn.Module, constants: dict[str, Any] | None = None, **fixed: Any):
        super().__init__()
        self.model = model
        self.constants = dict(constants or {})
        self.fixed = fixed

    def forward(self, **tensors: Any) -> torch.Tensor:
        return logits_of(self.model(**tensors, **self.constants, **self.fixed))


def exporter_reason(exc: BaseException, stage: str) -> str:
    """`stage: Type: first line (at transformers/...:N)` for a failed export step.

    The location is the innermost transformers frame the exporter names in its
    message (strict export traces symbolically, so the Python traceback ends
    inside torch), else the innermost transformers frame of the traceback.
    """
    text = str(exc).strip()
    first = next((line.strip() for line in text.splitlines() if line.strip()), repr(exc))
    if len(first) > REASON_LIMIT:
        first = first[: REASON_LIMIT - 3] + "..."
    frames = TRANSFORMERS_FRAME.findall(text)
    if frames:
        path, line = frames[-1]
        location = f"{package_path(path)}:{line}"
    else:
        location = where(exc)
    return f"{stage}: {type(exc).__name__}: {first}" + (f" (at {location})" if location else "")


def failed(exc: BaseException, stage: str, metrics: dict) -> ContractViolation:
    """The violation of an export step that raised: the exporter's reason, and a fingerprint naming the stage,
    the kind (data-dependent guard, unsupported, else export error), the exception and its transformers site."""
    fingerprint = Fingerprint(kind_of(exc, "export_error"), where=where_of(exc), error=type(exc).__name__, what=stage)
    return ContractViolation(exporter_reason(exc, stage), metrics, fingerprint)


def export(module: torch.nn.Module, kwargs: dict[str, Any], strict: bool, metrics: dict):
    """torch.export.export(module, kwargs=kwargs, strict=strict), or a ContractViolation."""
    stage = f"torch.export.export(strict={strict})"
    try:
        with torch.no_grad():
            return torch.export.export(module, args=(), kwargs=kwargs, strict=strict)
    except Exception as exc:
        raise failed(exc, stage, metrics) from exc


def save_and_load(program, metrics: dict):
    """The program after torch.export.save / torch.export.load through a temporary .pt2."""
    with tempfile.TemporaryDirectory(prefix="conformance-export-") as folder:
        path = os.path.join(folder, "program.pt2")
        try:
            torch.export.save(program, path)
        except Exception as exc:
            raise failed(exc, "torch.export.save", metrics) from exc
        metrics["pt2_bytes"] = os.path.getsize(path)
        try:
            return torch.export.load(path)
        except Exception as exc:
            raise failed(exc, "torch.export.load", metrics) from exc


def run_twice(program, kwargs: dict[str, Any], metrics: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits of two consecutive calls of a loaded program's module."""
    module = program.module()
    results = []
    for call in ("first", "second"):
        try:
            with torch.no_grad():
                results.append(logits_of(module(**kwargs)).detach().clone())
        except Exception as exc:
            raise failed(exc, f"loaded program, {call} call", metrics) from exc
    return results[0], results[1]


def export_forward(case, strict: bool) -> dict:
    """The forward-export contract of `export_forward` / `export_forward_strict` (their docstrings)."""
    metrics: dict = {"strict": strict}
    tensors, constants = split_inputs(case.inputs())
    model = case.fresh_model().eval()
    fixed = {"use_cache": False} if accepts(model, "use_cache") else {}
    started = time.perf_counter()
    program = export(LogitsModule(model, constants, **fixed), tensors, strict, metrics)
    metrics["export_seconds"] = round(time.perf_counter() - started, 3)
    metrics["graph_nodes"] = len(program.graph.nodes)
    del model
    loaded = save_and_load(program, metrics)
    first, second = run_twice(loaded, tensors, metrics)

    reference_model = case.fresh_model().eval()
    with torch.no_grad():
        expected = logits_of(reference_model(**tensors, **constants, **fixed))
    tol = declared_tolerance(case)
    assert_close(first, expected, tol, "loaded program (first call)", metrics)
    assert_close(second, expected, tol, "loaded program (second call)", metrics)
    repeat = judge_close(second, first, tol, metrics, "repeat_diff")
    if not repeat.within:
        raise ContractViolation(f"the loaded program's second call differs from its first by "
                                f"{repeat.beyond()}", metrics)
    return metrics
