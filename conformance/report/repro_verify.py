"""Verifying standalone reproducers: each script run alone must fail the way its group does.

Contracts:

* `run_script(path, timeout)` runs one script in a fresh interpreter
  (``python -I``: no PYTHON* variables, no user site, no script or working
  directory on the path) from an empty temporary working directory, behind a
  guard that makes `conformance` impossible to import (entries of the path
  holding the suite are dropped and an import finder refuses it, so an
  editable install cannot leak it in). It returns a `Run`: the exit status,
  the seconds it took, the parsed last ``REPRO-RESULT`` line (None when there
  is none) and the tail of its stderr.
* `judge(group, run)` is (reproduces, why): it reproduces when the script
  raised and its fingerprint has the group's kind, one of the group's
  exception types (when the group records any) and the group's key (its
  site, guard, or masked words: `findings.cause_key`); otherwise `why` names
  what differs, or that it timed out, crashed, or ran to the end without
  failing (never a pass).
* `verify(entries, folder, timeout, progress)` runs every entry's script,
  records `verified`, `seconds`, `observed` and `why` on the entry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from conformance.report import findings
from conformance.report.repro_report import RESULT

TIMEOUT = 600.0
GUARD = r"""
import os, runpy, sys
script = sys.argv[1]
sys.path[:] = [p for p in sys.path if "-packages" in p or not os.path.isdir(os.path.join(p or ".", "conformance"))]
class NoSuite:
    def find_spec(self, name, path=None, target=None):
        if name == "conformance" or name.startswith("conformance."):
            raise ModuleNotFoundError(f"{name} is not importable here: a reproducer may not use the suite")
        return None
sys.meta_path.insert(0, NoSuite())
sys.argv = [script]
runpy.run_path(script, run_name="__main__")
"""


@dataclass
class Run:
    status: int | None  # None: timed out
    seconds: float
    result: dict | None
    stderr: str


def _result(stdout: str) -> dict | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT + " "):
            try:
                return json.loads(line[len(RESULT) + 1:])
            except json.JSONDecodeError:
                return None
    return None


def run_script(path: Path, timeout: float = TIMEOUT, python: str = sys.executable) -> Run:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="repro-verify-") as cwd:
        try:
            done = subprocess.run([python, "-I", "-c", GUARD, str(Path(path).resolve())], cwd=cwd, env=env,
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            tail = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            return Run(None, round(time.perf_counter() - started, 1), None, tail[-2000:])
    return Run(done.returncode, round(time.perf_counter() - started, 1), _result(done.stdout), done.stderr[-2000:])


def _describe(found: dict) -> str:
    parts = [found.get("kind", "?")]
    key = findings.cause_key(found, "")[1]
    if key:
        parts.append(f"at {key}")
    if found.get("error"):
        parts.append(f"({found['error']})")
    return " ".join(parts)


def judge(group: findings.Group, run: Run) -> tuple[bool, str]:
    if run.status is None:
        return False, f"the script ran past {run.seconds:.0f} s (timed out)"
    if run.result is None:
        last = next((line for line in reversed(run.stderr.splitlines()) if line.strip()), "")
        return False, f"the script printed no {RESULT} line (exit status {run.status}): {last[:200]}"
    if not run.result.get("raised"):
        return False, "the script ran to the end without failing: the failure does not happen standalone " \
                      "(it may need the suite's call order or its exact inputs)"
    kind, key, _ = findings.cause_key(run.result, "")
    differs = []
    if kind != group.kind:
        differs.append(f"kind {kind} (the group: {group.kind})")
    if group.errors and run.result.get("error") not in group.errors:
        differs.append(f"exception {run.result.get('error') or 'none'} (the group: {', '.join(group.errors)})")
    if key != group.where:
        differs.append(f"site {key or 'none'} (the group: {group.where})")
    if differs:
        return False, f"it fails otherwise: {_describe(run.result)}; differs in " + "; ".join(differs)
    return True, ""


def verify(entries, groups: list[findings.Group], folder: Path, timeout: float = TIMEOUT, progress=None) -> None:
    """Run each entry's script (see the module) and record the verdict on the entry."""
    by_id = {g.id: g for g in groups}
    for entry in entries:
        if not entry.script:
            continue
        run = run_script(folder / entry.script, timeout)
        entry.seconds = run.seconds
        entry.observed = dict(run.result or {})
        entry.verified, why = judge(by_id[entry.group], run)
        entry.why = why
        if progress:
            progress(entry)
