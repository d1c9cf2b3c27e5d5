"""The pre-merge gate: the published matrix's job list restricted to the impacted classes, judged against the base.

Contracts:

* `gate_joblist(request)` is `tools.jobs.plan` for the installed version
  over `request.classes` (``--models`` of every job): every column group of
  the matrix (plain, each backend, each opt-in group, each extra whose
  packages are installed here, the half-precision groups), so that a gate
  runs the opt-in groups without ``--checks`` naming them, and a change
  that breaks bfloat16 or float16 only is red without ``--groups`` naming
  them; the columns it cannot run are the job
  list's `not_run`, with why.
* `run_gate(request)` runs the job list (each job afresh: the code under
  test may have changed since a run of the same command), merges it
  (`job_publish.merge_version`), and, where `request.base` names a commit
  of `request.repo`, runs the same jobs at that commit (a git worktree of
  it, its ``src/`` first on PYTHONPATH: the same suite, device and seeds)
  and judges the head's cells against the base's
  (`gate.merge_base.judge_against_base`). The base's envelope is cached by
  the base commit, the classes, the jobs' commands, the suite's commit and
  torch's version (`base_cache_key`), so a second pull request on the same
  base runs only its head. The envelope written to `request.out` records
  ``gate_run``: the groups run, the columns run, the published columns it
  did not run (with why: the summary says so in one line), each job's
  seconds and cells, head and base. Returns a `GateResult`; its `status`
  is 1 when a cell is red (fail, error, timeout, xpass) or a job stopped.
* `plan_command(args)` is `conformance plan`: the classes a change selects (as a run selects them), the
  ``--shard`` specs of one plain run that fit ``--budget``, and, for a change, the whole gate `jobs gate` would run
  (`gate_joblist`, `plan_lines`). Its ``--budget`` and ``--workers`` default to the gate's (`GateRequest`: the job
  lists' `jobs.DEFAULT_BUDGET` and `jobs.DEFAULT_WORKERS`), so that `plan` alone previews `jobs gate` alone.
  Returns `NOTHING_TO_CHECK` (10) when the change selects no class; bad input is a `CliError`.
* Every error is one line for a person (`JobsError`).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from conformance import columns, locations
from conformance.gate import merge_base
from conformance.report import envelope as report
from conformance.report import io
from conformance.report.summary import NEW
from conformance.tools import jobs as joblists
from conformance.tools.jobs import JobsError

GATE_OUT_DIR = "reports/latest/gate-jobs"
LONGEST_SLACK = 1.25


@dataclass(frozen=True)
class GateRequest:
    classes: tuple[str, ...]
    root: Path
    out: Path
    out_dir: str = GATE_OUT_DIR
    workers: int = joblists.DEFAULT_WORKERS
    budget: float = joblists.DEFAULT_BUDGET
    extras: str = "installed"
    groups: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()  # keep only these checks in every group (the harness's own tests: speed)
    pytest_args: tuple[str, ...] = ()
    target: str = joblists.TARGET
    repo: str = ""  # the transformers checkout
    base: str = ""  # the commit of `repo` to judge against; "" = the release expectations decide
    python: str = sys.executable
    env: dict = field(default_factory=dict)  # more environment for every job (head and base)
    package: str = "transformers"  # what the base's run must import from the base's worktree


@dataclass(frozen=True)
class GateResult:
    status: int
    envelope: dict
    lines: list[str]


def shards_by_group(classes: list[str], budget: float, workers: int) -> dict[str, int]:
    """The fewest shards of each group whose longest fits `budget`, or, where one class alone takes longer, the
    fewest whose longest takes at most `LONGEST_SLACK` times that class's shard (not a shard a class: that would
    only add each shard's start-up, and dealing longest first cannot fill shards to exactly the longest class)."""
    from conformance.run import shards

    found = {}
    for group in joblists.column_groups():
        seconds = shards.published_estimates(checks=list(group.checks), backend=group.backend)
        longest = max((shards.plan([n], seconds, float("inf"), workers).wall_seconds for n in classes), default=0.0)
        found[group.name] = shards.plan(classes, seconds, max(budget, LONGEST_SLACK * longest), workers).shards
    return found


def gate_env() -> str:
    """The env of the gate's jobs: the installed transformers' version, or, for a development checkout of a version
    not listed yet (5.25.0.dev0), the newest supported one (the gate's: its columns and published seconds)."""
    from conformance import versions

    here = versions.installed()
    return (here or next(v for v in versions.supported() if v.is_gate)).env


