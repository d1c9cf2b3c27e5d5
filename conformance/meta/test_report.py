"""Meta tests of conformance.report.envelope: envelope building, validation, merge, parts, diff."""

from __future__ import annotations

import copy
import json
import math

import pytest

import conformance.discover
from conformance import locations
from conformance.report import diff, io
from conformance.report import envelope as report
from conformance.verdicts import FAILING

pytestmark = pytest.mark.meta

ENV = {"python": "3.11.9", "torch": "2.13.0", "transformers": "5.24.0", "device": "cpu",
       "device_name": "x86_64", "dtype": "float32", "backend": "eager"}
CHECKS = ["build", "compile_prefill", "compile_decode", "legacy_cache"]
CHECK_INFO = {  # what the registry says of these checks (registry.describe)
    "build": {"column": 10, "observes": []},
    "compile_prefill": {"column": 20, "observes": ["_can_compile_fullgraph"], "compares": ["max_abs_diff"]},
    "compile_decode": {"column": 30, "observes": ["_can_compile_fullgraph"], "compares": ["max_abs_diff"]},
    "legacy_cache": {"column": 50, "observes": [],
                     "lists": {"metric": "raw_tuple", "what": "what a raw legacy tuple passed to forward does"}},
}


def cell(verdict: str, reason: str = "", observed: str = "", **metrics) -> dict:
    """A cell as a run writes it: its judgement (`verdict`) and its observation (`observed`: by default an xfail's
    fail, an xpass's pass, else the verdict)."""
    made = {"verdict": verdict, "reason": reason, "seconds": 0.1, "metrics": metrics, "nodeid": ""}
    return {**made, "observed": observed or report.observation(made)}


def make_envelope(**overrides) -> dict:
    """A small, realistic envelope: two image-text classes and one text class."""
    models = {
        "AlphaForConditionalGeneration": {
            "model_type": "alpha", "modalities": ["image", "text"], "kind": "multimodal-decoder-only",
            "tasks": ["image-text-to-text"], "declared": {"_can_compile_fullgraph": True},
            "tiny": {"parameters": 52832, "source": "auto", "strategy": "pixels"},
            "cells": {"build": cell("pass"),
                      "compile_prefill": cell("fail", "graph break: Tensor.item() (at transformers/a.py:12)",
                                              graph_breaks=1),
                      "compile_decode": cell("xfail", "recompiled: guard on cache_position"),
                      "legacy_cache": cell("pass", raw_tuple="rejected_clear")},
        },
        "BetaForConditionalGeneration": {
            "model_type": "beta", "modalities": ["image", "text"], "kind": "multimodal-decoder-only",
            "tasks": ["image-text-to-text", "image-to-text"], "declared": {"_can_compile_fullgraph": False},
            "tiny": {"parameters": 1000, "source": "fixture", "strategy": "patches"},
            "cells": {"build": cell("pass"), "compile_prefill": cell("pass"),
                      "compile_decode": cell("skip", "no KV cache"),
                      "legacy_cache": cell("pass", raw_tuple="rejected_unclear")},
        },
        "GammaForConditionalGeneration": {
            "model_type": "gamma", "modalities": ["text"], "kind": "text-encoder-decoder",
            "tasks": ["text2text"], "declared": {"_can_compile_fullgraph": False},
            "cells": {c: cell("error", "tiny model or inputs could not be built: KeyError: 'x'") for c in CHECKS},
        },
    }
    envelope = {"schema": report.SCHEMA, "created": "2026-11-29T12:00:00Z",
                "suite": {"version": "0.1.0", "commit": "abc1234"}, "environment": dict(ENV),
                "checks": list(CHECKS), "check_info": dict(CHECK_INFO), "models": models}
    envelope.update(overrides)
    envelope["summary"] = report.summarize(envelope["models"], envelope["checks"])
    return envelope


def write(path, data) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def test_build_envelope_has_design_fields_and_counts():
    records = [
        {"model": "A", "check": "build", "verdict": "fail", "reason": "old"},
        {"model": "A", "check": "build", "verdict": "pass", "tiny": {"parameters": 5, "source": "auto"}},
        {"model": "B", "check": "build", "verdict": "error", "reason": "no config"},
    ]
    envelope = report.build_envelope(records, dict(ENV), ["build"], {"A": {"model_type": "a"}})
    assert [f for f in envelope if f not in report.OPTIONAL_FIELDS] == list(report.TOP_FIELDS)
    assert envelope["models"]["A"]["cells"]["build"]["verdict"] == "pass"  # later record wins
    assert envelope["models"]["A"]["tiny"]["parameters"] == 5
    assert envelope["summary"]["build"]["pass"] == 1 and envelope["summary"]["build"]["error"] == 1
    assert set(envelope["summary"]["build"]) == set(report.VERDICTS)
    assert report.validate_envelope(envelope, "x") is envelope


