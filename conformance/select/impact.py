"""Impacted-model selection: which discovered classes a transformers change can affect.

Contract:

* `impacted_classes(changed_files)` takes paths as in a transformers
  checkout (``src/transformers/models/llava/modeling_llava.py`` or without
  the leading ``src/``) and returns the canonical names of the discovered
  classes whose code includes code of a changed file: what the class's own
  definition uses, transitively, through imports, modular parents and
  ``# Copied from`` comments, followed symbol by symbol (`code_graph`), plus
  the sub-models its default config builds through the auto registry
  (Llava runs CLIP's vision model). Reusing one symbol of a package does not
  make a class depend on the rest of that package.
* A change to a shared file (`SHARED`: cache, generation, masking, modeling
  utilities, integrations, ...) selects every class, whether or not the
  import graph reaches it: those files are also reached at run time through
  registries that static imports do not show.
* Files outside ``transformers/`` (docs, tests, utils scripts) and tooling
  that models never run (`TOOLING`: trainer, pipelines, CLI, ...) select
  nothing.
* With a diff (`--since`), `changed_definitions(ref, repo, files)` narrows
  each changed Python file to the top-level definitions the diff touches: a
  class is then impacted only when its code includes one of them (a change
  to ``LlavaMultiModalProjector`` alone selects the classes that use or copy
  the projector). A diff touching imports or other module-level code, or a
  file added, removed or not Python, counts as the whole file.
* `changed_since(ref, repo)` lists the files ``git diff --name-only REF``
  reports in the checkout `repo` (default: the checkout of an editable
  install of transformers); a missing repo or bad ref raises
  `ImpactError` with one line that says what to fix.
* `resolve_changed(paths, root, checkout)` turns every path a person named
  into a file of the transformers being gated (`ChangedFile`), or raises
  `ImpactError` with one line naming the path and the accepted forms: a
  file of the package at `root` as ``src/transformers/PATH``,
  ``transformers/PATH`` or ``PATH`` relative to the package (the package
  wins where ``PATH`` also names a file of the checkout: more classes, never
  fewer), an absolute path inside the package or the checkout, or a file
  of the checkout outside the package (``docs/...``, ``tests/...``: it
  affects no class). A path that names no file (a wrong prefix, a typo, a
  directory) is never read as "affects nothing". `resolve_diffed(paths,
  checkout)` does the same for the paths git reported: repo-relative by
  construction (a file the diff removes included), in a checkout that must
  hold ``src/transformers``.

The graph is built lazily (only files reachable from a discovered class are
parsed), cached per process, and only when a changed file needs it (not for
a shared file, tooling or a file outside the package). Parsed files are kept
between runs (`code_graph_cache`): a file is parsed again only when it changed.
"""

from __future__ import annotations

import functools
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from conformance.select.code_graph import WHOLE_FILE, SymbolGraph, touched_definitions
from conformance.select.code_graph_cache import ParseCache

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


# How a person may name a changed file of the package (the error of a path that names none says so).
ACCEPTED_FORMS = "src/transformers/PATH, transformers/PATH or PATH relative to the installed package"


@dataclass(frozen=True)
class ChangedFile:
    """A changed file of the transformers being gated.

    `path` is the file as in a transformers checkout (posix): ``src/transformers/<rel>`` for a file of the
    package, else relative to the checkout (``docs/source/en/index.md``); `rel` is the path relative to the
    package, None for a file of the checkout outside it (it affects no class). `impacted_classes` and
    `normalize` read `path`.
    """

    path: str
    rel: str | None


def _parts(path: str) -> tuple[str, ...]:
    return tuple(p for p in PurePosixPath(path.replace("\\", "/")).parts if p not in ("", "."))


def checkout_of(repo: str | Path | None) -> Path | None:
    """The transformers checkout `repo` names (``--transformers-repo``), else that of an editable install (None
    when there is none: a release installed from a wheel)."""
    if repo:
        return Path(repo).expanduser()
    found = _installed_checkout()
    return found if found is not None and (found / "src" / "transformers").is_dir() else None


def require_checkout(checkout: Path) -> Path:
    """`checkout` when it is a directory holding ``src/transformers``, else ImpactError (one line)."""
    if not checkout.is_dir():
        raise ImpactError(f"--transformers-repo {checkout}: no such directory; pass a transformers git checkout")
    if not (checkout / "src" / "transformers").is_dir():
        raise ImpactError(f"--transformers-repo {checkout}: not a transformers checkout (no src/transformers in it); "
                          "pass the checkout of the transformers being gated")
    return checkout


def resolve_changed(paths: list[str], root: Path, checkout: Path | None) -> list[ChangedFile]:
    """Each of `paths` as a file of the transformers at `root` (or of its `checkout`); see the module's contract.

    Raises ImpactError (one line naming the path, the accepted forms and, where it can tell, the path meant)
    for a path that names no file; `checkout` must hold ``src/transformers``.
    """
    if checkout is not None:
        require_checkout(checkout)
    return [_resolve(path, root, checkout) for path in paths]