def gate_joblist(request: GateRequest, out_dir: str | None = None) -> dict:
    """The job list of the gate (see the module's contract). Its jobs are for the installed transformers, whatever
    its version (the checkout under test), so that merging them accepts their envelopes."""
    from conformance import versions

    joblist = _planned(request, out_dir)
    made_with = versions.installed_version()
    for entry in [*joblist["jobs"], *joblist["versions"]]:
        entry["transformers"] = made_with
    return joblist


def _planned(request: GateRequest, out_dir: str | None) -> dict:
    asked = joblists.Request(envs=(gate_env(),), groups=request.groups, extras=request.extras,
                             checks=request.checks, models=",".join(request.classes), budget=request.budget,
                             shards=shards_by_group(list(request.classes), request.budget, request.workers),
                             workers=request.workers, out_dir=out_dir or request.out_dir,
                             target=request.target, pytest_args=request.pytest_args)
    return joblists.plan(asked, request.root, names_of=lambda version: list(request.classes))


def _run(joblist: dict, request: GateRequest, env: dict) -> tuple[dict, list[dict]]:
    """Run every job afresh and merge them; (envelope, one note a job)."""
    from conformance.tools import job_publish, job_run

    results = job_run.run_jobs(joblist["jobs"], request.root, {joblist["versions"][0]["env"]: request.python},
                               rerun=True, env={**joblist["env"], **request.env, **env}, echo=lambda line: None)
    by_id = {job["id"]: job for job in joblist["jobs"]}
    notes = [{"id": r.id, "group": by_id[r.id]["group"], "status": r.status, "cells": r.cells, "seconds": r.seconds,
              **({"message": r.message} if r.message else {})} for r in results]
    stopped = [n for n in notes if n["status"] == "stopped"]
    if stopped:
        raise JobsError(f"gate job {stopped[0]['id']} stopped: {stopped[0].get('message', '')}")
    envelope = job_publish.merge_version(joblist, joblist["versions"][0]["env"], request.root)
    return envelope, notes


