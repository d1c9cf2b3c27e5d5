"""Meta tests of the run's short summary (conformance.report.summary) and where the run prints it."""

from __future__ import annotations

import copy

import pytest

from conformance.meta.test_plugin import OK, fake_run  # noqa: F401 (fake_run: a fixture)
from conformance.meta.test_report import cell, make_envelope
from conformance.report import envelope as report
from conformance.report import pages, render, summary

pytestmark = pytest.mark.meta


def with_cells(count: int, verdict: str, **fields) -> dict:
    """An envelope of `count` classes whose one check has `verdict`."""
    models = {f"M{i:03d}ForConditionalGeneration": {"model_type": "m", "cells": {
        "build": {**cell(verdict, f"reason {i}"), **fields}}} for i in range(count)}
    return make_envelope(models=models, checks=["build"])


def test_one_line_per_check_with_pass_known_new_and_not_applicable():
    lines = summary.summary_lines(make_envelope())
    assert lines[0].startswith("conformance: 3 classes x 4 checks · transformers 5.24.0 · torch 2.13.0 · cpu")
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:6]}
    assert lines[1].split() == ["check", "pass", "known", "gaps", "new", "n/a"]
    assert rows["build"] == ["2", "0", "0", "1", "0", "(1", "error)"]
    assert rows["compile_prefill"] == ["1", "0", "0", "2", "0", "(1", "fail,", "1", "error)"]
    assert rows["compile_decode"] == ["0", "1", "0", "1", "1", "(1", "error)"]
    assert rows["legacy_cache"] == ["2", "0", "0", "1", "0", "(1", "error)"]


def test_a_one_check_run_names_its_one_column_only():
    """A run of one check (whatever else its envelope lists: the columns it could not run, shown ⬜ on the page)
    has one row, and says 1 class x 1 check."""
    envelope = make_envelope(models={OK: {"model_type": "ok", "cells": {"build": cell("pass")}}},
                             checks=["build", "compile_prefill", "export_onnx", "executorch"])
    lines = summary.summary_lines(envelope)
    assert lines[0].startswith("conformance: 1 class x 1 check · ")
    assert lines[1].split()[0] == "check" and lines[2].split() == ["build", "1", "0", "0", "0", "0"]
    assert not lines[3].startswith("  ")


def test_a_listed_harness_gap_counts_as_the_suites_own_not_as_a_known_failure():
    envelope = make_envelope()
    envelope["models"]["BetaForConditionalGeneration"]["cells"]["compile_decode"] = {**cell("xfail", observed="error"), "expected": "error"}
    envelope["summary"] = report.summarize(envelope["models"], envelope["checks"])
    counts = summary.tally(envelope)["compile_decode"]
    assert (counts.known, counts.gaps) == (1, 1)


def test_regressions_are_named_with_their_reason_and_stale_expectations_with_the_listed_verdict():
    envelope = make_envelope()
    envelope["models"]["BetaForConditionalGeneration"]["cells"]["build"] = {**cell("xpass"), "expected": "error"}
    envelope["summary"] = report.summarize(envelope["models"], envelope["checks"])
    text = summary.summary_text(envelope)
    assert "regressions (5): fail, error or timeout, not listed in the expectations or not as listed\n" in text
    assert ("  AlphaForConditionalGeneration / compile_prefill: fail: graph break: Tensor.item() "
            "(at transformers/a.py:12)\n") in text
    assert "  GammaForConditionalGeneration / build: error: tiny model or inputs could not be built" in text
    assert "stale expectations (1): passed, or failed with fewer breaks than listed: remove or tighten them\n" in text
    assert "  BetaForConditionalGeneration / build: listed as error\n" in text
    assert "(xpass)" not in text and "1 xpass" in text


