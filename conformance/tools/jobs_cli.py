"""`conformance jobs`: the publishing run of a transformers version, on one machine or as a job list for many.

    conformance jobs list    [SELECTION] [-o JOBS.json] [--github] [-- PYTEST_ARGS]
    conformance jobs status  [SELECTION | --from JOBS.json [--env ENV,...]]
    conformance jobs run     [SELECTION | --from JOBS.json [--env ENV,...]] [--only ID,...] [--parallel N] [--rerun]
                             [--python ENV=PATH]
    conformance jobs amend   [SELECTION | --from JOBS.json [--env ENV,...]] [--only ID,...] [--python ENV=PATH]
    conformance jobs publish [SELECTION | --from JOBS.json [--env ENV,...]] [--parallel N] [--rerun]
                             [--python ENV=PATH] [--no-run] [--group GROUP]
    conformance jobs gate    (--since REF --transformers-repo DIR | --changed-files PATH...) [--base auto|REF|none]
                             [-o OUT.json] [--groups ...] [--extras ...] [--workers W] [-- PYTEST_ARGS]

SELECTION: --env ENV[,ENV|all] (default: the installed transformers' env), --groups G,... (default: every column
group), --extras installed|all|E,... (default: installed), --checks C,..., --models GLOBS, --budget SECONDS,
--shards N|GROUP=N,..., --workers W, --out-dir DIR, --root DIR; arguments after `--` go to every job's pytest.
With --from, the list holds the selection: --env picks some of its versions (`jobs.of_versions`: publish one
version while another's jobs still run), any other planning option is refused in one line.

Contract: `run_command(args) -> int` (`cli` parses the options: `add_commands`). `list` prints the job list (`tools.jobs.plan`) as
JSON (or writes it to -o and prints one line a job), `--github` prints the
GitHub Actions matrix of it instead; `status` prints where each job stands
(`job_run.state`: done by this suite's cell code, done by another and so
run again, running or stopped with the cells kept, not started) and what is left, by
the published seconds or the group's measured walls, without running anything; `run` runs the jobs (`tools.job_run`:
each resumable, done ones skipped unless --rerun) and returns 1 when one
stopped; `amend` reruns alone, one process a cell, the cells the machine ended (a crashed worker, the memory
watchdog, the time limit) in finished jobs (`tools.job_amend`: each job's amendment, which `publish --group` puts
over its cells); `publish` is the one-machine command: it runs what is left of the
list, then merges each version and publishes it (`tools.job_publish`), so
that its output is the same whether the jobs ran here, in parallel or on
other runners (`--no-run`: only merge and publish fetched envelopes); `publish --group G` publishes one
column group of one version over its published matrix (`job_publish.publish_group`: a group finished after the
version was published, with the cells its amendments rerun alone);
`gate` is the pre-merge gate (`tools.job_gate`): every column group for the
classes the change impacts, at HEAD and (``--base auto``: the merge base of
``--since A...B``, or the commit ``--since`` names) at the base, judged
against it; it prints the summary and returns 1 when a cell is red, 10 when
the change selects no class. Bad input prints one line and returns 2 (as
the `conformance` command does).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from conformance import locations
from conformance.tools import jobs as joblists
from conformance.tools.errors import CliError, write_files
from conformance.tools.pytest_options import PytestOptions

COMMANDS = ("list", "status", "run", "amend", "publish", "gate")
DESCRIPTION = ("the publishing run as jobs: list, status, run, amend and publish them (each resumable; `amend` reruns "
               "alone the cells the machine ended; `publish` runs what is left, then publishes each version, or one "
               "group with --group, as `conformance publish` does), and gate, the pre-merge gate's jobs")


# The planning options' defaults: `_selection` declares them, `_planning_given` tells a given option from them.
PLANNING_DEFAULTS = {"groups": "", "extras": "installed", "checks": "", "models": "", "budget": joblists.DEFAULT_BUDGET,
                     "shards": "", "workers": joblists.DEFAULT_WORKERS, "out_dir": joblists.OUT_DIR}


def _selection(parser) -> None:
    parser.add_argument("--from", dest="joblist", metavar="JOBS.json", help="a job list (`jobs list -o`) instead "
                        "of planning one from the options below")
    parser.add_argument("--env", default="", help="tox env(s) of the transformers version(s), comma-separated, or "
                        "all (default: the installed transformers' env; with --from: every version of the list)")
    parser.add_argument("--groups", default=PLANNING_DEFAULTS["groups"], help="column groups, comma-separated "
                        "(default: all: plain, each backend, each opt-in group, each extra)")
    parser.add_argument("--extras", default=PLANNING_DEFAULTS["extras"], help="extras' groups: installed (default), "
                        "all, or a comma-separated list (a CI runner installs its group's extra)")
    parser.add_argument("--checks", default=PLANNING_DEFAULTS["checks"],
                        help="keep only these check ids in every group")
    parser.add_argument("--models", default=PLANNING_DEFAULTS["models"],
                        help="comma-separated class names or globs (default: all)")
    parser.add_argument("--budget", type=float, default=PLANNING_DEFAULTS["budget"],
                        help=f"seconds a job may take (default {joblists.DEFAULT_BUDGET:g}), by the published seconds")
    parser.add_argument("--shards", default=PLANNING_DEFAULTS["shards"],
                        help="N, or GROUP=N,...: shards instead of the budget's")
    parser.add_argument("--workers", type=int, default=PLANNING_DEFAULTS["workers"],
                        help="xdist workers per job (default 2; 1: no xdist)")
    parser.add_argument("--out-dir", default=PLANNING_DEFAULTS["out_dir"],
                        help=f"the jobs' envelopes (default {joblists.OUT_DIR})")
    parser.add_argument("--root", default=".", help="the repository root: where jobs run and paths start (default .)")


def _running(parser, jobs_at_once: bool = True) -> None:
    if jobs_at_once:
        parser.add_argument("--parallel", type=int, default=1, help="jobs at once on this machine (default 1)")
        parser.add_argument("--rerun", action="store_true", help="run finished jobs again (default: skip them)")
    parser.add_argument("--python", action="append", default=[], metavar="ENV=PATH",
                        help="the interpreter of a version's jobs (default: this one for the installed version, "
                             ".venv-<env>/bin/python for another)")


def add_commands(parser: argparse.ArgumentParser) -> None:
    """`parser` (`conformance jobs`) given its subcommands; the parsed options' `jobs_command` names the one given."""
    sub = parser.add_subparsers(dest="jobs_command", required=True, metavar="COMMAND")
    p = sub.add_parser("list", help="the job list as JSON (version x group x shard)")
    _selection(p)
    p.add_argument("-o", "--output", metavar="JOBS.json", help="write the list here; print one line a job")
    p.add_argument("--github", action="store_true", help="print the GitHub Actions matrix ({include: [...]})")
    p = sub.add_parser("status", help="where each job stands (done, to run again, stopped, not started); runs nothing")
    _selection(p)
    p = sub.add_parser("run", help="run the jobs (each resumable; finished ones are skipped)")
    _selection(p)
    _running(p)
    p.add_argument("--only", default="", metavar="ID,...", help="run only these jobs (a CI runner's entry)")
    p = sub.add_parser("amend", help="rerun alone the cells the machine ended in finished jobs (a crashed worker, "
                       "the memory watchdog, the time limit): each job's amendment in reports/jobs/reruns/")
    _selection(p)
    _running(p, jobs_at_once=False)
    p.add_argument("--only", default="", metavar="ID,...", help="amend only these jobs")
    p = sub.add_parser("publish", help="run what is left, merge each version and publish it as `conformance publish` does")
    _selection(p)
    _running(p)
    p.add_argument("--no-run", action="store_true", help="merge and publish only (the jobs ran elsewhere)")
    p.add_argument("--group", default="", metavar="GROUP", help="publish one column group of one version over its "
                   "published matrix (its jobs, and its amendments in reports/jobs/reruns/<env>-<group>-*.json)")
    p.add_argument("--no-screenshot", dest="screenshot", action="store_false",
                   help="leave reports/matrix.png as it is (default: retake it from the gate version's page)")
    p = sub.add_parser("gate", help="the pre-merge gate: every column group for the impacted classes, judged "
                       "against the merge base")
    p.add_argument("--changed-files", nargs="+", default=[], metavar="PATH", help="changed transformers files")
    p.add_argument("--since", default="", metavar="REF", help="git ref or A...B: changes from `git diff REF`")
    p.add_argument("--transformers-repo", default="", metavar="DIR", help="the transformers checkout under test")
    p.add_argument("--models", default="", help="keep only these classes (globs) of the impacted ones")
    p.add_argument("--base", default="auto", metavar="auto|REF|none", help="judge against this commit's run (auto: "
                   "the merge base of --since A...B, or the commit --since names; none: the release expectations)")
    p.add_argument("-o", "--output", default="reports/latest/pr.json", metavar="OUT.json",
                   help="the gate's envelope (default reports/latest/pr.json)")
    p.add_argument("--groups", default="", help="column groups, comma-separated (default: all)")
    from conformance.tools.job_gate import GateRequest as gate  # the gate's defaults have one home, the request
    p.add_argument("--extras", default=gate.extras, help=f"extras' groups: {gate.extras} (default) or E,...")
    p.add_argument("--budget", type=float, default=gate.budget,
                   help=f"seconds a job may take (default {gate.budget:.0f})")
    p.add_argument("--workers", type=int, default=gate.workers, help=f"xdist workers per job (default {gate.workers})")
    p.add_argument("--out-dir", default=gate.out_dir, help=f"the jobs' files (default {gate.out_dir})")
    p.add_argument("--root", default=".", help="the repository root (default .)")


