"""Stage 5, gate: rewriting an expectations file from a run (`conformance expectations --update RUN.json`).

Contract of `update_expectations(run_path, path=None) -> Path`:

* the file: `path`, else the run's version's file whose ``[conditions]``
  match the run, else the version's ``<major.minor>.toml``; a file that does
  not exist yet is written with the run's device, dtype and backend as its
  ``[conditions]``;
* the run's conditions (device, dtype, backend: the keys the file's
  conditions name) choose which part of each entry it rewrites
  (`conformance.gate.rewrite.recorded`): an inductor run changes what the
  entries say under inductor, an eager run what they say under eager, and
  nothing else; one entry a cell, never a second. A run of a torch axis
  (fixtures/versions.toml's `torch`) changes what they say on its torch
  (major.minor) only: ``conditions = { torch = "2.14" }``, a ``[[cell.when]]
  torch = "2.14"``. The same for dtype: a
  bfloat16 run whose cell fails with the float32 fingerprint widens the
  entry (``conditions = { dtype = ["bfloat16", "float32"] }``), one whose
  fingerprint differs adds a ``[[cell.when]] dtype = "bfloat16"``, and a
  cell that fails in bfloat16 only is an entry of that dtype only;
* cells of the run whose raw verdict (``observed``) failed (fail, error,
  timeout: also behind an xfail, an xpass "improved" or a "failure changed") are listed
  under the run's conditions with the run's fingerprint; cells that passed
  or were skipped are no longer listed under them; cells the run did not
  cover are kept as they were;
* reasons and links already written for a cell are kept (people edit
  them): those under the run's conditions, else, for a cell listed under
  other conditions only, the entry's own where the run's fingerprint is the
  entry's (the same failure); new cells get the run's
  one-line reason, and so does a listed cell whose failure changed (the
  run's fingerprint differs from the listed one: the kept reason would
  describe the old failure);
* entries are sorted by model then check, and the file is written
  atomically. A published matrix that merged another backend's columns
  (`compile_prefill@inductor`) or another dtype's (`static_cache~bf16`) is
  refused: each backend's and dtype's run updates from its own run file.
  An unusable run file, or an entry the grammar cannot write after the
  change (`recorded`), raises ExpectationsError (one line).
"""

from __future__ import annotations

from pathlib import Path

from conformance import versions
from conformance.fingerprints import Fingerprint, FingerprintError
from conformance.gate.conditions import conditions_of, matches
from conformance.gate.expectations import (
    Expectation,
    ExpectationsError,
    ExpectationsFile,
    dumps,
    files_for,
    path_for_version,
    read,
)
from conformance.report.envelope import EnvelopeError, load_envelope
from conformance.report.provenance import portable_texts
from conformance.gate.rewrite import recorded, same
from conformance.report.io import write_text_atomic
from conformance.verdicts import FAILING


def _target(envelope: dict, run: dict, path: Path | None) -> ExpectationsFile:
    if path is not None:
        path = Path(path)
        return read(path) if path.exists() else ExpectationsFile(path, _file_conditions(run), {})
    version = envelope["environment"].get("transformers", "")
    if version.count(".") < 1:
        raise ExpectationsError("the run file names no transformers version; pass the expectations file with --file")
    main = path_for_version(version)
    own = [candidate for candidate in files_for(version) if candidate.stem.split("-", 1)[0] == main.stem]
    for candidate in sorted(own, key=lambda candidate: candidate != main):
        file = read(candidate)
        if matches(file.conditions, run):
            return file
    return read(main) if main.exists() else ExpectationsFile(main, _file_conditions(run), {})


def _axes(environment: dict) -> tuple[str, ...]:
    """The keys a run stands apart on though no condition names them: ``torch`` for a run of a torch axis
    (fixtures/versions.toml), so that it rewrites what the entries say on its torch only."""
    version = versions.of_environment(str(environment.get("transformers", "")), str(environment.get("torch", "")))
    return ("torch",) if version is not None and version.torch else ()


def _file_conditions(run: dict) -> dict:
    return {key: run[key] for key in ("device", "dtype", "backend")}


def update_expectations(run_path: Path | str, path: Path | str | None = None) -> Path:
    """Rewrite an expectations file from the run at `run_path` (see the module); returns the file written."""
    try:
        envelope = portable_texts(load_envelope(run_path))  # reasons copied into the file name no machine folder
    except EnvelopeError as exc:
        raise ExpectationsError(str(exc)) from None
    env = envelope["environment"]
    if env.get("backends"):
        raise ExpectationsError(f"{run_path}: a merged matrix with columns of other backends "
                                f"({', '.join(env['backends'])}); update from each backend's own run file "
                                "(e.g. reports/latest/gate.json, then reports/latest/inductor.json)")
    if env.get("dtypes"):
        raise ExpectationsError(f"{run_path}: a merged matrix with columns of other dtypes "
                                f"({', '.join(env['dtypes'])}); update from each dtype's own run file "
                                "(e.g. the job list's plain~bf16 and inductor~bf16 envelopes)")
    run = conditions_of(env)
    axes = _axes(env)
    file = _target(envelope, run, Path(path) if path else None)
    updated = dict(file.cells)
    for model, row in envelope["models"].items():
        for check_id, cell in (row.get("cells") or {}).items():
            key = (model, check_id)
            entry = file.cells.get(key)
            old = entry.resolved(run) if entry is not None and any(matches(t, run) for t in file.holds(entry)) \
                else None
            value = _listed(cell, old, old or entry, key, run_path)
            if old is None and value is None or None not in (old, value) and same(old, value):
                continue
            edited = recorded(file.conditions, entry, run, value, f"{file.path}: cell {model} / {check_id}", axes)
            if edited is None:
                updated.pop(key, None)
            else:
                updated[key] = edited
    write_text_atomic(file.path, dumps(ExpectationsFile(file.path, file.conditions, updated)))
    return file.path


def _listed(cell: dict, old: Expectation | None, written: Expectation | None, key: tuple[str, str],
            run_path) -> Expectation | None:
    """What the expectations should list for a run's `cell` under the run's conditions (None: nothing); `old`:
    what they list there now, `written`: the reason and link to keep (`old`, else the entry's own fields)."""
    verdict = cell["observed"]
    if verdict not in FAILING:
        return None
    try:
        fingerprint = Fingerprint.from_data(cell["fingerprint"]) if cell.get("fingerprint") else None
    except FingerprintError as exc:
        raise ExpectationsError(f"{run_path}: cell {key[0]} / {key[1]}: fingerprint: {exc}") from None
    changed = written is not None and (written.fingerprint != fingerprint if old is None else
                                       None not in (old.fingerprint, fingerprint) and old.fingerprint != fingerprint)
    reason = written.reason if written is not None and not changed else (
        " ".join(str(cell.get("reason", "")).split()) or f"{verdict} (no reason recorded)")
    link = written.link if written is not None and (old is not None or not changed) else ""  # another failure: none
    return Expectation(key[0], key[1], verdict, reason, link, fingerprint)
