"""CI's rotating sample (`conformance sample`, `.ci/run`): the day's classes, and a rerun compared with the published.

The comparison is tested on a real run: the real plugin and checks over planted models (`planted.py`: one correct,
one whose prefill breaks the graph), its envelope standing for the published matrix. Rerun identical, the sample
passes; a published envelope whose cell's fingerprint (or raw verdict) differs from what the planted model gives
now is caught, naming the cell and both fingerprints.
"""

from __future__ import annotations

import copy
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import locations
from conformance.meta import gate_project
from conformance.tools import cli, sample

pytestmark = [pytest.mark.meta, pytest.mark.xdist_group("sample")]

ROOT = Path(__file__).resolve().parents[2]
MODELS = '''
from conformance.meta.planted import PrefillGraphBreakLM, TinyLM

NAMES = ["PrefillGraphBreakLM", "TinyLM"]
'''
BROKEN = ("PrefillGraphBreakLM", "compile_prefill")


def envelope(seconds: dict[str, float], odd: dict | None = None) -> dict:
    """A published matrix of classes with `seconds` in one plain column, an opt-in column that must not weigh,
    and `odd`: class -> a cell of the plain column instead of a pass."""
    models = {name: {"cells": {"build": {"verdict": "pass", "seconds": s},
                               "compile_dynamic": {"verdict": "pass", "seconds": 1000.0}}}
              for name, s in seconds.items()}
    for name, cell in (odd or {}).items():
        models[name]["cells"]["build"] = {**cell, "seconds": seconds[name]}
    return {"checks": ["build", "compile_dynamic", "build@inductor"],
            "check_info": {"build": {}, "compile_dynamic": {"opt_in": "dynamic"}}, "models": models}


SECONDS = {f"Class{i:02d}": 5.0 + i % 7 for i in range(40)}


def test_the_day_s_sample_is_deterministic_fits_the_budget_and_changes_the_next_day():
    published, day = envelope(SECONDS), datetime.date(2026, 12, 5)
    first = sample.pick(published, day, budget=30.0, salt="gate")
    assert first == sample.pick(copy.deepcopy(published), day, budget=30.0, salt="gate")
    assert len(first) >= 2 and sum(SECONDS[n] for n in first) <= 30.0
    assert sample.pick(published, day + datetime.timedelta(days=1), budget=30.0, salt="gate") != first
    assert sample.plain_columns(published) == ["build"]


def test_consecutive_days_take_every_class_in_turn():
    published, day = envelope(SECONDS), datetime.date(2026, 12, 5)
    seen = set()
    for offset in range(len(SECONDS)):
        seen |= set(sample.pick(published, day + datetime.timedelta(days=offset), budget=30.0, salt="tf523"))
    assert seen == set(SECONDS)


