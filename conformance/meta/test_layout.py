"""The flow is the layout: each stage imports only the stages before it; readers stay light.

Stages, in order (docs/design.md): the shared nouns at the package top
(columns, fingerprints, locations, reasons, tolerances, verdicts, versions) -> discover -> cases ->
checks -> report -> select -> gate -> run -> tools. A module may import its own stage and any
earlier one, at module level or inside a function; never a later one. (select, the classes a run
checks, comes before the run and owes the gate nothing; it follows report only for the atomic writer
its parse cache uses.) Within a stage the imports form no circle (imports inside functions count:
a circle hidden in a function is still two modules that cannot be read one before the other), and
the product never imports the meta tests (`conformance.meta`).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]
STAGES = ("nouns", "discover", "cases", "checks", "report", "select", "gate", "run", "tools")
NOUNS = ("conformance", "conformance.columns", "conformance.fingerprints", "conformance.locations",
         "conformance.profiles", "conformance.reasons", "conformance.tolerances", "conformance.verdicts", "conformance.versions")


def stage_of(module: str) -> str | None:
    """The stage a `conformance...` module belongs to; None for the tests (they may use every stage)."""
    if module in NOUNS:
        return "nouns"
    parts = module.split(".")
    if len(parts) < 2 or parts[0] != "conformance":
        return None
    if parts[1] == "meta" or parts[1].startswith("test_"):
        return None
    if parts[1] in STAGES:
        return parts[1]
    raise AssertionError(f"{module}: not in any stage; put it in a stage folder or list it as a shared noun")


def module_name(path: Path, root: Path = PACKAGE.parent) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imported_modules(path: Path, root: Path = PACKAGE.parent) -> set[str]:
    """Every conformance module `path` imports, anywhere in the file (relative imports resolved)."""
    found = set()
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}  # `from pkg import module`
    return {m for m in found if m == "conformance" or m.startswith("conformance.")}


def source_files(package: Path = PACKAGE) -> list[Path]:
    return sorted(p for p in package.rglob("*.py") if "meta" not in p.relative_to(package).parts)


def backward_imports() -> list[str]:
    """`importer (stage) imports imported (later stage)` for every import against the flow."""
    order = {stage: i for i, stage in enumerate(STAGES)}
    wrong = []
    for path in source_files():
        importer = module_name(path)
        own = stage_of(importer)
        if own is None:
            continue
        for imported in sorted(imported_modules(path)):
            if imported.split(".")[-1][:1].isupper():  # `from x import Name`: not a module
                continue
            try:
                theirs = stage_of(imported)
            except AssertionError:
                continue  # a name imported from a module, not a module itself
            if theirs is not None and order[theirs] > order[own]:
                wrong.append(f"{importer} ({own}) imports {imported} ({theirs})")
    return wrong


def import_graph(files: list[Path], root: Path = PACKAGE.parent) -> dict[str, set[str]]:
    """module -> the modules among `files` it imports (`from package import name` counts where name is a
    module; a package's own `__init__` counts only where it is named, as Python's import of a parent is not)."""
    modules = {module_name(path, root): path for path in files}
    return {module: {m for m in imported_modules(path, root) if m in modules and m != module}
            for module, path in modules.items()}


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles of an import graph: each set of two or more modules that import one another, directly or
    through others (a strongly connected component, Tarjan's), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph.get(module, ())):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(circles)


def circles_within_stages(files: list[Path] | None = None, root: Path = PACKAGE.parent) -> list[str]:
    """One line per import circle among the modules of one stage: its modules and who imports whom."""
    graph = import_graph(source_files() if files is None else files, root)
    lines = []
    for stage in STAGES:
        members = {m: {i for i in imported if stage_of(i) == stage} for m, imported in graph.items()
                   if stage_of(m) == stage}
        for circle in import_circles(members):
            edges = "; ".join(f"{m} imports {', '.join(sorted(members[m] & set(circle)))}" for m in circle)
            lines.append(f"circle in {stage}: {edges}")
    return lines


def meta_imports(files: list[Path] | None = None, root: Path = PACKAGE.parent) -> list[str]:
    """`importer imports conformance.meta...` for every product module that imports the meta tests."""
    return [f"{module_name(path, root)} imports {imported}"
            for path in (source_files() if files is None else files)
            for imported in sorted(imported_modules(path, root))
            if imported == "conformance.meta" or imported.startswith("conformance.meta.")]


def test_every_module_is_in_a_stage():
    for path in source_files():
        stage_of(module_name(path))


def test_no_module_imports_a_later_stage():
    assert backward_imports() == []


def test_the_check_finds_a_backward_import(tmp_path, monkeypatch):
    module = PACKAGE / "cases" / "_layout_probe.py"
    monkeypatch.setattr(sys.modules[__name__], "source_files", lambda: [module])
    module.write_text("def f():\n    from conformance.report import render\n")
    try:
        assert backward_imports() == ["conformance.cases._layout_probe (cases) imports conformance.report (report)",
                                      "conformance.cases._layout_probe (cases) imports conformance.report.render (report)"]
    finally:
        module.unlink()


def test_no_import_circle_within_a_stage():
    assert circles_within_stages() == []


def test_the_product_imports_no_meta_test():
    assert meta_imports() == []


def test_the_check_finds_a_circle_even_through_a_function(tmp_path):
    package = tmp_path / "conformance"
    (package / "report").mkdir(parents=True)
    (package / "report" / "a.py").write_text("from conformance.report import b\n")
    (package / "report" / "b.py").write_text("def f():\n    from conformance.report.c import g\n")
    (package / "report" / "c.py").write_text("from . import a\n\ndef g():\n    pass\n")
    (package / "report" / "d.py").write_text("from conformance.report import a, b\n")  # imports the circle: not in it
    (package / "tools").mkdir()
    (package / "tools" / "e.py").write_text("def f():\n    from conformance.meta import browser\n")
    files = source_files(package)
    assert circles_within_stages(files, tmp_path) == [
        "circle in report: conformance.report.a imports conformance.report.b; conformance.report.b imports "
        "conformance.report.c; conformance.report.c imports conformance.report.a"]
    assert meta_imports(files, tmp_path) == ["conformance.tools.e imports conformance.meta",
                                             "conformance.tools.e imports conformance.meta.browser"]


def test_circles_of_synthetic_graphs():
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert import_circles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}}) == \
        [["a", "b", "c"], ["d", "e"]]


@pytest.mark.parametrize("modules", [
    # What reads run files, and the plugin module that every pytest run of the environment imports.
    ("conformance.report.envelope", "conformance.report.render", "conformance.report.diff",
     "conformance.report.io", "conformance.report.summary", "conformance.report.page", "conformance.report.pages",
     "conformance.report.reproduce", "conformance.report.findings", "conformance.report.flag_advice",
     "conformance.tools.flag_patch", "conformance.gate.expectations", "conformance.gate.update",
     "conformance.gate.ratchet", "conformance.fingerprints", "conformance.tools.cli",
     "conformance.verdicts", "conformance.tolerances", "conformance.reasons", "conformance.locations",
     "conformance.versions", "conformance.columns"),
    ("conformance.run.plugin",),
])
def test_readers_import_no_torch(modules):
    code = "import sys\n" + "".join(f"import {m}\n" for m in modules) + "print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"
