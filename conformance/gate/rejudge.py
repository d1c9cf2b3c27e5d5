"""Judging a recorded run again, against the expectations as they are now, without running a cell.

After `conformance expectations --update` lists a column's new failures, the run that found them still says
`fail` (nothing listed them then); publishing it as is would show listed failures as new. `rejudge(envelope)`
applies `gate.ratchet.judge` to every cell's raw verdict (`verdicts.raw`) and fingerprint, exactly as the run
would have with today's expectations: a cell's `verdict`, `expected`, `observed` and `gate` are rewritten, its
outcome (reason, metrics, fingerprint) is not. A backend column (`compile_prefill@inductor`) is judged under
that backend's conditions, a dtype column (`static_cache~bf16`, `compile_prefill@inductor~bf16`) under that
dtype's (and backend's). The environment then names the files that judged it (`expectations`, and each
backend's under `backends`). Returns the new envelope and the number of cells whose verdict changed.
"""

from __future__ import annotations

from pathlib import Path

from conformance import columns, verdicts
from conformance.fingerprints import Fingerprint
from conformance.gate.expectations import load_for_environment
from conformance.gate.ratchet import judge


def _sources(applied) -> list[dict]:
    from conformance.report.provenance import portable

    return [{"file": portable(str(Path(s.path).resolve())), "conditions": s.conditions, "cells": s.cells}
            for s in applied.sources]


def rejudge(envelope: dict, path: Path | None = None, classes: dict | None = None) -> tuple[dict, int]:
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
            expectation = by_run[backend, dtype].cells.get((model, check_id))
            listed = expectation.verdict if expectation is not None else None
            raw = verdicts.raw(cell, listed)
            if raw not in verdicts.FAILING and raw != "pass":  # skip, not run: nothing to judge
                cells[column] = cell
                continue
            found = Fingerprint.from_data(cell["fingerprint"]) if cell.get("fingerprint") else None
            judgement = judge(raw, expectation, found)
            new = {k: v for k, v in cell.items() if k not in ("expected", "observed", "gate")}
            new["verdict"] = judgement.verdict
            for name, value in (("expected", listed or ""),
                                ("observed", raw if judgement.verdict != raw else ""), ("gate", judgement.note)):
                if value:
                    new[name] = value
            changed += new["verdict"] != cell.get("verdict")
            cells[column] = new
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
