"""The export checks on small synthetic modules whose answer is known (no tiny VLM)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pytest
import torch

import conformance.checks.export_forward  # noqa: F401  (registers the checks)
from conformance.cases.case import Case
from conformance.cases.samples import Sample
from conformance.checks.common.outcome import run_check
from conformance.meta.planted import Exportable


class DataDependentBranch(Exportable):
    def forward(self, input_ids, attention_mask=None):
        hidden = self.embed(input_ids)
        if hidden.sum() > 0:  # control flow on a tensor's value: not exportable
            hidden = hidden * 2
        return {"logits": self.head(hidden)}


@dataclass
class SyntheticCase(Case):
    factory: Callable[[], torch.nn.Module] | None = None

    def fresh_model(self) -> torch.nn.Module:
        torch.manual_seed(self.seed)
        return self.factory()


def case_of(factory) -> SyntheticCase:
    inputs = {"input_ids": torch.tensor([[0, 3, 4], [5, 6, 7]]), "attention_mask": torch.tensor([[0, 1, 1], [1, 1, 1]])}
    return SyntheticCase(info=None, tiny=None, sample=Sample(inputs=inputs, strategy="synthetic"), factory=factory)


@pytest.mark.parametrize("check_id", ["export_forward", "export_forward_strict"])
def test_exportable_module_passes(check_id):
    outcome = run_check(check_id, case_of(Exportable))
    assert outcome.verdict == "pass", outcome.reason
    assert outcome.metrics["max_abs_diff"] <= 1e-4
    assert outcome.metrics["repeat_diff"] == 0.0


@pytest.mark.parametrize("check_id,strict", [("export_forward", False), ("export_forward_strict", True)])
def test_data_dependent_branch_fails_with_the_exporters_reason(check_id, strict):
    outcome = run_check(check_id, case_of(DataDependentBranch))
    assert outcome.verdict == "fail"
    assert outcome.reason.startswith(f"torch.export.export(strict={strict}): ")
    assert "data-dependent" in outcome.reason.lower() or "data dependent" in outcome.reason.lower(), outcome.reason
    assert "\n" not in outcome.reason


def test_exporter_reason_points_at_the_transformers_frame_named_in_the_message():
    from conformance.checks.common.export import exporter_reason

    message = ('Unsupported context manager\n  File "/x/site-packages/transformers/models/a/modeling_a.py", line 7, in f\n'
               '  File "/x/site-packages/transformers/utils/b.py", line 9, in g\n')
    reason = exporter_reason(RuntimeError(message), "torch.export.export(strict=True)")
    assert reason == ("torch.export.export(strict=True): RuntimeError: Unsupported context manager "
                      "(at transformers/utils/b.py:9)")