def _shards(value: str) -> dict:
    found = {}
    for part in filter(None, (p.strip() for p in value.split(","))):
        group, _, count = part.rpartition("=")
        if not count.isdigit() or int(count) < 1:
            raise joblists.JobsError(f"--shards: {part!r} is not N or GROUP=N with N >= 1")
        found[group or "*"] = int(count)
    return found


def _request(args, pytest_args: list[str]) -> joblists.Request:
    from conformance import versions

    if not args.budget > 0 or args.workers < 1:
        raise joblists.JobsError("--budget must be a positive number of seconds and --workers at least 1")
    envs = _envs(args)
    if envs == ["all"]:
        envs = [v.env for v in versions.supported()]
    return joblists.Request(envs=tuple(envs or [joblists.installed_env()]),
                            groups=tuple(g.strip() for g in args.groups.split(",") if g.strip()),
                            extras=args.extras, checks=tuple(c.strip() for c in args.checks.split(",") if c.strip()),
                            models=args.models, budget=args.budget, shards=_shards(args.shards), workers=args.workers,
                            out_dir=args.out_dir.rstrip("/"), pytest_args=tuple(pytest_args))


def _planning_given(args) -> list[str]:
    """The planning options given (not --env or --root, which also apply to a job list)."""
    return ["--" + dest.replace("_", "-") for dest, default in PLANNING_DEFAULTS.items()
            if getattr(args, dest) != default]


