"""The `conformance` command: it parses the options and dispatches each subcommand to the module that owns it.

    conformance list
    conformance render RUN.json [-o OUT.md]
    conformance render --html RUN.json [RUN2.json ...] [-o OUT.html]
    conformance render --summary RUN.json
    conformance publish RUN.json [EXTRA.json ...] [--root DIR] [--no-screenshot]
    conformance diff OLD.json NEW.json
    conformance truth RUN.json
    conformance merge A.json B.json ... -o OUT.json
    conformance merge --parts DIR -o OUT.json [--device D --dtype T --backend B]
    conformance explain CLASS CHECK [--device D --dtype T --backend B]
    conformance expectations --update RUN.json [--file PATH]
    conformance expectations --migrate-sites PATH... [--dry-run]
    conformance plan [--changed-files PATH... | --since REF --transformers-repo DIR] [--budget S] [--json]
    conformance flags RUN.json [RUN2.json ...] [--patch [--transformers-repo DIR]] [--check] [-o OUT]
    conformance findings RUN.json [RUN2.json ...] [--group ID] [--json] [-o OUT.md]
    conformance findings RUN.json [...] --repro DIR [--verify [--keep-verified] [--python PATH]] [--group ID]
                     [--timeout S]
    conformance findings RUN.json [...] --issue ID|top [--repro DIR] [-o OUT.md]
    conformance bench [ARGS...]
    conformance versions [--ci]
    conformance jobs list|status|run|publish|gate [...] [-- PYTEST_ARGS]
    conformance sample classes|compare [...]

Where each lives: `render`, `diff`, `truth`, `merge`: `tools.run_files`; `publish`: `tools.publishing`; `list`,
`versions`, `expectations`: `tools.suite_data`; `findings`, `flags`: `tools.upstream`; `explain`: `tools.explain`;
`plan`: `tools.job_gate` (it previews `jobs gate`); `bench`: `tools.bench` (which parses its own options, as it
imports torch); `jobs`: `tools.jobs_cli`; `sample`: `tools.sample`. Every parser is an `errors.CommandParser`.

Contract: `main(argv) -> int` returns the exit status. Bad input (a missing
or malformed file, an unknown class or check, an unwritable output) prints
one line on stderr and returns 2 without writing anything; `diff` returns 1
when a cell regressed; `truth` returns 1 when a passing cell records a
comparison beyond its check's tolerance; `explain` returns 1 when the cell does not pass;
`flags --check` returns 1 when a declared flag disagrees unambiguously with the observation;
`plan` returns `NOTHING_TO_CHECK` (10, as a run does) when the changed files are real but affect no class,
printing "nothing to check: ..." (with --json: its `nothing_to_check`), and 2 for a path that names no
file of the transformers being gated. A reader that closes the pipe early
(`conformance diff ... | head`) ends any command quietly with 141 (128 + SIGPIPE).
Heavy imports (torch, transformers) happen only in the subcommands that
need them.
"""

from __future__ import annotations

import argparse
import os
import sys

from conformance.report import envelope as report
from conformance.report import render
from conformance.tools import explain, job_gate, jobs_cli, publishing, run_files, sample, suite_data, upstream
from conformance.tools.errors import USAGE_ERROR, CliError, CommandParser

BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports of a tool whose reader closed the pipe


def run_bench(argv: list[str]) -> int:
    import importlib

    try:
        bench = importlib.import_module("conformance.tools.bench")
    except ModuleNotFoundError as exc:
        if exc.name == "conformance.tools.bench":
            raise CliError("bench: conformance.tools.bench is not available in this checkout; update the suite") from None
        raise CliError(f"bench: cannot import conformance.tools.bench ({exc}); install the missing package") from None
    main_fn = getattr(bench, "main", None)
    if main_fn is None:
        raise CliError("bench: conformance.tools.bench has no main(argv); update the suite")
    return int(main_fn(argv) or 0)


# --------------------------------------------------------------------------- parser


