"""`conformance flags --patch`: a unified diff that sets declared capability flags to what a run observed.

Contract: `make_patch(advice, tree)` takes the advice of
`conformance.report.flag_advice` (only `set` advice changes anything) and a
transformers source tree (`SourceTree`: a checkout holding
``src/transformers``, or the package directory itself) and returns a
`Patch`: the diff (paths ``a/src/transformers/...``, so that ``git apply``
takes it at the root of a transformers checkout), one `Change` per class it
changes and one `LeftAlone` per class it could not change, with the reason.
The tree is read with `ast`, never imported.

Where the flag is written: a class gets the flag from the first class of its
MRO whose body assigns it (the owner; `ast`, bases resolved through the
module's imports). The patch changes the observed class only:

* the owner is the class itself: the assignment is changed in place;
* the owner is a base (the model's `*PreTrainedModel`, or `PreTrainedModel`)
  that is also the owner for classes the run did not observe, or observed
  otherwise (the base model, a text-only head): the assignment is added to
  the class's own body, so their flags do not change on this evidence;
* the owner is a base of the class's model package whose every inheriting
  class in the tree gets the same new value from this run: the owner's line
  is changed (one line instead of several).

A generated file (``This file was automatically generated from
.../modular_x.py``) is changed together with its modular file: the same class
there gets the same edit (changed in place or added). A class that the
modular file does not define is named in `Patch.notes` (regenerate with
``utils/modular_model_converter.py``).

A class is left alone when the tree does not define it (or defines it in
several files), when its flag is not a literal, or when the tree's value is not
the one the run declared (the tree is not the one the run ran on).
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path

from conformance.report.flag_advice import Advice

DIFF_ROOT = "src/transformers"  # where the package lives in a transformers checkout
GENERATED_FROM = re.compile(r"This file was automatically generated from (?:src/transformers/)?(\S+?\.py)")
CLASS_LINE = re.compile(r"^class\s+(\w+)\s*[(:]", re.M)
UNKNOWN = object()  # a flag assigned something that is not a literal


class PatchError(ValueError):
    """The source tree is unusable; the message is one line for a person."""


def installed_package() -> Path:
    """The installed transformers package directory, found without importing it."""
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        raise PatchError("transformers is not installed here; pass --transformers-repo DIR (a transformers checkout)")
    return Path(list(spec.submodule_search_locations)[0])


# --------------------------------------------------------------------------- reading the tree

ClassRef = tuple[str, str]  # (file relative to the package, class name)


@dataclass
class Module:
    rel: str
    text: str
    tree: ast.Module
    classes: dict[str, ast.ClassDef]
    imports: dict[str, tuple[str, str]]  # local name -> (absolute module, name there)


class SourceTree:
    """The transformers sources under `root` (a checkout holding src/transformers, or the package directory)."""

    def __init__(self, root: str | Path):
        root = Path(root)
        candidates = [root / DIFF_ROOT, root]
        package = next((p for p in candidates if (p / "modeling_utils.py").is_file() and (p / "models").is_dir()), None)
        if package is None:
            raise PatchError(f"{root}: not a transformers source tree (no {DIFF_ROOT}/modeling_utils.py, nor "
                             "modeling_utils.py beside models/); pass the root of a transformers checkout")
        self.package = package
        self._modules: dict[str, Module | None] = {}
        self._index: dict[str, list[str]] | None = None
        self._texts: dict[str, str] = {}
        self._modeling_files: list[str] | None = None
        self._mro: dict[ClassRef, list[ClassRef]] = {}

    # -- files

    def text(self, rel: str) -> str:
        if rel not in self._texts:
            self._texts[rel] = (self.package / rel).read_text(encoding="utf-8")
        return self._texts[rel]

    def module(self, rel: str) -> Module | None:
        if rel not in self._modules:
            path = self.package / rel
            self._modules[rel] = None
            if path.is_file():
                text = self.text(rel)
                try:
                    tree = ast.parse(text)
                except SyntaxError:
                    return None
                classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
                self._modules[rel] = Module(rel, text, tree, classes, _imports(tree, rel))
        return self._modules[rel]

    def module_file(self, dotted: str) -> str | None:
        """`transformers.models.x.modeling_x` -> its file relative to the package."""
        parts = dotted.split(".")
        if parts[0] != "transformers":
            return None
        base = "/".join(parts[1:])
        for rel in (f"{base}.py", f"{base}/__init__.py" if base else "__init__.py"):
            if (self.package / rel).is_file():
                return rel
        return None

    def modeling_files(self) -> list[str]:
        if self._modeling_files is None:
            self._modeling_files = sorted(str(p.relative_to(self.package))
                                          for p in self.package.glob("models/*/modeling_*.py"))
        return self._modeling_files

    def find_class(self, name: str, model_type: str = "") -> tuple[ClassRef | None, str]:
        """(the file defining class `name` among the model files, "") or (None, why not)."""
        if self._index is None:
            self._index = {}
            for rel in self.modeling_files():
                for found in CLASS_LINE.findall(self.text(rel)):
                    self._index.setdefault(found, []).append(rel)
        files = self._index.get(name, [])
        if len(files) > 1 and model_type:
            files = [f for f in files if f.split("/")[1] == model_type] or files
        if not files:
            return None, "the source tree does not define the class"
        if len(files) > 1:
            return None, f"the class is defined in {len(files)} files ({', '.join(files)})"
        return (files[0], name), ""

    # -- classes

    def resolve(self, rel: str, name: str, depth: int = 0) -> ClassRef | None:
        """Where the name `name` of module `rel` is defined as a class (following imports), or None."""
        module = self.module(rel)
        if module is None or depth > 8:
            return None
        if name in module.classes:
            return rel, name
        if name in module.imports:
            dotted, original = module.imports[name]
            target = self.module_file(dotted)
            return self.resolve(target, original, depth + 1) if target else None
        return None

    def bases(self, ref: ClassRef) -> list[ClassRef]:
        """The bases of a class that the tree defines (others, such as nn.Module, are left out)."""
        node = self.module(ref[0]).classes[ref[1]]
        found = []
        for base in node.bases:
            if isinstance(base, ast.Name):
                resolved = self.resolve(ref[0], base.id)
                if resolved is not None and resolved != ref:
                    found.append(resolved)
        return found

    def mro(self, ref: ClassRef) -> list[ClassRef]:
        """C3 linearization over the bases the tree defines (a depth-first order where C3 has none)."""
        return _c3(ref, self.bases, self._mro)

    def assignment(self, ref: ClassRef, flag: str) -> ast.stmt | None:
        """The statement of the class's own body that assigns `flag`, if any."""
        return _assignment(self.module(ref[0]).classes[ref[1]], flag)

    def owner(self, ref: ClassRef, flag: str) -> tuple[ClassRef | None, object]:
        """(the class of `ref`'s MRO whose body assigns `flag`, the literal value) or (None, None)."""
        for klass in self.mro(ref):
            stmt = self.assignment(klass, flag)
            if stmt is not None:
                return klass, _literal(stmt.value)
        return None, None

    def inheritors(self, owner: ClassRef, flag: str) -> list[ClassRef]:
        """Every class of the model files (the owner aside) that gets `flag` from `owner`."""
        found = []
        for rel in self.modeling_files():
            if owner[1] not in self.text(rel):
                continue
            module = self.module(rel)
            for name in (module.classes if module else {}):
                if (rel, name) != owner and self.owner((rel, name), flag)[0] == owner:
                    found.append((rel, name))
        return found

    def modular_of(self, rel: str) -> str | None:
        """The modular file a generated file says it was generated from, when the tree has it."""
        match = GENERATED_FROM.search(self.text(rel)[:2000])
        if match is None:
            return None
        modular = match.group(1).removeprefix("transformers/")
        return modular if (self.package / modular).is_file() else None


