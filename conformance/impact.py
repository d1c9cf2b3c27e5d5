"""Impacted-model selection: which discovered classes a transformers change can affect.

Contract:

* `impacted_classes(changed_files)` takes paths as in a transformers
  checkout (``src/transformers/models/llava/modeling_llava.py`` or without
  the leading ``src/``) and returns the canonical names of the discovered
  classes whose module imports a changed file, directly or transitively.
  Imports are read with `ast` from the installed transformers sources
  (relative imports count; imports inside functions and ``TYPE_CHECKING``
  blocks count). A package that has ``modular_*.py`` files is generated from
  them, so every other file of that package depends on its modular files
  (a class whose modular file imports from llava is impacted by llava).
* A change to a shared file (`SHARED`: cache, generation, masking, modeling
  utilities, integrations, ...) selects every class, whether or not the
  import graph reaches it: those files are also reached at run time through
  registries that static imports do not show.
* Files outside ``transformers/`` (docs, tests, utils scripts) and tooling
  that models never run (`TOOLING`: trainer, pipelines, CLI, ...) select
  nothing. A ``# Copied from transformers.<module>.<name>`` comment is code
  reuse: it counts like an import of that module.
* `changed_since(ref, repo)` lists the files ``git diff --name-only REF``
  reports in the checkout `repo` (default: the checkout of an editable
  install of transformers); a missing repo or bad ref raises
  `ImpactError` with one line that says what to fix.

The import graph is built lazily (only files reachable from a discovered
class are parsed) and cached per process.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
from collections import deque
from pathlib import Path, PurePosixPath

# Shared files and folders (relative to the transformers package): a change
# to any of them selects every class.
SHARED = (
    "cache_utils.py",
    "generation/",
    "masking_utils.py",
    "modeling_utils.py",
    "modeling_layers.py",
    "modeling_outputs.py",
    "modeling_rope_utils.py",
    "modeling_flash_attention_utils.py",
    "modeling_attn_mask_utils.py",
    "configuration_utils.py",
    "pytorch_utils.py",
    "activations.py",
    "initialization.py",
    "integrations/",
    "utils/generic.py",
    "utils/import_utils.py",
    "utils/output_capturing.py",
    "models/auto/",
)

# Tooling that models never run: a change to it selects nothing, and the
# graph does not follow imports into it.
TOOLING = (
    "trainer",
    "training_args",
    "pipelines/",
    "cli/",
    "commands/",
    "data/",
    "optimization.py",
    "hyperparameter_search.py",
    "hf_argparser.py",
    "modelcard.py",
    "sagemaker/",
    "distributed/",
    "testing_utils.py",
)

# Package roots whose imports are not followed: they import every model
# lazily, so following them would make every class depend on every model.
NOT_FOLLOWED = ("__init__.py", "models/__init__.py")

# `models/` packages that are registries, not models.
MODEL_INFRASTRUCTURE = ("auto", "__init__.py")
FILE_KINDS = ("modeling", "configuration", "image_processing", "video_processing", "feature_extraction",
              "processing", "tokenization", "modular")

# "# Copied from transformers.models.llava.modeling_llava.LlavaMultiModalProjector": code reuse by copy.
_COPIED_FROM = re.compile(r"#\s*Copied from transformers\.([\w.]+)")
_IMPORT_START = re.compile(r"^[ \t]*(?:from[ \t]+[.\w]+[ \t]+import\b|import[ \t]+\w)", re.M)


class ImpactError(RuntimeError):
    """Impact selection cannot be computed; the message is one line for a person."""


def transformers_root() -> Path:
    import transformers

    return Path(transformers.__file__).resolve().parent


def normalize(path: str) -> str | None:
    """`path` relative to the transformers package (posix), or None when outside it."""
    parts = PurePosixPath(path.replace("\\", "/")).parts
    parts = tuple(p for p in parts if p not in ("", "."))
    if parts[:1] == ("src",):
        parts = parts[1:]
    if parts[:1] != ("transformers",) or len(parts) < 2:
        return None
    return "/".join(parts[1:])


def _import_statements(source: str) -> list[ast.stmt]:
    """The import statements of a file, parsed with `ast` from their own lines only.

    Parsing only the import statements (not whole 100 kB modeling files) is
    what keeps the graph fast to build.
    """
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


def _model_package(rel: str) -> str | None:
    """``models/<pkg>/...`` -> pkg, for real model packages (not ``auto``); else None."""
    parts = rel.split("/")
    if len(parts) >= 3 and parts[0] == "models" and parts[1] not in MODEL_INFRASTRUCTURE:
        return parts[1]
    return None


def _kind(rel: str) -> str:
    stem = PurePosixPath(rel).stem
    return next((kind for kind in FILE_KINDS if stem.startswith(kind + "_")), "")


def _generated_from(generated: str, modular_dep: str) -> bool:
    """Whether a modular file's dependency `modular_dep` flows into the generated file `generated`.

    The modular converter copies definitions by kind: a generated modeling
    file takes modeling and configuration code, a configuration file only
    configuration code. Dependencies outside model packages always flow.
    """
    if _model_package(modular_dep) is None:
        return True
    kind, dep_kind = _kind(generated), _kind(modular_dep)
    if kind == "configuration":
        return dep_kind == "configuration"
    if kind == "modeling":
        return dep_kind in ("modeling", "configuration", "modular")
    return True


class ImportGraph:
    """Files of the installed transformers and the files each one depends on."""

    def __init__(self, root: Path):
        self.root = root
        self._deps: dict[str, frozenset[str]] = {}

    def _module_file(self, dotted: str) -> str | None:
        """`transformers.a.b` -> ``a/b.py`` or ``a/b/__init__.py`` (relative), if it exists."""
        parts = dotted.split(".")
        if parts[0] != "transformers":
            return None
        rel = "/".join(parts[1:])
        for candidate in ((rel + ".py") if rel else None, (rel + "/__init__.py") if rel else "__init__.py"):
            if candidate and (self.root / candidate).is_file():
                return candidate
        return None

    def _longest_module_file(self, dotted: str) -> str | None:
        """The module file named by the longest importable prefix of `dotted` (a `Copied from` target)."""
        parts = dotted.split(".")
        for end in range(len(parts), 1, -1):
            target = self._module_file(".".join(parts[:end]))
            if target:
                return target
        return None

    def _package_of(self, rel: str) -> str:
        parts = rel.split("/")[:-1]
        return ".".join(["transformers", *parts])

    def deps(self, rel: str) -> frozenset[str]:
        """Files `rel` depends on: its imports, plus its package's modular files."""
        if rel in self._deps:
            return self._deps[rel]
        found: set[str] = set()
        path = self.root / rel
        if rel not in NOT_FOLLOWED and path.is_file():
            package = self._package_of(rel)
            source = path.read_text(errors="replace")
            for node in _import_statements(source):
                for dotted in self._targets(node, package):
                    target = self._module_file(dotted)
                    if target and target != rel:
                        found.add(target)
            for dotted in _COPIED_FROM.findall(source):
                target = self._longest_module_file("transformers." + dotted)
                if target and target != rel:
                    found.add(target)
            found = {dep for dep in found if not is_tooling(dep)}
            if _model_package(rel) is None:
                # Infrastructure reaches model packages only through registries.
                found = {dep for dep in found if _model_package(dep) is None}
            elif not PurePosixPath(rel).name.startswith("modular_"):
                for modular in sorted(path.parent.glob("modular_*.py")):
                    modular_rel = modular.relative_to(self.root).as_posix()
                    found.add(modular_rel)
                    found.update(dep for dep in self.deps(modular_rel) if _generated_from(rel, dep))
        self._deps[rel] = frozenset(found)
        return self._deps[rel]

    @staticmethod
    def _targets(node: ast.stmt, package: str) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        if not isinstance(node, ast.ImportFrom):
            return []
        if node.level:
            base_parts = package.split(".")
            drop = node.level - 1
            if drop:
                base_parts = base_parts[:-drop]
            base = ".".join(base_parts + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        # `from pkg import name` may name a submodule as well as an attribute.
        return [base] + [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]

    def closure(self, rel: str) -> set[str]:
        """Every file `rel` depends on, transitively, and `rel` itself."""
        seen = {rel}
        queue = deque([rel])
        while queue:
            for dep in self.deps(queue.popleft()):
                if dep not in seen:
                    seen.add(dep)
                    queue.append(dep)
        return seen


def class_closures(root: Path, modules: dict[str, str]) -> dict[str, frozenset[str]]:
    """Class name -> the files (relative to `root`) its module (dotted, in `modules`) depends on."""
    graph = ImportGraph(root)
    closures: dict[str, frozenset[str]] = {}
    for name, module in modules.items():
        rel = graph._module_file(module)
        closures[name] = frozenset(graph.closure(rel)) if rel else frozenset()
    return closures


@functools.lru_cache(maxsize=1)
def _installed_closures() -> dict[str, frozenset[str]]:
    """`class_closures` of every discovered class of the installed transformers (cached per process)."""
    from conformance.discover import discover

    return class_closures(transformers_root(), {info.name: info.module for info in discover()})


def is_shared(rel: str) -> bool:
    return any(rel == s or (s.endswith("/") and rel.startswith(s)) for s in SHARED)


def is_tooling(rel: str) -> bool:
    return rel.startswith(TOOLING)


def impacted_classes(changed_files: list[str]) -> set[str]:
    """Canonical names of the discovered classes a change to `changed_files` can affect."""
    return select(changed_files, _installed_closures())


def select(changed_files: list[str], closures: dict[str, frozenset[str]]) -> set[str]:
    """The classes of `closures` whose files include a changed file (all of them for a shared file)."""
    impacted: set[str] = set()
    for path in changed_files:
        rel = normalize(path)
        if rel is None or is_tooling(rel):
            continue
        if is_shared(rel):
            return set(closures)
        impacted.update(name for name, files in closures.items() if rel in files)
    return impacted


def _installed_checkout() -> Path | None:
    """The git checkout the installed transformers comes from (an editable install), if any."""
    for candidate in transformers_root().parents[:2]:
        if (candidate / ".git").exists():
            return candidate
    return None


def changed_since(ref: str, repo: str | Path | None = None) -> list[str]:
    """Files changed between `ref` and the working tree of the checkout `repo`."""
    if not repo:
        repo = _installed_checkout()
        if repo is None:
            raise ImpactError("--since needs --transformers-repo PATH (a git checkout of transformers); the "
                              "installed transformers is not an editable checkout")
    repo = Path(repo).expanduser()
    if not repo.is_dir():
        raise ImpactError(f"--transformers-repo {repo}: no such directory; pass a transformers git checkout")
    inside = subprocess.run(["git", "-C", str(repo), "rev-parse", "--git-dir"], capture_output=True, text=True)
    if inside.returncode != 0:
        raise ImpactError(f"--transformers-repo {repo}: not a git checkout; clone transformers there")
    result = subprocess.run(["git", "-C", str(repo), "diff", "--name-only", ref, "--"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise ImpactError(f"--since {ref}: git cannot diff against it in {repo} "
                          f"({result.stderr.strip().splitlines()[0] if result.stderr.strip() else 'unknown ref'}); "
                          "pass a branch, tag or commit that exists there (fetch it first)")
    return [line for line in result.stdout.splitlines() if line.strip()]