def _envs(args) -> list[str]:
    """The envs --env names, as given (`all` included: the caller says what it means)."""
    return [e.strip() for e in args.env.split(",") if e.strip()]


def _joblist(args, pytest_args: list[str]) -> dict:
    if args.joblist:
        if pytest_args:
            raise joblists.JobsError("--from: the job list holds its commands; pytest arguments after -- are for "
                                     "planning one")
        planning = _planning_given(args)
        if planning:
            raise joblists.JobsError(f"--from: the job list holds its selection; {planning[0]} is for planning one "
                                     "(drop it; --env picks versions of the list)")
        joblist = joblists.load(Path(args.joblist))
        envs = _envs(args)
        return joblists.of_versions(joblist, envs) if envs and envs != ["all"] else joblist
    return joblists.plan(_request(args, pytest_args), Path(args.root))


def _pythons(values: list[str]) -> dict[str, str]:
    found = {}
    for value in values:
        env, sep, path = value.partition("=")
        if not sep or not env or not path:
            raise joblists.JobsError(f"--python: {value!r} is not ENV=PATH (e.g. tf523=.venv-tf523/bin/python)")
        if not os.access(path, os.X_OK) or Path(path).is_dir():
            raise joblists.JobsError(f"--python: {path} is not a Python interpreter that can be run; pass the venv's "
                                     f"bin/python (e.g. {env}=.venv-{env}/bin/python)")
        found[env] = path
    return found


