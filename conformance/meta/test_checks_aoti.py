"""aoti_forward on synthetic models whose answer is known: one that AOTInductor serves, and one bug per step.

Each model is an embedding and one Linear (`OneLinear`). The bugs:
a branch on the prompt length (``export``: nothing is compiled), a custom
operator that returns an int (``compile``: inductor's C++ wrapper has no
such return type), a custom operator defined only in Python (``load``: it
serves in the process that defined it, never in the fresh one), and a
custom operator whose inductor lowering computes something else than its
kernel (``compare``: the exported program is right, only the package is
wrong). Each AOTInductor compile builds C++: tens of seconds; the export
and the failure parsing are tested without one.
"""

from __future__ import annotations

import ast

import pytest
import torch

from conformance.checks.common import aoti
from conformance.checks.common.outcome import run_check
from conformance.checks.common.registry import load_all, opt_in_reason
from conformance.meta.planted import PROMPT_LENGTH, VOCAB, case_for

pytestmark = pytest.mark.meta

load_all()
OPS = "conformance_meta_aoti"


@torch.library.custom_op(f"{OPS}::count", mutates_args=())
def count(x: torch.Tensor) -> int:
    return 3


@count.register_fake
def _(x):
    return torch.library.get_ctx().new_dynamic_size()


def _doubling_op(name: str):
    """A custom operator ``x * 2`` with a Python kernel and a fake one."""

    @torch.library.custom_op(f"{OPS}::{name}", mutates_args=())
    def op(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    op.register_fake(lambda x: torch.empty_like(x))
    return op


double = _doubling_op("double")  # served through the proxy executor, by Python
scale = _doubling_op("scale")  # lowered by inductor, wrongly (`_register_wrong_lowering`)


class OneLinear(torch.nn.Module):
    """Token ids and a 2D mask in, ``{"logits": ...}`` out: an embedding of the planted config's vocabulary (the
    variants insert its ordinary tokens) and one Linear."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, 8)
        self.head = torch.nn.Linear(8, 16)

    def forward(self, input_ids, attention_mask=None):
        hidden = self.embed(input_ids) * attention_mask.unsqueeze(-1)
        return {"logits": self.head(hidden)}


def _register_wrong_lowering() -> None:
    """Inductor lowers `scale` to x * 3, its kernel computes x * 2: only the compiled code is wrong."""
    from torch._inductor import lowering

    lowering.register_lowering(torch.ops.conformance_meta_aoti.scale.default)(lambda x: lowering.mul(x, 3))


_register_wrong_lowering()


class BranchesOnLength(OneLinear):
    def forward(self, input_ids, attention_mask=None):
        hidden = self.embed(input_ids) * attention_mask.unsqueeze(-1)
        if input_ids.shape[1] == PROMPT_LENGTH:  # specialises the prompt length
            hidden = hidden * 2
        return {"logits": self.head(hidden)}


class ReturnsAnInt(OneLinear):
    def forward(self, input_ids, attention_mask=None):
        logits = super().forward(input_ids, attention_mask)["logits"]
        return {"logits": logits * torch.ops.conformance_meta_aoti.count(logits)}


class PythonOnlyOp(OneLinear):
    def forward(self, input_ids, attention_mask=None):
        return {"logits": torch.ops.conformance_meta_aoti.double(super().forward(input_ids, attention_mask)["logits"])}


class Miscompiled(OneLinear):
    def forward(self, input_ids, attention_mask=None):
        return {"logits": torch.ops.conformance_meta_aoti.scale(super().forward(input_ids, attention_mask)["logits"])}


def test_aoti_forward_is_an_opt_in_column_of_its_own_group():
    assert load_all()["aoti_forward"].opt_in == "aoti"
    assert opt_in_reason("aoti_forward").endswith("(tox -e aoti)")


def test_a_model_aotinductor_serves_passes_in_a_fresh_process():
    outcome = run_check("aoti_forward", case_for(OneLinear))
    assert outcome.verdict == "pass", outcome.reason
    metrics = outcome.metrics
    assert metrics["variants"] == {"traced": "pass", "shorter": "pass", "longer": "pass"}
    assert metrics["dynamic"] == {"input_ids": [1], "attention_mask": [1]}
    assert metrics["fresh_process_imported"] == []
    assert metrics["package_bytes"] > 0 and metrics["compile_seconds"] > 0
    assert metrics["missing_c_shims"] == [] and metrics["proxy_executor_ops"] == []
    assert metrics["worst_ratio"] <= 1.0 and (metrics["atol"], metrics["rtol"]) == (1e-4, 1.3e-6)


def failed_at(step: str, model_class: type) -> object:
    """The outcome of aoti_forward on `model_class`, held to failing at `step` (reason and fingerprint say so)."""
    outcome = run_check("aoti_forward", case_for(model_class))
    assert outcome.verdict == "fail", outcome.reason
    assert outcome.reason.startswith(f"{step}: ") and "\n" not in outcome.reason, outcome.reason
    assert outcome.fingerprint.what.startswith(f"{step}: "), outcome.fingerprint
    return outcome


def test_a_specialised_prompt_length_fails_at_export_before_any_compile():
    outcome = failed_at("export", BranchesOnLength)
    assert "fewer text tokens per prompt: input_ids dim 1 specialised to 8 by Eq(" in outcome.reason, outcome.reason
    assert outcome.fingerprint.kind == "specialisation" and "compile_seconds" not in outcome.metrics


def test_an_op_aotinductor_cannot_compile_fails_at_compile():
    outcome = failed_at("compile", ReturnsAnInt)
    assert "aoti_compile_and_package failed" in outcome.reason and "Unsupported return type" in outcome.reason
    assert outcome.fingerprint.kind == "backend" and outcome.fingerprint.where.startswith("torch._inductor.")


def test_an_op_that_needs_python_fails_to_load_where_only_torch_is():
    outcome = failed_at("load", PythonOnlyOp)
    assert "Could not find schema for conformance_meta_aoti::double" in outcome.reason, outcome.reason
    assert outcome.fingerprint.kind == "export_error"
    assert outcome.metrics["proxy_executor_ops"] == ["conformance_meta_aoti::double"]


def test_a_package_wrong_only_after_aotinductor_fails_at_compare():
    outcome = failed_at("compare", Miscompiled)
    assert "the traced prompt: the package's logits differ from eager by " in outcome.reason, outcome.reason
    assert outcome.fingerprint.kind == "numerical_mismatch" and outcome.metrics["worst_ratio"] > 1.0
    assert set(outcome.metrics["variants"].values()) != {"pass"}


def test_a_file_that_is_no_package_fails_at_load(tmp_path):
    package = tmp_path / aoti.PACKAGE
    package.write_bytes(b"not a package")
    with pytest.raises(aoti.ContractViolation) as failed:
        aoti.serve_in_fresh_process(str(package), {"traced": {"x": torch.ones(1)}}, str(tmp_path), {})
    assert failed.value.reason.startswith("load: "), failed.value.reason
    assert failed.value.fingerprint.what.startswith("load: ")


@pytest.mark.parametrize("entries,returncode,step,says", [
    ([{"step": "load"}, {"step": "loaded"}, {"step": "run", "call": "longer"}], -11, "run",
     "run: call longer: the process died of SIGSEGV"),
    ([{"step": "load"}], None, "load", "load: it ran past"),
    ([{"step": "run", "call": "shorter", "error": "RuntimeError", "message": "input check 12 failed\nmore"}], 1,
     "run", "run: call shorter: RuntimeError: input check 12 failed"),
])
def test_a_fresh_process_that_ends_without_a_result_names_its_step(entries, returncode, step, says):
    found = aoti._served_failure(entries, returncode, "last words\n", {})
    assert found.reason.startswith(says), found.reason
    assert found.fingerprint.what.startswith(f"{step}: ")


def test_the_runner_imports_nothing_but_torch_and_the_standard_library():
    tree = ast.parse(aoti.RUNNER)
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in node.names}
    assert imported == {"json", "sys", "time", "torch"}
