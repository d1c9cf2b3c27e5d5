"""Stage 4, report: each cell's answer on every published transformers version, and that history in words.

Contracts:

* `of(envelopes)` is the history of the runs `envelopes` (any order; one per
  transformers version: a later envelope of the same version replaces an
  earlier one): ``{"versions": [...], "cells": {class: {column: codes}}}``,
  versions oldest first (as `major.minor`, e.g. ``5.23``), `codes` one
  letter per version (`CODES`: the cell's `answer.answer`; ``-`` where that
  version's run has no such class or column). It is {} when the runs span
  fewer than two versions: one version has no history.
* `phrase(codes, versions)` says a history in words, its latest state first:
  "works on all published versions (4.57 → 5.24)", "works since 5.23",
  "broke in 5.24 (worked on 4.57 → 5.23)", "does not work since 5.23 (the suite
  could not check it on 4.57)", "first published on 5.24: works".
* `published(root, envelope)` is `of` over the published envelope of every
  supported version (fixtures/versions.toml: the gate's reports/matrix.json,
  the others reports/<env>/matrix.json, those present), `envelope` standing
  for its own version's: what `conformance publish` embeds in each page it
  writes.

Pure functions of the run files (`published` reads them); torch-free; no clock.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from conformance import versions
from conformance.report import answer

CODES = {"works": "w", "broken": "b", "nocheck": "c", "na": "n", "notrun": "-"}
WORDS = {"w": "works", "b": "does not work", "c": "the suite could not check it", "n": "does not apply",
         "-": "not published"}
PAST = {"w": "worked", "b": "did not work", "c": "the suite could not check it", "n": "did not apply"}
PUBLISHED = Path("reports/matrix.json")


def _minor(envelope: dict) -> str:
    return versions.major_minor(str(envelope["environment"].get("transformers", "")))


def _order(minor: str) -> tuple:
    return tuple(int(part) if part.isdigit() else 0 for part in minor.split("."))


def of(envelopes: Sequence[dict]) -> dict:
    """The cells' answers per published version (see the module's contract)."""
    by_version = {_minor(e): e for e in envelopes}
    if len(by_version) < 2:
        return {}
    ordered = [by_version[v] for v in sorted(by_version, key=_order)]
    names = sorted({name for e in ordered for name in e["models"]})
    columns = list(dict.fromkeys(c for e in ordered for c in e["checks"]))
    cells: dict[str, dict[str, str]] = {}
    for name in names:
        rows = [e["models"].get(name) for e in ordered]
        cells[name] = {c: "".join(CODES[answer.answer(row["cells"].get(c))[0]]
                                  if row is not None and c in e["checks"] else "-"
                                  for row, e in zip(rows, ordered)) for c in columns}
    return {"versions": sorted(by_version, key=_order), "cells": cells}


def _span(versions_: Sequence[str]) -> str:
    return versions_[0] if len(versions_) == 1 else f"{versions_[0]} → {versions_[-1]}"


def phrase(codes: str, versions_: Sequence[str]) -> str:
    """A cell's history in words, its latest state first (see the module's contract)."""
    last = codes[-1]
    start = len(codes) - 1
    while start > 0 and codes[start - 1] == last:
        start -= 1
    if last == "-":
        return f"not published on {versions_[-1]}"
    if start == 0:
        return f"{WORDS[last]} on all published versions ({_span(versions_)})"
    before = codes[start - 1]
    if before == "-" and not codes[:start].strip("-"):
        return f"first published on {versions_[start]}: {WORDS[last]}"
    if last == "b" and before == "w":
        head = f"broke in {versions_[start]}"
    else:
        head = f"{WORDS[last]} since {versions_[start]}"
    earlier = start - 1
    while earlier > 0 and codes[earlier - 1] == before:
        earlier -= 1
    if before == "-":
        return f"{head} (not published on {_span(versions_[earlier:start])})"
    return f"{head} ({PAST[before]} on {_span(versions_[earlier:start])})"


def published_paths(root: Path) -> list[Path]:
    """The published envelope of each supported version, where it is present under `root`."""
    paths = [root / (PUBLISHED if v.is_gate else PUBLISHED.parent / v.env / PUBLISHED.name)
             for v in versions.supported()]
    return [p for p in paths if p.is_file()]


def published(root: Path, envelope: dict) -> dict:
    """`of` the published versions under `root`, `envelope` in place of its own version's file."""
    from conformance.report import envelope as report

    runs = [report.load_envelope(p) for p in published_paths(Path(root))]
    return of([r for r in runs if _minor(r) != _minor(envelope)] + [envelope])


def embedded(history: dict, names: Sequence[str], columns: Sequence[str]) -> dict:
    """`history` as a page embeds it, for the classes `names` and the columns `columns` only: the versions, the
    columns, per class its codes column by column (space-separated, ``-`` for none) and each distinct codes'
    `phrase`; {} for no history."""
    if not history:
        return {}
    versions_ = history["versions"]
    absent = "-" * len(versions_)
    cells = {name: " ".join(history["cells"].get(name, {}).get(c, absent) for c in columns) for name in names}
    distinct = {codes for text in cells.values() for codes in text.split()}
    return {"versions": versions_, "columns": list(columns), "cells": cells,
            "phrases": {codes: phrase(codes, versions_) for codes in sorted(distinct)}}


def latest_changes(history: dict, name: str, columns: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the columns of `columns` that broke in the newest version: worked on the one before, not now; those that
    work since it: did not work or could not be checked before), for the class `name`; ([], []) without history."""
    if not history:
        return [], []
    codes = history["cells"].get(name, {})
    pairs = [(c, codes.get(c, "--")[-2:]) for c in columns]
    return ([c for c, pair in pairs if pair == "wb"], [c for c, pair in pairs if pair in ("bw", "cw")])