def _named(joblist: dict, only: str) -> list[dict] | None:
    """The jobs `--only ID,...` names, in list order; None when it names none. An id not in the list: JobsError."""
    ids = [i.strip() for i in only.split(",") if i.strip()]
    if not ids:
        return None
    unknown = [i for i in ids if i not in {job["id"] for job in joblist["jobs"]}]
    if unknown:
        raise joblists.JobsError(f"--only: no job {unknown[0]!r} in the list; `conformance jobs list` names them")
    return [job for job in joblist["jobs"] if job["id"] in ids]


def _run(joblist: dict, args, only: str = "") -> int:
    from conformance.tools import job_run

    named = _named(joblist, only)
    chosen = joblist["jobs"] if named is None else named
    if not args.rerun:
        from conformance.report import cell_code

        code = cell_code.of_package()
        to_run = [job for job in chosen if job_run.state(job, Path(args.root), code).status != "done"]
    else:
        to_run = chosen
    _refuse_redealt(joblist, to_run, args.root)
    results = job_run.run_jobs(chosen, Path(args.root), _pythons(args.python), args.parallel, args.rerun,
                               joblist.get("env"))
    stopped = [r.id for r in results if r.status == "stopped"]
    if stopped:
        print(f"conformance jobs: {len(stopped)} job(s) stopped ({', '.join(stopped)}); the same command continues "
              "them, keeping every cell they finished", file=sys.stderr)
        return 1
    return 0


def _published(root: str) -> Path:
    """The published matrix whose seconds a job's ``--shard`` deals by: the one under the root the jobs run in."""
    return Path(root) / locations.PUBLISHED_MATRIX.relative_to(locations.REPOSITORY)


def _redealt(joblist: dict, jobs: list[dict], root: str) -> list[str]:
    """The ids of `jobs` (those a run would run) whose ``--shard`` would now take other classes than the list
    planned (`joblists.redealt`)."""
    moved = set(joblists.redealt(joblist, _published(root)))
    return [job["id"] for job in jobs if job["id"] in moved]


def _refuse_redealt(joblist: dict, jobs: list[dict], root: str) -> None:
    moved = _redealt(joblist, jobs, root)
    if moved:
        raise joblists.JobsError(
            f"{len(moved)} job(s) to run ({moved[0]}{', ...' if len(moved) > 1 else ''}) would take other classes "
            f"than the list holds: {_published(root)} changed since the list was planned, and `jobs publish` "
            "would refuse their runs; plan the list again (`conformance jobs list ... -o LIST`) and run it")


def list_command(joblist: dict, args) -> int:
    text = json.dumps(joblist, indent=1) + "\n"
    if args.github:
        print(json.dumps(joblists.github_matrix(joblist), separators=(",", ":")))
    if args.output:
        write_files({Path(args.output): text})
        if not args.github:
            for job in joblist["jobs"]:
                print(f"{job['id']}: {len(job['classes'])} classes, about {job['wall_seconds']:.0f} s")
            walls = joblist["wall_seconds"]
            print(f"{len(joblist['jobs'])} jobs: about {walls['one_machine']:.0f} s one after another, "
                  f"{walls['runners']:.0f} s on one runner each; wrote {args.output}")
    elif not args.github:
        sys.stdout.write(text)
    return 0


def _pace(jobs: list[dict], states: list, planned_left: float) -> str:
    """What is left at the pace of the finished jobs (their measured walls over their planned ones): a machine's
    speed varies from day to day, and the published seconds were measured on another day."""
    pairs = [(state.seconds, job.get("wall_seconds", 0.0)) for job, state in zip(jobs, states)
             if state.status == "done" and state.seconds > 0 and job.get("wall_seconds", 0.0) > 0]
    if not pairs or not planned_left:
        return ""
    ratio = sum(m for m, _ in pairs) / sum(p for _, p in pairs)
    finished = f"{len(pairs)} finished jobs" if len(pairs) > 1 else "finished job"
    return (f"; the {finished} took {ratio:.2f} of the walls planned for them, so about {planned_left * ratio:.0f} s "
            "at that pace")


