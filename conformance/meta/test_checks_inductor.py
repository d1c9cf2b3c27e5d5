"""The compile columns under inductor: a failure only inductor makes is a failure, and says it is inductor's.

`WrongFakeStridesLM` (planted.py) passes both compile checks with dynamo's
eager backend and fails under inductor, whose generated code asserts the
strides a custom op's fake kernel promised (`compile_dynamic` too, which
blames the backend the same way). The correct `TinyLM` passes under
inductor too, its logits compared with eager within inductor's tolerance.
These compile real C++ kernels (a few seconds each).
"""

from __future__ import annotations

import dataclasses
import shutil

import pytest
import transformers

from conformance.checks.common.outcome import run_check
from conformance.checks.common.registry import load_all
from conformance.meta import planted

load_all()

pytestmark = [
    pytest.mark.skipif(
        int(transformers.__version__.split(".")[0]) < 5,
        reason=f"transformers {transformers.__version__}: the planted models need transformers 5's StaticCache and "
               "generate API (planted.py)"),
    pytest.mark.skipif(not (shutil.which("g++") or shutil.which("c++")),
                       reason="no C++ compiler (g++ or c++): inductor cannot build its CPU kernels here"),
]

COMPILE_CHECKS = ("compile_prefill", "compile_decode")
BLAMING_CHECKS = COMPILE_CHECKS + ("compile_dynamic",)  # every check that blames the backend (`blame_backend`)


def case(model_class, backend: str):
    return dataclasses.replace(planted.case_for(model_class), backend=backend)


@pytest.mark.parametrize("check_id", COMPILE_CHECKS)
def test_the_correct_model_passes_under_inductor(check_id):
    outcome = run_check(check_id, case(planted.TinyLM, "inductor"))
    assert outcome.verdict == "pass", outcome.reason
    assert outcome.metrics["max_abs_diff"] <= 1e-4


@pytest.mark.parametrize("check_id", COMPILE_CHECKS)
def test_wrong_fake_strides_pass_with_dynamo_alone(check_id):
    outcome = run_check(check_id, case(planted.WrongFakeStridesLM, "eager"))
    assert outcome.verdict == "pass", outcome.reason


@pytest.mark.parametrize("check_id", BLAMING_CHECKS)
def test_an_inductor_only_failure_is_red_and_named_inductors(check_id):
    outcome = run_check(check_id, case(planted.WrongFakeStridesLM, "inductor"))
    assert outcome.verdict == "fail", outcome.metrics
    assert "inductor failed where dynamo alone traces the same call fullgraph" in outcome.reason
    assert "its generated code raised" in outcome.reason and "stride" in outcome.reason
    fingerprint = outcome.fingerprint.to_data()
    assert fingerprint["kind"] == "backend", fingerprint
    assert fingerprint["where"].startswith("<inductor generated code>:"), fingerprint
    assert fingerprint["error"] == "AssertionError"
    assert "#" in fingerprint["what"]  # sizes and strides masked: the same lie at another shape is the same failure


def test_generated_code_is_named_wherever_the_inductor_cache_lives(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "elsewhere"))
    outcome = run_check("compile_prefill", case(planted.WrongFakeStridesLM, "inductor"))
    assert outcome.fingerprint.to_data()["where"] == "<inductor generated code>:call", outcome.reason
