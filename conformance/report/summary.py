"""Stage 4, report: the short summary of a run, as a person reads it at the end of a terminal.

Contracts:

* `tally(envelope)` counts each check's cells as pass, known (xfail: listed
  in the expectations), gaps (the known ones that are the suite's own,
  `is_gap`: a harness gap 🚧), new (fail, error,
  timeout: not listed, and xpass: a stale expectation) and n/a (skip), with
  the new ones by verdict.
* `near_edge(envelope)` are the comparing cells whose worst ratio to the
  allowed difference (`worst_ratio`, `cache_worst_ratio`) sits within
  `tolerances.NEAR_EDGE` of 1 on their side: where a verdict can flip with
  the machine or the day.
* `regressions(envelope)` are the fail, error and timeout cells (never
  listed: a listed one is xfail); `stale(envelope)` the xpass cells.
* `summary_lines(envelope, paths)` is the summary: a header, one line per
  check the run has a cell of (`ran`: not the columns it did not select or
  could not run, whose reasons its header printed), the regressions, stale expectations and cells near the edge by name
  (at most `limit` each, then "and N more"), the paths given: at most 2 +
  checks + 3 * (limit + 2) lines and the paths.
* A gate's envelope (`gate_run`, `tools.job_gate`) adds one line saying
  which published columns it ran and which it did not, with why (a gate
  that skipped a published column is never silently green); judged against
  its merge base (`merge_base`, `gate.merge_base`), two more sections: the
  cells already failing on the base (never blocking) and those fixed by the
  change (the change's own regressions are among the regressions, each note
  naming what changed from the base).

Pure functions of the envelope (no clock, no filesystem): the run prints
them, and so does `conformance render --summary`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, NamedTuple

from conformance import tolerances
from conformance.fingerprints import SUITE_OWN_KINDS
from conformance.verdicts import passed

NEW = ("fail", "error", "timeout", "xpass")  # what the expectations do not account for: a red gate
REGRESSING = ("fail", "error", "timeout")
LIMIT = 10  # regressions (and stale expectations) named before "and N more"
WIDTH = 120  # a named cell's line is cut to this many characters


class Tally(NamedTuple):
    passed: int
    known: int  # listed model failures (harness gaps excluded)
    new: int
    not_applicable: int
    new_by_verdict: dict[str, int]
    gaps: int = 0  # listed harness gaps: the suite's own


class Cell(NamedTuple):
    model: str
    check: str
    verdict: str
    reason: str
    expected: str
    note: str = ""  # the gate's note: why a listed cell is not xfail


def tally(envelope: dict) -> dict[str, Tally]:
    """Check -> its counts, in the envelope's column order (checks only in the summary last)."""
    summary = envelope["summary"]
    checks = list(envelope["checks"]) + [c for c in summary if c not in envelope["checks"]]
    gaps: dict[str, int] = {}
    for row in envelope["models"].values():
        for check_id, cell in row.get("cells", {}).items():
            if is_gap(cell):
                gaps[check_id] = gaps.get(check_id, 0) + 1
    result = {}
    for check_id in checks:
        counts = summary.get(check_id, {})
        new = {v: counts.get(v, 0) for v in NEW if counts.get(v, 0)}
        result[check_id] = Tally(counts.get("pass", 0), counts.get("xfail", 0) - gaps.get(check_id, 0),
                                 sum(new.values()), counts.get("skip", 0), new, gaps.get(check_id, 0))
    return result


def is_gap(cell: dict) -> bool:
    """A listed harness gap (🚧): an xfail whose check itself said `error` (its ``observed``) and whose fingerprint,
    where the run recorded one, is one of `fingerprints.SUITE_OWN_KINDS` (the suite could not set the cell up, its
    own code raised, or its worker died), never a finding about the model. The one home of this test: the tables, the page, the summary
    and the flag tables ask it."""
    if cell.get("verdict") != "xfail" or cell["observed"] != "error":
        return False
    fingerprint = cell.get("fingerprint")
    return not fingerprint or fingerprint.get("kind") in SUITE_OWN_KINDS