def status_command(joblist: dict, args) -> int:
    from conformance.report import cell_code
    from conformance.tools import job_run

    code = cell_code.of_package()
    states = [job_run.state(job, Path(args.root), code) for job in joblist["jobs"]]
    measured: dict[str, list[float]] = {}
    for job, state in zip(joblist["jobs"], states):
        if state.seconds > 0:
            measured.setdefault(job["group"], []).append(state.seconds)
    left, done, planned_left = 0.0, 0, 0.0
    for job, state in zip(joblist["jobs"], states):
        if state.status == "done":
            done += 1
            said = f"done, {state.cells} cells"
        elif state.status == "other code":
            said = f"done by cell code {state.made_by}, not this suite's: runs again"
        elif state.status == "stopped":
            said = f"running or stopped, {state.cells} cells recorded (a next run keeps them)"
        elif state.status == "stale try":
            said = "not started (a stopped try of another command or cell code lies here: the next run clears it)"
        else:
            said = "not started"
        if state.status != "done":
            walls = measured.get(job["group"], [])
            left += max(job.get("wall_seconds", 0.0), sum(walls) / len(walls) if walls else 0.0)
            planned_left += job.get("wall_seconds", 0.0)
        print(f"{job['id']}: {said}")
    print(f"{done} of {len(joblist['jobs'])} jobs done by this suite's cell code {code}; about {left:.0f} s of "
          "wall left (a job's published seconds, or the mean wall of its group's finished jobs where that is more: a "
          "column never published counts the median of the others); `conformance jobs run` with the same selection "
          f"runs them{_pace(joblist['jobs'], states, planned_left)}")
    moved = _redealt(joblist, [job for job, state in zip(joblist["jobs"], states) if state.status != "done"],
                     args.root)
    if moved:
        print(f"{len(moved)} job(s) not done ({', '.join(moved[:2])}{', ...' if len(moved) > 2 else ''}) would take "
              f"other classes than the list holds: {_published(args.root)} changed since the list was planned; plan "
              "the list again before running them (`jobs run` refuses them)")
    strays = job_run.leftovers(joblist["jobs"], Path(args.root))
    if strays:
        names = ", ".join(job_run.below(path, Path(args.root)) for path in strays[:4])
        print(f"{len(strays)} file(s) beside these jobs belong to none of them ({names}{', ...' if len(strays) > 4 else ''}):"
              " an earlier plan's; delete them (`git rm`) so that the folder holds this list's jobs only")
    return 0


def split_pytest_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """`conformance jobs`'s own arguments, and those after ``--`` (every job's pytest's)."""
    if "--" not in argv:
        return list(argv), []
    return list(argv[:argv.index("--")]), list(argv[argv.index("--") + 1:])


def run_command(args) -> int:
    """`conformance jobs COMMAND` (see the module's contract); `args.pytest_args` are those after ``--``."""
    from conformance.tools import job_publish

    if args.jobs_command == "gate":
        return gate_command(args, args.pytest_args)
    try:
        joblist = _joblist(args, args.pytest_args)
        if args.jobs_command == "list":
            return list_command(joblist, args)
        if args.jobs_command == "status":
            return status_command(joblist, args)
        if args.jobs_command == "run":
            return _run(joblist, args, args.only)
        if args.jobs_command == "amend":
            return _amend(joblist, args)
        if args.group:
            return _publish_group(joblist, args)
        if not args.no_run and _run(joblist, args):
            return 1
        for path in job_publish.publish(joblist, Path(args.root)):
            print(f"wrote {path}")
        if args.screenshot:
            print(job_publish.published_picture(joblist, Path(args.root)))
        return 0
    except joblists.JobsError as exc:
        raise CliError(str(exc)) from None


