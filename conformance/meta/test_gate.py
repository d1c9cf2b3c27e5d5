"""Meta tests of conformance.gate.expectations: expectations validation, the ratchet, the update command.

The two `pytester` tests run the real plugin on real tiny models (a few
seconds each): one injects a regression and checks that exactly that cell
turns red, the other lists cells as expected failures and checks xfail and
xpass.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.gate import expectations as gate

pytestmark = pytest.mark.meta
pytest_plugins = ["pytester"]

CLASSES = {"LlavaForConditionalGeneration": "LlavaForConditionalGeneration",
           "OldLlavaAlias": "LlavaForConditionalGeneration",
           "T5ForConditionalGeneration": "T5ForConditionalGeneration"}
GOOD = '''
[[cell]]
model = "LlavaForConditionalGeneration"
check = "compile_prefill"
verdict = "fail"
reason = "graph break"
link = "https://example.org/1"
'''


def parse(text: str) -> dict:
    return gate.parse(text, Path("5.24.toml"), CLASSES)


def test_valid_file_parses_and_alias_maps_to_class():
    text = GOOD + GOOD.replace("LlavaForConditionalGeneration", "OldLlavaAlias").replace("compile_prefill", "build")
    found = parse(text)
    assert set(found) == {("LlavaForConditionalGeneration", "compile_prefill"), ("LlavaForConditionalGeneration", "build")}
    assert found[("LlavaForConditionalGeneration", "compile_prefill")].link == "https://example.org/1"


@pytest.mark.parametrize("text, message", [
    ("[[cell]\nmodel = 1", "not valid TOML"),
    (GOOD.replace('reason = "graph break"\n', ""), "cell #1 lacks 'reason'"),
    (GOOD.replace('verdict = "fail"\n', ""), "cell #1 lacks 'verdict'"),
    (GOOD + GOOD, "cell #2: cell LlavaForConditionalGeneration / compile_prefill is listed twice"),
    (GOOD + GOOD.replace("LlavaForConditionalGeneration", "OldLlavaAlias"), "listed twice"),
    (GOOD.replace("LlavaFor", "LlamaFor"), "'LlamaForConditionalGeneration', which is not discovered"),
    (GOOD.replace("compile_prefill", "compile_prefil"), "unknown check 'compile_prefil'"),
    (GOOD.replace('"fail"', '"xfail"'), "verdict 'xfail'; use one of fail, error, timeout"),
    (GOOD.replace("link =", "lnk ="), "unknown field 'lnk'"),
    (GOOD.replace('"graph break"', "3"), "'reason' must be a string"),
    ("cells = []\n", "unknown top-level key 'cells'"),
])
def test_bad_file_is_one_clear_line(text, message):
    with pytest.raises(gate.ExpectationsError) as info:
        parse(text)
    assert message in str(info.value)
    assert "\n" not in str(info.value) and "5.24.toml" in str(info.value)


def test_missing_file_means_no_expectations(tmp_path):
    assert gate.load(tmp_path / "absent.toml") == {}


EXPECTED = gate.Expectation("M", "build", "fail", "r")


@pytest.mark.parametrize("raw, expectation, final", [
    ("fail", None, "fail"), ("error", None, "error"), ("timeout", None, "timeout"),
    ("pass", None, "pass"), ("skip", None, "skip"),
    ("fail", EXPECTED, "xfail"), ("error", EXPECTED, "xfail"), ("timeout", EXPECTED, "xfail"),
    ("pass", EXPECTED, "xpass"), ("skip", EXPECTED, "skip"),
])
def test_judge_is_the_ratchet(raw, expectation, final):
    assert gate.judge(raw, expectation) == final


def cell(verdict: str, reason: str = "") -> dict:
    return {"verdict": verdict, "reason": reason, "seconds": 0.1, "metrics": {}, "nodeid": ""}


def write_run(path: Path, cells: dict[str, dict[str, dict]], version: str = "5.24.0") -> Path:
    from conformance.meta.test_report import ENV
    from conformance.report.envelope import build_envelope

    records = [{"model": model, "check": check, **cell} for model, row in cells.items() for check, cell in row.items()]
    envelope = build_envelope(records, {**ENV, "transformers": version}, sorted({r["check"] for r in records}), {})
    path.write_text(json.dumps(envelope))
    return path


def test_update_keeps_reasons_adds_new_removes_passing(tmp_path):
    file = tmp_path / "5.24.toml"
    file.write_text(gate.dumps({
        ("A", "build"): gate.Expectation("A", "build", "fail", "hand-written reason", "https://x/1"),
        ("A", "compile_prefill"): gate.Expectation("A", "compile_prefill", "fail", "fixed upstream"),
        ("Z", "export_forward"): gate.Expectation("Z", "export_forward", "timeout", "not in this run"),
    }))
    run = write_run(tmp_path / "run.json", {
        "B": {"build": cell("fail", "logits are\nnot finite"), "compile_decode": cell("pass")},
        "A": {"build": cell("xfail", "observed text"), "compile_prefill": cell("pass"),
              "static_cache": cell("timeout", "ran past 300 s")},
    })
    assert gate.update_expectations(run, file) == file
    found = gate.parse(file.read_text(), file, None)
    assert found == {
        ("A", "build"): gate.Expectation("A", "build", "fail", "hand-written reason", "https://x/1"),
        ("A", "static_cache"): gate.Expectation("A", "static_cache", "timeout", "ran past 300 s"),
        ("B", "build"): gate.Expectation("B", "build", "fail", "logits are not finite"),
        ("Z", "export_forward"): gate.Expectation("Z", "export_forward", "timeout", "not in this run"),
    }
    text = file.read_text()
    order = [text.index(f'check = "{c}"') for c in ("build", "static_cache")]
    assert order == sorted(order) and text.index('"A"') < text.index('"B"') < text.index('"Z"')
    assert sorted(p.name for p in tmp_path.iterdir()) == ["5.24.toml", "run.json"]  # no temporary left


def test_update_lists_the_observed_verdict_of_an_xfail_cell(tmp_path):
    """An xfail cell lists its raw verdict (`observed`); a run file without it falls back to the verdict
    listed before, or for a new entry to the run's `expected`, else fail."""
    file = tmp_path / "5.24.toml"
    file.write_text(gate.dumps({("A", "build"): gate.Expectation("A", "build", "fail", "kept reason", "https://x/1")}))
    run = write_run(tmp_path / "run.json", {
        "A": {"build": {**cell("xfail", "r"), "expected": "fail", "observed": "error"}},
        "B": {"build": {**cell("xfail", "gone past"), "expected": "fail", "observed": "timeout"},
              "static_cache": {**cell("xfail", "old run"), "expected": "error"},
              "legacy_cache": cell("xfail", "older run")},
    })
    found = gate.parse(gate.update_expectations(run, file).read_text(), file, None)
    assert found == {
        ("A", "build"): gate.Expectation("A", "build", "error", "kept reason", "https://x/1"),
        ("B", "build"): gate.Expectation("B", "build", "timeout", "gone past"),
        ("B", "legacy_cache"): gate.Expectation("B", "legacy_cache", "fail", "older run"),
        ("B", "static_cache"): gate.Expectation("B", "static_cache", "error", "old run"),
    }


