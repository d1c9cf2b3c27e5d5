"""A cell a limit stopped while other work of the run was running is rerun alone once, before it is called so.

Contracts:

* `pending(record)`: whether a cell's record waits for its rerun: a limit
  stopped it (`timeout`, or `fail` kind `resources`) with metric
  `under_load` (`cell_life.stopped_outcome`), and it is no rerun itself.
  Such a cell is reported to pytest as skipped (`PENDING`) when it ends.
* `rerun_all(config, parts)` (the controller, at the end of the run, once
  every worker has finished): each pending cell's last record is run again
  in a fresh ``python -m pytest <nodeid>`` (the run's device, dtype,
  backend, limits and expectations; no xdist, its own envelope; the
  environment variable `RERUN_ENV` names the cell), and its record, with
  metrics ``rerun_alone: true``, ``first_seconds`` and ``first_reason`` (the
  stopped run's), is appended to the parts (`PartsDir.records("rerun")`,
  merged after every worker's) and is the cell's. A rerun that leaves no
  record keeps the first record, its reason saying why. Returns the records
  written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from conformance.report import io
from conformance.run.records import PartsDir, plain_nodeid

RERUN_ENV = "CONFORMANCE_RERUN_ALONE"
PROCESS = "rerun"
PENDING = "stopped while other work ran; rerun alone at the end of the run"
STARTUP_SECONDS = 120.0  # a fresh pytest: imports, discovery, collection


def pending(record: dict | None) -> bool:
    if not record:
        return False
    metrics = record.get("metrics") or {}
    raw = record.get("observed") or record["verdict"]
    stopped = raw == "timeout" or (record.get("fingerprint") or {}).get("kind") == "resources"
    return bool(metrics.get("under_load")) and not metrics.get("rerun_alone") and stopped


def _last_records(parts: PartsDir) -> list[dict]:
    last: dict[tuple, dict] = {}
    for record in io.read_records(parts.part_files()):
        if {"model", "check", "verdict"} <= set(record):
            last[(record["model"], record["check"])] = record
    return list(last.values())


def command(config, record: dict, out: Path) -> list[str]:
    """The pytest command that runs the cell of `record` alone, with this run's options, its envelope at `out`."""
    option, base = config.getoption, Path(config.invocation_params.dir)
    args = [sys.executable, "-m", "pytest", plain_nodeid(record["nodeid"]), "-q", "-p", "no:cacheprovider",
            "-p", "no:xdist", "--conformance-matrix-out", str(out), "--conformance-models", record["model"],
            "--conformance-checks", record["check"]]
    for name in ("device", "dtype", "backend", "cell_timeout", "cell_timeout_grace", "cell_memory"):
        args += [f"--conformance-{name.replace('_', '-')}", str(option(name))]
    if option("expectations"):
        args += ["--conformance-expectations", str(base / option("expectations"))]
    return args


def rerun_all(config, parts: PartsDir) -> list[dict]:
    """Rerun every pending cell alone (see the module); the records written."""
    written = []
    for first in _last_records(parts):
        if pending(first):
            record = rerun_one(config, first)
            io.append_record(parts.records(PROCESS), record)
            written.append(record)
    return written


def rerun_one(config, first: dict) -> dict:
    """The record of the cell of `first` run again alone (see the module)."""
    limit = float(config.getoption("cell_timeout")) + 2 * float(config.getoption("cell_timeout_grace"))
    with tempfile.TemporaryDirectory(prefix="conformance-rerun-") as folder:
        out = Path(folder) / "matrix.json"
        env = {**os.environ, RERUN_ENV: plain_nodeid(first["nodeid"])}
        env.pop("PYTEST_XDIST_WORKER", None)
        try:
            done = subprocess.run(command(config, first, out), cwd=config.rootpath, env=env, capture_output=True,
                                  text=True, timeout=limit + STARTUP_SECONDS)
            why = f"exit status {done.returncode}: {(done.stdout + done.stderr).strip().splitlines()[-1:]}"
        except subprocess.TimeoutExpired:
            why = f"it did not end within {limit + STARTUP_SECONDS:g} s"
        again = _cell(out, first["model"], first["check"])
    if again is None:
        reason = f"{first['reason']} (rerun alone gave no record: {why})"
        return {**first, "reason": reason, "metrics": {**first.get("metrics", {}), "rerun_alone": False}}
    metrics = {**again.get("metrics", {}), "rerun_alone": True, "first_seconds": first.get("seconds", 0.0),
               "first_reason": first.get("reason", "")}
    metrics.pop("under_load", None)
    reason = again.get("reason", "")
    if again["verdict"] != "pass" and again.get("observed", again["verdict"]) == first.get("observed", first["verdict"]):
        reason = f"{reason} (alone too: rerun after it was first stopped while other work ran)"
    return {**again, "reason": reason, "metrics": metrics, "process": {"id": PROCESS}}


def _cell(out: Path, model: str, check: str) -> dict | None:
    try:
        envelope = json.loads(out.read_text())
        row = envelope["models"][model]
        cell = row["cells"][check]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    record = {"model": model, "check": check, **cell}
    if check == "build" and row.get("tiny"):
        record["tiny"] = row["tiny"]
    return record