RATIOS = ("worst_ratio", "cache_worst_ratio")


def near_edge(envelope: dict) -> list[tuple[str, str, str, float]]:
    """(model, check, verdict, ratio) of every comparing cell near its tolerance's edge (see the module)."""
    found = []
    for model, row in sorted(envelope["models"].items()):
        for check_id, cell in sorted(row.get("cells", {}).items()):
            metrics = cell.get("metrics") or {}
            ratios = [metrics[k] for k in RATIOS if isinstance(metrics.get(k), (int, float))]
            if not ratios:
                continue
            ratio = max(ratios)
            if tolerances.near_edge(ratio, passed(cell)):
                found.append((model, check_id, cell["verdict"], float(ratio)))
    return found


def cells_with(envelope: dict, verdicts: Iterable[str]) -> list[Cell]:
    """The cells with one of `verdicts`, by class, then in column order."""
    verdicts = tuple(verdicts)
    order = {c: i for i, c in enumerate(envelope["checks"])}
    found = []
    for model, row in sorted(envelope["models"].items()):
        for check_id, cell in sorted(row["cells"].items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])):
            if cell["verdict"] in verdicts:
                found.append(Cell(model, check_id, cell["verdict"], cell.get("reason", ""), cell.get("expected", ""),
                                  cell.get("gate", "")))
    return found


def regressions(envelope: dict) -> list[Cell]:
    return cells_with(envelope, REGRESSING)


def stale(envelope: dict) -> list[Cell]:
    return cells_with(envelope, ("xpass",))


def listed_not_applicable(envelope: dict) -> list[Cell]:
    """Cells an expectation lists as failing whose check now does not apply (skip): the entry matches nothing."""
    return [c for c in cells_with(envelope, ("skip",)) if c.expected]


def header(envelope: dict) -> str:
    env = envelope["environment"]
    classes, checks = len(envelope["models"]), len(ran(envelope))
    peak = env.get("peak_rss_mib")
    return (f"conformance: {_count(classes, 'class', 'classes')} x {_count(checks, 'check', 'checks')} · "
            f"transformers {env['transformers']} · "
            f"torch {env['torch']} · {env['device']} · {env['dtype']} · {env['backend']}"
            + (f" · peak RSS {peak:.0f} MiB" if isinstance(peak, (int, float)) else ""))


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"


def ran(envelope: dict) -> dict[str, Tally]:
    """`tally` of the checks with a cell in this run: a column the run did not select or could not run (its
    header said why) has no row in the summary."""
    return {check_id: t for check_id, t in tally(envelope).items()
            if t.passed or t.known or t.new or t.not_applicable or t.gaps}


def check_lines(envelope: dict) -> list[str]:
    counts = ran(envelope)
    width = max([len("check")] + [len(c) for c in counts])
    lines = [f"  {'check':<{width}}  {'pass':>5}  {'known':>5}  {'gaps':>5}  {'new':>5}  {'n/a':>5}"]
    for check_id, t in counts.items():
        detail = ", ".join(f"{n} {v}" for v, n in t.new_by_verdict.items())
        lines.append(f"  {check_id:<{width}}  {t.passed:>5}  {t.known:>5}  {t.gaps:>5}  {t.new:>5}"
                     f"  {t.not_applicable:>5}" + (f"  ({detail})" if detail else ""))
    return lines


def _cut(text: str, width: int = WIDTH) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def named(title: str, note: str, cells: list[Cell], describe, limit: int = LIMIT) -> list[str]:
    """`title (N): note` and one line per cell, at most `limit`, then `and N more`; `title: none` when empty."""
    if not cells:
        return [f"{title}: none"]
    lines = [f"{title} ({len(cells)}): {note}"]
    lines += [_cut(f"  {c.model} / {c.check}: {describe(c)}") for c in cells[:limit]]
    if len(cells) > limit:
        lines.append(f"  and {len(cells) - limit} more")
    return lines