def _add_run_options(parser, device_default="auto"):
    parser.add_argument("--device", default=device_default, help="cpu, cuda, cuda:N or auto")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--backend", default="eager", help="dynamo backend: eager, aot_eager, inductor")


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="conformance", description="vlm-conformance: run files, reports and tools.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("list", help="discovered classes: model_type, kind, modalities")
    p.set_defaults(func=suite_data.list_command)

    p = sub.add_parser("render", help="Markdown matrix of a run; --html: one page of one or more runs; --summary")
    p.add_argument("runs", nargs="+", metavar="RUN.json")
    p.add_argument("--html", action="store_true",
                   help="write one self-contained HTML page, several runs side by side (default: RUN.html beside RUN.json)")
    p.add_argument("--summary", action="store_true", help="print the short summary the run prints at its end")
    p.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout (with --html: instead of RUN.html)")
    p.set_defaults(func=run_files.render_command)

    p = sub.add_parser("publish", help="publish a run (its extras' runs merged in): reports/matrix.json, MATRIX.md, "
                       "matrix.html, the README section (`jobs publish` publishes a job list's runs the same way)")
    p.add_argument("run", metavar="RUN.json")
    p.add_argument("extra", nargs="*", metavar="EXTRA.json",
                   help="run files of the extras' environments (e.g. reports/latest/onnx.json), merged into RUN.json")
    p.add_argument("--root", default=".", help="repository root holding README.md (default: .)")
    p.add_argument("--no-screenshot", dest="screenshot", action="store_false",
                   help="leave reports/matrix.png as it is (default: retake it with headless Chromium where installed)")
    p.set_defaults(func=publishing.publish_command)

    p = sub.add_parser("diff", help="cells whose verdict changed; exit 1 on a regression")
    p.add_argument("old", metavar="OLD.json")
    p.add_argument("new", metavar="NEW.json")
    p.set_defaults(func=run_files.diff_command)

    p = sub.add_parser("truth", help="passing cells whose recorded comparison exceeds the tolerance; exit 1 if any")
    p.add_argument("run", metavar="RUN.json")
    p.set_defaults(func=run_files.truth_command)

    p = sub.add_parser("merge", help="merge run files (shards, extras' runs), or rebuild one from part files")
    p.add_argument("runs", nargs="*", metavar="RUN.json")
    p.add_argument("--parts", metavar="DIR", help="a <matrix-out>.parts directory of an interrupted run")
    p.add_argument("-o", "--output", required=True, metavar="OUT.json")
    p.add_argument("--replace", action="store_true", help="each file's cells replace the same cells of the files "
                   "before it (republish reruns over a published matrix); default: files must be disjoint")
    _add_run_options(p, device_default="cpu")
    p.set_defaults(func=run_files.merge_command)

    p = sub.add_parser("explain", help="re-run one cell with its full traceback and a reproducer",
                       description="Re-run one cell of the matrix (CLASS x CHECK) as the matrix runs it, judged "
                       "against the expectations, with its full traceback and a one-line reproducer. Exits 0 when "
                       "the cell passes (or is skipped), 1 when it does not (a known failure, xfail, included), 2 on "
                       "bad input.")
    p.add_argument("model", metavar="CLASS", help="a discovered class (`conformance list`): its name, e.g. "
                   "LlavaForConditionalGeneration, or its model type, e.g. llava, in any case")
    p.add_argument("check", metavar="CHECK", help="a check id, a column of the matrix: build, compile_prefill, "
                   "static_cache, export_forward, ... (an unknown id lists them)")
    _add_run_options(p)
    p.set_defaults(func=explain.explain_command)

    p = sub.add_parser("expectations", help="rewrite the expectations file from a run, or judge a run again")
    p.add_argument("--update", metavar="RUN.json", help="rewrite the expectations file from this run's cells")
    p.add_argument("--judge", metavar="RUN.json", help="judge this run's cells again against the expectations "
                   "as they are now (no cell runs), written to -o")
    p.add_argument("-o", "--output", metavar="OUT.json", help="with --judge: the run file to write")
    p.add_argument("--file", metavar="PATH", help="expectations file (default: the installed version's)")
    p.add_argument("--migrate-sites", nargs="+", metavar="PATH", help="rename the fingerprint sites of these "
                   "expectations files or run files to today's rule, read in this environment's transformers")
    p.add_argument("--dry-run", action="store_true",
                   help="with --migrate-sites: say what would be renamed, write nothing")
    p.set_defaults(func=suite_data.expectations_command)

    p = sub.add_parser("plan", help="impacted classes and how many gate shards fit a time budget")
    p.add_argument("--models", default="", help="comma-separated class names, model types (llava) or globs, any "
                   "case; :ci for the CI classes (default: all)")
    p.add_argument("--changed-files", nargs="+", default=[], metavar="PATH", help="changed transformers files")
    p.add_argument("--since", default="", metavar="REF", help="git ref: changes from `git diff REF`")
    p.add_argument("--transformers-repo", default="", metavar="DIR", help="a transformers checkout, for --since")
    gate = job_gate.GateRequest  # plan previews the gate: its defaults are the gate's
    p.add_argument("--budget", type=float, default=gate.budget,
                   help=f"seconds a shard (and each gate job) may take (default: {gate.budget:g}, the gate's; a CI "
                        "matrix of small runners names its own, e.g. 120)")
    p.add_argument("--workers", type=int, default=gate.workers,
                   help=f"xdist workers per shard (default: {gate.workers}, the gate's)")
    p.add_argument("--json", action="store_true", help="one JSON object (classes, shards, specs) for a CI matrix")
    p.set_defaults(func=job_gate.plan_command)

    p = sub.add_parser("versions", help="the supported transformers versions and how CI tests each")
    p.add_argument("--ci", action="store_true", help="`env constraints classes` per version CI runs a subset of")
    p.set_defaults(func=suite_data.versions_command)

    p = sub.add_parser("flags", help="declared compile/static-cache flags vs the run; --patch: a diff setting them")
    p.add_argument("runs", nargs="+", metavar="RUN.json", help="run files of one transformers version; an "
                   "inductor run (environment.backend) decides the compile flag where it observed the class")
    p.add_argument("--patch", action="store_true", help="print a unified diff against the transformers source")
    p.add_argument("--transformers-repo", default="", metavar="DIR",
                   help="the transformers checkout to patch (default: the installed package)")
    p.add_argument("--check", action="store_true", help="exit 1 when a declared flag disagrees with the run")
    p.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout")
    p.set_defaults(func=upstream.flags_command)

    p = sub.add_parser("findings", help="failing cells grouped by root cause, Markdown for upstream issues")
    p.add_argument("runs", nargs="+", metavar="RUN.json")
    p.add_argument("--group", default="", metavar="ID", help="only this group's section, ready to paste")
    p.add_argument("--json", action="store_true", help="the groups as JSON (id, kind, where, classes, cells)")
    p.add_argument("-o", "--output", metavar="OUT.md", help="write here instead of stdout")
    p.add_argument("--repro", metavar="DIR", default="",
                   help="write a standalone reproducer script per upstream group, README.md and index.json into DIR")
    p.add_argument("--verify", action="store_true",
                   help="with --repro: run each script alone (the suite not importable) and compare its failure")
    p.add_argument("--timeout", type=float, default=600.0, metavar="S", help="seconds per script with --verify")
    p.add_argument("--keep-verified", action="store_true",
                   help="with --verify: keep the verdict of a script of DIR's index whose text is unchanged, and run "
                        "only the others (a verification resumed in the same venv)")
    p.add_argument("--python", default=sys.executable, metavar="PATH",
                   help="with --verify: the interpreter of a venv without the suite (default: this one, run -I)")
    p.add_argument("--issue", default="", metavar="ID|top",
                   help="an upstream issue text for group ID, ready to paste (its script from --repro DIR when "
                        "there, else written now); 'top': the ten ranked first, into DIR/issues/ (needs --repro)")
    p.set_defaults(func=upstream.findings_command)

    sub.add_parser("bench", help="decode speed, eager vs compiled (`bench --suite RUN.json`: what the matrix itself "
                   "costs per check); conformance.tools.bench", add_help=False)
    p = sub.add_parser("jobs", help="the publishing run as jobs: list, status, run, amend, publish, and gate (the "
                       "pre-merge gate's jobs)", description=jobs_cli.DESCRIPTION)
    jobs_cli.add_commands(p)
    p.set_defaults(func=jobs_cli.run_command)
    p = sub.add_parser("sample", help="CI's rotating rerun of the published matrix: the day's classes, and the rerun "
                       "cells that differ from the published ones", description=sample.DESCRIPTION)
    sample.add_commands(p)
    p.set_defaults(func=sample.run_command)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["bench"]:
            return run_bench(argv[1:])
        argv, pytest_args = jobs_cli.split_pytest_args(argv) if argv[:1] == ["jobs"] else (argv, [])
        args = build_parser().parse_args(argv)
        args.pytest_args = pytest_args
        return args.func(args)
    except (CliError, report.EnvelopeError, render.SectionError) as exc:
        print(f"conformance: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        print("conformance: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader left (`conformance diff ... | head`): stop quietly, as a Unix tool does
        _silence_stdout()
        return BROKEN_PIPE


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's flush at exit does not raise the same error again."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a test's captured stdout): nothing will flush to the pipe
        pass


if __name__ == "__main__":
    sys.exit(main())
