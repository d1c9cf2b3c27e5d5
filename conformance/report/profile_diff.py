"""Stage 4, report: where a checkpoint profile's row says otherwise than its class's default row.

Contract: `differences(envelopes)` pairs every profile row (row metadata with ``profile`` and ``class``:
`conformance.discover.profile_metadata`) with its class's default row, from the same run file or, when that file
has none, from the first of `envelopes` that has it (``conformance findings PROFILES.json reports/matrix.json``
compares a run of the profiles with the published default rows). A `Difference` is one column both rows hold
whose observed verdicts (``observed``: what the check itself said, a known failure counted as the failure it is)
differ; its `reason` is the profile's cell's, else the default's. `render(envelopes)` is the findings section: a
line per differing cell, grouped per profile row; nothing when no profile row is in the runs. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass


REASON_CHARS = 160


@dataclass(frozen=True)
class Difference:
    row: str  # the profile row, <ClassName>:<profile>
    checkpoint: str
    default: str  # the class's default row
    column: str
    profile_verdict: str
    default_verdict: str
    reason: str


def _default_row(name: str, own: dict, envelopes: list[dict]) -> dict | None:
    if name in own["models"]:
        return own["models"][name]
    return next((e["models"][name] for e in envelopes if name in e["models"]), None)


def profile_rows(envelopes: list[dict]) -> list[tuple[str, dict, dict]]:
    """(row name, row, its envelope) of every profile row of `envelopes`, first run first."""
    return [(name, row, e) for e in envelopes for name, row in sorted(e["models"].items()) if row.get("profile")]


def differences(envelopes: list[dict]) -> tuple[list[Difference], list[str]]:
    """The differing cells (see the module), and the profile rows whose default row is in none of the runs."""
    found, alone = [], []
    for name, row, own in profile_rows(envelopes):
        default_name = row.get("class", "")
        default = _default_row(default_name, own, envelopes)
        if default is None:
            alone.append(name)
            continue
        for column in sorted(set(row["cells"]) & set(default["cells"])):
            mine, theirs = row["cells"][column], default["cells"][column]
            if mine["observed"] != theirs["observed"]:
                reason = mine.get("reason") or theirs.get("reason") or ""
                found.append(Difference(name, row.get("checkpoint", ""), default_name, column, mine["observed"],
                                        theirs["observed"], " ".join(reason.split())))
    return found, alone


def _short(text: str) -> str:
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 3] + "..."


def render(envelopes: list[dict]) -> list[str]:
    """The Markdown section of the differences (see the module); [] when no run holds a profile row."""
    rows = profile_rows(envelopes)
    if not rows:
        return []
    found, alone = differences(envelopes)
    lines = ["## Checkpoint profiles that differ from their default row", "",
             f"{len(rows)} profile row(s); {len(found)} cell(s) where a profile's verdict is not its class's default "
             "row's (the checks' own verdicts, known failures counted as failures).", ""]
    for name in dict.fromkeys(d.row for d in found):
        mine = [d for d in found if d.row == name]
        lines.append(f"- `{name}` ({mine[0].checkpoint}) vs `{mine[0].default}`:")
        lines += [f"  - {d.column}: {d.profile_verdict} (default row {d.default_verdict})"
                  + (f": {_short(d.reason)}" if d.reason else "") for d in mine]
    if alone:
        lines.append(f"- no default row to compare in these runs: {', '.join(f'`{n}`' for n in alone)} "
                     "(add a run file that holds it, e.g. reports/matrix.json)")
    return lines + [""]
