"""Stage 5, gate: a pull request's cells judged against the same cells at its merge base.

Contract of `judge_against_base(head, base, base_commit)` -> a new head envelope:

Each cell of `head` that `base` also holds is judged by the observations
(``observed``, the raw verdict every cell stores: `report.envelope`) and
failure fingerprints of the two runs, not by the release's expectations:

| base | head | fingerprints | category | final verdict |
| --- | --- | --- | --- | --- |
| pass / skip | pass / skip | | (none) | the raw verdict |
| failing | failing | the same (`fingerprints.compare`: same or improved) | ``already_failing`` | ``xfail``, never blocking |
| failing | failing | changed (another failure, a new site, more breaks) | ``changed`` | the raw verdict, the change named |
| pass / skip | failing | | ``regressed`` | the raw verdict, "passes on the base" |
| failing | pass | | ``fixed`` | ``pass``, "fixed by this change" |

(failing: fail, error or timeout.) A judged cell keeps its release
judgement's verdict as ``release_verdict`` and gets ``base`` (the base's raw
verdict) and a ``gate`` note; its ``observed`` stays as it was; a cell the base does not hold keeps its
release judgement (as where no base run exists at all). The envelope gets
``merge_base``: the base commit, the cells judged, and the
(class, column) pairs of each category. The summary is recomputed.
Torch-free, a pure function of the two envelopes.
"""

from __future__ import annotations

from conformance.fingerprints import Fingerprint, FingerprintError, compare
from conformance.report.envelope import summarize
from conformance.verdicts import FAILING

CATEGORIES = ("already_failing", "changed", "regressed", "fixed")


def _fingerprint(cell: dict) -> Fingerprint | None:
    try:
        return Fingerprint.from_data(cell["fingerprint"]) if cell.get("fingerprint") else None
    except FingerprintError:
        return None


def category(base_cell: dict, head_cell: dict) -> tuple[str, str]:
    """(category, note) of a head cell against its base cell; category "" when neither run failed."""
    before, after = base_cell["observed"], head_cell["observed"]
    if before in FAILING and after in FAILING:
        listed, observed = _fingerprint(base_cell), _fingerprint(head_cell)
        if listed is None and observed is None:
            return "already_failing", f"already failing on the base ({before}, no fingerprint at either)"
        comparison = compare(listed, observed)
        if comparison.status in ("same", "improved"):
            detail = f"; {comparison.message}" if comparison.status == "improved" else ""
            return "already_failing", f"already failing on the base ({(observed or listed).summary()}){detail}"
        what = comparison.message.replace("failure changed: listed", "failure changed by this change: base")
        return "changed", what if comparison.status == "changed" else f"failure changed: {comparison.message}"
    if after in FAILING:
        return "regressed", f"passes on the base ({before}), {after} with this change"
    if before in FAILING:
        return "fixed", f"fixed by this change (the base: {before})"
    return "", ""


def _judged(base_cell: dict, head_cell: dict) -> tuple[str, dict]:
    kind, note = category(base_cell, head_cell)
    after = head_cell["observed"]
    verdict = {"already_failing": "xfail", "fixed": "pass"}.get(kind, after)
    cell = {**head_cell, "verdict": verdict, "observed": after, "base": base_cell["observed"],
            "release_verdict": head_cell["verdict"]}
    cell.pop("expected", None)  # the release's listing no longer decides this cell
    cell.pop("gate", None)
    if note:
        cell["gate"] = note
    if kind == "already_failing":
        cell["expected"] = base_cell["observed"]
    return kind, cell


def judge_against_base(head: dict, base: dict, base_commit: str) -> dict:
    """`head` with every cell `base` also holds judged against it (see the module's contract)."""
    found: dict[str, list[list[str]]] = {c: [] for c in CATEGORIES}
    judged = 0
    models = {}
    for name, row in head["models"].items():
        base_cells = (base["models"].get(name) or {}).get("cells", {})
        cells = {}
        for column, cell in row["cells"].items():
            if column not in base_cells:
                cells[column] = cell
                continue
            kind, cells[column] = _judged(base_cells[column], cell)
            judged += 1
            if kind:
                found[kind].append([name, column])
        models[name] = {**row, "cells": cells}
    record = {"base": base_commit, "judged": judged, "not_at_base": sum(len(r["cells"]) for r in models.values())
              - judged, **found}
    return {**head, "models": models, "merge_base": record, "summary": summarize(models, head["checks"])}


def base_commit(ref: str, repo) -> str:
    """The commit a pull request is judged against: for ``A...B`` (a diff since the merge base, as `--since`
    reads it) the merge base of A and B, else the commit `ref` names; "" when git cannot resolve it."""
    import subprocess

    base, three_dots, head = ref.partition("...")
    args = ["merge-base", base, head or "HEAD"] if three_dots else ["rev-parse", "--verify", f"{ref}^{{commit}}"]
    found = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    return found.stdout.strip() if found.returncode == 0 else ""
