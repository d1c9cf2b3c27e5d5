"""Which code of the installed transformers a class is made of, symbol by symbol.

A node is ``(file, symbol)``: ``file`` relative to the transformers package
(``models/llava/modeling_llava.py``), ``symbol`` a top-level name defined in
it, or ``"*"`` for the whole file. `SymbolGraph.closure(roots)` returns every
definition the roots depend on; `touched_definitions` maps changed lines of a
file to its definitions (how a diff narrows a selection). Edges:

* a top-level definition depends on the names it uses, resolved to where
  they are defined in the same file or imported from (imports anywhere in the
  file count, including inside functions and ``TYPE_CHECKING`` blocks), and
  on the file's other top-level statements;
* ``# Copied from transformers.<module>.<Name>`` above or inside a
  definition is code reuse: the definition depends on ``(<module file>, Name)``;
* a package that has ``modular_*.py`` files is generated from them: a symbol
  of a generated file depends on its definition in the modular file; a
  symbol the modular file does not define was copied from the modular file's
  parents by the converter, so it depends on every name the modular file
  imports from other model packages (by kind: a generated configuration file
  takes only configuration code);
* files outside model packages (infrastructure) are followed file by file
  and never into model packages: they reach models only through registries.

This is what makes reuse precise: Qwen3-VL-MoE's modular file imports two
output classes from Aria, and those do not depend on Llava although other
Aria classes do, so a Llava change does not reach Qwen3-VL-MoE.
"""

from __future__ import annotations

import ast
import re
from collections import deque
from pathlib import Path, PurePosixPath

WHOLE_FILE = "*"
MODULE_LEVEL = "<module>"

# `models/` packages that are registries, not models.
MODEL_INFRASTRUCTURE = ("auto",)
FILE_KINDS = ("modeling", "configuration", "image_processing", "video_processing", "feature_extraction",
              "processing", "tokenization", "modular")

# "# Copied from transformers.models.llava.modeling_llava.LlavaMultiModalProjector with Llava->X"
_COPIED_FROM = re.compile(r"#\s*Copied from transformers\.([\w.]+)")
_IMPORT_START = re.compile(r"^[ \t]*(?:from[ \t]+[.\w]+[ \t]+import\b|import[ \t]+\w)", re.M)

Node = tuple[str, str]


