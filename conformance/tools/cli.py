"""The `conformance` command.

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
    conformance findings RUN.json [...] --repro DIR [--verify [--python PATH]] [--group ID] [--timeout S]
    conformance findings RUN.json [...] --issue ID|top [--repro DIR] [-o OUT.md]
    conformance bench [ARGS...]
    conformance versions [--ci]
    conformance jobs list|status|run|publish|gate [...]   (the publishing run as jobs: conformance.tools.jobs_cli)
    conformance sample classes|compare [...]   (CI's rotating rerun of the published matrix: conformance.tools.sample)

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
from pathlib import Path

from conformance.report import diff, io, page, pages, render, summary, truth
from conformance.report import envelope as report
from conformance.tools.errors import USAGE_ERROR, CliError, write_files
from conformance.tools.publishing import published_files, published_picture
from conformance.tools.pytest_options import PytestOptions

BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports of a tool whose reader closed the pipe


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line instead of usage + message
        raise CliError(f"{message} (see `{self.prog} --help`)")


# --------------------------------------------------------------------------- commands


def cmd_render(args) -> int:
    if len(args.runs) > 1 and not (args.html or args.summary):
        raise CliError("render: several run files make one page side by side: add --html")
    if args.summary and args.output and not args.html:
        raise CliError("render: --summary prints to the terminal; -o names the Markdown or the --html page")
    envelopes = [report.load_envelope(run) for run in args.runs]
    if args.html:
        output = Path(args.output) if args.output else pages.beside(args.runs[0])[1]
        write_files({output: page.render_html(envelopes, [Path(run).name for run in args.runs])})
        print(f"wrote {output}")
    if args.summary:
        for run, envelope in zip(args.runs, envelopes):
            sys.stdout.write(summary.summary_text(envelope, [run] + [p for p in pages.beside(run) if p.exists()]))
    if args.html or args.summary:
        return 0
    text = render.render_markdown(envelopes[0])
    _emit(text, args.output)
    return 0


def _emit(text: str, output: str | None, note: str = "") -> None:
    """`text` into the file `output` (saying so, with `note`), else onto stdout."""
    if output:
        write_files({Path(output): text})
        print(f"wrote {output}{note}")
    else:
        sys.stdout.write(text)


def cmd_publish(args) -> int:
    """Publish one run file, or several merged into one (the main run and the runs of the extras' environments)."""
    runs = [args.run] + list(args.extra)
    envelopes = [report.load_envelope(path) for path in runs]
    envelope = envelopes[0] if len(envelopes) == 1 else report.merge_envelopes(envelopes, runs)
    files = published_files(envelope, Path(args.root))
    write_files(files)
    if len(runs) > 1:
        print(f"merged {len(runs)} run files: {', '.join(runs)}")
    for path in files:
        print(f"wrote {path}")
    if args.screenshot:
        print(published_picture(envelope, Path(args.root)))
    return 0


DIFF_HEADINGS = {
    "regression": "regressions",
    "improvement": "improvements",
    "changed": "other changes",
    "failure": "failures that changed under the same verdict (fingerprints)",
    "removed": "only in OLD (not run in NEW)",
    "added": "only in NEW",
}


def cmd_diff(args) -> int:
    old, new = report.load_envelope(args.old), report.load_envelope(args.new)
    for key in report.ENV_IDENTITY:
        before, after = old["environment"].get(key), new["environment"].get(key)
        if before != after:
            print(f"environment: {key} {before} -> {after}")
    changes = diff.diff_envelopes(old, new)
    if not changes:
        print("no verdict changed")
        return 0
    for kind in diff.CHANGE_ORDER:
        group = [c for c in changes if c.kind == kind]
        if not group:
            continue
        print(f"{DIFF_HEADINGS[kind]} ({len(group)}):")
        for c in group:
            reason = f"  {c.note or c.reason}" if (c.note or c.reason) and c.new not in ("pass", "absent") else ""
            print(f"  {c.model} / {c.check}: {c.old} -> {c.new}{reason}")
    regressions = sum(c.kind == "regression" for c in changes)
    print(f"{regressions} regression(s), {sum(c.kind == 'improvement' for c in changes)} improvement(s)")
    return 1 if regressions else 0


def cmd_truth(args) -> int:
    found = truth.breaches_in(args.run)
    for breach in found:
        print(breach.line())
    print(f"{len(found)} passing cell(s) record a comparison beyond their tolerance")
    return 1 if found else 0


def cmd_merge(args) -> int:
    if bool(args.parts) == bool(args.runs):
        raise CliError("merge: pass either shard run files or --parts DIR, not both or neither")
    if args.replace and len(args.runs) < 2:
        raise CliError("merge --replace: pass the run file to update first, then the reruns that replace its cells")
    replaced_note = ""
    if args.parts:
        env, note = None, ""
        if Path(args.parts).is_dir() and not (Path(args.parts) / report.PARTS_ENVIRONMENT).exists():
            device = args.device
            if device == "auto":
                import torch

                device = "cuda" if torch.cuda.is_available() else "cpu"
            env = report.environment(device, args.dtype, args.backend)
            note = (f"note: {args.parts} has no {report.PARTS_ENVIRONMENT}; environment taken from this machine "
                    f"with device {device}, dtype {args.dtype}, backend {args.backend}")
        envelope = report.envelope_from_parts(args.parts, env)
        if note:
            print(note, file=sys.stderr)
    elif args.replace:
        envelope, replaced = report.supersede([report.load_envelope(p) for p in args.runs], list(args.runs))
        replaced_note = f"; {replaced} cells of earlier files replaced by later ones"
    else:
        envelope = report.merge_envelopes([report.load_envelope(p) for p in args.runs], list(args.runs))
    write_files({Path(args.output): io.json_text(envelope)})
    cells = sum(len(r["cells"]) for r in envelope["models"].values())
    print(f"wrote {args.output}: {len(envelope['models'])} classes, {cells} cells{replaced_note}")
    return 0


def cmd_explain(args) -> int:
    from conformance.tools import explain

    try:
        return explain.explain(args.model, args.check, device=args.device, dtype=args.dtype, backend=args.backend)
    except explain.ExplainError as exc:
        raise CliError(str(exc)) from None


def cmd_list(args) -> int:
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


def cmd_expectations(args) -> int:
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
            from conformance.gate.rejudge import rejudge

            judged, changed = rejudge(envelope, Path(args.file) if args.file else None, classes=class_index())
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


def cmd_versions(args) -> int:
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


def cmd_plan(args) -> int:
    import json

    from conformance.cases.case import TransformersCases
    from conformance.run import shards as shard
    from conformance.run.options import NOTHING_TO_CHECK, UsageError, resolve_selection

    if not args.budget > 0 or args.workers < 1:
        raise CliError("plan: --budget must be a positive number of seconds and --workers at least 1")
    try:
        selection = resolve_selection(PytestOptions(args), TransformersCases())
    except UsageError as exc:
        raise CliError(str(exc)) from None
    names, nothing = selection.classes, selection.nothing_to_check
    from conformance.checks.common.registry import check_ids, opt_in_reason, unavailable
    from conformance.run.options import unavailable_checks

    not_run = unavailable_checks([], check_ids(), unavailable, opt_in_reason)  # a plain run's columns
    seconds = shard.published_estimates(checks=[c for c in check_ids() if c not in not_run])
    result = shard.plan(names, seconds, args.budget, args.workers)
    from conformance.tools import job_gate

    gate = None  # the whole gate (`conformance jobs gate`): every column group, budgeted per group
    if names and selection.impact:
        gate = job_gate.gate_joblist(job_gate.GateRequest(classes=tuple(names), root=Path("."), out=Path("."),
                                                          workers=args.workers, budget=args.budget))
    if args.json:
        print(json.dumps({"classes": names, "shards": result.shards, "specs": result.specs(),
                          "cell_seconds": result.cell_seconds, "wall_seconds": result.wall_seconds,
                          "changed_files": selection.changed_files, "nothing_to_check": nothing,
                          "gate": {"groups": job_gate.budget_by_group(gate), "jobs": [j["id"] for j in gate["jobs"]]}
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
        print("\n".join(job_gate.plan_lines(gate)))
    return 0


def cmd_flags(args) -> int:
    from conformance.report import flag_advice

    envelopes = [report.load_envelope(run) for run in args.runs]
    try:
        advice = flag_advice.advise(envelopes, list(args.runs))
    except flag_advice.AdviceError as exc:
        raise CliError(f"flags: {exc}") from None
    if args.transformers_repo and not args.patch:
        raise CliError("flags: --transformers-repo names the tree to patch: add --patch")
    where, not_patched, diff, notes = {}, {}, "", []
    if args.patch:
        from conformance.tools import flag_patch

        try:
            tree = flag_patch.SourceTree(args.transformers_repo or flag_patch.installed_package())
            model_types = {n: r.get("model_type", "") for e in envelopes for n, r in e["models"].items()}
            patch = flag_patch.make_patch(advice, tree, model_types)
        except flag_patch.PatchError as exc:
            raise CliError(f"flags: {exc}") from None
        where = {(c.advice.model, c.advice.flag): c.where() for c in patch.changes}
        not_patched = {(x.advice.model, x.advice.flag): x.why for x in patch.left_alone}
        diff, notes = patch.diff, patch.notes
    lines = flag_advice.summary_lines(advice, list(args.runs), where, not_patched) + [f"note: {n}" for n in notes]
    disagree = flag_advice.disagreeing(advice)
    if args.patch:
        lines.append(f"patch: {len(where)} class(es) in {diff.count('diff --git ')} file(s)"
                     + ("" if diff else "; nothing to change"))
        text = "".join(f"# {line}".rstrip() + "\n" for line in lines) + ("\n" + diff if diff else "")
    else:
        text = "\n".join(lines) + "\n"
    _emit(text, args.output)
    if args.check and disagree:
        print(f"conformance flags: {len(disagree)} declared flag(s) disagree with the observation", file=sys.stderr)
        return 1
    return 0


def _expectation_links(envelopes: list[dict]) -> tuple[dict[tuple[str, str], str], str]:
    """(class, check) -> the link of the expectation listing the cell, for the runs' conditions; a note when
    the expectations could not be read (the findings are written without links)."""
    from conformance.gate import expectations

    links: dict[tuple[str, str], str] = {}
    for envelope in envelopes:
        try:
            applied = expectations.load_for_environment(envelope["environment"])
        except expectations.ExpectationsError as exc:
            return links, f"expectation links left out: {exc}"
        links.update({key: e.link for key, e in applied.cells.items() if e.link})
    return links, ""


def cmd_findings(args) -> int:
    import json

    from conformance.report import findings

    envelopes = [report.load_envelope(run) for run in args.runs]
    groups = findings.group_failures(envelopes, list(args.runs))
    if args.verify and not args.repro:
        raise CliError("findings: --verify runs the scripts of --repro DIR; name the folder")
    if args.issue:
        return _findings_issue(args, groups, envelopes)
    if args.repro:
        return _findings_repro(args, groups, envelopes)
    links, note = _expectation_links(envelopes)
    if note:
        print(f"conformance findings: {note}", file=sys.stderr)
    if args.json:
        ranked = {g.id: (index, u) for index, (g, u) in enumerate(findings.rank(groups, envelopes), 1)}
        text = json.dumps([{"id": g.id, "kind": g.kind, "where": g.where, "by_reason": g.by_reason,
                            "upstream": g.upstream, "classes": g.classes,
                            "cells": [[c.model, c.check, c.verdict, args.runs[c.run]] for c in g.cells],
                            **({"rank": ranked[g.id][0], "site_in": findings.site_in(g),
                                "unlocks": {"cells": [list(c) for c in ranked[g.id][1].cells],
                                            "paths": ranked[g.id][1].paths}} if g.id in ranked else {})}
                           for g in groups if not args.group or g.id == args.group], indent=1) + "\n"
    else:
        try:
            text = findings.render_findings(groups, envelopes, list(args.runs), links, only=args.group)
        except KeyError:
            raise CliError(f"findings: no group {args.group!r} in these runs; the table of "
                           "`conformance findings RUN.json` lists the ids") from None
    _emit(text, args.output, f": {len(groups)} group(s)")
    return 0


def _issue_of(group, envelopes, folder: Path | None, sources: list[str]) -> str:
    """The issue text of one group: its script and verdict from `folder` (a --repro DIR) when there, else the
    script written now into a temporary folder."""
    import json
    import tempfile

    from conformance.report import repro, repro_issue

    known = {}
    if folder is not None and (folder / repro.INDEX).exists():
        known = {g["group"]: g for g in json.loads((folder / repro.INDEX).read_text())["groups"]}
    if group.id in known and known[group.id].get("script") and (folder / known[group.id]["script"]).exists():
        entry = repro.Entry(**known[group.id])
        return repro_issue.render_issue(group, envelopes, (folder / entry.script).read_text(), entry)
    with tempfile.TemporaryDirectory(prefix="conformance-issue-") as scratch:
        entry = repro.write_one(group, envelopes, Path(scratch))
        script = (Path(scratch) / entry.script).read_text() if entry.script else ""
    return repro_issue.render_issue(group, envelopes, script, entry if entry.script else None)


def _findings_issue(args, groups, envelopes) -> int:
    """`findings --issue ID|top`: an upstream issue text (see `conformance.report.repro_issue`)."""
    from conformance.report import findings, repro

    folder = Path(args.repro) if args.repro else None
    if args.issue == "top":
        if folder is None:
            raise CliError("findings: --issue top writes into DIR/issues/; name the folder with --repro DIR")
        ranked = [g for g, _ in findings.rank(groups, envelopes)][:findings.TOP]
        texts = {folder / repro.ISSUES / f"{g.id}.md": _issue_of(g, envelopes, folder, list(args.runs)) for g in ranked}
        write_files(texts)
        if (folder / repro.INDEX).exists():  # the README links each group's issue text
            import json

            entries = [repro.Entry(**g) for g in json.loads((folder / repro.INDEX).read_text())["groups"]]
            repro.write_index(entries, folder, list(args.runs), envelopes)
        print(f"wrote {len(texts)} issue text(s) into {folder / repro.ISSUES}")
        return 0
    group = next((g for g in groups if g.id == args.issue and g.upstream), None)
    if group is None:
        raise CliError(f"findings: no upstream group {args.issue!r} in these runs; `conformance findings "
                       "RUN.json` lists the ids")
    text = _issue_of(group, envelopes, folder, list(args.runs))
    _emit(text, args.output)
    return 0


def _findings_repro(args, groups, envelopes) -> int:
    """`findings --repro DIR [--verify]`: a standalone script per upstream group and its index; with --verify
    each script run alone and compared with its group, the index saying which reproduce (exit 0 either way: a
    script that does not reproduce is a finding of the index, listed with why)."""
    from conformance.report import repro, repro_verify

    folder = Path(args.repro)
    if args.group and not any(g.id == args.group and g.upstream for g in groups):
        raise CliError(f"findings: no upstream group {args.group!r} in these runs; `conformance findings "
                       "RUN.json` lists the ids")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"findings: cannot create {folder}: {exc.strerror or exc}") from None

    def said(entry) -> None:
        state = entry.script or f"no script: {entry.why}"
        if entry.verified is not None:
            state = f"{entry.script}: {'reproduces' if entry.verified else 'does not reproduce: ' + entry.why}" \
                    f" ({entry.seconds:.1f} s)"
        print(f"{entry.group}: {state}", file=sys.stderr, flush=True)

    entries = repro.write_repro(groups, envelopes, list(args.runs), folder, only=args.group, progress=said)
    written = [e for e in entries if e.script]
    print(f"wrote {len(written)} script(s) for {len(entries)} upstream group(s) into {folder}")
    if not args.verify:
        return 0
    repro_verify.verify(entries, groups, folder, timeout=args.timeout, progress=said, python=args.python)
    repro.write_index(entries, folder, list(args.runs), envelopes)
    failed = [e for e in written if not e.verified]
    print(f"verified: {len(written) - len(failed)} of {len(written)} script(s) reproduce "
          f"(index: {folder / repro.README})")
    return 0


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
    parser = _Parser(prog="conformance", description="vlm-conformance: run files, reports and tools.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")

    p = sub.add_parser("list", help="discovered classes: model_type, kind, modalities")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("render", help="Markdown matrix of a run; --html: one page of one or more runs; --summary")
    p.add_argument("runs", nargs="+", metavar="RUN.json")
    p.add_argument("--html", action="store_true",
                   help="write one self-contained HTML page, several runs side by side (default: RUN.html beside RUN.json)")
    p.add_argument("--summary", action="store_true", help="print the short summary the run prints at its end")
    p.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout (with --html: instead of RUN.html)")
    p.set_defaults(func=cmd_render)

    p = sub.add_parser("publish", help="write reports/matrix.json, MATRIX.md, matrix.html and the README section")
    p.add_argument("run", metavar="RUN.json")
    p.add_argument("extra", nargs="*", metavar="EXTRA.json",
                   help="run files of the extras' environments (e.g. reports/latest/onnx.json), merged into RUN.json")
    p.add_argument("--root", default=".", help="repository root holding README.md (default: .)")
    p.add_argument("--no-screenshot", dest="screenshot", action="store_false",
                   help="leave reports/matrix.png as it is (default: retake it with headless Chromium where installed)")
    p.set_defaults(func=cmd_publish)

    p = sub.add_parser("diff", help="cells whose verdict changed; exit 1 on a regression")
    p.add_argument("old", metavar="OLD.json")
    p.add_argument("new", metavar="NEW.json")
    p.set_defaults(func=cmd_diff)

    p = sub.add_parser("truth", help="passing cells whose recorded comparison exceeds the tolerance; exit 1 if any")
    p.add_argument("run", metavar="RUN.json")
    p.set_defaults(func=cmd_truth)

    p = sub.add_parser("merge", help="merge run files (shards, extras' runs), or rebuild one from part files")
    p.add_argument("runs", nargs="*", metavar="RUN.json")
    p.add_argument("--parts", metavar="DIR", help="a <matrix-out>.parts directory of an interrupted run")
    p.add_argument("-o", "--output", required=True, metavar="OUT.json")
    p.add_argument("--replace", action="store_true", help="each file's cells replace the same cells of the files "
                   "before it (republish reruns over a published matrix); default: files must be disjoint")
    _add_run_options(p, device_default="cpu")
    p.set_defaults(func=cmd_merge)

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
    p.set_defaults(func=cmd_explain)

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
    p.set_defaults(func=cmd_expectations)

    p = sub.add_parser("plan", help="impacted classes and how many gate shards fit a time budget")
    p.add_argument("--models", default="", help="comma-separated class names, model types (llava) or globs, any "
                   "case; :ci for the CI classes (default: all)")
    p.add_argument("--changed-files", nargs="+", default=[], metavar="PATH", help="changed transformers files")
    p.add_argument("--since", default="", metavar="REF", help="git ref: changes from `git diff REF`")
    p.add_argument("--transformers-repo", default="", metavar="DIR", help="a transformers checkout, for --since")
    p.add_argument("--budget", type=float, default=120.0, help="seconds a shard may take (default: 120)")
    p.add_argument("--workers", type=int, default=2, help="xdist workers per shard (default: 2)")
    p.add_argument("--json", action="store_true", help="one JSON object (classes, shards, specs) for a CI matrix")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("versions", help="the supported transformers versions and how CI tests each")
    p.add_argument("--ci", action="store_true", help="`env constraints classes` per version CI runs a subset of")
    p.set_defaults(func=cmd_versions)

    p = sub.add_parser("flags", help="declared compile/static-cache flags vs the run; --patch: a diff setting them")
    p.add_argument("runs", nargs="+", metavar="RUN.json", help="run files of one transformers version; an "
                   "inductor run (environment.backend) decides the compile flag where it observed the class")
    p.add_argument("--patch", action="store_true", help="print a unified diff against the transformers source")
    p.add_argument("--transformers-repo", default="", metavar="DIR",
                   help="the transformers checkout to patch (default: the installed package)")
    p.add_argument("--check", action="store_true", help="exit 1 when a declared flag disagrees with the run")
    p.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout")
    p.set_defaults(func=cmd_flags)

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
    p.add_argument("--python", default=sys.executable, metavar="PATH",
                   help="with --verify: the interpreter of a venv without the suite (default: this one, run -I)")
    p.add_argument("--issue", default="", metavar="ID|top",
                   help="an upstream issue text for group ID, ready to paste (its script from --repro DIR when "
                        "there, else written now); 'top': the ten ranked first, into DIR/issues/ (needs --repro)")
    p.set_defaults(func=cmd_findings)

    sub.add_parser("bench", help="decode speed, eager vs compiled (`bench --suite RUN.json`: what the matrix itself "
                   "costs per check); conformance.tools.bench", add_help=False)
    sub.add_parser("jobs", help="the publishing run as jobs: list, status, run, publish, and gate (the pre-merge "
                   "gate's jobs); conformance.tools.jobs_cli",
                   add_help=False)
    sub.add_parser("sample", help="CI's rotating rerun of the published matrix: the day's classes, and the rerun "
                   "cells that differ from the published ones; conformance.tools.sample", add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["bench"]:
            return run_bench(argv[1:])
        if argv[:1] == ["jobs"]:
            from conformance.tools import jobs_cli

            return jobs_cli.main(argv[1:])
        if argv[:1] == ["sample"]:
            from conformance.tools import sample

            return sample.main(argv[1:])
        args = build_parser().parse_args(argv)
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