def test_the_sample_leaves_out_what_the_run_checks_anyway_and_what_the_machine_decides():
    odd = {"Class01": {"verdict": "timeout", "fingerprint": {"kind": "timeout"}},
           "Class02": {"verdict": "xfail", "observed": "fail", "fingerprint": {"kind": "resources", "what": "x"}},
           "Class03": {"verdict": "error", "fingerprint": {"kind": "crash"}}}
    published = envelope({**SECONDS, "Huge": 500.0}, odd)
    found = sample.candidates(published, 30.0, exclude=["Class04"])
    assert not {"Class01", "Class02", "Class03", "Class04", "Huge"} & set(found)
    assert set(found) == set(SECONDS) - {"Class01", "Class02", "Class03", "Class04"}
    days = [datetime.date(2026, 1, 1) + datetime.timedelta(days=d) for d in range(60)]
    assert not {"Class01", "Class04", "Huge"} & set().union(*(sample.pick(published, d, 30.0, ["Class04"])
                                                                for d in days))


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory) -> tuple[Path, Path]:
    """One real run of the planted classes (build, compile_prefill): the "published" matrix and its rerun."""
    root = gate_project.make_root(tmp_path_factory.mktemp("sample"), MODELS)
    out = root / "rerun.json"
    env = {**os.environ, "PYTHONPATH": str(locations.REPOSITORY)}
    done = subprocess.run([sys.executable, "-m", "pytest", "test_matrix.py", *gate_project.PYTEST_ARGS, "-q",
                           "--checks", "build,compile_prefill", "--matrix-out", str(out)],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    rerun = json.loads(out.read_text())
    assert rerun["models"][BROKEN[0]]["cells"][BROKEN[1]]["fingerprint"]["kind"] == "graph_break"
    return root, out


def _published(root: Path, rerun: Path, change) -> Path:
    data = json.loads(rerun.read_text())
    change(data["models"])
    path = root / "published.json"
    path.write_text(json.dumps(data))
    return path


def test_a_rerun_identical_to_the_published_matrix_passes(planted_run, capsys):
    root, rerun = planted_run
    published = _published(root, rerun, lambda models: None)
    assert cli.main(["sample", "compare", str(published), str(rerun)]) == 0
    assert capsys.readouterr().out.strip() == f"0 of 4 rerun cell(s) differ from {published}"


def test_a_planted_fingerprint_change_is_caught_naming_the_cell_and_both_fingerprints(planted_run, capsys):
    root, rerun = planted_run
    now = json.loads(rerun.read_text())["models"][BROKEN[0]]["cells"][BROKEN[1]]["fingerprint"]

    def elsewhere(models):
        models[BROKEN[0]]["cells"][BROKEN[1]]["fingerprint"]["where"] = "transformers.cache_utils:update"

    published = _published(root, rerun, elsewhere)
    assert cli.main(["sample", "compare", str(published), str(rerun)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == f"1 of 4 rerun cell(s) differ from {published} (raw verdict or fingerprint)"
    line = out[0]
    assert line.startswith("PrefillGraphBreakLM / compile_prefill: published fail {")
    assert '"where": "transformers.cache_utils:update"' in line.split("; rerun ")[0]
    assert json.dumps(now, sort_keys=True) in line.split("; rerun ")[1]


def test_a_planted_verdict_change_and_a_cell_the_published_matrix_lacks_are_caught(planted_run, capsys):
    root, rerun = planted_run

    def changed(models):
        models["TinyLM"]["cells"]["compile_prefill"] = {"verdict": "xfail", "observed": "fail", "expected": "fail",
                                                        "fingerprint": {"kind": "graph_break", "where": "m:f"}}
        del models["TinyLM"]["cells"]["build"]

    published = _published(root, rerun, changed)
    assert cli.main(["sample", "compare", str(published), str(rerun)]) == 1
    out = capsys.readouterr().out
    assert "TinyLM / build: published absent; rerun pass\n" in out
    assert 'TinyLM / compile_prefill: published fail {"kind": "graph_break", "where": "m:f"}; rerun pass\n' in out


def test_the_classes_command_prints_one_line_for_models_and_refuses_a_bad_date(planted_run, capsys):
    _, published = planted_run
    args = ["sample", "classes", "--env", "tf523", "--published", str(published), "--date"]
    assert cli.main([*args, "2026-12-05"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "PrefillGraphBreakLM,TinyLM\n"
    assert captured.err.startswith(f"sample of 2026-12-05 (tf523, {published}): 2 of 2 classes")
    assert cli.main([*args, "5 Dec"]) == 2
    assert "--date '5 Dec': not a date; give it as YYYY-MM-DD" in capsys.readouterr().err
    assert cli.main([*args, "2026-12-05", "--exclude", "PrefillGraphBreakLM,TinyLM"]) == 2
    assert "no class of tf523 to sample: none reproducible, not excluded and within 80 s" in capsys.readouterr().err


def test_ci_reruns_a_sample_of_every_version_it_installs():
    script = (ROOT / ".ci" / "run").read_text()
    assert "sample classes --env gate" in script and "sample compare reports/matrix.json" in script
    assert 'sample classes --env "$env"' in script and 'sample compare "reports/$env/matrix.json"' in script
    assert '--models "$models,$sample"' in script
