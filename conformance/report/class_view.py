"""Stage 4, report: one class in words for the page's view of it: what works on which path, what to do about the rest.

Contracts:

* `path_of(envelope, column)` is the path a user takes that a column checks:
  ``eager forward`` (build), ``torch.compile (backend B)`` (the compile
  columns, by the backend they compiled with), ``generate with caches``
  (static and legacy cache, eager), ``torch.export``, ``ONNX Runtime``,
  ``ExecuTorch``; any other column is its own path.
* `paths(envelope)` is (path, its columns) per path, in column order;
  `states(envelope, name)` the class's state on each: ``works`` (every cell
  that applies works: `answer.answer`), ``partly``, ``broken`` (none
  works), ``nocheck`` (the suite could check none), ``na`` (none applies)
  or ``notrun``. The page lists each path's cells by answer.
* `todo(envelope, name, source, advice, groups)` is what to do about the rest,
  one line each: why the row is hidden (`answer.hidden_reason`); why none of
  its cells ran (the row's `not_run`: a package it needs); the declared
  flags the run contradicts (`flag_advice`: set, or left alone and why); the
  call-order workaround of a compile cell whose failure depends on call order
  (fingerprint kind ``call_order``: compile after one eager call, or before
  any); each root cause of its failing cells (`findings`: the group id, kind,
  upstream site ``module:qualname``, how many classes share it, the command
  that writes it up), the suite's own gaps said as such; or that nothing is
  left to do. `advice` is `flag_advice.advise_one` of the run, `groups`
  `findings.group_failures` of it (computed once per page, not per class).

Pure functions of the run file; torch-free.
"""

from __future__ import annotations

from conformance import columns
from conformance.report import findings, flag_advice
from conformance.report.answer import answer, hidden_reason
from conformance.verdicts import FAILING

CACHE_CHECKS = ("static_cache", "legacy_cache")
REASON_LIMIT = 220


def path_of(envelope: dict, column: str) -> str:
    check, _ = columns.split(column)
    if check == "build":
        return "eager forward"
    if check.startswith("compile_"):
        return f"torch.compile (backend {columns.backend_of(envelope, column)})"
    if check in CACHE_CHECKS:
        return "generate with caches"
    if check == "export_onnx" or check.startswith("onnx_"):
        return "ONNX Runtime"
    if check.startswith("export_"):
        return "torch.export"
    if check == "executorch":
        return "ExecuTorch"
    return check


def state(answers: list[str]) -> str:
    """The state of a path whose cells answer `answers` (`answer.answer`): see `states`."""
    applicable = [a for a in answers if a not in ("na", "notrun")]
    if not applicable:
        return "na" if "na" in answers else "notrun"
    if all(a == "works" for a in applicable):
        return "works"
    if "works" in applicable:
        return "partly"
    return "broken" if "broken" in applicable else "nocheck"


def paths(envelope: dict) -> list[tuple[str, list[str]]]:
    """(path, its columns) per path of the run, in column order (see the module's contract)."""
    by_path: dict[str, list[str]] = {}
    for column in envelope["checks"]:
        by_path.setdefault(path_of(envelope, column), []).append(column)
    return list(by_path.items())


def states(envelope: dict, name: str) -> list[str]:
    """The class's state on each path of `paths(envelope)`: works, partly, broken, nocheck, na or notrun."""
    cells = envelope["models"].get(name, {}).get("cells", {})
    return [state([answer(cells.get(c))[0] for c in ids]) for _, ids in paths(envelope)]


def _cut(text: str, limit: int = REASON_LIMIT) -> str:
    """One line of at most `limit` characters, its backticks quotes (a line may mark `code` with backticks)."""
    text = " ".join(str(text).split()).replace("`", "'")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def flag_lines(advice: list[flag_advice.Advice]) -> list[str]:
    lines = []
    for a in advice:
        if a.action == "set":
            lines.append(f"Declare {a.flag} = {a.value} (it says {a.declared}; {a.backend} backend): {a.why}. "
                         f"`conformance flags {a.source} --patch --transformers-repo DIR` writes it.")
        elif a.action == "ambiguous":
            lines.append(f"{a.flag} says {a.declared} and the checks disagree, but the declaration is left alone: "
                         f"{a.why}.")
        elif a.action == "unobserved":
            lines.append(f"{a.flag} ({a.declared}) could not be observed: {a.why}.")
    return lines


def call_order_line(column: str, cell: dict) -> str:
    fingerprint = cell.get("fingerprint") or {}
    if fingerprint.get("warm") == "fail" and fingerprint.get("cold") == "pass":
        return (f"{column} passes when compiled before any eager call and fails after one (call order): "
                "workaround: compile right after loading, before any eager call of the model.")
    return (f"{column} fails when compiled before any eager call and passes after one (call order): "
            "workaround: call the model once eagerly (one forward on real inputs) before its first compiled call.")


def cause_lines(name: str, cells: dict, source: str, groups: list[findings.Group]) -> list[str]:
    """One line per root cause of the class's failing cells, upstream findings first."""
    lines = []
    for group in groups:
        mine = [c.check for c in group.cells if c.model == name and c.check in cells]
        if not mine:
            continue
        others = len(group.classes) - 1
        shared = f"shared with {others} other class{'es' if others != 1 else ''}" if others else "this class only"
        if group.upstream:
            lines.append(f"{', '.join(mine)}: {_cut(group.title())} (root cause {group.id}, {shared}). "
                         f"`conformance findings {source} --group {group.id}` writes it up for an upstream issue.")
        else:
            lines.append(f"The suite could not check {', '.join(mine)} (its own gap, not upstream; {group.id}, "
                         f"{shared}): {_cut(cells[mine[0]].get('reason', ''))}")
    return lines


def todo(envelope: dict, name: str, source: str, advice: dict, groups: list[findings.Group]) -> list[str]:
    """What to do about what does not work, one line each (see the module's contract)."""
    row = envelope["models"].get(name, {})
    cells = {c: cell for c, cell in row.get("cells", {}).items() if c in envelope["checks"]}
    lines = []
    hidden = hidden_reason(name, row)
    if hidden:
        lines.append(f"Not a model a user runs on its own: {_cut(hidden)}")
    if row.get("not_run") and not cells:
        lines.append(f"Not run: {_cut(row['not_run'])}")
    lines += flag_lines([a for (model, _), a in sorted(advice.items()) if model == name])
    lines += [call_order_line(c, cell) for c, cell in cells.items()
              if c.startswith("compile_") and cell["observed"] in FAILING and flag_advice.is_call_order(cell)]
    lines += cause_lines(name, cells, source, groups)
    if not lines and cells and not any(answer(cell)[0] in ("broken", "nocheck") for cell in cells.values()):
        lines.append("Nothing to do: every check that applies works.")
    return lines
