"""A check is one file: registering it gives it its column, its tests, its place in the run, render and explain.

The synthetic check `probe` is registered by a module of the inner run (no
file in conformance/checks is touched); the inner run is a subprocess so the
registration does not leak into this process.
"""

from __future__ import annotations

import json

import pytest

from conformance.checks.common import registry
from conformance.meta.fake_cases import conftest
from conformance.report import render
from conformance.tools import explain

pytestmark = pytest.mark.meta

PROBE = '''
from conformance.checks.common.registry import check


@check("probe", column=15, observes=("_supports_probing",), lists=("probe_value", "what the probe saw"))
def check_probe(case):
    if case.info.name.startswith("Raises"):
        raise ValueError("the probe found a bug")
    return {"probe_value": case.info.name[:2]}
'''
MATRIX = '''
from conformance.run.cells import matrix_tests

globals().update(matrix_tests())
'''


def test_a_registered_check_gets_its_column_tests_and_report(pytester):
    pytester.makeconftest(conftest() + "\nimport probe_check  # noqa: F401  (registers the check)\n")
    pytester.makepyfile(probe_check=PROBE, test_matrix=MATRIX)
    (pytester.path / "none.toml").write_text("")
    out = pytester.path / "matrix.json"
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--matrix-out", str(out), "--expectations", str(pytester.path / "none.toml"),
        "--models", "OkForConditionalGeneration,RaisesForConditionalGeneration", "--checks", "build,probe", "-v")
    # Its generated test, parametrized over the classes, in column order after `build` (column 10).
    assert "test_matrix.py::test_probe[OkForConditionalGeneration] PASSED" in result.stdout.str()
    assert "test_matrix.py::test_probe[RaisesForConditionalGeneration] FAILED" in result.stdout.str()
    envelope = json.loads(out.read_text())
    assert envelope["checks"] == ["build", "probe"]
    assert envelope["check_info"]["probe"] == {"column": 15, "observes": ["_supports_probing"],
                                               "compares": ["max_abs_diff", "max_abs_diff_no_cache", "repeat_diff"],
                                               "lists": {"metric": "probe_value", "what": "what the probe saw"}}
    cells = envelope["models"]["RaisesForConditionalGeneration"]["cells"]
    assert cells["probe"]["verdict"] == "fail" and "the probe found a bug" in cells["probe"]["reason"]
    # The report renders its column and the metric it lists, from the run file alone.
    markdown = render.render_markdown(envelope)
    assert "| class | `build` | `probe` |" in markdown
    assert "## `probe`: what the probe saw (`probe_value`)" in markdown


def test_explain_reproduces_any_registered_check():
    for check_id in registry.check_ids():
        assert f"conformance/test_matrix.py::test_{check_id} " in explain.reproducer("X", check_id, "auto",
                                                                                     "float32", "eager")


def test_every_registered_check_has_a_generated_test():
    from conformance.run.cells import matrix_tests

    assert list(matrix_tests()) == [f"test_{c}" for c in registry.check_ids()]


def test_an_id_registered_by_two_modules_is_an_error(monkeypatch):
    monkeypatch.setattr(registry, "CHECKS", dict(registry.load_all()))

    def impostor(case):
        return {}

    impostor.__module__ = "somewhere.else"
    with pytest.raises(ValueError, match="'build' is registered twice"):
        registry.check("build", column=10)(impostor)
