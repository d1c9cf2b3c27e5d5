"""Cutting a verified reproducer after the statement that raises: nothing after it ever ran.

A script fails at one of its top-level statements: the one holding the outermost frame of its traceback in
the script (``<module>``). The statements after it are dead code for the failure, and so is every definition,
constant and import only they used. The verifier keeps a cut only when the cut script, run again, fails the
same way (`repro_verify.verify`); a script written again is cut where its verified version ends (`recut`), so
its kept verdict survives a regeneration.

Contracts:

* `raising_statement(source, frames, path)` is the index, among the top-level statements of `source`, of the one
  whose lines hold the outermost ``<module>`` frame of `frames` in the file `path`; None when no frame is there.
* `cut(source, last)` is `source` without its top-level statements after index `last` (their lines and the lines
  after them), then pruned (`repro_source.prune`: what only they used goes) and tidied; `source` itself when
  `last` is its final statement.
* `recut(source, previous)` is `source` cut after its last top-level statement that is, as code, the final
  statement of `previous` (a cut script); None when it has none or `previous` does not parse.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conformance.report import repro_source


def raising_statement(source: str, frames, path: Path) -> int | None:
    """The index of the top-level statement the script raised in (see the module)."""
    target = str(Path(path).resolve())
    line = next((f.lineno for f in frames if f.name == "<module>" and str(Path(f.filename).resolve()) == target),
                None)
    if line is None:
        return None
    for index, node in enumerate(ast.parse(source).body):
        if node.lineno <= line <= (node.end_lineno or node.lineno):
            return index
    return None


def cut(source: str, last: int) -> str:
    """`source` ending at its top-level statement `last` (see the module)."""
    body = ast.parse(source).body
    if last >= len(body) - 1:
        return source
    kept = source.splitlines()[:body[last].end_lineno or body[last].lineno]
    return repro_source.tidy(repro_source.prune("\n".join(kept) + "\n"))


def recut(source: str, previous: str) -> str | None:
    """`source` cut where `previous` ends (see the module)."""
    try:
        body, ending = ast.parse(source).body, ast.parse(previous).body
    except SyntaxError:
        return None
    if not ending:
        return None
    final = ast.dump(ending[-1])
    matches = [index for index, node in enumerate(body) if ast.dump(node) == final]
    return cut(source, matches[-1]) if matches else None
