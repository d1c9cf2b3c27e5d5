"""Check `build`: the tiny model runs its multimodal prefill, and uses its media.

Contract: a fresh tiny model's eager prefill forward over the sample (every
modality the sample carries) runs, the logits are finite, and when the
sample carries media (pixels, video, audio), changing those values changes
the logits: proof that the media path ran and its placeholders were consumed.
Metrics: `parameters`, `max_abs_diff` (how far the perturbed logits moved).
"""

from __future__ import annotations

import torch

from conformance.cases.case import Case
from conformance.checks.common.compare import logits_of
from conformance.checks.common.outcome import ContractViolation
from conformance.checks.common.registry import check


# Its `max_abs_diff` is how far the media moved the logits (must be > 0), not a comparison within a tolerance.
@check("build", column=10, compares=())
def check_build(case: Case) -> dict:
    model = case.fresh_model()
    metrics = {"parameters": sum(p.numel() for p in model.parameters())}
    with torch.no_grad():
        logits = logits_of(model(**case.inputs()))
    if not torch.isfinite(logits).all():
        raise ContractViolation("eager prefill logits are not finite", metrics)
    if case.sample.media_keys:
        with torch.no_grad():
            moved = logits_of(model(**case.inputs(case.sample.perturbed())))
        change = float((moved.float() - logits.float()).abs().max())
        metrics["max_abs_diff"] = change
        if change == 0.0:
            keys = ", ".join(case.sample.media_keys)
            raise ContractViolation(f"changing {keys} does not change the logits: the media path is not used", metrics)
    return metrics
