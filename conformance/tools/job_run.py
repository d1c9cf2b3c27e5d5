"""Running the entries of a job list, each resumable: a stopped job continues where it stopped.

Contracts:

* `run_job(job, root, python)` runs one entry's command in `root` (``python``
  replaced by `python`, the job list's `env` set) and returns a `JobResult`.
  A job whose envelope and done note (`JobFiles.done_note`) of the same
  command and the same cell code (`conformance.report.cell_code`: this
  suite's, the runner's package) are there is skipped (`rerun=True` clears
  them and runs it again); files another command left under the job's name
  (another ``--models``, another plan), or that other cell code made (an
  earlier commit's checks), are cleared, never merged, and the result says
  so. Otherwise what an
  earlier, stopped try left is kept as an attempt envelope beside the job's:
  the envelope a Ctrl-C'd run wrote (no done note), and the part files of a
  killed one (rebuilt by ``conformance merge --parts`` under the job's
  Python: row metadata is that version's). The cells the attempts hold are
  not run again: the command gets ``--deselect`` for each (through an
  ``@`` argument file). Once the command ends with its cells run (exit
  0, 1 or 5: pytest's passed, failed, nothing collected), the attempts and
  the new envelope are merged into the job's envelope (they are disjoint),
  and the done note is written; the envelope's texts name no folder of
  this machine (`provenance.portable_texts`). Any other end leaves everything for the
  next try and says so in one line (with the log's last error).
* `run_jobs(jobs, root, pythons, parallel)` runs entries, `parallel` at once,
  in list order, and returns their results; Ctrl-C stops the running
  commands (each writes what it finished) and ends with KeyboardInterrupt.
* `state(job, root, code)` says where a job stands without running it (for
  `conformance jobs status`): finished by this cell code (`code`), finished
  by another (runs again), stopped with the cells its attempts and part
  files hold (kept by the next run), a stale try (cleared by the next run),
  or not started. `standing(files, command, code)` is that judgement's one
  home, which `run_job` asks too, with why it clears what it clears.
* `leftovers(jobs, root)` are the committed-kind files (envelopes and done
  notes) in the jobs' folders that belong to no job of the list: what an
  earlier publication's other plan left there (for `conformance jobs
  status`: a published folder holds one list's jobs).
* `python_for(env, pythons, root)` is the interpreter of a version's jobs:
  `pythons[env]`, this one where the installed transformers is that version,
  else ``<root>/.venv-<env>/bin/python``; JobsError (one line, the fix) when
  none is there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from conformance import versions
from conformance.report import cell_code
from conformance.report import envelope as report
from conformance.report import io, provenance
from conformance.run.records import PartsDir
from conformance.tools import run_files
from conformance.tools.jobs import RUN_ENV, JobsError

DONE_EXIT_CODES = (0, 1, 5)  # pytest: all passed, some failed, no test collected (every cell recorded earlier)


@dataclass(frozen=True)
class JobFiles:
    """The files of one job: its envelope `out` and what lies beside it."""

    out: Path

    @property
    def done_note(self) -> Path:
        return self.out.with_name(self.out.stem + ".done.json")

    @property
    def started(self) -> Path:
        """The command of the job's latest try (what its files belong to)."""
        return self.out.with_name(self.out.stem + ".started.json")

    @property
    def log(self) -> Path:
        return self.out.with_name(self.out.stem + ".log")

    @property
    def resume_args(self) -> Path:
        return self.out.with_name(self.out.stem + ".resume.args")

    @property
    def parts(self) -> PartsDir:
        return PartsDir.of(self.out)

    def attempts(self) -> list[Path]:
        return sorted(self.out.parent.glob(f"{self.out.stem}.attempt-*.json"),
                      key=lambda p: int(p.stem.rsplit("-", 1)[1]))

    def next_attempt(self) -> Path:
        taken = [int(p.stem.rsplit("-", 1)[1]) for p in self.attempts()]
        return self.out.with_name(f"{self.out.stem}.attempt-{max(taken, default=0) + 1}.json")

    def done(self, command: list[str], code: str | None = None) -> bool:
        """Whether `command` finished here: its done note is there, and its envelope (unless it recorded none);
        with `code`, made by that cell code."""
        note = self._read(self.done_note)
        finished = note.get("command") == command and (self.out.exists() or not note.get("cells"))
        return finished and (code is None or self.made_by(note) == code)

    def made_by(self, note: dict | None = None) -> str:
        """The cell code of the finished job: its done note's, else its envelope's ("" where unknown)."""
        note = self._read(self.done_note) if note is None else note
        if note.get("cell_code") or not self.out.exists():
            return note.get("cell_code", "")
        try:
            return cell_code.of_envelope(report.load_envelope(self.out))
        except report.EnvelopeError:
            return ""

    def belongs_to(self, command: list[str], code: str | None = None) -> bool:
        """Whether what lies here was left by `command` (and, with `code`, that cell code) or nothing lies here:
        else it is another job's, to clear."""
        started = self._read(self.started)
        if not started:
            return True
        return started.get("command") == command and (code is None or started.get("cell_code") == code)

    @staticmethod
    def _read(path: Path) -> dict:
        try:
            return json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return {}

    def clear(self) -> None:
        for path in [self.out, self.done_note, self.started, self.resume_args, *self.attempts()]:
            path.unlink(missing_ok=True)
        self.parts.clear()


