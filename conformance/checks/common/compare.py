"""Comparing outputs: the logits of any model output, their difference, the tolerance check.

Contract: `logits_of(output)` finds the logits tensor of a ModelOutput,
dict, tuple or tensor: `logits`, else a scoring output's first `logits*`
field (CLIP-style `logits_per_<modality>`), else a tuple's first tensor
(TypeError when there is none); `max_abs_diff(a, b)`
is their largest absolute difference in float32 (ContractViolation when the
shapes differ); `assert_close(actual, expected, tol, what, metrics)` records
the worst difference so far as ``metrics["max_abs_diff"]`` and raises
ContractViolation, naming `what`, beyond `tol` (NaN is beyond any tolerance),
fingerprinted as a numerical mismatch at `what`.
`tolerance(case, backend)` is design.md's tolerance for the case's dtype and
a backend (default: the case's), from `conformance.tolerances`.
"""

from __future__ import annotations

from typing import Any

import torch

from conformance import tolerances
from conformance.checks.common.outcome import ContractViolation
from conformance.fingerprints import Fingerprint, mask


def tolerance(case, backend: str | None = None) -> float:
    return tolerances.tolerance(str(case.dtype), backend or case.backend)


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


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:
        raise ContractViolation(f"logits shape {tuple(a.shape)} != expected {tuple(b.shape)}")
    return float((a.detach().float() - b.detach().float()).abs().max()) if a.numel() else 0.0


def assert_close(actual: torch.Tensor, expected: torch.Tensor, tol: float, what: str, metrics: dict) -> float:
    """Record max_abs_diff in `metrics` and raise ContractViolation beyond `tol`."""
    diff = max_abs_diff(actual, expected)
    metrics["max_abs_diff"] = max(diff, metrics.get("max_abs_diff", 0.0))
    if not diff <= tol:  # also catches NaN
        raise ContractViolation(f"{what}: logits differ from eager by {diff:.3g} > {tol:g}", metrics,
                                Fingerprint("numerical_mismatch", what=mask(what)))
    return diff