def gate_line(envelope: dict) -> list[str]:
    """A gate's one line on the published columns it ran and did not run (none for another run)."""
    record = envelope.get("gate_run")
    if not record:
        return []
    groups = ", ".join(record["groups"])
    published, missing = record.get("published") or [], record.get("not_run") or {}
    if not missing:
        return [f"gate: ran every published column ({len(record['columns'])}; groups {groups}) for "
                f"{record['classes']} classes"]
    why = "; ".join(f"{c}: {reason}" for c, reason in missing.items())
    return [_cut(f"gate: ran {len(published) - len(missing)} of the {len(published)} published columns (groups "
                 f"{groups}) for {record['classes']} classes; NOT RUN: {why}", 3 * WIDTH)]


def base_lines(envelope: dict, limit: int = LIMIT) -> list[str]:
    """The cells judged against the merge base: already failing there, and fixed by the change (none for a run
    without a base)."""
    record = envelope.get("merge_base")
    if not record:
        return []
    def cells(pairs):
        found = []
        for model, check in pairs:
            cell = envelope["models"][model]["cells"][check]
            found.append(Cell(model, check, cell["verdict"], cell.get("reason", ""), "", cell.get("gate", "")))
        return found

    head = [f"judged against the merge base {record['base'][:12]}: {record['judged']} cells"
            + (f" ({record['not_at_base']} not at the base: judged by the release expectations)"
               if record.get("not_at_base") else "")]
    head += named("already failing on the base", "red there too, the same failure: not this change's, never "
                  "blocking", cells(record["already_failing"]), lambda c: c.note, limit)
    head += named("fixed by this change", "failing on the base, passing here", cells(record["fixed"]),
                  lambda c: c.note, limit)
    return head


def summary_lines(envelope: dict, paths: Iterable[str | Path] = (), limit: int = LIMIT) -> list[str]:
    """The short summary (see the module's contract), without trailing newlines."""
    lines = [header(envelope)] + gate_line(envelope) + check_lines(envelope) + base_lines(envelope, limit)
    lines += named("regressions", "fail, error or timeout, not listed in the expectations or not as listed",
                   regressions(envelope), lambda c: f"{c.verdict}: " + (f"{c.note} | " if c.note else "")
                   + (" ".join(c.reason.split()) or "(no reason recorded)"), limit)
    lines += named("stale expectations", "passed, or failed with fewer breaks than listed: remove or tighten them",
                   stale(envelope), lambda c: f"listed as {c.expected or 'failing'}"
                   + (f": {c.note}" if c.note else ""), limit)
    unmatched = listed_not_applicable(envelope)
    lines += [] if not unmatched else named("listed but not applicable", "an expectation lists a failure where the check now does not "
                   "apply: remove it (`conformance expectations --update RUN.json`)", unmatched,
                   lambda c: f"listed as {c.expected}; now: " + " ".join(c.reason.split())[:160], limit)
    edge = [Cell(m, c, v, f"worst ratio {r:.2f} of the allowed difference", "") for m, c, v, r in near_edge(envelope)]
    lines += named("near the edge", f"a comparison within {tolerances.NEAR_EDGE:g}x of its tolerance: a verdict "
                   "another machine or day could flip", edge, lambda c: f"{c.verdict}, {c.reason}", limit)
    paths = [str(p) for p in paths]
    if paths:
        lines.append("files: " + paths[0])
        lines += [f"       {p}" for p in paths[1:]]
    return lines


def summary_text(envelope: dict, paths: Iterable[str | Path] = (), limit: int = LIMIT) -> str:
    return "\n".join(summary_lines(envelope, paths, limit)) + "\n"