def test_update_is_idempotent(tmp_path):
    run = write_run(tmp_path / "run.json", {"A": {"build": cell("error", "no get_image_features")}})
    file = gate.update_expectations(run, tmp_path / "e.toml")
    first = file.read_text()
    gate.update_expectations(run, file)
    assert file.read_text() == first


def test_update_without_path_uses_the_run_version(tmp_path, monkeypatch):
    monkeypatch.setattr(gate, "EXPECTATIONS_DIR", tmp_path / "expectations")
    run = write_run(tmp_path / "run.json", {"A": {"build": cell("fail", "x")}}, version="4.57.6")
    assert gate.update_expectations(run) == tmp_path / "expectations" / "4.57.toml"


@pytest.mark.parametrize("content, message", [(None, "no such file"), ("{", "not valid JSON"),
                                              ('{"a": 1}', "expected 'vlm-conformance/1'")])
def test_update_from_bad_run_is_one_clear_line(tmp_path, content, message):
    run = tmp_path / "run.json"
    if content is not None:
        run.write_text(content)
    with pytest.raises(gate.ExpectationsError, match=message):
        gate.update_expectations(run, tmp_path / "e.toml")


# --- the real plugin on real tiny models ------------------------------------------------------

REGRESSED = "LlavaForConditionalGeneration"
HEALTHY = "T5ForConditionalGeneration"

