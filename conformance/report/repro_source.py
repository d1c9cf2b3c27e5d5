"""Tidying a reproducer's source: no unused imports or constants, no line longer than it must be.

Contracts:

* `prune(source)` drops each top-level import name, each top-level constant (``NAME = ...``, upper case),
  each top-level function and class that nothing else in the source uses (a piece a template listed and its
  steps, once cut short, no longer call; its own recursive calls do not count), each top-level assignment of a
  name nothing reads whose value cannot fail or act (a literal, a comprehension, a name, an attribute, a
  subscript, or an instance of a class the script defines whose ``__init__`` only stores its arguments:
  ``decoder = DecoderPart(...)`` once the steps stop before the decoder), and an import statement left without a name; it repeats until nothing more goes (what
  only a dropped statement used goes too). The source must compile.
* `wrap(source, width)` breaks each line longer than `width` after commas inside brackets (where Python
  continues a line implicitly), the rest indented four more than the line; a line without such a comma (a long
  string) stays as it is.
* `long_lines(source, limit)` counts the lines longer than `limit` (the issue's 120).
* `tidy(source)` leaves at most two blank lines in a row, and one before ``import torch``.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

LIMIT = 120


def _used(tree: ast.AST) -> set[str]:
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}


def _used_outside(tree: ast.Module, skip: ast.AST) -> set[str]:
    """The names read anywhere in `tree` but inside `skip` (a definition's own recursive calls)."""
    return set().union(*(_used(node) for node in tree.body if node is not skip))


INERT = (ast.Constant, ast.Dict, ast.List, ast.Tuple, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp, ast.Name,
         ast.Attribute, ast.Subscript)


def _stores_only(cls: ast.ClassDef) -> bool:
    """Whether the class's ``__init__`` (if any) does nothing but ``super().__init__()`` and ``self.x = <name or
    attribute>``: making one cannot fail or act."""
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None:
        return True
    for statement in init.body:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue  # its docstring
        if isinstance(statement, ast.Expr) and ast.unparse(statement.value) == "super().__init__()":
            continue
        values = statement.value.elts if isinstance(getattr(statement, "value", None), ast.Tuple) else \
            [getattr(statement, "value", None)]
        if not (isinstance(statement, ast.Assign) and all(isinstance(v, (ast.Name, ast.Attribute)) for v in values)):
            return False
    return True


def _inert(value: ast.expr, classes: set[str]) -> bool:
    """Whether evaluating `value` can neither fail nor act in a way the script's failure depends on."""
    if isinstance(value, ast.Call):
        return isinstance(value.func, ast.Name) and value.func.id in classes
    return isinstance(value, INERT)


def prune(source: str) -> str:
    while True:
        tree = ast.parse(source)
        lines = source.splitlines()
        used = _used(tree)
        classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef) and _stores_only(node)}
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
            elif (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                  and node.targets[0].id not in used and _inert(node.value, classes)):
                edits.append((node.lineno, node.end_lineno or node.lineno, None))
            elif (isinstance(node, (ast.FunctionDef, ast.ClassDef))
                  and node.name not in _used_outside(tree, node)):
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


def tidy(source: str) -> str:
    return re.sub(r"\n{4,}", "\n\n\n", re.sub(r"\n\n+(import torch)", r"\n\n\1", source))
