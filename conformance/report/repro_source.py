"""Tidying a reproducer's source: no unused imports or constants, no line longer than it must be.

Contracts:

* `prune(source)` drops each top-level import name, each top-level constant (``NAME = ...``, upper case) and
  each top-level function and class that nothing else in the source uses (a piece a template listed and its
  steps, once cut short, no longer call), and an import statement left without a name; it repeats until nothing
  more goes (a constant used only by a dropped one goes too). The source must compile.
* `wrap(source, width)` breaks each line longer than `width` after commas inside brackets (where Python
  continues a line implicitly), the rest indented four more than the line; a line without such a comma (a long
  string) stays as it is.
* `long_lines(source, limit)` counts the lines longer than `limit` (the issue's 120).
"""

from __future__ import annotations

import ast
import io
import tokenize

LIMIT = 120


def _used(tree: ast.AST) -> set[str]:
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}


def prune(source: str) -> str:
    while True:
        tree = ast.parse(source)
        lines = source.splitlines()
        used = _used(tree)
        edits: list[tuple[int, int, str | None]] = []  # (first line, last line, replacement or None: delete)
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                    continue
                keep = [a for a in node.names if (a.asname or a.name).split(".")[0] in used]
                if len(keep) == len(node.names):
                    continue
                text = None
                if keep:
                    names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in keep)
                    text = (f"from {node.module} import {names}" if isinstance(node, ast.ImportFrom)
                            else f"import {names}")
                edits.append((node.lineno, node.end_lineno or node.lineno, text))
            elif (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                  and node.targets[0].id.isupper() and node.targets[0].id not in used):
                edits.append((node.lineno, node.end_lineno or node.lineno, None))
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name not in used:
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                edits.append((first, node.end_lineno or node.lineno, None))
        if not edits:
            return source
        for first, last, text in sorted(edits, reverse=True):
            lines[first - 1:last] = [text] if text is not None else []
        source = "\n".join(lines) + "\n"


def _break_points(source: str) -> dict[int, list[int]]:
    """Per line number, the columns just after a comma inside brackets."""
    found: dict[int, list[int]] = {}
    depth = 0
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.OP:
            if token.string in "([{":
                depth += 1
            elif token.string in ")]}":
                depth -= 1
            elif token.string == "," and depth > 0:
                found.setdefault(token.start[0], []).append(token.end[1])
    return found


def wrap(source: str, width: int = LIMIT) -> str:
    points = _break_points(source)
    out: list[str] = []
    for number, line in enumerate(source.splitlines(), 1):
        if len(line) <= width or number not in points:
            out.append(line)
            continue
        pad = " " * (len(line) - len(line.lstrip()) + 4)
        start, piece_width = 0, width
        cuts = [c for c in points[number] if c < len(line)]
        while len(line) - start > piece_width:
            fits = [c for c in cuts if start < c <= start + piece_width]
            if not fits:
                break
            piece = line[start:fits[-1]].rstrip()
            out.append(piece if start == 0 else pad + piece)
            start = fits[-1]
            while start < len(line) and line[start] == " ":
                start += 1
            piece_width = width - len(pad)
        out.append(line if start == 0 else pad + line[start:])
    return "\n".join(out) + ("\n" if source.endswith("\n") else "")


def long_lines(source: str, limit: int = LIMIT) -> int:
    return sum(len(line) > limit for line in source.splitlines())