def file_key(path: Path) -> tuple[int, int] | None:
    """(size, modification time) of a file, None when it cannot be read: what a cached parse is valid for."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


def model_package(rel: str) -> str | None:
    """``models/<pkg>/...`` -> pkg, for real model packages (not ``auto``); else None."""
    parts = rel.split("/")
    if len(parts) >= 3 and parts[0] == "models" and parts[1] not in MODEL_INFRASTRUCTURE:
        return parts[1]
    return None


def file_kind(rel: str) -> str:
    stem = PurePosixPath(rel).stem
    return next((kind for kind in FILE_KINDS if stem.startswith(kind + "_")), "")


def generated_takes(generated: str, parent: str) -> bool:
    """Whether code of `parent` (imported by a modular file) can flow into the generated file `generated`.

    The modular converter copies definitions by kind: a generated modeling
    file takes modeling and configuration code, a configuration file only
    configuration code. Code outside model packages always flows.
    """
    if model_package(parent) is None:
        return True
    kind, parent_kind = file_kind(generated), file_kind(parent)
    if kind == "configuration":
        return parent_kind == "configuration"
    if kind == "modeling":
        return parent_kind in ("modeling", "configuration", "modular")
    return True


def import_statements(source: str) -> list[ast.stmt]:
    """The import statements of a file, parsed with `ast` from their own lines only (fast on big files)."""
    statements = []
    for match in _IMPORT_START.finditer(source):
        start = match.start()
        line_end = source.find("\n", start)
        text = source[start:line_end if line_end != -1 else len(source)]
        if "(" in text and ")" not in text:
            end = source.find(")", start)
            text = source[start:end + 1] if end != -1 else text
        while text.rstrip().endswith("\\"):
            nxt = source.find("\n", start + len(text) + 1)
            text = source[start:nxt if nxt != -1 else len(source)]
        try:
            statements.extend(ast.parse(text.strip()).body)
        except SyntaxError:
            continue
    return statements


def _names_used(node: ast.AST) -> set[str]:
    """Every bare name a node reads (``a`` of ``a.b.c`` too)."""
    names: set[str] = set()
    stack = [node]
    while stack:  # ast.walk, without its generator overhead (this is most of the graph's build time)
        current = stack.pop()
        if type(current) is ast.Name:
            names.add(current.id)
            continue
        for field in current._fields:
            value = getattr(current, field, None)
            if isinstance(value, list):
                stack.extend(item for item in value if isinstance(item, ast.AST))
            elif isinstance(value, ast.AST):
                stack.append(value)
    return names


def _defined_names(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
        node, (ast.AnnAssign, ast.AugAssign)) else []
    return [sub.id for target in targets for sub in ast.walk(target) if isinstance(sub, ast.Name)]


def _renamed_score(copy: str, original: str) -> int:
    """Length of the name part `copy` and `original` share after their model prefixes (0: unrelated)."""
    if copy == original:
        return len(copy) + 1
    if not (copy[:1].isupper() and original[:1].isupper()):
        return 0
    shared = 0
    while shared < min(len(copy), len(original)) and copy[-1 - shared] == original[-1 - shared]:
        shared += 1
    suffix = copy[len(copy) - shared:]
    # Cut back to a word start: Aria/Llava + "MultiModalProjector" share "aMultiModalProjector".
    while suffix and not suffix[0].isupper():
        suffix = suffix[1:]
    return len(suffix) if len(suffix) >= 3 else 0


class ParsedFile:
    """One model file: its top-level definitions, what each uses, its imports and copies."""

    def __init__(self, graph: "SymbolGraph", rel: str, source: str):
        self.rel = rel
        self.uses: dict[str, set[str]] = {MODULE_LEVEL: set()}
        self.definitions: set[str] = set()  # classes and functions (not constants or loggers)
        self.copies: dict[str, set[Node]] = {}
        self.imports: dict[str, set[Node]] = {}
        try:
            tree = ast.parse(source)
        except SyntaxError:
            tree = ast.Module(body=[], type_ignores=[])
        for stmt in tree.body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                continue
            for name in _defined_names(stmt) or [MODULE_LEVEL]:
                self.uses.setdefault(name, set()).update(_names_used(stmt))
            if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                self.definitions.add(stmt.name)
        spans = _spans(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for local, target in graph.import_targets(node, rel):
                    self.imports.setdefault(local, set()).add(target)
        for lineno, line in enumerate(source.splitlines(), 1):
            match = _COPIED_FROM.search(line)
            if not match:
                continue
            owner = next((name for first, last, name in spans if first <= lineno <= last), None)
            if owner is None:  # a comment right above a definition
                owner = next((name for first, _last, name in spans if first > lineno), None)
            target = graph.dotted_symbol("transformers." + match.group(1))
            if owner and target:
                self.copies.setdefault(owner, set()).add(target)

    def defines(self, name: str) -> bool:
        return name in self.uses and name != MODULE_LEVEL

    def to_data(self) -> dict:
        """Plain data (lists and strings only) that `from_data` turns back into an equal ParsedFile."""
        return {
            "rel": self.rel,
            "uses": {name: sorted(used) for name, used in self.uses.items()},
            "definitions": sorted(self.definitions),
            "copies": {name: sorted(map(list, nodes)) for name, nodes in self.copies.items()},
            "imports": {name: sorted(map(list, nodes)) for name, nodes in self.imports.items()},
        }

    @classmethod
    def from_data(cls, data: dict) -> "ParsedFile":
        """A ParsedFile from `to_data`'s output; ValueError (or TypeError, KeyError) when it is malformed."""
        parsed = cls.__new__(cls)
        parsed.rel = str(data["rel"])
        parsed.uses = {str(name): {str(u) for u in used} for name, used in data["uses"].items()}
        parsed.definitions = {str(d) for d in data["definitions"]}
        parsed.copies = {str(name): {_node(n) for n in nodes} for name, nodes in data["copies"].items()}
        parsed.imports = {str(name): {_node(n) for n in nodes} for name, nodes in data["imports"].items()}
        return parsed

    def resolve(self, name: str) -> set[Node]:
        """Where a name used in this file comes from (empty for builtins and locals)."""
        if self.defines(name):
            return {(self.rel, name)}
        return self.imports.get(name, set())


def _node(value) -> Node:
    file, symbol = value
    return (str(file), str(symbol))