def _resolve(path: str, root: Path, checkout: Path | None) -> ChangedFile:
    parts = _parts(path)
    if PurePosixPath(path.replace("\\", "/")).is_absolute():
        parts = _relative_parts(Path(path), root, checkout) or parts
    if parts[:2] == ("src", "transformers"):
        package_parts = [parts[2:]]
    elif parts[:1] == ("transformers",):
        package_parts = [parts[1:]]
    else:
        package_parts = [parts]  # relative to the package: models/llava/modeling_llava.py
    bases = [root] + ([checkout / "src" / "transformers"] if checkout is not None else [])
    for rel in filter(None, package_parts):
        for base in bases:
            if (base / Path(*rel)).is_file():
                return ChangedFile("/".join(("src", "transformers") + rel), "/".join(rel))
    if checkout is not None and parts and (checkout / Path(*parts)).is_file():
        return ChangedFile("/".join(parts), None)  # docs/..., tests/...: a file of the checkout, outside the package
    candidates = [base / Path(*rel) for rel in package_parts if rel for base in bases]
    candidates += [checkout / Path(*parts)] if checkout is not None and parts else []
    if any(c.is_dir() for c in candidates):
        raise ImpactError(f"--changed-files {path}: is a directory; name the changed files in it "
                          "(or use --since REF, which lists them)")
    import transformers

    where = f"transformers {transformers.__version__} ({root}"
    where += f", checkout {checkout})" if checkout is not None else ")"
    meant = _meant(parts, root)
    hint = (f"; did you mean transformers/{meant}?" if meant else
            "" if checkout is not None else
            "; a file outside the package (docs/, tests/) needs --transformers-repo CHECKOUT")
    raise ImpactError(f"--changed-files {path}: no such file in {where}; name a changed file as {ACCEPTED_FORMS}{hint}")


def _relative_parts(path: Path, root: Path, checkout: Path | None) -> tuple[str, ...] | None:
    """An absolute path inside the package (as ``transformers/...``) or the checkout (relative to it)."""
    real = path.resolve()
    bases = [(root, ("transformers",))] + ([(checkout, ())] if checkout is not None else [])
    for base, prefix in bases:
        if real.is_relative_to(base.resolve()):
            return prefix + real.relative_to(base.resolve()).parts
    return None


def _meant(parts: tuple[str, ...], root: Path) -> str:
    """The package file a wrong prefix probably meant: the longest tail of `parts` that is one ('' if none)."""
    for start in range(1, len(parts)):
        tail = parts[start:]
        if (root / Path(*tail)).is_file():
            return "/".join(tail)
    return ""


def resolve_diffed(paths: list[str], repo: str | Path | None) -> list[ChangedFile]:
    """The files `git diff` reported in the checkout `repo` (as `changed_since` reads it; repo-relative, removed
    files included) as `ChangedFile`s; ImpactError when that checkout holds no ``src/transformers``."""
    checkout = Path(repo).expanduser() if repo else _installed_checkout()
    if checkout is None:
        raise ImpactError("--since needs --transformers-repo PATH (a git checkout of transformers); the "
                          "installed transformers is not an editable checkout")
    require_checkout(checkout)
    found = []
    for path in paths:
        parts = _parts(path)
        inside = parts[:2] == ("src", "transformers") and len(parts) > 2
        found.append(ChangedFile("/".join(parts), "/".join(parts[2:]) if inside else None))
    return found


Closure = frozenset  # of code_graph nodes: (file relative to the transformers package, definition name)


def class_closures(root: Path, roots: dict[str, list[str]]) -> dict[str, Closure]:
    """Class name -> the definitions (`code_graph` nodes, files relative to `root`) its code depends on.

    `roots` maps a class name to dotted names of the classes it runs: its own
    (``transformers.models.llava.modeling_llava.LlavaForConditionalGeneration``)
    and the sub-models its default config builds through the auto registry.
    """
    cache = ParseCache.load(root)
    graph = SymbolGraph(root, cache)
    closures: dict[str, Closure] = {}
    for name, dotted_names in roots.items():
        nodes = [node for node in map(graph.dotted_symbol, dotted_names) if node]
        closures[name] = frozenset(graph.closure(nodes)) if nodes else frozenset()
    cache.save()
    return closures


def registry_submodels(config_class, sub_configs: dict[str, str] | None = None) -> list[str]:
    """Dotted names of the models a config's default sub-configs build through the auto registry.

    LlavaConfig's default vision config is CLIP's: Llava runs CLIPVisionModel
    although no Llava file imports it. `sub_configs` (a checkpoint profile's:
    sub-config key -> model type) replaces those defaults: the LLaVA-Interleave
    row runs Qwen2Model and SiglipVisionModel. A config that cannot be built with
    defaults contributes nothing.
    """
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    from conformance.discover import quiet_transformers

    try:
        with quiet_transformers():
            config = config_class()
    except Exception:  # noqa: BLE001 - some configs need arguments; they simply add no edges
        return []
    found = []
    chosen = sub_configs or {}
    for key in dict.fromkeys([*(getattr(config_class, "sub_configs", {}) or {}), *chosen]):
        model_type = chosen.get(key) or getattr(getattr(config, key, None), "model_type", None)
        class_name = MODEL_MAPPING_NAMES.get(model_type or "")
        if isinstance(class_name, (tuple, list)):
            class_name = class_name[0]
        cls = getattr(transformers, class_name, None) if class_name else None
        if cls is not None:
            found.append(f"{cls.__module__}.{cls.__name__}")
    return found