CONFTEST = '''
import functools

import pytest
import torch
from transformers import LlavaForConditionalGeneration

pytest_plugins = ["conformance.run.plugin"]


def pytest_conformance_case_source(config):
    return None  # the installed transformers' classes; implementing the hook says this run is the suite


@pytest.fixture(autouse=True)
def nan_logits_regression(monkeypatch):
    """The injected regression: Llava's forward returns NaN logits."""
    original = LlavaForConditionalGeneration.forward

    @functools.wraps(original)  # the forward keeps its signature: samples are built from it
    def forward(self, *args, **kwargs):
        output = original(self, *args, **kwargs)
        output.logits = torch.full_like(output.logits, float("nan"))
        return output

    monkeypatch.setattr(LlavaForConditionalGeneration, "forward", forward)
'''
TEST_BUILD = '''
import pytest
from conformance.run.cells import run_cell


@pytest.mark.conformance_check("build")
def test_build(model_case, request):
    run_cell("build", model_case, request)
'''


@pytest.fixture(scope="session")
def preloaded():
    """Import and cache before any pytester snapshot: pytester drops the modules
    a run imports, and torch's operator registries cannot be imported twice."""
    import torch._dynamo  # noqa: F401

    from conformance.checks.common.registry import load_all
    from conformance.discover import discover

    discover()
    load_all()


@pytest.fixture
def gate_run(preloaded, pytester):
    """Run the real plugin's build check on the two classes with a given expectations file."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_build=TEST_BUILD)

    def run(expectations: str):
        exp = pytester.path / "expectations.toml"
        exp.write_text(expectations)
        out = pytester.path / "matrix.json"
        result = pytester.runpytest_inprocess(
            "-p", "no:cacheprovider", "-p", "no:randomly", "--models", f"{REGRESSED},{HEALTHY}",
            "--checks", "build", "--expectations", str(exp), "--matrix-out", str(out))
        verdicts = {m: row["cells"]["build"]["verdict"] for m, row in json.loads(out.read_text())["models"].items()}
        return result, verdicts

    return run


def test_injected_regression_turns_exactly_that_cell_red(gate_run):
    result, verdicts = gate_run("")
    assert verdicts == {REGRESSED: "fail", HEALTHY: "pass"}
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"*FAIL {REGRESSED} / build: eager prefill logits are not finite*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_listed_failure_is_xfail_and_listed_pass_is_xpass_that_fails_the_run(gate_run):
    listed = "".join(
        f'[[cell]]\nmodel = "{model}"\ncheck = "build"\nverdict = "fail"\nreason = "known"\n\n'
        for model in (REGRESSED, HEALTHY))
    result, verdicts = gate_run(listed)
    assert verdicts == {REGRESSED: "xfail", HEALTHY: "xpass"}
    result.assert_outcomes(xfailed=1, failed=1)
    result.stdout.fnmatch_lines([f"*XPASS {HEALTHY} / build*remove this expectation*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


@pytest.mark.parametrize("version, expected", [
    ("5.24.0", "5.24.toml"), ("5.24.1", "5.24.toml"), ("5.25.0.dev0", "5.24.toml"), ("5.30.0", "5.24.toml"),
    ("5.22.0", "5.9.toml"), ("5.8.0", "5.8.toml"), ("4.57.6", "4.57.toml"), ("4.58.0.dev0", "4.57.toml"), ("6.0.0", "6.0.toml"),
])
def test_default_path_falls_back_to_the_newest_older_release(tmp_path, monkeypatch, version, expected):
    monkeypatch.setattr(gate, "EXPECTATIONS_DIR", tmp_path)
    for name in ("4.57.toml", "5.9.toml", "5.23.toml", "5.24.toml"):
        (tmp_path / name).write_text("")
    assert gate.default_path(version).name == expected
