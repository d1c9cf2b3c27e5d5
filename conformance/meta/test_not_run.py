"""Optional and opt-in columns: a check whose extra is not installed, or an opt-in check --checks did not name,
is not run, and every report says "not run", never ➖.

A check declares the packages it needs (`@check(..., requires=..., extra=...)`).
Where they are missing, the run deselects its cells and names the missing
extra in its header, the envelope lists the column under `not_run`, the
matrix shows its cells as ⬜ (not ➖, "does not apply"), and the envelope of
the extra's environment merges into the main one (`conformance merge`,
`conformance publish MAIN.json EXTRA.json`). An opt-in column
(`@check(..., opt_in=GROUP)`) is the same in a run without --checks (its
reason names the --checks and the tox env that run it), and runs when
--checks names it.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re

import pytest

from conformance.checks.common import registry
from conformance.checks.common.outcome import run_check
from conformance.meta.fake_cases import conftest
from conformance.meta.test_report import CHECK_INFO, CHECKS, cell, make_envelope
from conformance.report import envelope as report
from conformance.report import render
from conformance.tolerances import COMPARISON_METRICS
from conformance.tools import cli, explain

pytestmark = pytest.mark.meta

ALPHA, BETA, GAMMA = (f"{n}ForConditionalGeneration" for n in ("Alpha", "Beta", "Gamma"))
MISSING = "conformance_no_such_package"
WHY = f"needs {MISSING}, not installed: pip install 'vlm-conformance[probe]'"
ONNX_WHY = "needs onnx, onnxscript, onnxruntime, not installed: pip install 'vlm-conformance[onnx]'"
ONNX_INFO = {"export_onnx": {"column": 93, "observes": [], "requires": ["onnx", "onnxscript", "onnxruntime"],
                             "extra": "onnx"},
             "onnx_generate": {"column": 96, "observes": [], "requires": ["onnx", "onnxscript", "onnxruntime"],
                               "extra": "onnx"}}


# --------------------------------------------------------------------------- the registry


@pytest.fixture
def probe(monkeypatch):
    """A registered check that requires a package nobody has."""
    monkeypatch.setattr(registry, "CHECKS", dict(registry.load_all()))

    def check_probe(case):
        raise AssertionError("a check whose package is missing must not be called")

    registry.check("probe", column=95, requires=(MISSING,), extra="probe")(check_probe)
    return registry.get("probe")


def test_a_missing_requirement_is_named_with_its_install_command(probe):
    assert probe.missing() == [MISSING]
    assert registry.unavailable("probe") == WHY
    assert registry.unavailable("build") == ""
    assert registry.describe(["probe"])["probe"] == {"column": 95, "observes": [], "requires": [MISSING],
                                                    "extra": "probe", "compares": list(COMPARISON_METRICS)}


def test_run_check_refuses_instead_of_making_a_skip(probe):
    with pytest.raises(registry.NotInstalled, match=re.escape(f"probe {WHY}")):
        run_check("probe", object())


@pytest.mark.parametrize("check_id, extra", [("executorch", "executorch"), ("export_onnx", "onnx"),
                                             ("onnx_generate", "onnx")])
def test_optional_columns_are_not_run_without_their_extra(check_id, extra, monkeypatch):
    spec = registry.get(check_id)
    monkeypatch.setitem(registry.CHECKS, check_id, dataclasses.replace(spec, requires=(MISSING,)))
    with pytest.raises(registry.NotInstalled, match=rf"pip install 'vlm-conformance\[{extra}\]'"):
        run_check(check_id, object())
    with pytest.raises(explain.ExplainError, match=f"{check_id} needs {MISSING}, not installed"):
        explain.resolve_check(check_id)


def test_an_extra_without_requirements_is_refused():
    with pytest.raises(ValueError, match="give both"):
        registry.check("probe_extra", column=1, extra="probe")


# --------------------------------------------------------------------------- the run


PROBE = f'''
from conformance.checks.common.registry import check


@check("probe", column=95, requires=({MISSING!r},), extra="probe")
def check_probe(case):
    raise AssertionError("a check whose package is missing must not be called")
'''
MATRIX = '''
from conformance.run.cells import matrix_tests

globals().update(matrix_tests())
'''


def _runner(pytester, module: str, source: str):
    """A run of the suite in `pytester` with the check module `module` (its `source`) registered, no
    expectations and one class: `run(*pytest_args) -> (result, envelope path)`."""
    pytester.makeconftest(conftest() + f"\nimport {module}  # noqa: F401  (registers the check)\n")
    pytester.makepyfile(**{module: source, "test_matrix": MATRIX})
    (pytester.path / "none.toml").write_text("")
    out = pytester.path / "matrix.json"

    def run(*args):
        return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--matrix-out", str(out), "--expectations",
                                             str(pytester.path / "none.toml"), "--models",
                                             "OkForConditionalGeneration", "-v", *args), out
    return run


@pytest.fixture
def inner_run(pytester):
    return _runner(pytester, "probe_check", PROBE)


def test_a_column_whose_extra_is_missing_is_deselected_named_and_recorded_as_not_run(inner_run):
    result, out = inner_run("-k", "test_build or test_probe")
    text = result.stdout.str()
    missing = [line for line in text.splitlines()
               if line.startswith("conformance: not run: ") and "pip install" in line]
    assert len(missing) == 1 and f"probe ({WHY})" in missing[0]  # one line names every extra and its install
    assert "test_probe" not in text.split("conformance: not run")[1].split("\n", 1)[1]  # no cell, not even a skip
    assert "1 passed" in text and "skipped" not in text
    envelope = json.loads(out.read_text())
    # The columns: build (ran) and every column that could not run here (probe; the real extras' where missing).
    assert envelope["checks"] == ["build"] + list(envelope["not_run"]) and envelope["not_run"]["probe"] == WHY
    assert envelope["check_info"]["probe"]["extra"] == "probe"
    assert list(envelope["models"]["OkForConditionalGeneration"]["cells"]) == ["build"]
    markdown = render.render_markdown(report.validate_envelope(envelope, "matrix.json"))
    not_run_cells = " ⬜ |" * len(envelope["not_run"])
    assert f"| OkForConditionalGeneration | ✅ |{not_run_cells}\n" in markdown
    assert f"Not run: `probe`: `{WHY}`." in markdown


def test_asking_for_a_check_whose_extra_is_missing_is_a_usage_error(inner_run):
    result, out = inner_run("--checks", "build,probe")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--checks: probe {WHY}; install it or leave probe out of --checks" in result.stderr.str()
    assert not out.exists()


# --------------------------------------------------------------------------- opt-in columns


SLOW = "opt-in column, run only when named: --checks slow_probe (tox -e slow)"
OPT_IN = '''
from conformance.checks.common.registry import check


@check("slow_probe", column=97, opt_in="slow")
def check_slow_probe(case):
    return {"probed": case.info.name}
'''


def test_an_opt_in_column_says_how_to_run_it(monkeypatch):
    monkeypatch.setattr(registry, "CHECKS", dict(registry.load_all()))
    registry.check("slow_probe", column=97, opt_in="slow")(lambda case: {})
    assert registry.opt_in_reason("slow_probe") == SLOW
    assert registry.opt_in_reason("build") == ""
    assert registry.unavailable("slow_probe") == ""  # nothing is missing: named, it runs
    assert registry.describe(["slow_probe"])["slow_probe"]["opt_in"] == "slow"
    assert "opt_in" not in registry.describe(["build"])["build"]


@pytest.mark.parametrize("check_id", ["compile_dynamic", "export_dynamic"])
def test_the_dynamic_columns_are_opt_in(check_id):
    assert registry.get(check_id).opt_in == "dynamic"
    assert registry.opt_in_reason(check_id) == ("opt-in column, run only when named: "
                                                "--checks compile_dynamic,export_dynamic (tox -e dynamic)")
    # The one mechanism: without --checks they are not run, with the reason; named, they run.
    from conformance.run.options import unavailable_checks

    known = registry.check_ids()
    assert unavailable_checks([], known, lambda c: "", registry.opt_in_reason)[check_id] == \
        registry.opt_in_reason(check_id)
    assert unavailable_checks([check_id], known, lambda c: "", registry.opt_in_reason) == {}


@pytest.fixture
def opt_in_run(pytester):
    return _runner(pytester, "slow_probe_check", OPT_IN)


def test_an_opt_in_column_is_not_run_unless_named(opt_in_run):
    result, out = opt_in_run("-k", "test_build or test_slow_probe")
    text = result.stdout.str()
    assert f"conformance: not run: slow_probe ({SLOW})" in text  # the header says how to run it
    assert "test_slow_probe" not in text.split("conformance: not run")[-1].split("\n", 1)[1]  # no cell, no skip
    assert "1 passed" in text and "skipped" not in text
    envelope = json.loads(out.read_text())
    assert envelope["not_run"]["slow_probe"] == SLOW and envelope["check_info"]["slow_probe"]["opt_in"] == "slow"
    assert list(envelope["models"]["OkForConditionalGeneration"]["cells"]) == ["build"]
    markdown = render.render_markdown(report.validate_envelope(envelope, "matrix.json"))
    assert "| `slow_probe` | ⬜ not run |" in markdown and f"Not run: `slow_probe`: `{SLOW}`." in markdown
    not_run_cells = " ⬜ |" * len(envelope["not_run"])  # never ➖ "does not apply"
    assert f"| OkForConditionalGeneration | ✅ |{not_run_cells}\n" in markdown


def test_an_opt_in_column_named_in_checks_runs(opt_in_run):
    result, out = opt_in_run("--checks", "build,slow_probe")
    text = result.stdout.str()
    assert "test_matrix.py::test_slow_probe[OkForConditionalGeneration] PASSED" in text
    assert "conformance: not run" not in text
    envelope = json.loads(out.read_text())
    assert envelope["checks"] == ["build", "slow_probe"] and envelope["not_run"] == {}
    cell = envelope["models"]["OkForConditionalGeneration"]["cells"]["slow_probe"]
    assert cell["verdict"] == "pass"


# --------------------------------------------------------------------------- the report


def main_run() -> dict:
    """The main environment's run: the ONNX columns could not run there."""
    envelope = make_envelope(checks=CHECKS + ["export_onnx", "onnx_generate"],
                             check_info={**CHECK_INFO, **ONNX_INFO},
                             not_run={"export_onnx": ONNX_WHY, "onnx_generate": ONNX_WHY})
    return envelope


