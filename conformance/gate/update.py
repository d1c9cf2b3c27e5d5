"""Stage 5, gate: rewriting an expectations file from a run (`conformance expectations --update RUN.json`).

Contract of `update_expectations(run_path, path=None) -> Path`:

* the run's conditions (device, dtype, backend) choose the file: `path`, or
  the run's version's file whose conditions match the run, or a new one
  (``<major.minor>.toml`` for the default conditions cpu/float32/eager,
  ``<major.minor>-<device>-<dtype>-<backend>.toml`` otherwise), written with
  those conditions; a given file measured under other conditions is an
  `ExpectationsError` (one line);
* cells of the run whose raw verdict failed (fail, error, timeout: also
  behind an xfail, an xpass "improved" or a "failure changed") are listed
  with the run's fingerprint; cells that passed or were skipped are removed;
  cells the run did not cover are kept as they were;
* reasons and links already written for a cell are kept (people edit them);
  new cells get the run's one-line reason, and so does a listed cell whose
  failure changed (the run's fingerprint differs from the listed one: the
  kept reason would describe the old failure);
* entries are sorted by model then check, and the file is written
  atomically. A published matrix that merged another backend's columns
  (`compile_prefill@inductor`) is refused: each backend's run updates its own file. An unusable run file raises ExpectationsError (one line).
"""

from __future__ import annotations

from pathlib import Path

from conformance.fingerprints import Fingerprint, FingerprintError
from conformance.gate.expectations import (
    DEFAULT_CONDITIONS,
    Expectation,
    ExpectationsError,
    ExpectationsFile,
    dumps,
    files_for,
    matches,
    path_for_version,
    read,
    run_conditions,
)
from conformance.report.envelope import EnvelopeError, load_envelope
from conformance.report.io import write_text_atomic
from conformance.verdicts import FAILING, raw


def _target(envelope: dict, run: dict, path: Path | None) -> ExpectationsFile:
    if path is not None:
        path = Path(path)
        if not path.exists():
            return ExpectationsFile(path, _file_conditions(run), {})
        file = read(path)
        if not matches(file.conditions, run):
            raise ExpectationsError(f"{path}: measured under {file.conditions}, but the run was {run}; pass a file "
                                    "of the run's conditions (or a new path) with --file")
        return file
    version = envelope["environment"].get("transformers", "")
    if version.count(".") < 1:
        raise ExpectationsError("the run file names no transformers version; pass the expectations file with --file")
    for candidate in files_for(version):
        file = read(candidate)
        if matches(file.conditions, run) and candidate.stem.split("-", 1)[0] == ".".join(version.split(".")[:2]):
            return file
    conditions = _file_conditions(run)
    name = "" if conditions == DEFAULT_CONDITIONS else "-".join(conditions.values())
    return ExpectationsFile(path_for_version(version, name), conditions, {})


def _file_conditions(run: dict) -> dict:
    return {key: run[key] for key in ("device", "dtype", "backend")}


def update_expectations(run_path: Path | str, path: Path | str | None = None) -> Path:
    """Rewrite an expectations file from the run at `run_path` (see the module); returns the file written."""
    try:
        envelope = load_envelope(run_path)
    except EnvelopeError as exc:
        raise ExpectationsError(str(exc)) from None
    env = envelope["environment"]
    if env.get("backends"):
        raise ExpectationsError(f"{run_path}: a merged matrix with columns of other backends "
                                f"({', '.join(env['backends'])}); update from each backend's own run file "
                                "(e.g. reports/latest/gate.json, then reports/latest/inductor.json)")
    run = run_conditions(env.get("device", "cpu"), env.get("dtype", "float32"), env.get("backend", "eager"),
                         env.get("torch", ""))
    file = _target(envelope, run, Path(path) if path else None)
    updated = dict(file.cells)
    for model, row in envelope["models"].items():
        for check_id, cell in (row.get("cells") or {}).items():
            key = (model, check_id)
            old = file.cells.get(key)
            verdict = raw(cell, old.verdict if old else None)
            if verdict not in FAILING:
                updated.pop(key, None)
                continue
            try:
                fingerprint = Fingerprint.from_data(cell["fingerprint"]) if cell.get("fingerprint") else None
            except FingerprintError as exc:
                raise ExpectationsError(f"{run_path}: cell {model} / {check_id}: fingerprint: {exc}") from None
            changed = old is not None and None not in (old.fingerprint, fingerprint) and old.fingerprint != fingerprint
            reason = old.reason if old is not None and not changed else (" ".join(str(cell.get("reason", "")).split())
                                                                         or f"{verdict} (no reason recorded)")
            updated[key] = Expectation(model, check_id, verdict, reason, old.link if old else "", fingerprint,
                                       old.conditions if old else {})
    write_text_atomic(file.path, dumps(ExpectationsFile(file.path, file.conditions, updated)))
    return file.path
