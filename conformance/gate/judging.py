"""Stage 5, gate: a cell's judgement, in one place: its observation against the expectation that applies to it.

A cell stores its observation (`report.envelope`): ``observed``, what the check or the harness said (pass, fail,
skip, error, timeout), its fingerprint, reason and metrics; the conditions it ran under are its envelope's
environment and, in a merged matrix, its column's backend and dtype. Its judgement is computed from those here and
nowhere else; the file keeps the judgement of when it was written (``verdict``) as a cache for its readers.

Contracts:

* `judge_cell(cell, expectation)` is `cell` (a record or an envelope's cell: ``observed``, ``fingerprint``) with
  its judgement against `expectation` (a `gate.expectations.Expectation`, or None where nothing lists the cell):
  ``verdict`` (`gate.ratchet.judge`), ``expected`` (the listed verdict, where listed) and ``gate`` (why a listed
  cell is not xfail, where it is not); its observation, reason and metrics as they were. The run's records
  (`run.cell_life`) and `judge_envelope` both judge with it.
* `judge_envelope(envelope, path=None, classes=None)` judges every cell of a recorded run against the expectations
  as they are now (`path`, else the files of the run's version: `expectations.load_for_environment`), without
  running a cell: what `conformance jobs publish` (after `conformance expectations --update` listed a column's new
  failures, the run that found them still says `fail`) and `conformance expectations --judge` write. A backend
  column (`compile_prefill@inductor`) is judged under that backend's conditions, a dtype column
  (`static_cache~bf16`, `compile_prefill@inductor~bf16`) under that dtype's (and backend's); a skipped cell is left
  as it was recorded (a listing does not change a skip). The environment then names the files that judged it
  (`expectations`, and each backend's under `backends`, each dtype's under `dtypes`). Returns the new envelope
  (its summary counted again) and the number of cells whose verdict changed.

The pre-merge gate's comparison with the merge base (`gate.merge_base`) is another judgement, of the same
observations: against the base's cells instead of the release's expectations.
"""

from __future__ import annotations

from pathlib import Path

from conformance import columns
from conformance.fingerprints import Fingerprint
from conformance.gate.expectations import load_for_environment
from conformance.gate.ratchet import judge
from conformance.verdicts import FAILING



def judge_cell(cell: dict, expectation) -> dict:
    observed = cell["observed"]
    found = Fingerprint.from_data(cell["fingerprint"]) if cell.get("fingerprint") else None
    judgement = judge(observed, expectation, found)
    judged = {k: v for k, v in cell.items() if k not in ("expected", "observed", "gate")}
    judged["verdict"] = judgement.verdict
    if expectation is not None:
        judged["expected"] = expectation.verdict
    judged["observed"] = observed
    if judgement.note:
        judged["gate"] = judgement.note
    return judged


def _sources(applied) -> list[dict]:
    from conformance.report.provenance import portable

    return [{"file": portable(str(Path(s.path).resolve())), "conditions": s.conditions, "cells": s.cells}
            for s in applied.sources]


def judge_envelope(envelope: dict, path: Path | None = None, classes: dict | None = None) -> tuple[dict, int]:
    from conformance.report.envelope import summarize

    env = envelope["environment"]
    by_run: dict[tuple[str, str], dict] = {}  # (backend, dtype) -> the expectations that apply there
    changed = 0
    models = {}
    for model, row in envelope["models"].items():
        cells = {}
        for column, cell in row["cells"].items():
            check_id, backend = columns.split(column)
            backend = backend or env.get("backend", "eager")
            dtype = columns.split_dtype(column)[1] or env.get("dtype", "float32")
            if (backend, dtype) not in by_run:
                by_run[backend, dtype] = load_for_environment({**env, "dtype": dtype}, backend, path, classes)
            if cell["observed"] not in FAILING and cell["observed"] != "pass":  # skip: nothing to judge
                cells[column] = cell
                continue
            cells[column] = judge_cell(cell, by_run[backend, dtype].cells.get((model, check_id)))
            changed += cells[column]["verdict"] != cell["verdict"]
        models[model] = {**row, "cells": cells}
    main, dtype = env.get("backend", "eager"), env.get("dtype", "float32")
    env = {**env, "expectations": _sources(by_run[main, dtype]) if (main, dtype) in by_run
           else env.get("expectations", [])}
    if env.get("backends"):
        env["backends"] = {b: {**info, "expectations": _sources(by_run[b, dtype])} if (b, dtype) in by_run else info
                           for b, info in env["backends"].items()}
    if env.get("dtypes"):
        env["dtypes"] = {d: {**info, "expectations": _sources(by_run[main, d])} if (main, d) in by_run else info
                         for d, info in env["dtypes"].items()}
    checks = envelope["checks"]
    return {**envelope, "environment": env, "models": models, "summary": summarize(models, checks)}, changed