def _imports(tree: ast.Module, rel: str) -> dict[str, tuple[str, str]]:
    """Names the module imports at module level (also under if/try), as (absolute module, name)."""
    package = ["transformers"] + rel.split("/")[:-1]
    found = {}
    stack = list(tree.body)
    while stack:
        node = stack.pop(0)
        if isinstance(node, (ast.If, ast.Try)):
            stack[:0] = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                         *[s for h in getattr(node, "handlers", []) for s in h.body]]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                dotted = ".".join(base + ([node.module] if node.module else []))
            else:
                dotted = node.module or ""
            for alias in node.names:
                found[alias.asname or alias.name] = (dotted, alias.name)
    return found


def _c3(ref: ClassRef, bases_of, memo: dict) -> list[ClassRef]:
    if ref in memo:
        return memo[ref]
    memo[ref] = [ref]  # a cycle (not valid Python) stops here
    bases = bases_of(ref)
    sequences = [list(_c3(b, bases_of, memo)) for b in bases] + [list(bases)]
    result = [ref]
    while any(sequences):
        sequences = [s for s in sequences if s]
        head = next((s[0] for s in sequences if not any(s[0] in t[1:] for t in sequences)), None)
        if head is None:  # no C3 order: depth-first, left to right
            for s in sequences:
                result += [c for c in s if c not in result]
            break
        result.append(head)
        sequences = [s[1:] if s[0] == head else s for s in sequences]
    memo[ref] = result
    return result