def _amend(joblist: dict, args) -> int:
    """`jobs amend`: each chosen finished job's machine-ended cells rerun alone (`job_amend.amend`)."""
    from conformance.report import cell_code
    from conformance.tools import job_amend, job_run

    root, code = Path(args.root), cell_code.of_package()
    named = _named(joblist, args.only)
    chosen = named if named is not None else [job for job in joblist["jobs"]
                                              if job_run.state(job, root, code).status == "done"]
    pythons = _pythons(args.python)
    for job in chosen:
        done = job_amend.amend(job, root, job_run.python_for(job["env"], pythons, root))
        if done.found:
            print(f"{job['id']}: {done.found} cell(s) the machine ended, {done.rerun} rerun alone now; "
                  f"its amendment: {done.path.relative_to(root) if done.path else 'none'}")
    return 0


def _publish_group(joblist: dict, args) -> int:
    """`jobs publish --group G`: the group's jobs of one version run (what is left), then published over that
    version's matrix (`job_publish.publish_group`)."""
    from conformance.tools import job_publish

    envs = sorted({job["env"] for job in joblist["jobs"]}) if args.joblist else [joblists.installed_env()]
    if len(envs) != 1:
        raise joblists.JobsError(f"--group publishes one version's group; the list has {', '.join(envs)}: pick one "
                                 "with --env")
    jobs = job_publish.group_jobs(joblist, envs[0], args.group)
    if not args.no_run and _run(joblist, args, ",".join(job["id"] for job in jobs)):
        return 1
    done = job_publish.publish_group(joblist, envs[0], args.group, Path(args.root))
    for path in done.written:
        print(f"wrote {path}")
    amended = f"; {done.amended} cell(s) amended by {', '.join(done.amendments)}" if done.amendments else ""
    print(f"published {envs[0]}'s {args.group} group: {done.cells} cells from {len(jobs)} job(s){amended}; the "
          f"group's run is {done.group_run}")
    if args.screenshot:
        print(job_publish.published_picture(joblists.of_versions(joblist, envs), Path(args.root)))
    return 0


def gate_request(args, pytest_args: list[str]):
    """The `GateRequest` of `conformance jobs gate`'s options (the classes resolved as a run resolves them); None
    when the change selects no class (printed: nothing to check)."""
    from conformance.cases.case import TransformersCases
    from conformance.gate import merge_base
    from conformance.run.options import UsageError, resolve_selection
    from conformance.tools import job_gate

    if not (args.changed_files or args.since):
        raise CliError("jobs gate: name the change: --since REF --transformers-repo DIR, or --changed-files PATH...")
    try:
        selection = resolve_selection(PytestOptions(args), TransformersCases())
    except UsageError as exc:
        raise CliError(str(exc)) from None
    if selection.nothing_to_check:
        print(selection.nothing_to_check)
        return None
    from conformance.select import impact

    repo = impact.checkout_of(args.transformers_repo)
    base = ""
    if args.base not in ("none", ""):
        ref = args.since if args.base == "auto" else args.base
        if repo is not None and ref:
            base = merge_base.base_commit(ref, repo)
            if not base:
                raise CliError(f"jobs gate: --base {ref}: git cannot resolve it in {repo}; fetch it, or pass "
                               "--base none (the release expectations judge)")
        elif args.base != "auto":
            raise CliError("jobs gate: --base needs the transformers checkout (--transformers-repo DIR)")
    root = Path(args.root)
    return job_gate.GateRequest(classes=tuple(selection.classes), root=root, out=root / args.output,
                                out_dir=args.out_dir.rstrip("/"), workers=args.workers, budget=args.budget,
                                extras=args.extras, groups=tuple(g for g in args.groups.split(",") if g),
                                pytest_args=tuple(pytest_args),
                                repo=str(repo or ""), base=base)


def gate_command(args, pytest_args: list[str]) -> int:
    from conformance.run.options import NOTHING_TO_CHECK
    from conformance.tools import job_gate

    try:
        request = gate_request(args, pytest_args)
        if request is None:
            return NOTHING_TO_CHECK
        print(f"conformance jobs gate: {len(request.classes)} classes, every column group"
              + (f", judged against {request.base[:12]}" if request.base else ", judged by the release expectations"))
        result = job_gate.run_gate(request)
    except joblists.JobsError as exc:
        raise CliError(str(exc)) from None
    print("\n".join(result.lines))
    return result.status