@dataclass(frozen=True)
class JobResult:
    id: str
    status: str  # "done", "skipped" (done earlier) or "stopped" (run it again to continue)
    cells: int = 0  # in the job's envelope
    resumed: int = 0  # cells kept from earlier attempts, not run again
    seconds: float = 0.0
    message: str = ""


@dataclass(frozen=True)
class JobState:
    id: str
    status: str  # "done"; "other code" (done by other cell code: runs again); "stopped"; "stale try" (a stopped try of
    # another command or cell code: the next run clears it); "not started"
    cells: int = 0  # done: in its envelope; stopped: kept for the next run
    made_by: str = ""
    seconds: float = 0.0  # done (by any cell code): the wall its done note measured


def standing(files: JobFiles, command: list[str], code: str) -> tuple[str, str]:
    """(status, why) of what lies under a job's name, the one home of that judgement (`JobState.status`; `why`
    says why the next run clears it, "" when it keeps it): another command's files are a stale try; a finished
    job is done, or other code when another cell code made it; a stopped try of another cell code is a stale
    try; nothing there is not started."""
    if not files.belongs_to(command):
        return "stale try", "the files here were another command's"
    if files.done(command):
        made_by = files.made_by()
        if made_by == code:
            return "done", ""
        return "other code", f"the files here were made by cell code {made_by or 'unknown'}, this suite's is {code}"
    if not files.started.exists():
        return "not started", ""
    if not files.belongs_to(command, code):
        return "stale try", f"the stopped try here was made by other cell code, this suite's is {code}"
    return "stopped", ""


def state(job: dict, root: Path, code: str) -> JobState:
    files = JobFiles(root / job["out"])
    status, _ = standing(files, job["command"], code)
    if status in ("done", "other code"):
        note = files._read(files.done_note)
        return JobState(job["id"], status, note.get("cells", 0), files.made_by(note) or "unknown",
                        float(note.get("seconds") or 0.0))
    if status != "stopped":
        return JobState(job["id"], status)
    finished = {(r["model"], r["check"]) for r in io.read_records(files.parts.part_files())
                if {"model", "check", "verdict"} <= set(r)}
    kept = {(m, c) for path in files.attempts() + ([files.out] if files.out.exists() else [])
            for m, row in report.load_envelope(path)["models"].items() for c in row["cells"]}
    return JobState(job["id"], "stopped", len(finished | kept), code)


def leftovers(jobs: list[dict], root: Path) -> list[Path]:
    """The envelopes and done notes in the folders of `jobs` that are no job's of them (see the module)."""
    owned, folders = set(), set()
    for job in jobs:
        files = JobFiles(root / job["out"])
        owned |= {files.out, files.done_note}
        folders.add(files.out.parent)
    return [path for folder in sorted(folders) if folder.is_dir() for path in sorted(folder.glob("*.json"))
            if path not in owned and not path.name.endswith(".started.json") and ".attempt-" not in path.name]


def python_for(env: str, pythons: dict[str, str], root: Path) -> str:
    if env in pythons:
        return pythons[env]
    here = versions.installed()
    if here is not None and here.env == env:
        return sys.executable
    venv = root / f".venv-{env}" / "bin" / "python"
    if venv.exists():
        return str(venv)
    version = next((v for v in versions.supported() if v.env == env), None)
    pins = f"constraints/{version.constraints}" if version else "its constraints file"
    raise JobsError(f"no Python for {env}'s jobs (transformers {version.transformers if version else '?'}): make "
                    f".venv-{env} (python3 -m venv .venv-{env} && .venv-{env}/bin/pip install -c {pins} -e '.[dev]') "
                    f"or pass --python {env}=PATH")


def cells_of(envelope: dict) -> int:
    return sum(len(row["cells"]) for row in envelope["models"].values())


def _salvage(files: JobFiles, python: str, root: Path, log) -> None:
    """Keep what a stopped try left as attempt envelopes: an envelope with no done note, the part files."""
    if files.out.exists():
        files.out.replace(files.next_attempt())
    finished = [r for r in io.read_records(files.parts.part_files()) if {"model", "check", "verdict"} <= set(r)]
    if finished:
        attempt = files.next_attempt()
        merge = [python, "-m", "conformance.tools.cli", "merge", "--parts", str(files.parts.path), "-o", str(attempt)]
        log.write(f"\n== {len(finished)} finished cells of a stopped try: {' '.join(merge[1:])}\n")
        log.flush()
        if subprocess.run(merge, cwd=root, stdout=log, stderr=subprocess.STDOUT).returncode != 0:
            raise JobsError(f"{files.parts.path}: the part files of a stopped try could not be merged (see "
                            f"{files.log}); merge them with `conformance {' '.join(merge[3:])}`, or run again "
                            "with --rerun")
    files.parts.clear()