def test_read_records_drops_torn_last_line(tmp_path):
    part = tmp_path / "w.jsonl"
    io.append_record(part, {"model": "A", "check": "build", "verdict": "pass"})
    with open(part, "a") as handle:
        handle.write('{"model": "B", "che')
    assert [r["model"] for r in io.read_records([part])] == ["A"]


def test_a_run_file_is_strict_json_and_reads_its_nan_metrics_back_as_floats(tmp_path):
    """A half-precision cell records NaN differences: the file holds their names (strict readers, a browser's
    JSON.parse or jq, take no NaN token) and the envelope reader gives the floats back."""
    envelope = make_envelope()
    envelope["models"]["AlphaForConditionalGeneration"]["cells"]["compile_prefill"]["metrics"].update(
        max_abs_diff=float("nan"), worst_ratio=float("inf"), per_step=[float("-inf"), 0.5])
    path = tmp_path / "run.json"
    io.write_json_atomic(path, envelope)
    text = path.read_text()
    json.loads(text, parse_constant=lambda name: pytest.fail(f"a {name} token in a run file"))
    cells = report.load_envelope(path)["models"]["AlphaForConditionalGeneration"]["cells"]
    metrics = cells["compile_prefill"]["metrics"]
    assert math.isnan(metrics["max_abs_diff"]) and metrics["worst_ratio"] == math.inf
    assert metrics["per_step"] == [-math.inf, 0.5] and metrics["graph_breaks"] == 1


def test_write_atomic_leaves_no_temp_and_keeps_old_on_error(tmp_path):
    target = tmp_path / "m.json"
    io.write_json_atomic(target, {"a": 1})
    with pytest.raises(TypeError):
        io.write_texts_atomic({target: "new", tmp_path / "other": object()})  # second write fails
    assert json.loads(target.read_text()) == {"a": 1}
    assert not (tmp_path / "other").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("", "is empty"),
    ('{"schema": "vlm-conformance/1", "created": ', "not valid JSON"),
    ('[1, 2]', "not a run envelope"),
    ('{"schema": "other/2"}', "schema 'other/2'"),
    ('{"created": "x"}', "no \"schema\" field"),
])
def test_load_envelope_bad_files_give_one_line(tmp_path, content, message):
    path = tmp_path / "run.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(report.EnvelopeError) as info:
        report.load_envelope(path)
    text = str(info.value)
    assert message in text and str(path) in text and "\n" not in text


@pytest.mark.parametrize("mutate, message", [
    (lambda e: e.pop("summary"), "missing field 'summary'"),
    (lambda e: e["environment"].pop("dtype"), "environment.dtype"),
    (lambda e: e["models"]["BetaForConditionalGeneration"].pop("cells"), "has no 'cells'"),
    (lambda e: e["models"]["BetaForConditionalGeneration"]["cells"]["build"].update(verdict="ok"), "verdict 'ok'"),
])
def test_load_envelope_missing_fields(tmp_path, mutate, message):
    envelope = make_envelope()
    mutate(envelope)
    with pytest.raises(report.EnvelopeError, match=message):
        report.load_envelope(write(tmp_path / "run.json", envelope))


def test_load_envelope_accepts_pytest_json_report_file(tmp_path):
    envelope = make_envelope()
    loaded = report.load_envelope(write(tmp_path / "r.json", {"tests": [], "conformance": envelope}))
    assert loaded == envelope


OLDER_CELLS = {  # cells of a file older than `observed` on every cell -> what the check said, as read
    "pass": ({"verdict": "pass"}, "pass"),
    "fail": ({"verdict": "fail"}, "fail"),
    "skip": ({"verdict": "skip"}, "skip"),
    "listed error": ({"verdict": "xfail", "expected": "error"}, "error"),  # the verdict listed when it ran
    "listed, none recorded": ({"verdict": "xfail"}, "fail"),  # before `expected` was recorded
    "listed pass": ({"verdict": "xpass", "expected": "fail"}, "pass"),
    "improved": ({"verdict": "xpass", "expected": "fail", "observed": "fail"}, "fail"),  # recorded: kept
    "changed": ({"verdict": "timeout", "expected": "fail", "observed": "timeout", "gate": "failure changed"},
                "timeout"),
}