@functools.lru_cache(maxsize=1)
def _installed_closures() -> dict[str, Closure]:
    """`class_closures` of every discovered class of the installed transformers (cached per process)."""
    from conformance.discover import discover

    roots = {info.name: [f"{info.module}.{info.class_name}",
                         *registry_submodels(info.config_class, info.profile.sub_configs if info.profile else None)]
             for info in discover()}
    return class_closures(transformers_root(), roots)


def is_shared(rel: str) -> bool:
    return any(rel == s or (s.endswith("/") and rel.startswith(s)) for s in SHARED)


def is_tooling(rel: str) -> bool:
    return rel.startswith(TOOLING)


def impacted_classes(changed_files: list[str], definitions: dict[str, set[str] | None] | None = None) -> set[str]:
    """Canonical names of the discovered classes a change to `changed_files` can affect (see `select`).

    The code graph is built only when a changed file needs it: a shared file
    selects every class and tooling or files outside the package select none,
    whatever the graph says.
    """
    rels = [normalize(path) for path in changed_files]
    if any(rel is not None and is_shared(rel) for rel in rels):
        from conformance.discover import discover

        return {info.name for info in discover()}
    if all(rel is None or is_tooling(rel) for rel in rels):
        return set()
    return select(changed_files, _installed_closures(), definitions)


def select(changed_files: list[str], closures: dict[str, Closure],
           definitions: dict[str, set[str] | None] | None = None) -> set[str]:
    """The classes of `closures` whose code includes code of a changed file (all of them for a shared file).

    `definitions` maps a file (relative to the transformers package) to the
    top-level definitions a diff touched in it (`changed_definitions`); a file
    it does not map, or maps to None, changed as a whole.
    """
    definitions = definitions or {}
    impacted: set[str] = set()
    for path in changed_files:
        rel = normalize(path)
        if rel is None or is_tooling(rel):
            continue
        if is_shared(rel):
            return set(closures)
        touched = definitions.get(rel)
        impacted.update(name for name, nodes in closures.items()
                        if any(file == rel and (touched is None or symbol == WHOLE_FILE or symbol in touched)
                               for file, symbol in nodes))
    return impacted


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", re.M)


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)


def changed_definitions(ref: str, repo: str | Path | None, files: list[str]) -> dict[str, set[str] | None]:
    """For each changed file of transformers, the top-level definitions the diff against `ref` touches.

    Lines the diff removes are looked up in the file at the diff's base,
    lines it adds in the file at its other side (the working tree, or ``B``
    of ``A...B``). A file maps to None (changed as a whole) when it is added
    or removed, is not Python, or the diff touches code outside every
    definition (imports, module-level statements); blank and comment lines
    change nothing.
    """
    repo = Path(repo).expanduser() if repo else _installed_checkout()
    if repo is None:
        return {}
    base, three_dots, head = ref.partition("...")
    if three_dots:
        merge_base = _git(repo, "merge-base", base, head or "HEAD")
        base = merge_base.stdout.strip() if merge_base.returncode == 0 else base
        head = head or "HEAD"
    found: dict[str, set[str] | None] = {}
    for path in files:
        rel = normalize(path)
        if rel is not None:
            found[rel] = _touched(repo, ref, path, base, head) if path.endswith(".py") else None
    return found


def _touched(repo: Path, ref: str, path: str, base: str, head: str) -> set[str] | None:
    """`changed_definitions` of one file; `head` is empty when the diff's other side is the working tree."""
    diff = _git(repo, "diff", "-U0", "--no-color", ref, "--", path)
    old = _git(repo, "show", f"{base}:{path}")
    if head:
        shown = _git(repo, "show", f"{head}:{path}")
        new = shown.stdout if shown.returncode == 0 else None
    else:
        new = (repo / path).read_text(errors="replace") if (repo / path).is_file() else None
    if diff.returncode != 0 or old.returncode != 0 or new is None:
        return None
    removed: set[int] = set()
    added: set[int] = set()
    for match in _HUNK.finditer(diff.stdout):
        start, count = int(match.group(1)), int(match.group(2) or 1)
        removed.update(range(start, start + count))
        start, count = int(match.group(3)), int(match.group(4) or 1)
        added.update(range(start, start + count))
    before = touched_definitions(old.stdout, removed)
    after = touched_definitions(new, added)
    if before is None or after is None:
        return None
    return before | after


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
