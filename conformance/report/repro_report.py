"""The reporting part of every standalone reproducer: its source is copied verbatim into each script.

Contract: this module imports only the standard library and torch (never
`conformance`, never transformers), because `conformance.report.repro`
pastes its source under the reproducer's steps. `main(reproduce)` calls the
script's `reproduce()`; when it raises, the traceback goes to stderr and the
last line on stdout is ``REPRO-RESULT {json}``: ``raised`` true and the
failure's fingerprint as the suite would record it (`kind`, `where`,
`error`, `guard`, `what`: the rules of `conformance.fingerprints` and
`conformance.reasons`, restated here: the site is the innermost
transformers frame as ``module:qualname``, a transformers file the message
names first, dynamo's traced stack before the traceback) and the exit
status is 1; when nothing raised it is ``raised`` false and 0, so a script
can never pass silently as if it reproduced.

How a raised exception becomes a kind: a `Finding` states its own (a
check's comparison or contract, a call order, a recompile); any other
exception is a data-dependent guard or an unsupported construct by its
words (`kind_of`), else the default of the step it was raised in
(`failing_as`: an export step's is ``export_error``, a compile's turns
``unsupported`` into ``graph_break`` and a failure inside inductor or
AOTAutograd into ``backend``), else ``exception``.
"""

import ast
import contextlib
import functools
import json
import os
import re
import sys
import traceback
from pathlib import Path

RESULT = "REPRO-RESULT"
DATA_DEPENDENT = ("Could not guard on data-dependent", "data-dependent expression", "GuardOnDataDependentSymNode",
                  "DataDependentOutputException", "PendingUnbackedSymbolNotFound")
TRANSFORMERS_FILE = re.compile(r'File "([^"]*/transformers/[^"]+)", line (\d+)')
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|\.\d+)(?![\w.])", re.IGNORECASE)
SHAPE = re.compile(r"\((?:\s*[-\w]+\s*,)+\s*[-\w]*\s*\)|\[(?:\s*[-\w]+\s*,)+\s*[-\w]*\s*\]")
BACKEND_PARTS = ("/torch/_inductor/", "/torch/_functorch/")
GENERATED_MARKERS = ("torchinductor_", "<inductor", "codegen(")
WRAPPERS = ("BackendCompilerFailed", "InductorError")


class Finding(AssertionError):
    """The check's own statement about the model: its `kind`, the words its fingerprint keeps (`what`, masked;
    default the message), a failed `guard`, the exception behind it (`cause`: its site and type), and the site the
    check names where no exception has one (`where`: the function that decided, as ``module:qualname``)."""

    def __init__(self, kind, message, what=None, guard="", cause=None, where=""):
        super().__init__(message)
        self.kind, self.what, self.guard, self.cause = kind, message if what is None else what, guard, cause
        self.where = where


@contextlib.contextmanager
def failing_as(default, unsupported="", backend=""):
    """A failure raised inside is of kind `default` unless its words say otherwise (`kind_of`); `unsupported`
    renames an unsupported construct (a compile says graph_break); under a code-generating `backend` a failure
    raised inside it is the backend's (kind backend)."""
    try:
        yield
    except Exception as exc:
        if not hasattr(exc, "repro_as"):
            exc.repro_as = (default, unsupported, backend)
        raise


def mask(text):
    """`text` with numbers and shapes replaced by ``#`` (the suite's `fingerprints.mask`)."""
    return " ".join(NUMBER.sub("#", SHAPE.sub("#", text)).split())


INSTALLED_MARKERS = ("/site-packages/", "/dist-packages/")
CHECKOUT_LAYOUT = re.compile(r"(?:^|/)src/(?=[A-Za-z_]\w*/)")
_LOADED = {"count": -1, "files": {}}


def module_of(filename):
    return resolve(filename)[0]


def resolve(filename, lineno=None, function=""):
    """(dotted module, real file or None): `conformance.reasons.resolve`, restated."""
    return _resolved(filename, lineno or 0, function or "", len(sys.modules), tuple(sys.path))


