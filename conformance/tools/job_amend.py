"""Amending a finished job: the cells the machine ended in it, run again alone, as its group's amendment.

A cell a crashed worker, the memory watchdog or the time limit ended says more about the machine at that moment
(another cell beside it) than about the model. `jobs publish --group` puts a group's amendments over its jobs'
cells (`job_publish.merge_group`, which refuses one of another cell code, or one over a verdict a job reached).

Contracts:

* `machine_ended(envelope)` is the ``(model, column)`` cells of a job's envelope whose run the machine ended: a
  `timeout`, or a fingerprint of a kind `sample.MACHINE_KINDS` names (crash, resources, timeout).
* `alone_command(job, model, check, out)` is the job's command for that one cell, in one process: its pytest
  arguments without what deals or spreads cells (``--shard``, ``-n``, ``--dist``) or names them (``--models``,
  ``--checks``, ``--matrix-out``), then ``--models MODEL --checks CHECK --matrix-out OUT``.
* `amendment_path(job, root)` is the job's amendment, ``reports/jobs/reruns/<job id>-alone.json`` (a name
  `job_publish.amendment_files` finds for the job's env and group).
* `amend(job, root, python)` reruns, one after another, each machine-ended cell of the finished job that no
  amendment of its group holds yet (a stopped amend continues), and writes the job's amendment (the reruns merged, the
  earlier ones kept); it returns what it did (`Amended`). JobsError (one line) for a job that has not finished.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from conformance.report import envelope as report
from conformance.report import io, provenance
from conformance.tools.job_publish import AMENDMENTS, amendment_files
from conformance.tools.job_run import JobFiles
from conformance.tools.jobs import RUN_ENV, JobsError
from conformance.tools.run_files import merged
from conformance.tools.sample import MACHINE_KINDS

DEALING = {"--shard": 1, "-n": 1, "--dist": 1, "--models": 1, "--checks": 1, "--matrix-out": 1}  # option -> values


@dataclass(frozen=True)
class Amended:
    """One job's amendment: the machine-ended cells found, those rerun now, and the file (None: nothing to do)."""

    found: int
    rerun: int
    path: Path | None


def machine_ended(envelope: dict) -> list[tuple[str, str]]:
    return [(model, column) for model, row in envelope["models"].items() for column, cell in row["cells"].items()
            if cell["observed"] == "timeout" or (cell.get("fingerprint") or {}).get("kind") in MACHINE_KINDS]


def alone_command(job: dict, model: str, check: str, out: str) -> list[str]:
    command, kept, skip = job["command"], [], 0
    for arg in command:
        if skip:
            skip -= 1
            continue
        name = arg.split("=", 1)[0]
        if name in DEALING:
            skip = DEALING[name] if "=" not in arg else 0
            continue
        kept.append(arg)
    return [*kept, "--models", model, "--checks", check, "--matrix-out", out]


def amendment_path(job: dict, root: Path) -> Path:
    return root / AMENDMENTS / f"{job['id']}-alone.json"


def amend(job: dict, root: Path, python: str) -> Amended:
    files = JobFiles(root / job["out"])
    if not files.done(job["command"]):
        raise JobsError(f"job {job['id']} has not finished: run it first (`conformance jobs run --only {job['id']}`)")
    if not files.out.exists():
        return Amended(0, 0, None)
    found = machine_ended(report.load_envelope(files.out))
    path = amendment_path(job, root)
    earlier = report.load_envelope(path) if path.exists() else None
    held = {(m, c) for other in amendment_files(root, job["env"], job["group"])
            for m, row in report.load_envelope(other)["models"].items() for c in row["cells"]}
    to_run = [cell for cell in found if cell not in held]
    if not to_run:
        return Amended(len(found), 0, path if earlier else None)
    envelopes, sources = ([earlier], [path.name]) if earlier else ([], [])
    parts = path.with_name(path.stem + ".parts")  # the reruns' own run files (a path the runs record: relative)
    parts.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".log"), "a") as log:
        for index, (model, check) in enumerate(to_run):
            out = parts / f"cell-{index}.json"
            out.unlink(missing_ok=True)
            command = [python, *alone_command(job, model, check, out.relative_to(root).as_posix())[1:]]
            log.write(f"\n== {' '.join(command)}\n")
            log.flush()
            subprocess.run(command, cwd=root, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **RUN_ENV},
                           check=False)
            if out.exists():
                envelopes.append(report.load_envelope(out))
                sources.append(f"{model} {check}")
    if len(envelopes) == (1 if earlier else 0):
        raise JobsError(f"job {job['id']}: no rerun of its {len(to_run)} machine-ended cell(s) wrote a run file "
                        f"(log: {path.with_suffix('.log').relative_to(root)})")
    amendment = envelopes[0] if len(envelopes) == 1 else merged(envelopes, sources)[0]
    io.write_json_atomic(path, provenance.portable_texts(amendment))
    shutil.rmtree(parts, ignore_errors=True)
    return Amended(len(found), len(envelopes) - (1 if earlier else 0), path)