def _assignment(node: ast.ClassDef, flag: str) -> ast.Assign | ast.AnnAssign | None:
    for stmt in node.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == flag for t in stmt.targets):
            return stmt
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == flag \
                and stmt.value is not None:  # an annotation alone assigns nothing
            return stmt
    return None


def _literal(node: ast.expr | None):
    try:
        return ast.literal_eval(node) if node is not None else UNKNOWN
    except (ValueError, TypeError, SyntaxError):
        return UNKNOWN


# --------------------------------------------------------------------------- editing


@dataclass(frozen=True)
class Edit:
    rel: str
    klass: str
    flag: str
    value: bool
    how: str  # "changed" (the assignment in place) | "added" (to the class's body)


def plan_edit(tree: SourceTree, rel: str, klass: str, flag: str, value: bool) -> Edit:
    """Change the class's own assignment where it has one, else add one to its body."""
    how = "changed" if tree.assignment((rel, klass), flag) is not None else "added"
    return Edit(rel, klass, flag, value, how)


def apply_edits(text: str, module: Module, edits: list[Edit]) -> str:
    """`text` with the edits made: a changed assignment keeps its line and comment, an added one goes after
    the class's docstring and leading class attributes (or replaces a lone `pass`)."""
    lines = text.splitlines(keepends=True)
    operations = []  # (line index, lines to remove, new lines), applied bottom up
    for edit in edits:
        node = module.classes[edit.klass]
        stmt = _assignment(node, edit.flag)
        if stmt is not None:
            value = stmt.value
            if value.lineno != value.end_lineno:
                raise PatchError(f"{module.rel}: {edit.klass}.{edit.flag} spans several lines; edit it by hand")
            line = lines[value.lineno - 1]
            start, end = _char_offsets(line, value.col_offset, value.end_col_offset)
            operations.append((value.lineno - 1, 1, [line[:start] + repr(edit.value) + line[end:]]))
            continue
        body = node.body
        if body[0].lineno == node.end_lineno == node.lineno:  # `class X(Base): ...` (a body of `...` or `pass`)
            if len(body) != 1 or not _is_placeholder(body[0]):
                raise PatchError(f"{module.rel}: the body of {edit.klass} is on its class line; edit it by hand")
            line = lines[node.lineno - 1]
            start, _ = _char_offsets(line, body[0].col_offset, body[0].col_offset)
            indent = line[: node.col_offset] + "    "
            operations.append((node.lineno - 1, 1, [line[:start].rstrip() + "\n",
                                                    f"{indent}{edit.flag} = {edit.value!r}\n"]))
            continue
        if body[0].lineno == node.lineno:
            raise PatchError(f"{module.rel}: the body of {edit.klass} starts on its class line; edit it by hand")
        indent = lines[body[0].lineno - 1][: body[0].col_offset]
        new = f"{indent}{edit.flag} = {edit.value!r}\n"
        rest = body[1:] if _is_docstring(body[0]) else body
        if len(rest) == 1 and _is_placeholder(rest[0]) and rest[0].lineno == rest[0].end_lineno:
            operations.append((rest[0].lineno - 1, 1, [new]))  # the class now has a body of its own
            continue
        after = body[0] if _is_docstring(body[0]) else None
        for stmt in rest:
            if not isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                break
            after = stmt
        if after is not None:
            at = after.end_lineno
        else:  # before the first statement, above its decorators and the comments over it
            first = body[0]
            at = min([first.lineno] + [d.lineno for d in getattr(first, "decorator_list", [])]) - 1
            while at > node.lineno and lines[at - 1].strip().startswith("#"):
                at -= 1
        # an attribute block of its own: a blank line before what follows, unless it follows other attributes
        separate = (after is None or after is body[0] and _is_docstring(after)) and at < len(lines) \
            and lines[at].strip() != ""
        operations.append((at, 0, [new] + (["\n"] if separate else [])))
    for index, remove, new in sorted(operations, key=lambda op: op[0], reverse=True):
        lines[index:index + remove] = new
    return "".join(lines)


def _is_placeholder(stmt: ast.stmt) -> bool:
    """`pass` or `...`: a body that says nothing."""
    return isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                                           and stmt.value.value is Ellipsis)


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _char_offsets(line: str, start: int, end: int) -> tuple[int, int]:
    """ast's UTF-8 byte columns of `line` as character offsets."""
    encoded = line.encode("utf-8")
    return len(encoded[:start].decode("utf-8")), len(encoded[:end].decode("utf-8"))


