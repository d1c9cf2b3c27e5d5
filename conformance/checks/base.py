"""What every check shares: the case it runs on, how it reports, tolerances.

A check is a function ``check(case: Case) -> dict`` registered with
`@check("id")`. It returns its metrics when the contract held, raises
`ContractViolation(reason, metrics)` when it ran and the contract was
violated, and `NotApplicable(reason)` when the check does not apply to the
model (e.g. no KV cache). Any other exception raised while the check runs is
a violation too (the model failed under the check), reported with its type,
message and the innermost transformers frame. `run_check` turns all of this
into an `Outcome`; checks never decide xfail/xpass (the gate does).
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from conformance.discover import ModelInfo
from conformance.samples import Sample
from conformance.tiny import TinyModel, new_model

CHECK_IDS = (
    "build",
    "compile_prefill",
    "compile_decode",
    "static_cache",
    "legacy_cache",
    "export_forward",
    "export_forward_strict",
    "export_static_cache",
    "export_generate",
    "executorch",
)

# Logits max-abs-diff tolerance: (dtype, backend) -> tolerance (design.md).
TOLERANCES = {
    ("float32", "eager"): 1e-5,
    ("float32", "aot_eager"): 1e-5,
    ("float32", "inductor"): 1e-4,
    ("float32", "export"): 1e-4,
}
LOW_PRECISION_TOLERANCE = 1e-2

CHECKS: dict[str, Callable[["Case"], dict]] = {}


class ContractViolation(AssertionError):
    """The check ran and its contract did not hold."""

    def __init__(self, reason: str, metrics: dict | None = None):
        super().__init__(reason)
        self.reason = reason
        self.metrics = metrics or {}


class NotApplicable(Exception):
    """The check does not apply to this model; the message says why."""


def check(check_id: str):
    """Register a check function under its stable id."""
    if check_id not in CHECK_IDS:
        raise ValueError(f"unknown check id {check_id!r}")

    def decorate(fn):
        CHECKS[check_id] = fn
        fn.check_id = check_id
        return fn

    return decorate


def tolerance(dtype: torch.dtype, backend: str) -> float:
    if dtype in (torch.bfloat16, torch.float16):
        return LOW_PRECISION_TOLERANCE
    return TOLERANCES.get(("float32", backend), 1e-4)


@dataclass
class Case:
    """One model under one configuration (device, dtype, backend)."""

    info: ModelInfo
    tiny: TinyModel
    sample: Sample
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    dtype: torch.dtype = torch.float32
    backend: str = "eager"
    seed: int = 0
    # False skips traces that only measure and decide no verdict (the graph-break count of a failing compile).
    count_graph_breaks: bool = True

    def fresh_model(self) -> torch.nn.Module:
        """A new instance with the same deterministic weights, never called before."""
        return new_model(self.tiny, seed=self.seed, device=self.device, dtype=self.dtype)

    def inputs(self, sample: Sample | None = None) -> dict[str, Any]:
        return (sample or self.sample).to(self.device, self.dtype)

    def tol(self, backend: str | None = None) -> float:
        return tolerance(self.dtype, backend or self.backend)


def logits_of(output: Any) -> torch.Tensor:
    """The logits tensor of a model output (ModelOutput, dict, tuple or tensor)."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict) and "logits" in output:
        return output["logits"]
    logits = getattr(output, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
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
        raise ContractViolation(f"{what}: logits differ from eager by {diff:.3g} > {tol:g}", metrics)
    return diff


def where(exc: BaseException) -> str:
    """`file:line` of the innermost frame inside transformers (else innermost)."""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        if "/transformers/" in frame.filename:
            path = frame.filename.split("/transformers/", 1)[1]
            return f"transformers/{path}:{frame.lineno}"
    if frames:
        return f"{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}"
    return ""


def one_line(exc: BaseException, limit: int = 300) -> str:
    """`Type: message (at file:line)` on one line, for a matrix cell."""
    text = " ".join(str(exc).split()) or repr(exc)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    location = where(exc)
    return f"{type(exc).__name__}: {text}" + (f" (at {location})" if location else "")


@dataclass
class Outcome:
    """The raw result of one cell, before expectations are applied."""

    verdict: str  # pass | fail | skip | error
    reason: str = ""
    metrics: dict = field(default_factory=dict)
    traceback: str = ""


def run_check(check_id: str, case: Case) -> Outcome:
    """Run one registered check on `case` and classify what happened."""
    fn = CHECKS[check_id]
    started = time.perf_counter()
    cpu_started = time.process_time()
    metrics: dict = {}
    try:
        torch.manual_seed(case.seed)
        metrics = fn(case) or {}
        outcome = Outcome("pass", "", metrics)
    except NotApplicable as exc:
        outcome = Outcome("skip", str(exc))
    except ContractViolation as exc:
        outcome = Outcome("fail", exc.reason, exc.metrics, traceback.format_exc())
    except Exception as exc:  # the model failed under the check
        outcome = Outcome("fail", one_line(exc), metrics, traceback.format_exc())
    finally:
        # Compiled artifacts must not leak into the next cell; the plugin
        # collects garbage when it moves on to the next model.
        torch._dynamo.reset()
    outcome.metrics["seconds"] = round(time.perf_counter() - started, 3)
    # CPU time of this process: the cost of the cell even on a shared machine.
    outcome.metrics["cpu_seconds"] = round(time.process_time() - cpu_started, 3)
    return outcome


def load_all_checks() -> dict[str, Callable]:
    """Import every check module so that CHECKS is complete."""
    import importlib
    import pkgutil

    import conformance.checks as package

    for module in pkgutil.iter_modules(package.__path__):
        if module.name != "base" and not module.name.startswith("_"):
            importlib.import_module(f"conformance.checks.{module.name}")
    return CHECKS