def onnx_run() -> dict:
    """The [onnx] environment's run (`tox -e onnx`): only the ONNX columns, same classes, same environment."""
    whole = make_envelope()
    models = {}
    for name, row in whole["models"].items():
        meta = {k: v for k, v in row.items() if k != "cells"}
        models[name] = {**meta, "cells": {"export_onnx": cell("pass", max_abs_diff=1e-7),
                                          "onnx_generate": cell("fail", "step 0: ONNX Runtime logits differ")}}
    models[GAMMA]["cells"] = {c: cell("error", "tiny model or inputs could not be built: KeyError: 'x'")
                              for c in ("export_onnx", "onnx_generate")}
    envelope = make_envelope(checks=["export_onnx", "onnx_generate"], check_info=dict(ONNX_INFO), models=models)
    envelope["environment"]["peak_rss_mib"] = 2000.0
    return envelope


def test_a_cell_that_did_not_run_is_not_run_never_does_not_apply():
    markdown = render.render_markdown(main_run())
    assert f"| {ALPHA} | ✅ | ❌ | ⚠️ | ✅ | ⬜ | ⬜ |" in markdown
    assert f"| {BETA} | ✅ | ✅ | ➖ | ✅ | ⬜ | ⬜ |" in markdown  # ➖: compile_decode ran and does not apply
    assert "| `export_onnx` | ⬜ not run | 0 |" in markdown
    assert f"Not run: `export_onnx`, `onnx_generate`: `{ONNX_WHY}`." in markdown
    legend = render.legend()
    assert "⬜ not run" in legend and "➖ does not apply" in legend and "blank" not in legend
    assert render.NOT_RUN[0] not in render.SYMBOLS.values()


