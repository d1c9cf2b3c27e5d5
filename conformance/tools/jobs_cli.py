"""`conformance jobs`: the publishing run of a transformers version, on one machine or as a job list for many.

    conformance jobs list    [SELECTION] [-o JOBS.json] [--github] [-- PYTEST_ARGS]
    conformance jobs run     [SELECTION | --from JOBS.json] [--only ID,...] [--parallel N] [--rerun] [--python ENV=PATH]
    conformance jobs publish [SELECTION | --from JOBS.json] [--parallel N] [--rerun] [--python ENV=PATH] [--no-run]

SELECTION: --env ENV[,ENV|all] (default: the installed transformers' env), --groups G,... (default: every column
group), --extras installed|all|E,... (default: installed), --checks C,..., --models GLOBS, --budget SECONDS,
--shards N|GROUP=N,..., --workers W, --out-dir DIR, --root DIR; arguments after `--` go to every job's pytest.

Contract: `main(argv) -> int`. `list` prints the job list (`tools.jobs.plan`) as
JSON (or writes it to -o and prints one line a job), `--github` prints the
GitHub Actions matrix of it instead; `run` runs the jobs (`tools.job_run`:
each resumable, done ones skipped unless --rerun) and returns 1 when one
stopped; `publish` is the one-machine command: it runs what is left of the
list, then merges each version and publishes it (`tools.job_publish`), so
that its output is the same whether the jobs ran here, in parallel or on
other runners (`--no-run`: only merge and publish fetched envelopes). Bad
input prints one line and returns 2 (as the `conformance` command does).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from conformance.tools import jobs as joblists

COMMANDS = ("list", "run", "publish")


def _selection(parser) -> None:
    parser.add_argument("--from", dest="joblist", metavar="JOBS.json", help="a job list (`jobs list -o`) instead "
                        "of planning one from the options below")
    parser.add_argument("--env", default="", help="tox env(s) of the transformers version(s), comma-separated, or "
                        "all (default: the installed transformers' env)")
    parser.add_argument("--groups", default="", help="column groups, comma-separated (default: all: plain, each "
                        "backend, each opt-in group, each extra)")
    parser.add_argument("--extras", default="installed", help="extras' groups: installed (default), all, or a "
                        "comma-separated list (a CI runner installs its group's extra)")
    parser.add_argument("--checks", default="", help="keep only these check ids in every group")
    parser.add_argument("--models", default="", help="comma-separated class names or globs (default: all)")
    parser.add_argument("--budget", type=float, default=joblists.DEFAULT_BUDGET,
                        help=f"seconds a job may take (default {joblists.DEFAULT_BUDGET:g}), by the published seconds")
    parser.add_argument("--shards", default="", help="N, or GROUP=N,...: shards instead of the budget's")
    parser.add_argument("--workers", type=int, default=2, help="xdist workers per job (default 2; 1: no xdist)")
    parser.add_argument("--out-dir", default=joblists.OUT_DIR, help=f"the jobs' envelopes (default {joblists.OUT_DIR})")
    parser.add_argument("--root", default=".", help="the repository root: where jobs run and paths start (default .)")


def _running(parser) -> None:
    parser.add_argument("--parallel", type=int, default=1, help="jobs at once on this machine (default 1)")
    parser.add_argument("--rerun", action="store_true", help="run finished jobs again (default: skip them)")
    parser.add_argument("--python", action="append", default=[], metavar="ENV=PATH",
                        help="the interpreter of a version's jobs (default: this one for the installed version, "
                             ".venv-<env>/bin/python for another)")


def build_parser(error_type) -> argparse.ArgumentParser:
    class Parser(argparse.ArgumentParser):
        def error(self, message):
            raise error_type(f"{message} (see `{self.prog} --help`)")

    parser = Parser(prog="conformance jobs", description="the publishing run as jobs: list, run, publish")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="COMMAND")
    p = sub.add_parser("list", help="the job list as JSON (version x group x shard)")
    _selection(p)
    p.add_argument("-o", "--output", metavar="JOBS.json", help="write the list here; print one line a job")
    p.add_argument("--github", action="store_true", help="print the GitHub Actions matrix ({include: [...]})")
    p = sub.add_parser("run", help="run the jobs (each resumable; finished ones are skipped)")
    _selection(p)
    _running(p)
    p.add_argument("--only", default="", metavar="ID,...", help="run only these jobs (a CI runner's entry)")
    p = sub.add_parser("publish", help="run what is left, merge each version, publish it (reports/, README)")
    _selection(p)
    _running(p)
    p.add_argument("--no-run", action="store_true", help="merge and publish only (the jobs ran elsewhere)")
    return parser


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
    envs = [e.strip() for e in args.env.split(",") if e.strip()]
    if envs == ["all"]:
        envs = [v.env for v in versions.supported()]
    return joblists.Request(envs=tuple(envs or [joblists.installed_env()]),
                            groups=tuple(g.strip() for g in args.groups.split(",") if g.strip()),
                            extras=args.extras, checks=tuple(c.strip() for c in args.checks.split(",") if c.strip()),
                            models=args.models, budget=args.budget, shards=_shards(args.shards), workers=args.workers,
                            out_dir=args.out_dir.rstrip("/"), pytest_args=tuple(pytest_args))


def _joblist(args, pytest_args: list[str]) -> dict:
    if args.joblist:
        if pytest_args:
            raise joblists.JobsError("--from: the job list holds its commands; pytest arguments after -- are for "
                                     "planning one")
        return joblists.load(Path(args.joblist))
    return joblists.plan(_request(args, pytest_args), Path(args.root))


def _pythons(values: list[str]) -> dict[str, str]:
    found = {}
    for value in values:
        env, sep, path = value.partition("=")
        if not sep or not env or not path:
            raise joblists.JobsError(f"--python: {value!r} is not ENV=PATH (e.g. tf523=.venv-tf523/bin/python)")
        found[env] = path
    return found


def _run(joblist: dict, args, only: str = "") -> int:
    from conformance.tools import job_run

    chosen = joblist["jobs"]
    if only:
        ids = [i.strip() for i in only.split(",") if i.strip()]
        unknown = [i for i in ids if i not in {job["id"] for job in chosen}]
        if unknown:
            raise joblists.JobsError(f"--only: no job {unknown[0]!r} in the list; `conformance jobs list` names them")
        chosen = [job for job in chosen if job["id"] in ids]
    results = job_run.run_jobs(chosen, Path(args.root), _pythons(args.python), args.parallel, args.rerun,
                               joblist.get("env"))
    stopped = [r.id for r in results if r.status == "stopped"]
    if stopped:
        print(f"conformance jobs: {len(stopped)} job(s) stopped ({', '.join(stopped)}); the same command continues "
              "them, keeping every cell they finished", file=sys.stderr)
        return 1
    return 0


def cmd_list(joblist: dict, args) -> int:
    text = json.dumps(joblist, indent=1) + "\n"
    if args.github:
        print(json.dumps(joblists.github_matrix(joblist), separators=(",", ":")))
    if args.output:
        from conformance.tools import cli

        cli._write({Path(args.output): text})
        if not args.github:
            for job in joblist["jobs"]:
                print(f"{job['id']}: {len(job['classes'])} classes, about {job['wall_seconds']:.0f} s")
            walls = joblist["wall_seconds"]
            print(f"{len(joblist['jobs'])} jobs: about {walls['one_machine']:.0f} s one after another, "
                  f"{walls['runners']:.0f} s on one runner each; wrote {args.output}")
    elif not args.github:
        sys.stdout.write(text)
    return 0


def main(argv: list[str]) -> int:
    from conformance.tools import job_publish
    from conformance.tools.cli import CliError

    argv = list(argv)
    pytest_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    args = build_parser(CliError).parse_args(argv)
    try:
        joblist = _joblist(args, pytest_args)
        if args.command == "list":
            return cmd_list(joblist, args)
        if args.command == "run":
            return _run(joblist, args, args.only)
        if not args.no_run and _run(joblist, args):
            return 1
        for path in job_publish.publish(joblist, Path(args.root)):
            print(f"wrote {path}")
        return 0
    except joblists.JobsError as exc:
        raise CliError(str(exc)) from None
