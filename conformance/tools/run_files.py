"""The commands over run files: `render`, `diff`, `truth` and `merge`; and the one merge of several runs.

Contracts:

* `merged(envelopes, sources, replace=False)` is the one envelope of several runs' envelopes (`sources` their
  names, in that order): shards and extras' runs joined (`report.merge_envelopes`: disjoint cells of one
  environment), or, with `replace`, each file's cells replacing the same cells of the files before it
  (`report.supersede`); second, how many cells were replaced (0 without `replace`). `conformance merge`,
  `conformance publish` and `jobs publish` (`job_publish.merge_version`) merge through it.
* `emit(text, output, note)` writes a command's text into the file `output` (saying so), else onto stdout.
* Each `*_command(args)` is one `conformance` subcommand (`cli` parses its options): it returns the exit
  status and raises `CliError` for bad input, before writing anything. `diff` returns 1 when a cell regressed,
  `truth` 1 when a passing cell records a comparison beyond its check's tolerance.
"""

from __future__ import annotations

import sys
from pathlib import Path

from conformance.report import diff, io, page, pages, render, summary, truth
from conformance.report import envelope as report
from conformance.tools.errors import CliError, write_files


def merged(envelopes: list[dict], sources: list[str], replace: bool = False) -> tuple[dict, int]:
    """One envelope of several runs (see the module's contract)."""
    if replace:
        return report.supersede(envelopes, sources)
    return report.merge_envelopes(envelopes, sources), 0


def emit(text: str, output: str | None, note: str = "") -> None:
    """`text` into the file `output` (saying so, with `note`), else onto stdout."""
    if output:
        write_files({Path(output): text})
        print(f"wrote {output}{note}")
    else:
        sys.stdout.write(text)


def render_command(args) -> int:
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
    emit(render.render_markdown(envelopes[0]), args.output)
    return 0


DIFF_HEADINGS = {
    "regression": "regressions",
    "improvement": "improvements",
    "changed": "other changes",
    "failure": "failures that changed under the same verdict (fingerprints)",
    "removed": "only in OLD (not run in NEW)",
    "added": "only in NEW",
}


def diff_command(args) -> int:
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


def truth_command(args) -> int:
    found = truth.breaches_in(args.run)
    for breach in found:
        print(breach.line())
    print(f"{len(found)} passing cell(s) record a comparison beyond their tolerance")
    return 1 if found else 0


def merge_command(args) -> int:
    if bool(args.parts) == bool(args.runs):
        raise CliError("merge: pass either shard run files or --parts DIR, not both or neither")
    if args.replace and len(args.runs) < 2:
        raise CliError("merge --replace: pass the run file to update first, then the reruns that replace its cells")
    replaced_note = ""
    if args.parts:
        envelope = _from_parts(args)
    else:
        envelope, replaced = merged([report.load_envelope(p) for p in args.runs], list(args.runs), args.replace)
        if args.replace:
            replaced_note = f"; {replaced} cells of earlier files replaced by later ones"
    write_files({Path(args.output): io.json_text(envelope)})
    cells = sum(len(r["cells"]) for r in envelope["models"].values())
    print(f"wrote {args.output}: {len(envelope['models'])} classes, {cells} cells{replaced_note}")
    return 0


def _from_parts(args) -> dict:
    """The envelope of an interrupted run's part files; where they hold no environment, this machine's (said on
    stderr) with the options' device, dtype and backend."""
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
    return envelope