def base_cache_key(joblist: dict, commit: str) -> str:
    """What a base envelope depends on: the base commit, the jobs' commands, the suite and torch."""
    import torch

    suite = report.suite_version()
    data = {"commit": commit, "commands": [job["command"] for job in joblist["jobs"]], "suite": suite,
            "torch": torch.__version__}
    return hashlib.sha1(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def base_cache_dir(root: Path) -> Path:
    from conformance.select.code_graph_cache import cache_dir

    return (cache_dir() or root / GATE_OUT_DIR) / "gate-base"


def base_checkout(repo: Path, commit: str, where: Path) -> Path:
    """A git worktree of `repo` at `commit` (made once, then reused), for the base's run."""
    tree = where / "worktrees" / commit[:16]
    if not (tree / ".git").exists():
        tree.parent.mkdir(parents=True, exist_ok=True)
        made = subprocess.run(["git", "-C", str(repo), "worktree", "add", "--force", "--detach", str(tree), commit],
                              capture_output=True, text=True)
        if made.returncode != 0:
            raise JobsError(f"--base {commit[:12]}: git cannot make a worktree of {repo} at it "
                            f"({(made.stderr.strip().splitlines() or ['?'])[-1]}); fetch the base commit first")
    return tree


def _base_env(tree: Path, request: GateRequest) -> dict:
    """The environment of the base's jobs: its ``src/`` before everything else on the path, checked."""
    head = request.env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    path = os.pathsep.join(p for p in (str(tree / "src"), head) if p)
    env = {**os.environ, **request.env, "PYTHONPATH": path}
    shown = subprocess.run([request.python, "-c", f"import {request.package} as m; print(m.__file__)"], env=env,
                           capture_output=True, text=True, cwd=tree.parent)
    if not shown.stdout.strip().startswith(str(tree)):
        found = shown.stdout.strip() or shown.stderr.strip()[-200:]
        raise JobsError(f"the base's run would import {request.package} from {found}, not from the base's "
                        f"worktree {tree}: the checkout must keep its package in src/")
    return {"PYTHONPATH": path}


def base_classes(request: GateRequest, env: dict, check: str) -> list[str]:
    """The classes of `request.classes` that the base's run discovers (collected there, `check`'s cells only):
    a pull request that adds a model has a class its base does not know, and ``--models`` naming it would stop
    the base's run."""
    import re

    command = [request.python, "-m", "pytest", request.target, "--collect-only", "-q", "--checks", check,
               *request.pytest_args]
    found = subprocess.run(command, cwd=request.root, capture_output=True, text=True,
                           env={**os.environ, **joblists.RUN_ENV, **request.env, **env})
    if found.returncode not in (0, 5):
        last = (found.stdout.strip().splitlines() or found.stderr.strip().splitlines() or ["?"])[-1]
        raise JobsError(f"--base {request.base[:12]}: collecting the base's classes failed (exit "
                        f"{found.returncode}: {last})")
    known = {m.group(1) for m in re.finditer(r"::\S+\[([^\]\s]+)\]", found.stdout)}
    return [name for name in request.classes if name in known]


def run_base(request: GateRequest, head_joblist: dict) -> tuple[dict, list[dict], bool, list[str]]:
    """The base's envelope of the head's jobs (`head_joblist`) over the classes the base has: (envelope, job
    notes, whether it came from the cache, the classes not at the base). Where the base has none of them, its
    envelope holds no class and no job runs."""
    where = base_cache_dir(request.root)
    tree = base_checkout(Path(request.repo), request.base, where)
    env = _base_env(tree, request)
    present = base_classes(request, env, head_joblist["jobs"][0]["checks"][0])
    missing = [name for name in request.classes if name not in present]
    if not present:
        return {"models": {}}, [], False, missing
    joblist = gate_joblist(replace(request, classes=tuple(present)), out_dir=f"{request.out_dir}/base")
    cached = where / f"{request.base[:16]}-{base_cache_key(joblist, request.base)}.json"
    if cached.exists():
        stored = json.loads(cached.read_text())
        return stored["envelope"], stored["jobs"], True, missing
    envelope, notes = _run(joblist, request, env)
    io.write_json_atomic(cached, {"envelope": envelope, "jobs": notes})
    return envelope, notes, False, missing


def published_columns() -> list[str]:
    """The columns of the published matrix (reports/matrix.json), in its order; [] where none is published."""
    path = locations.PUBLISHED_MATRIX
    return list(report.load_envelope(path)["checks"]) if path.exists() else []


def group_column(check_id: str, group: joblists.Group) -> str:
    """The column a group's run of `check_id` fills in a merged matrix (``compile_prefill@inductor~bf16``)."""
    column = columns.column_id(check_id, group.backend) if group.backend != "eager" else check_id
    return columns.dtype_column(column, group.dtype) if group.dtype != joblists.MAIN_DTYPE else column


def gate_record(joblist: dict, envelope: dict, notes: list[dict], base: dict | None) -> dict:
    """`gate_run` of the envelope: what the gate ran, and what of the published matrix it did not, with why."""
    ran = [c for c in envelope["checks"] if c not in envelope.get("not_run", {})]
    published = published_columns()
    groups = {group_column(c, g): g.name for g in joblists.column_groups() for c in g.checks}
    listed = {**joblist["versions"][0]["not_run"], **envelope.get("not_run", {})}
    not_run = {c: listed.get(c) or (f"its group {groups[c]} is not in this gate run (--groups)" if c in groups
                                    else "no check of this suite makes it") for c in published if c not in ran}
    return {"groups": joblist["groups"], "classes": len(envelope["models"]), "columns": ran,
            "published": published, "not_run": not_run, "jobs": notes, **({"base": base} if base else {})}


def run_gate(request: GateRequest) -> GateResult:
    """Run the gate (see the module's contract)."""
    from conformance.report.summary import summary_lines

    if not request.classes:
        raise JobsError("the gate has no class to run: the change selects none (nothing to check)")
    joblist = gate_joblist(request)
    head, notes = _run(joblist, request, {})
    base_info = None
    if request.base:
        base, base_notes, from_cache, missing = run_base(request, joblist)
        head = merge_base.judge_against_base(head, base, request.base)
        base_info = {"commit": request.base, "cached": from_cache, "jobs": base_notes, "not_at_base": missing}
    envelope = {**head, "gate_run": gate_record(joblist, head, notes, base_info)}
    io.write_json_atomic(request.out, envelope)
    red = any(cell["verdict"] in NEW for row in envelope["models"].values() for cell in row["cells"].values())
    return GateResult(1 if red else 0, envelope, summary_lines(envelope, [request.out]))


def budget_by_group(joblist: dict) -> list[dict]:
    """Per group of a gate's job list: its checks, backend, cell seconds (from the published seconds of its columns
    for the gate's classes), shards and longest shard; then each published group it cannot run here, with why."""
    found = {}
    for job in joblist["jobs"]:
        entry = found.setdefault(job["group"], {"group": job["group"], "checks": job["checks"],
                                                "backend": job["backend"],
                                                "dtype": job.get("dtype", joblists.MAIN_DTYPE),
                                                "cell_seconds": 0.0, "shards": 0,
                                                "wall_seconds": 0.0, "specs": []})
        entry["cell_seconds"] = round(entry["cell_seconds"] + job["cell_seconds"], 1)
        entry["shards"] += 1
        entry["wall_seconds"] = max(entry["wall_seconds"], job["wall_seconds"])
        entry["specs"].append(job["id"])
    not_run = joblist["versions"][0]["not_run"]
    skipped = [{"group": g.name, "checks": list(g.checks), "not_run": not_run[g.checks[0]]}
               for g in joblists.column_groups() if g.name not in found and g.checks[0] in not_run]
    return list(found.values()) + skipped


def plan_lines(joblist: dict) -> list[str]:
    """`conformance plan`'s lines on the whole gate: one a group (or why it cannot run here), then the total."""
    lines = []
    groups = budget_by_group(joblist)
    for entry in groups:
        if "not_run" in entry:
            lines.append(f"  {entry['group']}: not run here: {entry['not_run']}")
            continue
        backend = f" under {entry['backend']}" if entry["backend"] != "eager" else ""
        backend += f" in {entry['dtype']}" if entry["dtype"] != joblists.MAIN_DTYPE else ""
        lines.append(f"  {entry['group']} ({len(entry['checks'])} columns{backend}): about {entry['cell_seconds']:.0f} s "
                     f"of cells, {entry['shards']} shard(s), about {entry['wall_seconds']:.0f} s each at most")
    walls = joblist["wall_seconds"]
    shards = sum(e.get("shards", 0) for e in groups)
    cells = sum(e.get("cell_seconds", 0.0) for e in groups)
    return [f"the whole gate: {len(joblist['groups'])} column groups, about {cells:.0f} s of cells in {shards} "
            f"shard(s) (about {walls['one_machine']:.0f} s one after another, {walls['runners']:.0f} s on one "
            "runner each)"] + lines


def plan_command(args) -> int:
    """`conformance plan` (see the module's contract)."""
    from conformance.cases.case import TransformersCases
    from conformance.checks.common.registry import check_ids, opt_in_reason, unavailable
    from conformance.run import shards as shard
    from conformance.run.options import NOTHING_TO_CHECK, UsageError, resolve_selection, unavailable_checks
    from conformance.tools.errors import CliError
    from conformance.tools.pytest_options import PytestOptions

    if not args.budget > 0 or args.workers < 1:
        raise CliError("plan: --budget must be a positive number of seconds and --workers at least 1")
    try:
        selection = resolve_selection(PytestOptions(args), TransformersCases())
    except UsageError as exc:
        raise CliError(str(exc)) from None
    names, nothing = selection.classes, selection.nothing_to_check
    not_run = unavailable_checks([], check_ids(), unavailable, opt_in_reason)  # a plain run's columns
    seconds = shard.published_estimates(checks=[c for c in check_ids() if c not in not_run])
    result = shard.plan(names, seconds, args.budget, args.workers)
    gate = None  # the whole gate (`conformance jobs gate`): every column group, budgeted per group
    if names and selection.impact:
        gate = gate_joblist(GateRequest(classes=tuple(names), root=Path("."), out=Path("."), workers=args.workers,
                                        budget=args.budget))
    if args.json:
        print(json.dumps({"classes": names, "shards": result.shards, "specs": result.specs(),
                          "cell_seconds": result.cell_seconds, "wall_seconds": result.wall_seconds,
                          "changed_files": selection.changed_files, "nothing_to_check": nothing,
                          "gate": {"groups": budget_by_group(gate), "jobs": [j["id"] for j in gate["jobs"]]}
                          if gate else None}))
        return NOTHING_TO_CHECK if nothing else 0
    if nothing:
        print(nothing)
        return NOTHING_TO_CHECK
    unknown = [n for n in names if n not in seconds]
    print(f"classes: {', '.join(names)}")
    print(f"{result.classes} classes, about {result.cell_seconds:.0f} s of cells"
          + (f" ({len(unknown)} without a published time, counted as the median class)" if unknown else ""))
    print(f"{result.shards} shard(s) of {args.workers} workers, about {result.wall_seconds:.0f} s each at most "
          f"(budget {args.budget:g} s): " + " ".join(f"--shard {spec}" for spec in result.specs()))
    if gate is not None:
        print("\n".join(plan_lines(gate)))
    return 0