class NoCache:
    """The parse cache of a graph that keeps nothing between runs."""

    def get(self, rel: str, key) -> None:
        return None

    def put(self, rel: str, key, parsed: "ParsedFile") -> None:
        return None


class SymbolGraph:
    """Lazily parsed files of one transformers tree and the dependencies of their symbols."""

    def __init__(self, root: Path, cache=None):
        self.root = root
        self.cache = cache if cache is not None else NoCache()  # e.g. a code_graph_cache.ParseCache
        self._parsed: dict[str, ParsedFile] = {}
        self._deps: dict[Node, frozenset[Node]] = {}

    # -- module names ------------------------------------------------------------------------------

    def module_file(self, dotted: str) -> str | None:
        """`transformers.a.b` -> ``a/b.py`` or ``a/b/__init__.py`` (relative), if it exists."""
        parts = dotted.split(".")
        if parts[0] != "transformers":
            return None
        rel = "/".join(parts[1:])
        for candidate in ((rel + ".py") if rel else None, (rel + "/__init__.py") if rel else "__init__.py"):
            if candidate and (self.root / candidate).is_file():
                return candidate
        return None

    def dotted_symbol(self, dotted: str) -> Node | None:
        """``transformers.models.a.modeling_a.AClass.method`` -> (``models/a/modeling_a.py``, ``AClass``)."""
        parts = dotted.split(".")
        for end in range(len(parts), 1, -1):
            target = self.module_file(".".join(parts[:end]))
            if target:
                return (target, parts[end]) if end < len(parts) else (target, WHOLE_FILE)
        return None

    def import_targets(self, node: ast.stmt, rel: str) -> list[tuple[str, Node]]:
        """(local name, node) pairs an import statement in file `rel` binds."""
        if isinstance(node, ast.Import):
            found = []
            for alias in node.names:
                target = self.module_file(alias.name)
                if target:
                    found.append(((alias.asname or alias.name).split(".")[0], (target, WHOLE_FILE)))
            return found
        if not isinstance(node, ast.ImportFrom):
            return []
        if node.level:
            package = ["transformers", *rel.split("/")[:-1]]
            base_parts = package[:len(package) - (node.level - 1)]
            base = ".".join(base_parts + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        module = self.module_file(base)
        found = []
        for alias in node.names:
            submodule = self.module_file(f"{base}.{alias.name}") if alias.name != "*" else None
            if submodule:  # `from pkg import module`
                found.append((alias.asname or alias.name, (submodule, WHOLE_FILE)))
            elif module:
                found.append((alias.asname or alias.name, (module, alias.name if alias.name != "*" else WHOLE_FILE)))
        return found

    # -- parsing -----------------------------------------------------------------------------------

    def parsed(self, rel: str) -> ParsedFile:
        if rel not in self._parsed:
            path = self.root / rel
            key = file_key(path)
            found = self.cache.get(rel, key)
            if found is None:
                source = path.read_text(errors="replace") if path.is_file() else ""
                found = ParsedFile(self, rel, source)
                self.cache.put(rel, key, found)
            self._parsed[rel] = found
        return self._parsed[rel]

    def modular_files(self, rel: str) -> list[str]:
        """The modular files `rel` is generated from (none for modular files and hand-written packages)."""
        if model_package(rel) is None or PurePosixPath(rel).name.startswith("modular_"):
            return []
        folder = (self.root / rel).parent
        return [path.relative_to(self.root).as_posix() for path in sorted(folder.glob("modular_*.py"))]

    # -- edges -------------------------------------------------------------------------------------

    def deps(self, node: Node) -> frozenset[Node]:
        if node not in self._deps:
            rel = node[0]
            if model_package(rel) is None:
                found = self._infrastructure_deps(rel)
            elif node[1] == WHOLE_FILE:
                found = {(rel, name) for name in self.parsed(rel).uses}
            else:
                found = self._symbol_deps(rel, node[1])
            found.discard(node)
            self._deps[node] = frozenset(found)
        return self._deps[node]

    def _infrastructure_deps(self, rel: str) -> set[Node]:
        """A file outside model packages: the infrastructure files it imports, whole."""
        path = self.root / rel
        if not path.is_file() or rel in ("__init__.py", "models/__init__.py"):
            return set()
        found = set()
        for stmt in import_statements(path.read_text(errors="replace")):
            for _local, (target, _symbol) in self.import_targets(stmt, rel):
                if model_package(target) is None:
                    found.add((target, WHOLE_FILE))
        return found

    def _symbol_deps(self, rel: str, symbol: str) -> set[Node]:
        parsed = self.parsed(rel)
        if not parsed.defines(symbol) and symbol != MODULE_LEVEL:
            if symbol in parsed.imports:  # a re-export, e.g. from a package __init__
                return set(parsed.imports[symbol])
            if PurePosixPath(rel).name == "__init__.py":  # a lazy package: the file that defines it
                folder = (self.root / rel).parent
                for path in sorted(folder.glob("*.py")):
                    sibling = path.relative_to(self.root).as_posix()
                    if sibling != rel and self.parsed(sibling).defines(symbol):
                        return {(sibling, symbol)}
            return {(rel, WHOLE_FILE)}
        found = {(rel, MODULE_LEVEL)} if symbol != MODULE_LEVEL else set()
        for name in parsed.uses.get(symbol, ()):
            found.update(parsed.resolve(name))
        found.update(parsed.copies.get(symbol, ()))
        for modular in self.modular_files(rel):
            source = self.parsed(modular)
            if source.defines(symbol):
                found.add((modular, symbol))
            elif symbol in self.parsed(rel).definitions:  # module constants and loggers are not copied code
                parents = {target[0] for targets in source.imports.values() for target in targets
                           if model_package(target[0]) and generated_takes(rel, target[0])}
                found.update(self._renamed_origins(symbol, parents))
        return found

    def _renamed_origins(self, symbol: str, parents: set[str]) -> set[Node]:
        """The definitions in `parents` that the converter copied and renamed into `symbol`.

        A copied class keeps its name after the model prefix
        (``LlavaMultiModalProjector`` -> ``AriaMultiModalProjector``), a copied
        function keeps its whole name. The candidates sharing the longest
        such suffix win; with no candidate, every parent file counts whole.
        Only classes and functions are candidates.
        """
        best, origins = 0, set()
        for parent in sorted(parents):
            for name in self.parsed(parent).definitions:
                score = _renamed_score(symbol, name)
                if score > best:
                    best, origins = score, {(parent, name)}
                elif score == best and score:
                    origins.add((parent, name))
        return origins or {(parent, WHOLE_FILE) for parent in parents}

    def closure(self, roots: list[Node]) -> set[Node]:
        """Every definition any of the roots depends on, transitively, the roots included.

        Nodes that name a definition their file does not hold (re-exports,
        names resolved through a package) are left out; whole files, module
        level code and infrastructure files stay.
        """
        seen = set(roots)
        queue = deque(roots)
        while queue:
            for dep in self.deps(queue.popleft()):
                if dep not in seen:
                    seen.add(dep)
                    queue.append(dep)
        return {(rel, symbol) for rel, symbol in seen if symbol in (WHOLE_FILE, MODULE_LEVEL)
                or model_package(rel) is None or self.parsed(rel).defines(symbol)}


def _spans(tree: ast.Module) -> list[tuple[int, int, str]]:
    """(first line, last line, name) of each name a top-level statement defines, decorators included."""
    spans = []
    for stmt in tree.body:
        names = _defined_names(stmt)
        if names:
            first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
            spans.extend((first, stmt.end_lineno or stmt.lineno, name) for name in names)
    return spans


def definition_spans(source: str) -> list[tuple[int, int, str]] | None:
    """`_spans` of a source text; None when it does not parse."""
    try:
        return _spans(ast.parse(source))
    except SyntaxError:
        return None


def touched_definitions(source: str, lines: set[int]) -> set[str] | None:
    """The top-level definitions of `source` that contain any of `lines` (1-based).

    Blank and comment-only lines outside definitions change nothing. None
    (the whole file) when another line outside every definition is touched
    (imports, module-level code) or the source does not parse.
    """
    spans = definition_spans(source)
    if spans is None:
        return None
    text = source.splitlines()
    names: set[str] = set()
    for line in lines:
        owners = {name for first, last, name in spans if first <= line <= last}
        if owners:
            names |= owners
        elif 1 <= line <= len(text) and text[line - 1].strip() and not text[line - 1].strip().startswith("#"):
            return None
    return names