def test_an_older_file_is_upgraded_once_on_read_every_cell_stating_what_its_check_said(tmp_path):
    """`load_envelope` gives every cell `observed` (`observation`: the one reconstruction), its judgement and the
    rest as recorded; a part file of an older run too (`build_envelope`); a file that has it everywhere is read as
    it is."""
    envelope = make_envelope()
    envelope["models"] = {"A": {"cells": {name: {**cell, "reason": "r", "seconds": 0.1, "metrics": {}, "nodeid": ""}
                                          for name, (cell, _) in OLDER_CELLS.items()}}}
    envelope["checks"] = list(OLDER_CELLS)
    loaded = report.load_envelope(write(tmp_path / "old.json", envelope))["models"]["A"]["cells"]
    assert {name: c["observed"] for name, c in loaded.items()} == {n: said for n, (_, said) in OLDER_CELLS.items()}
    def judged(cell: dict) -> dict:
        return {k: v for k, v in cell.items() if k != "observed"}

    assert all(judged(loaded[n]) == judged(c) for n, c in envelope["models"]["A"]["cells"].items())
    records = [{"model": "A", "check": name, **cell} for name, (cell, _) in OLDER_CELLS.items()]
    built = report.build_envelope(records, dict(ENV), list(OLDER_CELLS), {})["models"]["A"]["cells"]
    assert {name: c["observed"] for name, c in built.items()} == {n: said for n, (_, said) in OLDER_CELLS.items()}
    current = make_envelope()
    assert report.upgraded(current) is current


@pytest.mark.parametrize("published", sorted(str(p.relative_to(locations.REPOSITORY)) for p in
                                             (locations.REPOSITORY / "reports").glob("**/matrix.json")))
def test_every_published_cell_reads_with_what_its_check_said_beside_its_judgement(published):
    """The published matrices (reports/matrix.json, reports/<env>/matrix.json) read with `observed` on every cell,
    a raw verdict, that their recorded judgement agrees with: the same verdict, or a listed failure's xfail, or an
    xpass."""
    cells = [c for row in report.load_envelope(locations.REPOSITORY / published)["models"].values()
             for c in row["cells"].values()]
    assert cells and all(c["observed"] in ("pass", "fail", "skip", "error", "timeout") for c in cells)
    odd = [c for c in cells if c["verdict"] != c["observed"] and not (c["verdict"] == "xfail" and c["observed"] in
                                                                       FAILING) and c["verdict"] != "xpass"]
    assert not odd


def _shard(envelope: dict, names: list[str]) -> dict:
    shard = copy.deepcopy(envelope)
    shard["models"] = {n: r for n, r in shard["models"].items() if n in names}
    shard["summary"] = report.summarize(shard["models"], shard["checks"])
    return shard


def test_merge_shards_equals_whole():
    whole = make_envelope()
    a = _shard(whole, ["AlphaForConditionalGeneration"])
    b = _shard(whole, ["BetaForConditionalGeneration", "GammaForConditionalGeneration"])
    b["environment"]["device_name"] = "another runner"  # may differ between shard machines
    a["environment"].update(peak_rss_mib=900.0, peak_rss_mib_by_process={"gw0": 900.0, "gw1": 10.0})
    b["environment"].update(peak_rss_mib=1200.0, peak_rss_mib_by_process={"gw0": 1200.0})
    merged = report.merge_envelopes([a, b], ["a.json", "b.json"])
    assert merged["environment"]["device_name"] == "x86_64"
    assert merged["environment"]["peak_rss_mib"] == 1200.0  # a peak is the maximum over the shards
    assert merged["environment"]["peak_rss_mib_by_process"] == {"gw0": 1200.0, "gw1": 10.0}
    assert merged["models"] == whole["models"]
    assert merged["summary"] == whole["summary"]
    assert merged["checks"] == whole["checks"]


def test_merge_refuses_other_environment_and_overlap():
    whole = make_envelope()
    other = copy.deepcopy(whole)
    other["environment"]["transformers"] = "4.57.1"
    with pytest.raises(report.EnvelopeError, match="environment differs .* 'transformers'"):
        report.merge_envelopes([whole, other], ["a.json", "b.json"])
    with pytest.raises(report.EnvelopeError, match="also in a.json"):
        report.merge_envelopes([whole, copy.deepcopy(whole)], ["a.json", "b.json"])


