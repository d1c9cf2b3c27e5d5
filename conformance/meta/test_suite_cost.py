"""Self-tests of `conformance bench --suite` (the matrix's own cost per check): grouping, tables, errors."""

from __future__ import annotations

import json

import pytest

from conformance.tools import bench, suite_cost

pytestmark = pytest.mark.meta


def _report(path, duration, tests):
    path.write_text(json.dumps({"duration": duration, "tests": [
        {"nodeid": nodeid, "outcome": "passed", **{phase: {"duration": s} for phase, s in zip(
            ("setup", "call", "teardown"), seconds)}} for nodeid, seconds in tests]}))
    return path


def _run(tmp_path, name="run.json", scale=1.0):
    return _report(tmp_path / name, 100.0 * scale, [
        ("conformance/test_matrix.py::test_build[AForConditionalGeneration]@AForConditionalGeneration",
         (2.0 * scale, 0.5, 0.0)),
        ("conformance/test_matrix.py::test_compile_prefill[AForConditionalGeneration]@AForConditionalGeneration",
         (0.0, 10.0 * scale, 0.1)),
        ("conformance/test_matrix.py::test_compile_prefill[BForConditionalGeneration]", (0.0, 5.0, 0.0)),
        ("conformance/meta/test_gate.py::test_something", (0.0, 1.0, 0.0)),
        ("conformance/test_static_cache_property.py::test_property", (0.0, 3.0, 0.0)),
    ])


def test_cells_are_grouped_by_check_and_the_build_is_its_setup(tmp_path):
    cost = suite_cost.read(_run(tmp_path))
    assert set(cost.rows) == {"build", "compile_prefill", suite_cost.META, suite_cost.OTHER}
    assert cost.rows["compile_prefill"].tests == 2 and cost.rows["compile_prefill"].call == 15.0
    assert cost.rows["build"].setup == 2.0
    assert cost.wall == 100.0 and cost.total == pytest.approx(21.6)
    text = suite_cost.table(cost)
    assert "| `build` | 1 | 2 | 0 | 2 | 12% |" in text
    assert "| **wall** | | | | **100** | |" in text


def test_two_runs_give_the_change_per_row(tmp_path):
    earlier, now = suite_cost.read(_run(tmp_path, "a.json")), suite_cost.read(_run(tmp_path, "b.json", 0.5))
    text = suite_cost.table(now, earlier)
    assert "| `compile_prefill` | 2 | 15 | 10 | -33% |" in text
    assert "| **wall** | | **100** | **50** | -50% |" in text


def test_bench_suite_prints_the_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "cost.json"
    assert bench.main(["--suite", str(_run(tmp_path)), "--out", str(out)]) == 0
    assert "| `compile_prefill` |" in capsys.readouterr().out
    written = json.loads(out.read_text())
    assert written["schema"] == suite_cost.SCHEMA and written["rows"]["build"]["setup"] == 2.0


@pytest.mark.parametrize("content, message", [
    (None, "cannot read it"),
    ("{not json", "not JSON"),
    (json.dumps({"schema": "vlm-conformance/1", "models": {}}), "not a pytest-json-report file"),
])
def test_a_file_that_is_not_a_report_is_one_clear_line(tmp_path, capsys, content, message):
    path = tmp_path / "report.json"
    if content is not None:
        path.write_text(content)
    assert bench.main(["--suite", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"conformance bench --suite: {path}: {message}")