def _recorded(attempts: list[Path]) -> list[str]:
    return sorted({cell["nodeid"] for path in attempts for row in report.load_envelope(path)["models"].values()
                   for cell in row["cells"].values() if cell.get("nodeid")})


def below(path: Path, root: Path) -> str:
    """`path` relative to `root` when below it (what the job's command names), else absolute."""
    try:
        return str(path.resolve().relative_to(Path(root).resolve()))
    except ValueError:
        return str(path.resolve())


def _last_error(log: Path) -> str:
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    errors = [line for line in lines if line.startswith(("ERROR", "E ", "conformance: error"))]
    return (errors or lines or [""])[-1][:300]


def run_job(job: dict, root: Path, python: str, rerun: bool = False, env: dict | None = None) -> JobResult:
    """Run one entry of a job list, resuming what a stopped try of it left (see the module's contract)."""
    files = JobFiles(root / job["out"])
    code = cell_code.of_package()
    stale = standing(files, job["command"], code)[1]
    if rerun or stale:
        files.clear()
    elif files.done(job["command"], code):
        return JobResult(job["id"], "skipped", cells=files._read(files.done_note).get("cells", 0))
    files.out.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(files.log, "a") as log:
        if stale:
            log.write(f"\n== {stale}: cleared\n")
        io.write_json_atomic(files.started, {"id": job["id"], "command": job["command"], "cell_code": code})
        _salvage(files, python, root, log)
        attempts = files.attempts()
        recorded = _recorded(attempts)
        command = [python, *job["command"][1:]]
        if recorded:
            files.resume_args.write_text("".join(f"--deselect={nodeid}\n" for nodeid in recorded))
            command.append(f"@{below(files.resume_args, root)}")
        log.write(f"\n== {' '.join(job['command'])}" + (f" (continued: {len(recorded)} cells kept)" if recorded
                                                          else "") + "\n")
        log.flush()
        rc = subprocess.run(command, cwd=root, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, **RUN_ENV, **(env or {})}).returncode
    seconds = round(time.monotonic() - start, 1)
    if rc not in DONE_EXIT_CODES:
        return JobResult(job["id"], "stopped", resumed=len(recorded), seconds=seconds,
                         message=f"exit {rc}: {_last_error(files.log)} (log: {below(files.log, root)}; the same "
                                 "command continues it)" + (f"; {stale}, cleared" if stale else ""))
    parts = [p for p in [files.out, *attempts] if p.exists()]
    cells = 0
    if parts:
        envelopes = [report.load_envelope(p) for p in parts]
        merged = envelopes[0] if len(parts) == 1 else run_files.merged(envelopes, [p.name for p in parts])[0]
        portable = provenance.portable_texts(merged)  # a message can quote a traceback's file of this machine
        if parts != [files.out] or portable != merged:
            io.write_json_atomic(files.out, portable)
        cells = cells_of(merged)
    io.write_json_atomic(files.done_note, {"id": job["id"], "command": job["command"], "cell_code": code, "exit": rc,
                                           "cells": cells, "resumed": len(recorded), "attempts": len(attempts),
                                           "seconds": seconds})
    for path in [*attempts, files.resume_args]:
        path.unlink(missing_ok=True)
    return JobResult(job["id"], "done", cells=cells, resumed=len(recorded), seconds=seconds,
                     message=f"{stale}, run again" if stale else "")


def run_jobs(jobs: list[dict], root: Path, pythons: dict[str, str], parallel: int = 1, rerun: bool = False,
             env: dict | None = None, echo=print) -> list[JobResult]:
    """Run `jobs`, `parallel` at once; each result is echoed as it comes."""
    interpreters = {job["env"]: python_for(job["env"], pythons, root) for job in jobs}  # all found before any runs
    lock = threading.Lock()
    count = len(jobs)

    def one(numbered):
        number, job = numbered
        result = run_job(job, root, interpreters[job["env"]], rerun, env)
        with lock:
            echo(line(result, number, count))
        return result

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        return list(pool.map(one, enumerate(jobs, start=1)))


def line(result: JobResult, number: int, count: int) -> str:
    """One line for a person per finished job."""
    head = f"[{number}/{count}] {result.id}:"
    if result.status == "skipped":
        return f"{head} done earlier ({result.cells} cells), not run again (--rerun runs it again)"
    kept = f", {result.resumed} kept from a stopped try" if result.resumed else ""
    if result.status == "done":
        return f"{head} {result.cells} cells in {result.seconds:.0f} s{kept}" + \
            (f" ({result.message})" if result.message else "")
    return f"{head} stopped after {result.seconds:.0f} s{kept}: {result.message}"
