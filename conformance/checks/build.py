"""Check `build`: the tiny model runs its multimodal prefill, and uses its media.

Contract: a fresh tiny model's eager prefill forward over the sample (every
modality the sample carries) runs, the logits are finite, and when the
sample carries media (pixels, video, audio), changing those values changes
the logits: proof that the media path ran and its placeholders were consumed.
In half precision the logits must move in that dtype too; when they do not,
the reason says the media do not reach the output in this dtype (the path
may run with an effect below the dtype's resolution: a tiny model whose
media move its float32 logits by 1e-6 moves its bfloat16 ones by 0).
Metrics: `parameters`, `max_abs_diff` (how far the perturbed logits moved).

A half-precision cell compares its model with the same model in the same
dtype (compiled, exported, static cache: as a float32 cell does), never
with float32. How far half precision is from float32 is a diagnostic only:
in a bfloat16 or float16 run, `fp32_max_diff` is the largest difference of
these prefill logits from the same case's float32 model (the same seed, so
the same weights before the cast) on the float32 sample, or
`fp32_diff_error` when that could not be computed. Never judged.
"""

from __future__ import annotations

import dataclasses

import torch

from conformance.cases.case import Case
from conformance.checks.common.compare import logits_of, max_abs_diff
from conformance.checks.common.outcome import ContractViolation
from conformance.checks.common.registry import check
from conformance.reasons import one_line


# Its `max_abs_diff` is how far the media moved the logits (must be > 0), not a comparison within a tolerance.
@check("build", column=10, compares=())
def check_build(case: Case) -> dict:
    model = case.fresh_model()
    metrics = {"parameters": sum(p.numel() for p in model.parameters())}
    with torch.no_grad():
        logits = logits_of(model(**case.inputs()))
    if not torch.isfinite(logits).all():
        raise ContractViolation("eager prefill logits are not finite", metrics)
    if case.dtype in (torch.bfloat16, torch.float16):
        _float32_distance(case, logits, metrics)
    if case.sample.media_keys:
        with torch.no_grad():
            moved = logits_of(model(**case.inputs(case.sample.perturbed())))
        change = float((moved.float() - logits.float()).abs().max())
        metrics["max_abs_diff"] = change
        if change == 0.0:
            keys = ", ".join(case.sample.media_keys)
            if case.dtype in (torch.bfloat16, torch.float16):  # the path may run, its effect rounded away
                raise ContractViolation(f"changing {keys} does not change the {str(case.dtype).split('.')[-1]} "
                                        "logits: the media do not reach the output in this dtype", metrics)
            raise ContractViolation(f"changing {keys} does not change the logits: the media path is not used", metrics)
    return metrics


def _float32_distance(case: Case, logits: torch.Tensor, metrics: dict) -> None:
    """Record `fp32_max_diff`: these half-precision logits vs the same case's float32 model (see the module)."""
    try:
        reference = dataclasses.replace(case, dtype=torch.float32, _variants=None)
        with torch.no_grad():
            wide = logits_of(reference.fresh_model()(**reference.inputs()))
        metrics["fp32_max_diff"] = max_abs_diff(logits, wide)
    except Exception as exc:  # a diagnostic: whatever stops it is recorded, never a verdict
        metrics["fp32_diff_error"] = one_line(exc, limit=160)
