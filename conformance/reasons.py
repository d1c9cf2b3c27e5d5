"""One-line reasons: how an exception becomes the text of a matrix cell.

Contract: `one_line(exc)` is ``Type: message (at file:line)`` on one line,
the message clipped to `limit` characters, located by `where(exc)` unless a
`location` is given (a caller that knows a better frame); `where(exc)` is the ``file:line``
of the innermost traceback frame inside transformers (else the innermost
frame), as ``transformers/<path>:<line>``.

`site(filename, lineno)` names a place in code the way a fingerprint does,
stable when code moves by some lines: ``<dotted module>:<qualified name of
the innermost enclosing def>`` (``transformers.models.llava.modeling_llava:
LlavaModel.get_image_features``; ``<module>`` for module level). `site_of(frames)`
is the site of the innermost frame inside transformers (else the innermost),
for a list of `traceback.FrameSummary`; `exception_site(exc)` that of an
exception (dynamo's traced stack when it has one, else its traceback).
`stack_site(frames, real_stack)` is the same of frames known apart from an exception (a printed traceback's).
`raised_in_suite(exc)` is the line between a model's failure and the
suite's: whether the frame that raised `exc` (after following explicit
causes, ``raise ... from``, to the root) is this package's own code. The
harness's own tests (``conformance/meta/``) play the model's part and do not
count, nor does an exception a check raises on purpose about the model
(its class says ``deliberate = True``: ContractViolation, NotApplicable). An
exception propagating out of transformers or torch was raised there,
whoever called. `suite_location(exc)` is that frame as
``conformance/<path>:<line>`` and `suite_site(exc)` as a site.
`exception_chain(exc)` is `exc` and each exception it was raised from (the one walk of a chain: explicit causes,
optionally implicit context and a wrapper's inner exception), `innermost(exc)` the exception that started a chain
of ``raise ... from`` wrappers (the root those rules follow).
Torch-free.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import sys
import traceback
from pathlib import Path


def package_path(filename: str) -> str:
    """``transformers/<path>`` of a file of the transformers package wherever it lives: below a venv's
    site-packages or in a checkout's ``src/transformers/`` (the last ``transformers`` directory of the path is the
    package's, so ``/work/transformers/src/transformers/x.py`` is ``transformers/x.py``, as installed)."""
    return "transformers/" + filename.rsplit("/transformers/", 1)[1]


def short_path(filename: str) -> str:
    """A file as a reason names it: `package_path` inside transformers, else its base name."""
    return package_path(filename) if "/transformers/" in filename else filename.rsplit("/", 1)[-1]


def where(exc: BaseException) -> str:
    """`file:line` of the innermost frame inside transformers (else innermost)."""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        if "/transformers/" in frame.filename:
            return f"{package_path(frame.filename)}:{frame.lineno}"
    if frames:
        return f"{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}"
    return ""


INSTALLED_PREFIX = re.compile(r"[^\s\"'(]*/(?:site|dist)-packages/")  # a venv's path before a package's files
CHECKOUT_PREFIX = re.compile(r"[^\s\"'(]*/src/(?=transformers/)")  # a transformers checkout's path before its package


def package_paths(text: str) -> str:
    """`text` with every path into an installed package or a transformers checkout written from the package on."""
    return CHECKOUT_PREFIX.sub("", INSTALLED_PREFIX.sub("", text))


def one_line(exc: BaseException, limit: int = 300, location: str | None = None) -> str:
    """`Type: message (at file:line)` on one line, for a matrix cell; a path into an installed package or a
    transformers checkout is written from the package on (``executorch/exir/tensor.py``, not this machine's venv)."""
    text = package_paths(" ".join(str(exc).split())) or repr(exc)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    location = where(exc) if location is None else location
    return f"{type(exc).__name__}: {text}" + (f" (at {location})" if location else "")


INSTALLED_MARKERS = ("/site-packages/", "/dist-packages/")  # a venv's, a tox env's, a user site's, the system's
CHECKOUT_LAYOUT = re.compile(r"(?:^|/)src/(?=[A-Za-z_]\w*/)")  # an editable checkout's src/ layout: src/<package>/


def module_of(filename: str) -> str:
    """The dotted module of a source file, the same wherever its package lives and however the path is written
    (`resolve`)."""
    return resolve(filename)[0]


