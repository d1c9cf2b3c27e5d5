"""Meta tests: a cell's history across published transformers versions (conformance.report.history), on fake runs.

`three_versions()` is the fixture the page's tests share: Alpha's compile_prefill broke in 5.24, its build works since
5.23, Beta is first published on 5.23, Gamma on every version.
"""

from __future__ import annotations

import copy
import json

import pytest

from conformance.meta.test_report import cell, make_envelope
from conformance.report import envelope as report
from conformance.report import history

pytestmark = pytest.mark.meta


def at_version(envelope: dict, version: str) -> dict:
    envelope = copy.deepcopy(envelope)
    envelope["environment"]["transformers"] = version
    envelope["summary"] = report.summarize(envelope["models"], envelope["checks"])
    return envelope


def three_versions() -> list[dict]:
    """4.57, 5.23, 5.24 runs of `make_envelope`'s classes, oldest first (see the module's docstring)."""
    new = at_version(make_envelope(), "5.24.0")  # Alpha: build pass, compile_prefill fail
    middle = at_version(make_envelope(), "5.23.0")
    middle["models"]["AlphaForConditionalGeneration"]["cells"]["compile_prefill"] = cell("pass")
    old = at_version(make_envelope(), "4.57.6")
    old["models"]["AlphaForConditionalGeneration"]["cells"]["compile_prefill"] = cell("pass")
    old["models"]["AlphaForConditionalGeneration"]["cells"]["build"] = cell("xfail", "known")
    del old["models"]["BetaForConditionalGeneration"]
    return [old, middle, new]


def test_each_cell_has_one_code_per_version_oldest_first():
    found = history.of(list(reversed(three_versions())))  # any order in, oldest first out
    assert found["versions"] == ["4.57", "5.23", "5.24"]
    alpha = found["cells"]["AlphaForConditionalGeneration"]
    assert alpha["build"] == "bww" and alpha["compile_prefill"] == "wwb"
    assert alpha["compile_decode"] == "bbb"  # xfail on every version
    assert found["cells"]["BetaForConditionalGeneration"]["compile_decode"] == "-nn"  # not in 4.57; skip: n/a
    assert found["cells"]["GammaForConditionalGeneration"]["build"] == "bbb"  # error


def test_one_version_has_no_history_and_a_later_run_of_a_version_replaces_the_earlier():
    old, middle, new = three_versions()
    assert history.of([new]) == {} and history.of([new, copy.deepcopy(new)]) == {}
    fixed = copy.deepcopy(new)
    fixed["models"]["AlphaForConditionalGeneration"]["cells"]["compile_prefill"] = cell("pass")
    assert history.of([old, new, fixed])["cells"]["AlphaForConditionalGeneration"]["compile_prefill"] == "ww"


def test_a_column_a_version_did_not_run_is_not_published_there():
    old, middle, new = three_versions()
    new["checks"].append("export_onnx")
    new["models"]["AlphaForConditionalGeneration"]["cells"]["export_onnx"] = cell("pass")
    assert history.of([old, middle, new])["cells"]["AlphaForConditionalGeneration"]["export_onnx"] == "--w"


@pytest.mark.parametrize("codes, words", [
    ("www", "works on all published versions (4.57 → 5.24)"),
    ("bww", "works since 5.23 (did not work on 4.57)"),
    ("wwb", "broke in 5.24 (worked on 4.57 → 5.23)"),
    ("bwb", "broke in 5.24 (worked on 5.23)"),
    ("cbb", "does not work since 5.23 (the suite could not check it on 4.57)"),
    ("nww", "works since 5.23 (did not apply on 4.57)"),
    ("--w", "first published on 5.24: works"),
    ("-bb", "first published on 5.23: does not work"),
    ("w-w", "works since 5.24 (not published on 5.23)"),
    ("ww-", "not published on 5.24"),
    ("nnn", "does not apply on all published versions (4.57 → 5.24)"),
])
def test_a_history_in_words(codes, words):
    assert history.phrase(codes, ["4.57", "5.23", "5.24"]) == words


def test_the_page_embeds_only_its_classes_and_columns_with_each_phrase_once():
    found = history.of(three_versions())
    embedded = history.embedded(found, ["AlphaForConditionalGeneration", "ZetaForConditionalGeneration"],
                                ["build", "compile_prefill"])
    assert embedded["cells"] == {"AlphaForConditionalGeneration": "bww wwb", "ZetaForConditionalGeneration": "--- ---"}
    assert embedded["phrases"]["wwb"] == "broke in 5.24 (worked on 4.57 → 5.23)"
    assert set(embedded["phrases"]) == {"bww", "wwb", "---"}
    assert history.embedded({}, ["AlphaForConditionalGeneration"], ["build"]) == {}


def test_published_reads_every_supported_versions_file_the_run_standing_for_its_own(tmp_path):
    old, middle, new = three_versions()
    for folder, run in (("reports", new), ("reports/tf523", middle), ("reports/tf457", old)):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "matrix.json").write_text(json.dumps(run))
    assert [p.relative_to(tmp_path).as_posix() for p in history.published_paths(tmp_path)] == [
        "reports/matrix.json", "reports/tf523/matrix.json", "reports/tf457/matrix.json"]
    fixed = copy.deepcopy(new)  # the run being published replaces the published file of its version
    fixed["models"]["AlphaForConditionalGeneration"]["cells"]["compile_prefill"] = cell("pass")
    found = history.published(tmp_path, fixed)
    assert found["versions"] == ["4.57", "5.23", "5.24"]
    assert found["cells"]["AlphaForConditionalGeneration"]["compile_prefill"] == "www"
    (tmp_path / "reports/tf457/matrix.json").unlink()
    assert history.published(tmp_path, fixed)["versions"] == ["5.23", "5.24"]  # what is published, no more