@functools.lru_cache(maxsize=4096)
def _resolved(filename, lineno, function, _modules, _path):
    if filename.startswith("<"):
        return _dotted(Path(filename).name), None
    given = os.path.normpath(filename)
    real = _locate(given, lineno, function)
    if real is not None:
        below = (_below_installed(given) or _loaded_as(real) or _below_installed(real) or _below_package(real)
                 or _below_root(real) or _below_root(str(Path(given))) or Path(real).name)
        return _dotted(below), real
    relative = None if os.path.isabs(given) else _without_parents(given)
    return _dotted(_below_installed(given) or _below_checkout(given) or _below_root(given) or relative
                   or Path(given).name), None


def _dotted(path):
    return re.sub(r"\.py$", "", path).replace("/", ".").removesuffix(".__init__")


def _below_installed(path):
    for marker in INSTALLED_MARKERS:
        if marker in "/" + path:
            return ("/" + path).rsplit(marker, 1)[1]
    return None


def _below_checkout(path):
    found = list(CHECKOUT_LAYOUT.finditer(path))
    return path[found[-1].end():] if found else None


def _without_parents(path):
    parts = Path(path).parts
    while parts and parts[0] in ("..", "."):
        parts = parts[1:]
    return "/".join(parts)


def _roots():
    return sorted({os.path.realpath(p) for p in sys.path if p}, key=len, reverse=True)


def _below_root(path):
    return next((path[len(root) + 1:] for root in _roots() if path.startswith(root + "/")), None)


def _below_package(real):
    folder = os.path.dirname(real)
    top = None
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        top, folder = folder, os.path.dirname(folder)
    return os.path.relpath(real, os.path.dirname(top)) if top else None


def _loaded():
    if _LOADED["count"] != len(sys.modules):
        files = {}
        for name, module in list(sys.modules.items()):
            try:
                file = vars(module).get("__file__")
            except TypeError:
                continue
            if name not in ("__main__", "__mp_main__") and isinstance(file, str) and file.endswith(".py"):
                files.setdefault(os.path.basename(file), []).append((file, name))
        _LOADED.update(count=len(sys.modules), files=files)
    return _LOADED["files"]


def _loaded_as(real):
    names = [name for file, name in _loaded().get(os.path.basename(real), []) if os.path.realpath(file) == real]
    if not names:
        return None
    name = sorted(names, key=lambda n: (-n.count("."), n))[0]
    return name.replace(".", "/") + ("/__init__.py" if real.endswith("/__init__.py") else ".py")


def _locate(given, lineno, function):
    if os.path.isabs(given) and os.path.isfile(given):
        return os.path.realpath(given)
    for tail in (_below_installed(given), _below_checkout(given),
                 None if os.path.isabs(given) else _without_parents(given)):
        if not tail:
            continue
        found = {os.path.realpath(file) for file, _ in _loaded().get(os.path.basename(tail), [])
                 if ("/" + os.path.normpath(file)).endswith("/" + tail)}
        found |= {os.path.realpath(os.path.join(root, tail)) for root in _roots()
                  if os.path.isfile(os.path.join(root, tail))}
        if found:
            return min(found, key=lambda real: (not _defines(real, lineno, function),
                                                _dotted(_loaded_as(real) or _below_package(real) or real).count("."),
                                                real))
    return None


def _defines(filename, lineno, function):
    inside = [name for first, last, name in _definitions(filename) if lineno and first <= lineno <= last]
    return bool(inside and function and inside[-1].rsplit(".", 1)[-1] == function)


