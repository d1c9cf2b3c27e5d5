"""Comparing outputs: the logits of any model output, and the one closeness rule every check judges with.

Contract: `logits_of(output)` finds the logits tensor of a ModelOutput,
dict, tuple or tensor: `logits`, else a scoring output's first `logits*`
field (CLIP-style `logits_per_<modality>`), else a tuple's first tensor
(TypeError when there is none); `max_abs_diff(a, b)` is their largest
absolute difference in float32 (ContractViolation when the shapes differ).

`closeness(actual, expected, tol)` measures two tensors against a
`conformance.tolerances.Tolerance` elementwise (``|actual - expected| <=
atol + rtol * |expected|``; equal entries, also two equal infinities, differ
by 0; NaN is beyond any tolerance): the largest absolute difference, the
worst ratio to the allowed difference (1.0 = at the edge) and, at that
element, the difference and what was allowed. `record(metrics, found, tol,
metric)` keeps the worst of each in a cell's metrics (`metric`, default
``max_abs_diff``; ``worst_ratio``; the ``atol`` and ``rtol`` judged with).
`judge_close(...)` is both. `assert_close(actual, expected, tol, what,
metrics)` records and raises ContractViolation, naming `what`, when the
tensors are not close, fingerprinted as a numerical mismatch at `what`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from conformance.checks.common.outcome import ContractViolation
from conformance.fingerprints import Fingerprint, mask
from conformance.tolerances import Tolerance


def logits_of(output: Any) -> torch.Tensor:
    """The logits tensor of a model output (ModelOutput, dict, tuple or tensor): `logits`, else the first
    `logits*` field (a contrastive scorer's `logits_per_text`), else a tuple's first tensor."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict) and "logits" in output:
        return output["logits"]
    logits = getattr(output, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    if isinstance(output, dict):  # a scoring model's logits (CLIP-style `logits_per_<modality>`): the first
        for key, value in output.items():
            if key.startswith("logits") and isinstance(value, torch.Tensor):
                return value
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    raise TypeError(f"no logits in output of type {type(output).__name__}")


def _check_shapes(a: torch.Tensor, b: torch.Tensor) -> None:
    if a.shape != b.shape:
        raise ContractViolation(f"logits shape {tuple(a.shape)} != expected {tuple(b.shape)}")


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    _check_shapes(a, b)
    return float((a.detach().float() - b.detach().float()).abs().max()) if a.numel() else 0.0


@dataclass(frozen=True)
class Closeness:
    """How far `actual` is from `expected` under a tolerance (see the module)."""

    max_abs_diff: float
    ratio: float  # worst |actual - expected| / (atol + rtol * |expected|)
    diff: float  # the difference at the worst element
    allowed: float  # what the tolerance allows there

    @property
    def within(self) -> bool:
        return self.ratio <= 1.0  # False for NaN

    def beyond(self) -> str:
        """``<diff> > <allowed>`` at the worst element, for a reason."""
        return f"{self.diff:.3g} > {self.allowed:.3g}"


def closeness(actual: torch.Tensor, expected: torch.Tensor, tol: Tolerance) -> Closeness:
    _check_shapes(actual, expected)
    if not actual.numel():
        return Closeness(0.0, 0.0, 0.0, tol.atol)
    a, e = actual.detach().double(), expected.detach().double()
    delta = torch.where(a == e, torch.zeros_like(a), (a - e).abs())
    allowed = tol.atol + tol.rtol * e.abs()
    ratios = delta / allowed
    if torch.isnan(ratios).any():
        worst = int(torch.isnan(ratios).flatten().nonzero()[0])
        ratio = math.nan
    else:
        worst = int(ratios.flatten().argmax())
        ratio = float(ratios.flatten()[worst])
    return Closeness(float(delta.max()), ratio, float(delta.flatten()[worst]), float(allowed.flatten()[worst]))


def _worse(new: float, old: float | None) -> float:
    if old is None or math.isnan(new):
        return new
    if isinstance(old, float) and math.isnan(old):
        return old
    return max(new, old)


def record(metrics: dict, found: Closeness, tol: Tolerance, metric: str = "max_abs_diff") -> None:
    """Keep the worst difference (`metric`) and ratio of a cell, and the tolerance it was judged with."""
    metrics[metric] = _worse(found.max_abs_diff, metrics.get(metric))
    metrics["worst_ratio"] = _worse(round(found.ratio, 4) if not math.isnan(found.ratio) else found.ratio,
                                    metrics.get("worst_ratio"))
    metrics["atol"], metrics["rtol"] = tol.atol, tol.rtol


def judge_close(actual: torch.Tensor, expected: torch.Tensor, tol: Tolerance, metrics: dict,
                metric: str = "max_abs_diff") -> Closeness:
    """`closeness`, recorded in `metrics` (see `record`)."""
    found = closeness(actual, expected, tol)
    record(metrics, found, tol, metric)
    return found


def assert_close(actual: torch.Tensor, expected: torch.Tensor, tol: Tolerance, what: str, metrics: dict,
                 metric: str = "max_abs_diff") -> Closeness:
    """Record the comparison in `metrics` and raise ContractViolation when the tensors are not close."""
    found = judge_close(actual, expected, tol, metrics, metric)
    if not found.within:
        raise ContractViolation(f"{what}: logits differ from eager by {found.beyond()}", metrics,
                                Fingerprint("numerical_mismatch", what=mask(what)))
    return found
