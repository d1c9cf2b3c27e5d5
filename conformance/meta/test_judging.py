"""A cell's judgement has one home, `gate.judging`: the run's records and publishing judge the same observation alike.

A cell stores its observation (``observed``, fingerprint, reason, metrics); its verdict against the expectations is
`judging.judge_cell`, which the run's record-making (`run.cell_life.end`) calls, and `judging.judge_envelope`, which
`conformance jobs publish` (`tools.job_publish.merge_version`, also the pre-merge gate's merge of its jobs) and
`conformance expectations --judge` (`tools.suite_data`) call. No other product module applies the ratchet.
"""

from __future__ import annotations

import ast

from conformance.checks.common.outcome import Outcome
from conformance.fingerprints import Fingerprint
from conformance.gate import expectations as gate
from conformance.gate import judging
from conformance.meta.test_layout import imported_modules, module_name, source_files
from conformance.meta.test_report import ENV
from conformance.report import envelope as report

FP = {"kind": "exception", "error": "ValueError", "where": "m:f"}
OTHER = {"kind": "exception", "error": "KeyError", "where": "m:g"}


def test_only_the_judging_module_applies_the_ratchet_and_its_callers_call_it():
    """`gate.ratchet.judge` is imported by `gate.judging` alone; the run, publishing and `expectations --judge`
    hold judging's own functions, not copies."""
    from conformance.run import cell_life
    from conformance.tools import job_publish, suite_data

    importers = sorted(module_name(path) for path in source_files()
                       if "conformance.gate.ratchet.judge" in imported_modules(path))
    assert importers == ["conformance.gate.judging"]
    assert cell_life.judge_cell is judging.judge_cell
    assert job_publish.judge_envelope is judging.judge_envelope
    calls = {node.func.id for node in ast.walk(ast.parse(open(job_publish.__file__).read()))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    assert "judge_envelope" in calls
    assert "judge_envelope" in open(suite_data.__file__).read()


def _file(tmp_path):
    path = tmp_path / "5.24.toml"
    listed = {
        ("A", "build"): gate.Expectation("A", "build", "fail", "boom", fingerprint=Fingerprint.from_data(FP)),
        ("A", "compile_prefill"): gate.Expectation("A", "compile_prefill", "fail", "was failing",
                                                   fingerprint=Fingerprint.from_data(FP)),
        ("A", "compile_decode"): gate.Expectation("A", "compile_decode", "error", "other failure",
                                                  fingerprint=Fingerprint.from_data(FP)),
        ("A", "static_cache"): gate.Expectation("A", "static_cache", "fail", "unfingerprinted"),
    }
    path.write_text(gate.dumps(gate.ExpectationsFile(path, dict(gate.DEFAULT_CONDITIONS), listed)))
    return path


OUTCOMES = {  # column -> what its check said
    "build": Outcome("fail", "boom", fingerprint=Fingerprint.from_data(FP)),  # listed, the same: xfail
    "compile_prefill": Outcome("pass", "", {"seconds": 1.0}),  # listed, passes: xpass
    "compile_decode": Outcome("error", "another", fingerprint=Fingerprint.from_data(OTHER)),  # changed: error
    "static_cache": Outcome("fail", "x", fingerprint=Fingerprint.from_data(FP)),  # listed without one: fail
    "legacy_cache": Outcome("fail", "new", fingerprint=Fingerprint.from_data(OTHER)),  # not listed: fail
    "export_forward": Outcome("skip", "n/a"),
}


def test_the_run_and_publishing_judge_the_same_observation_alike(tmp_path):
    """The records a run makes (`cell_life.end`) and the envelope publishing judges again from their observations
    (`judge_envelope`, with the same expectations) carry the same verdict, listed verdict and gate note."""
    from conformance.run.cell_life import end

    path = _file(tmp_path)
    applied = gate.load_for_environment(ENV, None, path).cells
    records = [end("A", column, outcome, applied).record for column, outcome in OUTCOMES.items()]
    envelope = report.build_envelope(records, dict(ENV), list(OUTCOMES), {})
    observations = {c: {k: v for k, v in cell.items() if k not in ("verdict", "expected", "gate")}
                    for c, cell in envelope["models"]["A"]["cells"].items()}
    unjudged = {**envelope, "models": {"A": {"cells": {c: {**o, "verdict": "fail"} for c, o in observations.items()}}}}
    judged, _ = judging.judge_envelope(unjudged, path)
    run_cells, published = envelope["models"]["A"]["cells"], judged["models"]["A"]["cells"]
    fields = ("verdict", "expected", "observed", "gate")
    for column in OUTCOMES:
        if column == "export_forward":  # a skip is left as recorded: the judgement of a skip is the skip
            continue
        assert {f: published[column].get(f) for f in fields} == {f: run_cells[column].get(f) for f in fields}, column
    assert {c: run_cells[c]["verdict"] for c in OUTCOMES} == {
        "build": "xfail", "compile_prefill": "xpass", "compile_decode": "error", "static_cache": "fail",
        "legacy_cache": "fail", "export_forward": "skip"}
    assert {c: run_cells[c]["observed"] for c in OUTCOMES} == {c: o.verdict for c, o in OUTCOMES.items()}


def test_judging_keeps_the_observation_and_replaces_only_the_judgement():
    cell = {"verdict": "xfail", "reason": "boom", "seconds": 1.0, "metrics": {"m": 1}, "nodeid": "n",
            "expected": "fail", "observed": "fail", "gate": "old note", "fingerprint": FP}
    judged = judging.judge_cell(cell, None)  # the entry is gone: the failure is new
    assert judged == {**{k: v for k, v in cell.items() if k not in ("expected", "gate")}, "verdict": "fail"}