def unified_diff(rel: str, before: str, after: str) -> str:
    """A git-style diff of one file of the package, with paths as in a transformers checkout."""
    path = f"{DIFF_ROOT}/{rel}"
    body = list(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                     f"a/{path}", f"b/{path}", n=3))
    if not body:
        return ""
    body = [line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in body]
    return f"diff --git a/{path} b/{path}\n" + "".join(body)


# --------------------------------------------------------------------------- the patch


@dataclass(frozen=True)
class Change:
    advice: Advice
    edits: tuple[Edit, ...]
    owner: ClassRef | None  # where the class got the flag before
    shared_with: tuple[str, ...] = ()  # classes that keep the owner's value (when the edit was added)

    def where(self) -> str:
        main = self.edits[0]
        text = f"{main.rel}: {main.klass} ({main.how})"
        if len(self.edits) > 1:
            text += " and " + ", ".join(f"{e.rel}: {e.klass} ({e.how})" for e in self.edits[1:])
        if main.how == "added" and self.owner is not None:
            kept = f"; {self.owner[1]} keeps it"
            if self.shared_with:
                kept += f" for {len(self.shared_with)} other class(es), e.g. {', '.join(self.shared_with[:3])}"
            text += kept
        return text


@dataclass(frozen=True)
class LeftAlone:
    advice: Advice
    why: str


@dataclass
class Patch:
    diff: str = ""
    changes: list[Change] = field(default_factory=list)
    left_alone: list[LeftAlone] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


def make_patch(advice: list[Advice], tree: SourceTree, model_types: dict[str, str] | None = None) -> Patch:
    """The patch for every `set` advice (see the module); `model_types` (class -> model_type) picks among files."""
    patch = Patch()
    to_set = [a for a in advice if a.action == "set"]
    wanted = {(a.model, a.flag): a.value for a in to_set}
    planned: list[tuple[Advice, Edit, ClassRef | None, tuple[str, ...]]] = []
    for item in to_set:
        ref, why = tree.find_class(item.model, (model_types or {}).get(item.model, ""))
        if ref is None:
            patch.left_alone.append(LeftAlone(item, why))
            continue
        owner, value = tree.owner(ref, item.flag)
        if value is UNKNOWN:
            patch.left_alone.append(LeftAlone(item, f"{owner[1]}.{item.flag} is not a literal"))
            continue
        if owner is None or value != item.declared:
            says = f"{owner[1]} sets {value}" if owner else "no class of its MRO sets it"
            patch.left_alone.append(LeftAlone(item, f"the source tree does not match the run ({says}, the run "
                                                    f"declared {item.declared}): not the tree the run ran on"))
            continue
        shared: tuple[str, ...] = ()
        if owner == ref:
            edit = plan_edit(tree, *ref, item.flag, item.value)
        else:
            own_package = owner[0].startswith("models/") and owner[0].split("/")[1] == ref[0].split("/")[1]
            inheritors = tree.inheritors(owner, item.flag) if own_package else []
            if own_package and all(wanted.get((name, item.flag)) == item.value for _, name in inheritors):
                edit = plan_edit(tree, *owner, item.flag, item.value)
            else:
                edit = plan_edit(tree, *ref, item.flag, item.value)
                shared = tuple(name for _, name in inheritors if name != ref[1])
        planned.append((item, edit, owner, shared))
    by_file: dict[str, list[Edit]] = {}
    for item, edit, owner, shared in planned:
        edits = [edit]
        modular = tree.modular_of(edit.rel)
        note = ""
        if modular is not None:
            module = tree.module(modular)
            if module is not None and edit.klass in module.classes:
                edits.append(plan_edit(tree, modular, edit.klass, edit.flag, edit.value))
            else:
                note = (f"{modular} does not define {edit.klass}: after applying, regenerate {edit.rel} with "
                        "utils/modular_model_converter.py and check it keeps the flag")
        try:
            for e in edits:  # each edit alone first: one that cannot be made leaves its class alone
                apply_edits(tree.text(e.rel), tree.module(e.rel), [e])
        except PatchError as exc:
            patch.left_alone.append(LeftAlone(item, str(exc)))
            continue
        if note:
            patch.notes.append(note)
        for e in edits:
            if e not in by_file.setdefault(e.rel, []):
                by_file[e.rel].append(e)
        patch.changes.append(Change(item, tuple(edits), owner, shared))
    diffs = []
    for rel in sorted(by_file):
        before = tree.text(rel)
        diffs.append(unified_diff(rel, before, apply_edits(before, tree.module(rel), by_file[rel])))
        patch.files.append(f"{DIFF_ROOT}/{rel}")
    patch.diff = "".join(diffs)
    return patch