def resolve(filename: str, lineno: int | None = None, function: str = "") -> tuple[str, str | None]:
    """(dotted module, the real file on this machine or None) of a source file named by an absolute, relative or bare
    path, as dynamo prints a frame (relative to torch's parent folder), a traceback (absolute) or a stored text.

    The file: the path itself when it exists; else the loaded modules' files and the files below sys.path entries
    that end with it (the part below a site-packages or a checkout's ``src/`` first, else the path as written);
    of several, those whose definition around `lineno` is named `function`, then the shortest dotted module, then
    the first path. The module, first rule that answers: the path below a site-packages (dist-packages) folder as
    written, the name the file is loaded under (the most qualified of several), the real file's path below a
    site-packages folder, below its outermost package (folders with ``__init__.py``), below the longest sys.path
    entry; for a file not on this machine, below a checkout's ``src/``, below the longest sys.path entry, the
    relative path as written; else its stem.
    Names in angle brackets (``<string>``, ``<frozen ...>``) are their own module."""
    return _resolved(filename, lineno or 0, function or "", len(sys.modules), tuple(sys.path))


@functools.lru_cache(maxsize=4096)
def _resolved(filename: str, lineno: int, function: str, _modules: int, _path: tuple) -> tuple[str, str | None]:
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


def _dotted(path: str) -> str:
    return re.sub(r"\.py$", "", path).replace("/", ".").removesuffix(".__init__")


def _below_installed(path: str) -> str | None:
    for marker in INSTALLED_MARKERS:
        if marker in "/" + path:
            return ("/" + path).rsplit(marker, 1)[1]
    return None


def _below_checkout(path: str) -> str | None:
    found = list(CHECKOUT_LAYOUT.finditer(path))
    return path[found[-1].end():] if found else None


def _without_parents(path: str) -> str:
    parts = Path(path).parts
    while parts and parts[0] in ("..", "."):
        parts = parts[1:]
    return "/".join(parts)


def _roots() -> list[str]:
    return sorted({os.path.realpath(p) for p in sys.path if p}, key=len, reverse=True)


def _below_root(path: str) -> str | None:
    return next((path[len(root) + 1:] for root in _roots() if path.startswith(root + "/")), None)


def _below_package(real: str) -> str | None:
    """The real file's path below its outermost regular package (None for a file in no package)."""
    folder = os.path.dirname(real)
    top = None
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        top, folder = folder, os.path.dirname(folder)
    return os.path.relpath(real, os.path.dirname(top)) if top else None


_LOADED: dict[str, object] = {"count": -1, "files": {}}


def _loaded() -> dict[str, list[tuple[str, str]]]:
    """The loaded modules' source files by base name: [(file as loaded, module name)] (built again when
    sys.modules grows or shrinks)."""
    if _LOADED["count"] != len(sys.modules):
        files: dict[str, list[tuple[str, str]]] = {}
        for name, module in list(sys.modules.items()):
            try:
                file = vars(module).get("__file__")
            except TypeError:  # an object standing in for a module, without a __dict__
                continue
            if name not in ("__main__", "__mp_main__") and isinstance(file, str) and file.endswith(".py"):
                files.setdefault(os.path.basename(file), []).append((file, name))
        _LOADED.update(count=len(sys.modules), files=files)
    return _LOADED["files"]  # type: ignore[return-value]


def _loaded_as(real: str) -> str | None:
    """The real file's path below its import root, by the most qualified name it is loaded under."""
    names = [name for file, name in _loaded().get(os.path.basename(real), []) if os.path.realpath(file) == real]
    if not names:
        return None
    name = sorted(names, key=lambda n: (-n.count("."), n))[0]
    return name.replace(".", "/") + ("/__init__.py" if real.endswith("/__init__.py") else ".py")


def _locate(given: str, lineno: int, function: str) -> str | None:
    """The real file `given` names on this machine (see `resolve`), else None."""
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


def _defines(filename: str, lineno: int, function: str) -> bool:
    """Whether the innermost definition around `lineno` of the file is named `function`."""
    inside = [name for first, last, name in _definitions(filename) if lineno and first <= lineno <= last]
    return bool(inside and function and inside[-1].rsplit(".", 1)[-1] == function)