def test_the_extras_run_merges_into_the_main_one():
    merged = report.merge_envelopes([main_run(), onnx_run()], ["matrix.json", "onnx.json"])
    assert merged["checks"] == CHECKS + ["export_onnx", "onnx_generate"]
    assert merged["not_run"] == {}  # the columns ran in the other file
    alpha = merged["models"][ALPHA]["cells"]
    assert list(alpha) == CHECKS + ["export_onnx", "onnx_generate"]
    assert merged["summary"]["export_onnx"]["pass"] == 2 and merged["summary"]["onnx_generate"]["fail"] == 2
    assert merged["environment"]["peak_rss_mib"] == 2000.0
    # The extras' file first: the columns still come in column order.
    assert report.merge_envelopes([onnx_run(), main_run()], ["onnx.json", "matrix.json"])["checks"] == merged["checks"]
    markdown = render.render_markdown(merged)
    assert f"| {ALPHA} | ✅ | ❌ | ⚠️ | ✅ | ✅ | ❌ |" in markdown and "Not run:" not in markdown


def test_merging_still_refuses_a_cell_in_two_run_files():
    twice = onnx_run()
    twice["models"][ALPHA]["cells"]["build"] = cell("pass")
    with pytest.raises(report.EnvelopeError, match=f"cell {ALPHA} / build is also in matrix.json"):
        report.merge_envelopes([main_run(), twice], ["matrix.json", "onnx.json"])


