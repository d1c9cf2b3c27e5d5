"""What goes upstream from a run: `conformance findings` (failing cells grouped by root cause, their reproducers and
issue texts) and `conformance flags` (declared flags vs the observation, and the transformers patch that sets them).

Contracts:

* `findings_command(args)` and `flags_command(args)` are those subcommands (`cli` parses their options; the
  contracts of what they print are `report.findings`, `report.repro`, `report.repro_issue`, `report.flag_advice`
  and `tools.flag_patch`). They return the exit status (`flags --check`: 1 when a declared flag disagrees
  unambiguously with the observation) and raise `CliError` for bad input, before writing anything.
* `expectation_links(envelopes)` is (class, check) -> the link of the expectation listing the cell, for the runs'
  conditions, and a note when the expectations could not be read (the findings are then written without links).
"""

from __future__ import annotations

import sys
from pathlib import Path

from conformance.report import envelope as report
from conformance.tools.errors import CliError, write_files
from conformance.tools.run_files import emit


def flags_command(args) -> int:
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
    emit(text, args.output)
    if args.check and disagree:
        print(f"conformance flags: {len(disagree)} declared flag(s) disagree with the observation", file=sys.stderr)
        return 1
    return 0


def expectation_links(envelopes: list[dict]) -> tuple[dict[tuple[str, str], str], str]:
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


def findings_command(args) -> int:
    import json

    from conformance.report import findings

    from conformance.report.upstream_threads import UpstreamFileError

    envelopes = [report.load_envelope(run) for run in args.runs]
    links, note = expectation_links(envelopes)
    if note:
        print(f"conformance findings: {note}", file=sys.stderr)
    try:
        groups = findings.group_failures(envelopes, list(args.runs), links)
    except UpstreamFileError as exc:
        raise CliError(f"findings: {exc}") from None
    if args.verify and not args.repro:
        raise CliError("findings: --verify runs the scripts of --repro DIR; name the folder")
    if args.issue:
        return _findings_issue(args, groups, envelopes)
    if args.repro:
        return _findings_repro(args, groups, envelopes)
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
    emit(text, args.output, f": {len(groups)} group(s)")
    return 0


def issue_text(group, envelopes, folder: Path | None, sources: list[str]) -> str:
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
        # the texts written before stay current: rewritten while their group is in the runs, else removed
        upstream = {g.id: g for g in groups if g.upstream}
        earlier = sorted((folder / repro.ISSUES).glob("*.md"))
        top = {g.id for g in ranked}
        kept = [upstream[path.stem] for path in earlier if path.stem in upstream.keys() - top]
        texts = {folder / repro.ISSUES / f"{g.id}.md": issue_text(g, envelopes, folder, list(args.runs))
                 for g in ranked + kept}
        write_files(texts)
        gone = [path for path in earlier if path.stem not in upstream]
        for path in gone:
            path.unlink()
        if (folder / repro.INDEX).exists():  # the README links each group's issue text
            import json

            entries = [repro.Entry(**g) for g in json.loads((folder / repro.INDEX).read_text())["groups"]]
            repro.write_index(entries, folder, list(args.runs), envelopes)
        print(f"wrote {len(texts)} issue text(s) into {folder / repro.ISSUES} (the top {len(ranked)}, "
              f"{len(kept)} written before and rewritten); removed {len(gone)} whose group is no longer in the runs")
        return 0
    group = next((g for g in groups if g.id == args.issue and g.upstream), None)
    if group is None:
        raise CliError(f"findings: no upstream group {args.issue!r} in these runs; `conformance findings "
                       "RUN.json` lists the ids")
    text = issue_text(group, envelopes, folder, list(args.runs))
    emit(text, args.output)
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

    if args.keep_verified and not args.verify:
        raise CliError("findings: --keep-verified keeps the verdicts of a --verify run; add --verify")
    previous = repro_verify.previous_verdicts(folder) if args.keep_verified else {}
    entries = repro.write_repro(groups, envelopes, list(args.runs), folder, only=args.group, progress=said)
    written = [e for e in entries if e.script]
    print(f"wrote {len(written)} script(s) for {len(entries)} upstream group(s) into {folder}")
    if not args.verify:
        return 0
    left = repro_verify.keep_verdicts(entries, folder, previous) if args.keep_verified else entries
    if args.keep_verified:
        print(f"kept {len(written) - len(left)} verdict(s) of unchanged scripts; verifying {len(left)}")
    repro_verify.verify(left, groups, folder, timeout=args.timeout, progress=said, python=args.python)
    repro.write_index(entries, folder, list(args.runs), envelopes)
    failed = [e for e in written if not e.verified]
    print(f"verified: {len(written) - len(failed)} of {len(written)} script(s) reproduce "
          f"(index: {folder / repro.README})")
    return 0
