"""The suite's own data as commands: `conformance list` (the discovered classes), `conformance versions` (the
supported transformers versions and how CI tests each) and `conformance expectations` (the known failures: rewritten
from a run, a run judged again against them, their sites renamed to today's rule).

Contract: each `*_command(args)` is that subcommand (`cli` parses its options); it returns the exit status and
raises `CliError` for bad input, before writing anything. Heavy imports (transformers) happen inside them.
"""

from __future__ import annotations

import sys
from pathlib import Path

from conformance.report import envelope as report
from conformance.report import io
from conformance.tools.errors import CliError, write_files


def list_command(args) -> int:
    from conformance.discover import discover

    infos = discover()
    width = max((len(i.name) for i in infos), default=0)
    type_width = max((len(i.model_type) for i in infos), default=0)
    kind_width = max((len(i.kind) for i in infos), default=0)
    for info in infos:
        print(f"{info.name:<{width}}  {info.model_type:<{type_width}}  {info.kind:<{kind_width}}  "
              f"{','.join(info.modalities)}")
    print(f"{len(infos)} classes", file=sys.stderr)
    return 0


def versions_command(args) -> int:
    from conformance import versions

    try:
        supported, models, gate_models = versions.supported(), versions.ci_models(), versions.gate_ci_models()
    except versions.VersionsError as exc:
        raise CliError(str(exc)) from None
    for version in supported:
        if args.ci:  # what .ci/run reads: one line per version it tests with the subset
            if not version.is_gate and version.ci:
                print(version.env, version.constraints, ",".join(models))
            continue
        how = (f"meta tests, {len(gate_models)} classes (--models :ci, [ci] gate)" if version.is_gate
               else f"meta tests, {len(models)} classes ([ci] models)" if version.ci else "none (a publishing run)")
        torch = f" torch {version.torch}" if version.torch else ""
        print(f"transformers {version.transformers:<8}{torch} tox -e {version.env:<6} "
              f"constraints/{version.constraints:<10} CI: {how}")
    return 0


def expectations_command(args) -> int:
    if args.migrate_sites:
        return _migrate_sites([Path(path) for path in args.migrate_sites], write=not args.dry_run)
    if bool(args.update) == bool(args.judge):
        raise CliError("expectations: pass --update RUN.json (rewrite the file from a run) or --judge RUN.json "
                       "-o OUT.json (judge a run again against the file), one of them")
    if args.judge and not args.output:
        raise CliError("expectations --judge: name the file to write with -o OUT.json (it may be RUN.json itself)")
    envelope = report.load_envelope(args.update or args.judge)
    from conformance.gate.expectations import ExpectationsError

    try:
        if args.judge:
            from conformance.discover import class_index
            from conformance.gate.judging import judge_envelope

            judged, changed = judge_envelope(envelope, Path(args.file) if args.file else None, classes=class_index())
            write_files({Path(args.output): io.json_text(judged)})
            print(f"wrote {args.output}: {changed} cells' verdicts changed by today's expectations")
            return 0
        from conformance.gate.update import update_expectations

        written = update_expectations(Path(args.update), Path(args.file) if args.file else None)
    except ExpectationsError as exc:
        raise CliError(str(exc)) from None
    print(f"wrote {written}")
    return 0


def _migrate_sites(paths: list[Path], write: bool) -> int:
    """Each file's fingerprint sites renamed to today's rule (`conformance.gate.sites`), in this environment's
    transformers (run it in the env of the version the files were made with)."""
    from conformance.gate.sites import migrate_file

    for path in paths:
        try:
            renames = migrate_file(path, write=write)
        except (OSError, ValueError) as exc:
            raise CliError(f"expectations --migrate-sites: {exc}") from None
        print(f"{path}: {len(renames)} site(s) {'renamed' if write else 'to rename'}")
        for (old, new), count in sorted(_counted(renames).items()):
            print(f"  {count} x {old} -> {new}")
    return 0


def _counted(pairs: list) -> dict:
    counts: dict = {}
    for pair in pairs:
        counts[pair] = counts.get(pair, 0) + 1
    return counts
