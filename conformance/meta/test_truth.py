"""Verdict truth over run files: no passing cell records a comparison beyond its check's tolerance."""

from __future__ import annotations

import json

import pytest

from conformance import locations
from conformance.report import truth
from conformance.tools import cli

PUBLISHED = locations.PUBLISHED_MATRIX

INFO = {
    "build": {"column": 10, "observes": [], "compares": []},
    "static_cache": {"column": 40, "observes": [], "compares": ["max_abs_diff"], "tolerance": "eager"},
    "export_forward": {"column": 60, "observes": [], "compares": ["max_abs_diff", "repeat_diff"],
                       "tolerance": "export"},
    "compile_prefill": {"column": 20, "observes": [], "compares": ["max_abs_diff"]},
}


def _envelope(cells: dict[str, dict], backend: str = "eager", dtype: str = "float32", info=INFO) -> dict:
    env = {"python": "3", "torch": "2", "transformers": "5.24.0", "device": "cpu", "device_name": "x",
           "dtype": dtype, "backend": backend}
    return {"schema": "vlm-conformance/1", "created": "", "suite": {}, "environment": env,
            "checks": list(info), "check_info": info, "summary": {},
            "models": {"AForConditionalGeneration": {"cells": cells}}}


def _cell(verdict: str, **metrics) -> dict:
    return {"verdict": verdict, "reason": "", "seconds": 0.0, "metrics": metrics}


@pytest.mark.skipif(not PUBLISHED.exists(), reason="no published matrix in this checkout")
def test_the_published_matrix_has_no_passing_cell_beyond_its_tolerance():
    found = truth.breaches_in(PUBLISHED)
    assert not found, "\n".join(b.line() for b in found)


def test_a_pass_beyond_the_eager_tolerance_is_found():
    found = truth.breaches(_envelope({"static_cache": _cell("pass", max_abs_diff=0.015, new_tokens=10)}))
    assert [b.line() for b in found] == [
        "AForConditionalGeneration / static_cache: pass with max_abs_diff = 0.015 > 1e-05"]


def test_each_check_uses_its_backend_and_the_run_dtype():
    cells = {"export_forward": _cell("pass", max_abs_diff=5e-5, repeat_diff=0.0),  # export: 1e-4
             "compile_prefill": _cell("xpass", max_abs_diff=5e-5)}  # the run's backend (eager): 1e-5
    assert [(b.check, b.tolerance) for b in truth.breaches(_envelope(cells))] == [("compile_prefill", 1e-5)]
    assert truth.breaches(_envelope(cells, backend="inductor")) == []  # inductor: 1e-4
    cells["static_cache"] = _cell("pass", max_abs_diff=5e-3)
    assert truth.breaches(_envelope(cells, dtype="bfloat16")) == []  # bf16: 1e-2


def test_a_column_of_another_backend_uses_that_backends_tolerance():
    info = {**INFO, "compile_prefill@inductor": {**INFO["compile_prefill"], "column": 21, "backend": "inductor"}}
    cells = {"compile_prefill": _cell("pass", max_abs_diff=5e-5),  # eager: 1e-5
             "compile_prefill@inductor": _cell("pass", max_abs_diff=5e-5)}  # inductor: 1e-4
    assert [(b.check, b.tolerance) for b in truth.breaches(_envelope(cells, info=info))] == [("compile_prefill", 1e-5)]


def test_a_dtype_column_uses_its_dtypes_tolerance():
    """A float32 matrix with bfloat16 columns merged in (``static_cache~bf16``): each column is held to its own
    dtype's tolerance, the float32 columns to float32's."""
    info = {**INFO, "static_cache~bf16": {**INFO["static_cache"], "column": 1040}}
    judged = {"worst_ratio": 0.5, "atol": 1e-2, "rtol": 1.6e-2}
    cells = {"static_cache~bf16": _cell("pass", **judged), "static_cache": _cell("pass", **judged)}
    assert [(b.check, b.tolerance) for b in truth.breaches(_envelope(cells, info=info))] == [("static_cache", 1e-5)]


def test_failing_cells_and_metrics_that_are_no_comparison_are_not_breaches():
    cells = {"static_cache": _cell("xfail", max_abs_diff=0.02),
             "export_forward": _cell("fail", max_abs_diff=1.0),
             "build": _cell("pass", max_abs_diff=0.88, parameters=10)}  # build: how far the media moved the logits
    assert truth.breaches(_envelope(cells)) == []


def test_nan_is_beyond_any_tolerance():
    found = truth.breaches(_envelope({"export_forward": _cell("pass", max_abs_diff=0.0, repeat_diff=float("nan"))}))
    assert [(b.metric, b.check) for b in found] == [("repeat_diff", "export_forward")]


def test_a_run_file_without_declarations_is_read_with_the_registry():
    envelope = _envelope({"static_cache": _cell("pass", max_abs_diff=2e-5),
                          "build": _cell("pass", max_abs_diff=0.5)}, info={})
    envelope["checks"] = ["build", "static_cache"]
    assert [(b.check, b.tolerance) for b in truth.breaches(envelope)] == [("static_cache", 1e-5)]


def test_the_command_prints_each_breach_and_fails(tmp_path, capsys):
    run = tmp_path / "run.json"
    run.write_text(json.dumps(_envelope({"static_cache": _cell("pass", max_abs_diff=0.0097)})))
    assert cli.main(["truth", str(run)]) == 1
    out = capsys.readouterr().out
    assert "AForConditionalGeneration / static_cache: pass with max_abs_diff = 0.0097 > 1e-05" in out
    run.write_text(json.dumps(_envelope({"static_cache": _cell("pass", max_abs_diff=0.0)})))
    assert cli.main(["truth", str(run)]) == 0
