"""aoti_generate on planted models whose answer is known, and its failures named by step and part.

Two cells build C++ (a package per part, tens of seconds each): the planted
`TinyLM` passes, and a decode step that keeps a Python int of the prompt
(`test_generation_requests`'s planted Llama) serves the traced prompt but
not a longer one, a ``specialisation`` of the export. The rest runs without
a compile: `BakedPositionLM` fails while its parts export, the worker's
failures and the step a request's failure is judged at.
"""

from __future__ import annotations

import ast

import pytest

from conformance.checks import aoti_generate
from conformance.checks.common import aoti
from conformance.checks.common.outcome import ContractViolation, run_check
from conformance.checks.common.registry import load_all, opt_in_reason
from conformance.fingerprints import Fingerprint
from conformance.meta import planted
from conformance.meta.test_generation_requests import _baking_class, _lm, _text_case
from conformance.meta.test_planted_bugs import one_thread  # noqa: F401  (autouse: one thread a cell)

pytestmark = pytest.mark.meta

load_all()


def test_aoti_generate_is_an_opt_in_column_of_the_aoti_group():
    assert load_all()["aoti_generate"].opt_in == "aoti"
    assert opt_in_reason("aoti_generate").endswith("(tox -e aoti)")


@planted.NEEDS_TRANSFORMERS_5
def test_a_model_whose_parts_aotinductor_serves_passes_token_by_token_in_a_torch_only_worker():
    outcome = run_check("aoti_generate", planted.case_for(planted.TinyLM))
    assert outcome.verdict == "pass", outcome.reason
    metrics = outcome.metrics
    assert metrics["requests"] == {"traced": "pass", "longer": "pass"}
    parts = ["embed_prefill", "embed_step", "prefill", "step"]
    assert metrics["parts"] == parts and metrics["dynamic_parts"] == ["embed_prefill", "prefill"]
    assert sorted(metrics["package_bytes_per_part"]) == parts and all(metrics["package_bytes_per_part"].values())
    assert metrics["package_bytes"] == sum(metrics["package_bytes_per_part"].values())
    assert sorted(metrics["compile_seconds_per_part"]) == parts and metrics["compile_seconds"] > 0
    assert metrics["proxy_executor_ops"] == [] and metrics["proxy_executor_ops_per_part"] == {}
    assert metrics["fresh_process_imported"] == []
    # per request: embed_prefill, prefill, then embed_step and step for each new token after the first
    assert metrics["calls"] == 2 * (2 + 2 * (metrics["new_tokens"] - 1))
    assert planted.judged_as_declared("aoti_generate", metrics) and metrics["worst_ratio"] <= 1.0


def test_a_decode_step_that_bakes_the_prompt_length_is_a_specialisation_of_the_export():
    outcome = run_check("aoti_generate", _text_case(lambda: _lm(_baking_class())))
    assert outcome.verdict == "fail", outcome.reason
    assert outcome.metrics["requests"]["traced"] == "pass" and outcome.metrics["static_export"] == "pass"
    assert outcome.reason.startswith("export: served traced, not longer (5 text tokens more): part step bakes")
    assert outcome.fingerprint.kind == "specialisation"
    assert outcome.fingerprint.what == "export: input_ids dim 1 in part step"
    assert outcome.fingerprint.where.endswith("KeepsPromptLength.forward")


def test_a_part_that_fails_to_export_names_the_part_and_compiles_nothing_dynamic(monkeypatch):
    """BakedPositionLM counts its write position in a Python int: the dynamic prefill leaves it a symbol, and the
    step's export fails on it. The static retry is the only build; it is not compiled here (no C++ in this test)."""
    def not_compiled(program, folder, metrics):
        metrics["compile_seconds"] = 0.0
        raise aoti.violation("compile", "not compiled in this test", metrics, Fingerprint("backend"))

    monkeypatch.setattr(aoti, "compile_and_package", not_compiled)
    outcome = run_check("aoti_generate", planted.case_for(planted.BakedPositionLM))
    assert outcome.verdict == "fail", outcome.reason
    assert outcome.reason.startswith("export: export of part 'step' failed: "), outcome.reason
    assert "torch.SymInt" in outcome.reason  # the prefill's symbolic length, kept in the model's Python int
    assert outcome.fingerprint.what == "export: export of part step"
    assert outcome.metrics["static_export"] == "compile: part embed_prefill: not compiled in this test"


def test_a_worker_that_cannot_load_a_package_names_the_part(tmp_path):
    (tmp_path / "step.pt2").write_bytes(b"not a package")
    metrics: dict = {}
    with pytest.raises(ContractViolation) as failed:
        aoti.Worker({"step": str(tmp_path / "step.pt2")}, str(tmp_path), metrics)
    assert failed.value.reason.startswith("load: part step: "), failed.value.reason
    assert failed.value.fingerprint.what.startswith("load: ")
    assert "serve_seconds" in metrics


@pytest.mark.parametrize("reason,kind,step", [
    ("served traced, not longer (5 more): run: part step: the process died of SIGSEGV", "export_error", "run"),
    ("served traced, not longer (5 more): part prefill: input_ids dim 1 specialised to 8", "specialisation", "export"),
    ("tokens from the exported parts differ from eager generate at new token 2", "numerical_mismatch", "compare"),
])
def test_a_request_failure_is_judged_at_its_step(reason, kind, step):
    found = aoti_generate.at_its_step(ContractViolation(reason, {}, Fingerprint(kind, what="x")), {})
    assert found.reason == f"{step}: {reason}" and found.fingerprint.what == f"{step}: x"
    assert found.fingerprint.kind == kind


def test_a_failure_the_worker_or_a_build_stated_keeps_its_step():
    stated = aoti.violation("run", "part step: RuntimeError: boom", {}, Fingerprint("export_error", what="boom"))
    assert aoti_generate.at_its_step(stated, {}) is stated


def test_a_compile_failure_names_its_part():
    exc = aoti.violation("compile", "inductor failed: X", {}, Fingerprint("backend", what="X"))
    found = aoti.in_part("prefill", exc, {"kept": 1})
    assert found.reason == "compile: part prefill: inductor failed: X"
    assert found.fingerprint.what == "compile: part prefill: X" and found.metrics == {"kept": 1}


def test_the_worker_imports_nothing_but_torch_and_the_standard_library():
    tree = ast.parse(aoti.WORKER)
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in node.names}
    assert imported == {"io", "os", "struct", "sys", "time", "torch"}
