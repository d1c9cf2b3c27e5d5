"""Stage 4, report: a cell as the answer to a user's question "does it work here?", and the gate's state beside it.

Contracts:

* `answer(cell)` is (answer, mark). The answer (`ANSWERS`) is what a user of
  the class wants first: ``works`` (the check passed: pass, or an xpass whose
  raw verdict was a pass), ``broken`` (it does not work: a known failure,
  xfail, or a new one, fail, error or timeout; an xpass that still failed,
  with fewer breaks than listed), ``nocheck`` (the suite could not check it:
  `summary.is_gap`: an xfail whose check said ``error``, the suite's own gap
  listed in the expectations), ``na`` (skip: does not apply) or ``notrun`` (no cell).
  The mark (`MARKS`) is the gate's state: ``listed`` (a known failure),
  ``new`` (not listed: the gate fails), ``improved`` (an xpass: the
  expectation is stale), ``gap`` (a known harness gap), or "" (nothing to
  say: a pass, a skip, not run).
* `hidden_reason(name, row)` is why a row is not a model a user runs on its
  own ("" when it is one): the row's `not_standalone` where the envelope
  records it, a ``...PreTrainedModel`` class (a base class), or a row whose
  every cell but ``build`` is skip (no check applies; the first such reason
  says why). The page hides these rows behind a toggle.
* `column_description(envelope, column)` is the one line that says what a
  column checks: `check_info[column]["description"]` (`registry.describe`,
  from the check's docstring), with the backend it compiled with for a
  check with backend columns and for those columns (`conformance.columns`),
  and why the run did not run it; "" when the run file has no description
  (older than descriptions).

Pure functions of the recorded cells and rows; torch-free.
"""

from __future__ import annotations

from conformance import columns
from conformance.report import render, summary
from conformance.verdicts import passed

ANSWERS = {
    "works": ("✓", "works"),
    "broken": ("✗", "does not work"),
    "nocheck": ("🚧", "the suite could not check this (its own gap)"),
    "na": ("–", "does not apply"),
    "notrun": ("", "not run (not in this run, e.g. an optional column whose extra was not installed)"),
}
MARKS = {
    "listed": ("", "known failure: listed in fixtures/expectations with this failure's fingerprint"),
    "new": ("!", "new failure: not listed in the expectations, the gate fails on it"),
    "improved": ("↑", "improved: better than listed (passes, or fewer graph breaks or recompiles): "
                      "update the expectation"),
    "gap": ("", render.KNOWN_ERROR[1]),
}
NEW_VERDICTS = ("fail", "error", "timeout")
PRETRAINED = "PreTrainedModel"


def answer(cell: dict | None) -> tuple[str, str]:
    """(answer, mark) of a recorded cell, None for a cell the run did not include (see the module's contract)."""
    if cell is None:
        return "notrun", ""
    verdict = cell.get("verdict")
    if verdict == "skip":
        return "na", ""
    if verdict == "pass":
        return "works", ""
    if verdict == "xpass":
        return ("works" if passed(cell) else "broken"), "improved"
    if verdict == "xfail":
        return ("nocheck", "gap") if summary.is_gap(cell) else ("broken", "listed")
    if verdict in NEW_VERDICTS:
        return "broken", "new"
    return "notrun", ""


def symbol(cell: dict | None) -> str:
    """The glyphs a cell shows: the answer's, then the mark's (✗! a new failure, ✓↑ a stale expectation)."""
    what, mark = answer(cell)
    return ANSWERS[what][0] + (MARKS[mark][0] if mark else "")


def hidden_reason(name: str, row: dict) -> str:
    """Why the row is internal or not standalone ("" for a model a user runs); see the module's contract."""
    if row.get("not_standalone"):
        return str(row["not_standalone"])
    short = name.removesuffix("ForConditionalGeneration")
    if short.endswith(PRETRAINED):
        return f"a base class (…{PRETRAINED}), not a model: its subclasses are the models"
    others = [cell for check, cell in row.get("cells", {}).items() if check != "build"]
    if others and all(cell.get("verdict") == "skip" for cell in others):
        return "no check applies: " + (others[0].get("reason") or "every cell but build is skip")
    return ""


def column_description(envelope: dict, column: str) -> str:
    """One line: what `column` checks, under which backend, and why it was not run (see the module)."""
    info = (envelope.get("check_info") or {}).get(column) or {}
    text = str(info.get("description") or "").strip()
    if text and (info.get("backend") or columns.has_backend_columns(info)):
        text = f"{text.rstrip('.')} (backend {columns.backend_of(envelope, column)})."
    why = render.not_run_columns(envelope).get(column)
    return f"{text} Not run: {why}." if why and text else (f"Not run: {why}." if why else text)
