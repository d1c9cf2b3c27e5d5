"""Stage 4, report: what changed between two runs.

Contract: `diff_envelopes(old, new)` lists the cells whose verdict differs
(`Change`: model, check, old and new verdict or ``absent``, the reason),
regressions first, then improvements, then other changes, then cells that
kept a failing verdict but whose failure changed (their fingerprints differ:
another kind, site or exception, or other graph-break or recompile counts;
`Change.note` says how), cells only in the old run, cells only in the new
run. A change is a regression when the new verdict is worse by `SEVERITY`
(a pass turned skip hides coverage: worse).
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance.fingerprints import Fingerprint, compare

# How bad a verdict is, for the direction of a change. xpass passed the check
# (only its expectation is stale); skip hides coverage, so pass -> skip counts
# as a regression.
SEVERITY = {"pass": 0, "xpass": 0, "skip": 1, "xfail": 2, "fail": 3, "error": 3, "timeout": 3}


@dataclass(frozen=True)
class Change:
    model: str
    check: str
    old: str  # a verdict, or "absent"
    new: str
    reason: str  # the new cell's reason (the old one's when the cell is gone)
    note: str = ""  # for a failure that changed under the same verdict: how

    @property
    def kind(self) -> str:
        """regression | improvement | changed | failure | added | removed."""
        if self.note:
            return "failure"
        if self.old == "absent":
            return "added"
        if self.new == "absent":
            return "removed"
        delta = SEVERITY[self.new] - SEVERITY[self.old]
        return "regression" if delta > 0 else "improvement" if delta < 0 else "changed"


CHANGE_ORDER = ("regression", "improvement", "changed", "failure", "removed", "added")


def diff_envelopes(old: dict, new: dict) -> list[Change]:
    """Cells whose verdict differs, regressions first, then improvements, then the rest."""
    changes = []
    for model in sorted(set(old["models"]) | set(new["models"])):
        old_cells = old["models"].get(model, {}).get("cells", {})
        new_cells = new["models"].get(model, {}).get("cells", {})
        for check_id in sorted(set(old_cells) | set(new_cells)):
            before = old_cells.get(check_id, {}).get("verdict", "absent")
            after = new_cells.get(check_id, {}).get("verdict", "absent")
            cell = new_cells.get(check_id) or old_cells.get(check_id)
            if before != after:
                changes.append(Change(model, check_id, before, after, cell.get("reason", "")))
                continue
            note = failure_change(old_cells.get(check_id, {}), new_cells.get(check_id, {}))
            if note:
                changes.append(Change(model, check_id, before, after, cell.get("reason", ""), note))
    return sorted(changes, key=lambda c: (CHANGE_ORDER.index(c.kind), c.model, c.check))


def failure_change(old_cell: dict, new_cell: dict) -> str:
    """How the failure of a cell changed between two runs ('' when it did not, or either has no fingerprint)."""
    before, after = old_cell.get("fingerprint"), new_cell.get("fingerprint")
    if not before or not after:
        return ""
    comparison = compare(Fingerprint.from_data(before), Fingerprint.from_data(after))
    return "" if comparison.status == "same" else comparison.message