def test_a_column_run_on_some_classes_only_is_not_run_for_the_others():
    partial = onnx_run()
    del partial["models"][BETA]
    merged = report.merge_envelopes([main_run(), partial], ["matrix.json", "onnx.json"])
    assert merged["not_run"] == {}
    assert f"| {BETA} | ✅ | ✅ | ➖ | ✅ | ⬜ | ⬜ |" in render.render_markdown(merged)


def test_an_older_run_file_without_not_run_still_loads_and_a_bad_one_is_named(tmp_path):
    older = make_envelope()
    older.pop("not_run", None)
    path = tmp_path / "old.json"
    path.write_text(json.dumps(older))
    assert report.load_envelope(path)["checks"] == CHECKS
    bad = copy.deepcopy(main_run())
    bad["not_run"] = ["export_onnx"]
    path.write_text(json.dumps(bad))
    with pytest.raises(report.EnvelopeError, match="'not_run' must map check ids"):
        report.load_envelope(path)


def test_publish_merges_the_extras_run_files(tmp_path, capsys):
    (tmp_path / "README.md").write_text(f"# p\n\n{render.START_MARKER}\n{render.END_MARKER}\n")
    main, extra = tmp_path / "matrix.json", tmp_path / "onnx.json"
    main.write_text(json.dumps(main_run()))
    extra.write_text(json.dumps(onnx_run()))
    assert cli.main(["publish", str(main), str(extra), "--root", str(tmp_path), "--no-screenshot"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"merged 2 run files: {main}, {extra}\n") and out.count("wrote ") == 4
    published = report.load_envelope(tmp_path / "reports" / "matrix.json")
    assert published["not_run"] == {} and published["summary"]["export_onnx"]["pass"] == 2
    assert render.extract_section((tmp_path / "README.md").read_text()) == render.readme_section(published)