@functools.lru_cache(maxsize=256)
def _definitions(filename: str) -> tuple[tuple[int, int, str], ...]:
    """(first line, last line, qualified name) of every def and class of a file, outermost first."""
    try:
        tree = ast.parse(Path(filename).read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return ()
    found: list[tuple[int, int, str]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                found.append((child.lineno, child.end_lineno or child.lineno, name))
                walk(child, name + ("." if isinstance(child, ast.ClassDef) else ".<locals>."))
            else:
                walk(child, prefix)

    walk(tree, "")
    return tuple(found)


def site(filename: str, lineno: int | None, function: str = "") -> str:
    """``module:qualname`` of the innermost def or class around `lineno` of `filename` (any form `resolve` takes:
    the file is read where it really is, so the qualname does not depend on how the path was written)."""
    module, real = resolve(filename, lineno, function)
    inside = [name for first, last, name in (_definitions(real) if real else ()) if lineno and first <= lineno <= last]
    name = inside[-1] if inside else (function if function and function != "<module>" else "<module>")
    return f"{module}:{name}"


def in_transformers(filename: str) -> bool:
    """Whether a frame's file is in transformers' package, however its path is written."""
    return "/transformers/" in "/" + filename


def site_of(frames) -> str:
    """The site of the innermost frame inside transformers, else of the innermost frame outside this suite (the
    torch or backend code that raised through a check's wrapper), else of the innermost frame ('' for none)."""
    frames = list(frames or [])
    if not frames:
        return ""
    inside = [f for f in frames if in_transformers(f.filename)]
    outside = [f for f in frames if not in_suite(f.filename)]
    frame = (inside or outside or frames)[-1]
    return site(frame.filename, frame.lineno, frame.name)


def exception_site(exc: BaseException) -> str:
    """The site an exception points at: dynamo's traced user stack when it reaches outside this suite, else its
    traceback. (A backend that traces again under torch's tracing context, as ExecuTorch's lowering does, stamps
    the stack of whoever called it: the suite's check, not the code that failed.)"""
    return stack_site(traceback.extract_tb(exc.__traceback__), getattr(exc, "real_stack", None))


def stack_site(frames, real_stack=None) -> str:
    """`exception_site` of a traceback's frames and dynamo's traced stack (None when there is none)."""
    if real_stack and any(not in_suite(frame.filename) for frame in real_stack):
        return site_of(real_stack)
    return site_of(frames)


SUITE = Path(__file__).resolve().parent
STAND_INS = SUITE / "meta"  # the harness's own tests: their models and cases stand in for transformers


@functools.lru_cache(maxsize=1024)
def in_suite(filename: str) -> bool:
    """Whether a source file is this package's own code (not its meta tests)."""
    try:
        path = Path(filename).resolve()
    except (OSError, ValueError):
        return False
    return path.is_relative_to(SUITE) and not path.is_relative_to(STAND_INS)


def exception_chain(exc: BaseException | None, context: bool = False, inner: bool = False) -> list[BaseException]:
    """`exc`, then each exception it was raised from, each once (the walk ends before one it has seen): its
    `__cause__` (``raise ... from``); with `context`, else its `__context__` (what it was raised while handling);
    with `inner`, first a wrapper's `inner_exception` (inductor's `InductorError`)."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(exc)
        following = (exc.__cause__ or exc.__context__) if context else exc.__cause__
        exc = (getattr(exc, "inner_exception", None) or following) if inner else following
    return chain


def innermost(exc: BaseException, at_repeat: bool = False) -> BaseException:
    """The exception that started a chain of ``raise ... from`` wrappers: the last of `exception_chain(exc)`. Where
    the causes loop back (``raise a from b`` after ``raise b from a``), the last one before the loop closes; with
    `at_repeat`, the one it comes back to (what the exporters' and ONNX failures have always been named by)."""
    last = exception_chain(exc)[-1]
    return last.__cause__ if at_repeat and last.__cause__ is not None else last


ATTRIBUTE_HOOKS = ("__getattr__", "__getattribute__")


def _raising_frame(exc: BaseException):
    """The frame whose code raised the root cause. A failed attribute lookup is the failure of the code that looked
    the attribute up, not of the hook that answered it: an AttributeError raised by a `__getattr__` or
    `__getattribute__` (torch's `Module.__getattr__`, a config's) is its caller's."""
    root = innermost(exc)
    frames = traceback.extract_tb(root.__traceback__)
    if isinstance(root, AttributeError):
        while len(frames) > 1 and frames[-1].name in ATTRIBUTE_HOOKS:
            frames = frames[:-1]
    return frames[-1] if frames else None


def raised_in_suite(exc: BaseException) -> bool:
    if getattr(innermost(exc), "deliberate", False):  # a check's own statement about the model (ContractViolation...)
        return False
    frame = _raising_frame(exc)
    return frame is not None and in_suite(frame.filename)


def suite_location(exc: BaseException) -> str:
    frame = _raising_frame(exc)
    if frame is None:
        return ""
    return f"conformance/{Path(frame.filename).resolve().relative_to(SUITE)}:{frame.lineno}"


def suite_site(exc: BaseException) -> str:
    frame = _raising_frame(exc)
    return site(frame.filename, frame.lineno, frame.name) if frame is not None else ""