def test_an_expectation_of_a_cell_that_no_longer_applies_is_named_not_red():
    envelope = make_envelope()
    envelope["models"]["BetaForConditionalGeneration"]["cells"]["build"] = {
        **cell("skip", "the sample's media reach the model by another route"), "expected": "fail"}
    envelope["summary"] = report.summarize(envelope["models"], envelope["checks"])
    text = summary.summary_text(envelope)
    assert "listed but not applicable (1): an expectation lists a failure where the check now does not apply" in text
    assert "  BetaForConditionalGeneration / build: listed as fail; now: the sample's media reach" in text
    assert "listed but not applicable" not in summary.summary_text(make_envelope())


def test_a_clean_run_says_none():
    text = summary.summary_text(make_envelope(models={}))
    assert "regressions: none\nstale expectations: none\n" in text


@pytest.mark.parametrize("verdict, title", [("timeout", "regressions"), ("xpass", "stale expectations")])
def test_named_cells_are_capped_with_and_n_more(verdict, title):
    lines = summary.summary_lines(with_cells(25, verdict, expected="fail"), limit=10)
    start = lines.index(next(line for line in lines if line.startswith(f"{title} (25)")))
    named = lines[start + 1: start + 12]
    assert [line.split(" / ")[0].strip() for line in named[:10]] == [f"M{i:03d}ForConditionalGeneration"
                                                                    for i in range(10)]
    assert named[10] == "  and 15 more"


def test_the_summary_stays_short_on_a_run_with_many_failures_and_lists_the_paths():
    envelope = make_envelope()
    for i in range(300):
        envelope["models"][f"X{i}ForConditionalGeneration"] = {"cells": {
            c: cell("fail" if i % 2 else "xpass", "a long reason " * 40) for c in envelope["checks"]}}
    envelope["summary"] = report.summarize(envelope["models"], envelope["checks"])
    paths = ["reports/latest/matrix.json", *map(str, pages.beside("reports/latest/matrix.json"))]
    lines = summary.summary_lines(envelope, paths)
    # two full sections (regressions, stale), "near the edge: none" (no cell compared anything), the paths
    assert len(lines) == 2 + len(envelope["checks"]) + 2 * (summary.LIMIT + 2) + 1 + len(paths)
    assert all(len(line) <= summary.WIDTH for line in lines)
    assert lines[-3:] == ["files: reports/latest/matrix.json", "       reports/latest/matrix.md",
                          "       reports/latest/matrix.html"]


def test_the_summary_is_a_pure_function_of_the_envelope():
    envelope = make_envelope()
    before = copy.deepcopy(envelope)
    assert summary.summary_text(envelope) == summary.summary_text(copy.deepcopy(envelope))
    assert envelope == before


def test_pages_sit_beside_the_envelope_and_never_replace_it():
    assert pages.beside("reports/latest/gate.json") == (pages.Path("reports/latest/gate.md"),
                                                         pages.Path("reports/latest/gate.html"))
    assert pages.beside("out/run.md")[0].name == "run.md.md"


def test_the_run_ends_with_the_summary_and_writes_the_pages(fake_run):  # noqa: F811 (the imported fixture)
    listed = (f'[[cell]]\nmodel = "{OK}"\ncheck = "compile_prefill"\nverdict = "fail"\nreason = "was broken"\n')
    result, out = fake_run("--models", "Ok*,Raises*", "--checks", "build,compile_prefill", expectations=listed)
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if line.strip("= ") == "conformance")
    assert "short test summary info" in "\n".join(lines[:start])  # pytest's own lines come first
    envelope = report.load_envelope(out)
    markdown, html = pages.beside(out)
    expected = summary.summary_lines(envelope, [out, markdown, html])
    assert lines[start + 1: start + 1 + len(expected)] == expected
    assert len(lines) == start + 1 + len(expected) + 1  # then pytest's last line: the counts
    assert "RaisesForConditionalGeneration / compile_prefill: fail: ValueError: the fake model failed" in \
        "\n".join(expected)
    assert any(line.startswith(f"  {OK} / compile_prefill: listed as fail") for line in expected)
    assert markdown.read_text() == render.render_markdown(envelope)
    assert "RaisesForConditionalGeneration" in html.read_text()