@functools.lru_cache(maxsize=256)
def _definitions(filename):
    try:
        tree = ast.parse(Path(filename).read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return ()
    found = []

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                found.append((child.lineno, child.end_lineno or child.lineno, name))
                walk(child, name + ("." if isinstance(child, ast.ClassDef) else ".<locals>."))
            else:
                walk(child, prefix)

    walk(tree, "")
    return tuple(found)


def site(filename, lineno, function=""):
    """``module:qualname`` of the innermost def or class around `lineno` of `filename`, read where it really is."""
    module, real = resolve(filename, lineno, function)
    inside = [name for first, last, name in (_definitions(real) if real else ()) if lineno and first <= lineno <= last]
    name = inside[-1] if inside else (function if function and function != "<module>" else "<module>")
    return f"{module}:{name}"


def site_of(frames):
    frames = list(frames or [])
    if not frames:
        return ""
    frame = ([f for f in frames if "/transformers/" in "/" + f.filename] or frames)[-1]
    return site(frame.filename, frame.lineno, frame.name)


def where_of(exc):
    named = TRANSFORMERS_FILE.findall(str(exc))
    if named:
        return site(named[-1][0], int(named[-1][1]))
    stack = getattr(exc, "real_stack", None)
    return site_of(stack) if stack else site_of(traceback.extract_tb(exc.__traceback__))


def kind_of(exc, default="exception"):
    text = f"{type(exc).__name__}: {exc}"
    if any(marker in text for marker in DATA_DEPENDENT):
        return "data_dependent_guard"
    return "unsupported" if type(exc).__name__ == "Unsupported" else default


def guard_site(reason):
    """``<masked guard> @ <module:qualname>`` of one of dynamo's guard-failure reasons."""
    head = next((line.strip() for line in reason.splitlines() if line.strip()), "")
    head = head.split(": ", 1)[1] if re.match(r"^\S+/\S+: ", head) else head
    segments = [part.strip() for part in head.split("  # ")]
    located = next((re.search(r"(\S+\.py):(\d+) in (\w+)", part) for part in segments[1:]
                    if re.search(r"\S+\.py:\d+ in ", part)), None)
    where = site(located.group(1), int(located.group(2)), located.group(3)) if located else "?"
    return f"{mask(segments[0])} @ {where}"


def _chain(exc):
    seen = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = getattr(exc, "inner_exception", None) or exc.__cause__ or exc.__context__
    return seen


def _generated(filename):
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir
        root = cache_dir()
    except ImportError:
        root = ""
    return any(marker in filename for marker in GENERATED_MARKERS) or bool(root and filename.startswith(root))


def _backend_frames(exc):
    frames = [f for e in _chain(exc) for f in traceback.extract_tb(e.__traceback__)]
    return [f for f in frames if _generated(f.filename) or any(part in f.filename for part in BACKEND_PARTS)]


def backend_fingerprint(exc):
    """Kind backend: the innermost inductor/AOTAutograd frame (generated code as ``<inductor generated code>``),
    the exception the backend's wrapper was raised for, its first line masked."""
    chain = _chain(exc)
    inner = next((e for e in chain if type(e).__name__ not in WRAPPERS), chain[-1])
    frames = _backend_frames(exc)
    where = ""
    if frames:
        frame = frames[-1]
        where = (f"<inductor generated code>:{frame.name}" if _generated(frame.filename)
                 else site(frame.filename, frame.lineno, frame.name))
    message = " ".join((next((l.strip() for l in str(inner).splitlines() if l.strip()), "") or repr(inner)).split())
    message = message[:237] + "..." if len(message) > 240 else message
    return {"kind": "backend", "where": where, "error": type(inner).__name__, "what": mask(message)}


def fingerprint(exc):
    """The suite's fingerprint of a failure the script raised (see the module)."""
    if isinstance(exc, Finding):
        found = {"kind": exc.kind, "guard": guard_site(exc.guard) if exc.guard else "", "where": exc.where}
        if exc.cause is not None:
            found.update(where=where_of(exc.cause), error=type(exc.cause).__name__)
        elif exc.kind in ("contract", "numerical_mismatch"):
            found["what"] = mask(exc.what)
        return {k: v for k, v in found.items() if v}
    default, unsupported, backend = getattr(exc, "repro_as", ("exception", "", ""))
    if backend not in ("", "eager") and (any(type(e).__name__ in WRAPPERS for e in _chain(exc))
                                         or _backend_frames(exc)):
        return backend_fingerprint(exc)
    kind = kind_of(exc, default)
    if kind == "unsupported" and unsupported:
        kind = unsupported
    return {"kind": kind, "where": where_of(exc), "error": type(exc).__name__}


def main(reproduce):
    """Run `reproduce()`; print its fingerprint as the last ``REPRO-RESULT`` line; 1 when it raised, else 0."""
    try:
        reproduce()
    except Exception as exc:
        traceback.print_exc()
        found = {"raised": True, **fingerprint(exc),
                 "message": " ".join(str(exc).split())[:300]}
        print(f"{RESULT} {json.dumps(found, sort_keys=True)}", flush=True)
        return 1
    print("reproduce() returned: the failure did not happen here", file=sys.stderr)
    print(f"{RESULT} {json.dumps({'raised': False})}", flush=True)
    return 0
