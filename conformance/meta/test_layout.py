"""The flow is the layout: each stage imports only the stages before it; readers stay light.

Stages, in order (docs/design.md): the shared nouns at the package top
(columns, fingerprints, locations, reasons, tolerances, verdicts, versions) -> discover -> cases ->
checks -> report -> select -> gate -> run -> tools. A module may import its own stage and any
earlier one, at module level or inside a function; never a later one. (select, the classes a run
checks, comes before the run and owes the gate nothing; it follows report only for the atomic writer
its parse cache uses.)
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
         "conformance.reasons", "conformance.tolerances", "conformance.verdicts", "conformance.versions")


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


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imported_modules(path: Path) -> set[str]:
    """Every conformance module `path` imports, anywhere in the file (relative imports resolved)."""
    found = set()
    package = module_name(path).split(".")
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


def source_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "meta" not in p.relative_to(PACKAGE).parts)


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