def test_merge_replace_republishes_rerun_cells_over_a_published_matrix():
    """`conformance merge --replace PUBLISHED.json RERUN.json`: the rerun's cells (and its rows' facts) replace the
    published ones, every other cell stays; a rerun under another backend replaces only its `@backend` columns."""
    published = make_envelope()
    rerun = _shard(make_envelope(), ["AlphaForConditionalGeneration"])
    rerun["models"]["AlphaForConditionalGeneration"]["cells"] = {"compile_prefill": cell("pass")}
    rerun["models"]["AlphaForConditionalGeneration"]["tiny"]["strategy"] = "speech_start"
    merged, replaced = report.supersede([published, rerun], ["matrix.json", "rerun.json"])
    alpha = merged["models"]["AlphaForConditionalGeneration"]
    assert replaced == 1
    assert alpha["cells"]["compile_prefill"]["verdict"] == "pass"
    assert alpha["cells"]["compile_decode"] == published["models"]["AlphaForConditionalGeneration"]["cells"][
        "compile_decode"]
    assert alpha["tiny"]["strategy"] == "speech_start"
    assert merged["models"]["BetaForConditionalGeneration"] == published["models"]["BetaForConditionalGeneration"]
    assert [r["command"] for r in merged["environment"]["runs"]] == ["matrix.json", "rerun.json"]
    inductor = copy.deepcopy(rerun)
    inductor["environment"]["backend"] = "inductor"
    with_columns, replaced = report.supersede([merged, inductor], ["merged.json", "inductor.json"])
    alpha = with_columns["models"]["AlphaForConditionalGeneration"]
    assert replaced == 0 and alpha["cells"]["compile_prefill@inductor"]["verdict"] == "pass"
    assert alpha["cells"]["compile_prefill"]["verdict"] == "pass"  # the eager cell of the first rerun, kept


def test_envelope_from_parts_uses_environment_file(tmp_path, monkeypatch):
    monkeypatch.setattr(conformance.discover, "row_metadata", lambda names: {})  # discovery is slow and not under test
    parts = tmp_path / "m.json.parts"
    io.append_record(parts / "gw0.jsonl", {"model": "NotAClass", "check": "build", "verdict": "pass"})
    io.append_record(parts / "gw1.jsonl", {"model": "NotAClass", "check": "compile_prefill", "verdict": "fail",
                                              "reason": "boom"})
    with open(parts / "gw1.jsonl", "a") as handle:
        handle.write('{"model": "NotAClass", "check": "legacy')  # killed mid-write
    (parts / report.PARTS_ENVIRONMENT).write_text(json.dumps(ENV))
    envelope = report.envelope_from_parts(parts)
    assert envelope["environment"] == ENV
    assert envelope["checks"] == ["build", "compile_prefill"]
    assert envelope["summary"]["compile_prefill"]["fail"] == 1
    assert report.validate_envelope(envelope, "x")


def test_envelope_from_parts_errors(tmp_path):
    with pytest.raises(report.EnvelopeError, match="no such directory"):
        report.envelope_from_parts(tmp_path / "missing")
    (tmp_path / "p").mkdir()
    with pytest.raises(report.EnvelopeError, match="no finished cells"):
        report.envelope_from_parts(tmp_path / "p")
    io.append_record(tmp_path / "p" / "main.jsonl", {"model": "A", "check": "build", "verdict": "pass"})
    with pytest.raises(report.EnvelopeError, match="--device/--dtype/--backend"):
        report.envelope_from_parts(tmp_path / "p")


def test_diff_orders_regressions_first():
    old = make_envelope()
    new = copy.deepcopy(old)
    cells = new["models"]["BetaForConditionalGeneration"]["cells"]
    cells["compile_prefill"] = cell("fail", "graph break")            # pass -> fail: regression
    cells["legacy_cache"] = cell("xfail", "known")                    # pass -> xfail: regression
    alpha = new["models"]["AlphaForConditionalGeneration"]["cells"]
    alpha["compile_prefill"] = cell("pass")                           # fail -> pass: improvement
    alpha["compile_decode"] = cell("fail", "listed no more")          # xfail -> fail: regression
    gamma = new["models"]["GammaForConditionalGeneration"]["cells"]
    gamma["build"] = cell("fail", "NaN logits")                       # error -> fail: same severity
    del gamma["legacy_cache"]                                         # removed
    changes = diff.diff_envelopes(old, new)
    kinds = [(c.model[:5], c.check, c.kind) for c in changes]
    assert kinds == [
        ("Alpha", "compile_decode", "regression"),
        ("BetaF", "compile_prefill", "regression"),
        ("BetaF", "legacy_cache", "regression"),
        ("Alpha", "compile_prefill", "improvement"),
        ("Gamma", "build", "changed"),
        ("Gamma", "legacy_cache", "removed"),
    ]
    assert diff.diff_envelopes(old, copy.deepcopy(old)) == []
