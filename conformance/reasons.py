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


def module_of(filename: str) -> str:
    """The dotted module of a source file (its path below a sys.path entry), else its stem."""
    path = str(Path(filename))
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            path = path.rsplit(marker, 1)[1]
            break
    else:
        roots = sorted((str(Path(p).resolve()) for p in sys.path if p), key=len, reverse=True)
        path = next((path[len(root) + 1:] for root in roots if path.startswith(root + "/")), Path(path).name)
    dotted = re.sub(r"\.py$", "", path).replace("/", ".")
    return dotted.removesuffix(".__init__")


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
    """``module:qualname`` of the innermost def or class around `lineno` of `filename`."""
    inside = [name for first, last, name in _definitions(filename) if lineno and first <= lineno <= last]
    name = inside[-1] if inside else (function if function and function != "<module>" else "<module>")
    return f"{module_of(filename)}:{name}"


def site_of(frames) -> str:
    """The site of the innermost frame inside transformers, else of the innermost frame outside this suite (the
    torch or backend code that raised through a check's wrapper), else of the innermost frame ('' for none)."""
    frames = list(frames or [])
    if not frames:
        return ""
    inside = [f for f in frames if "/transformers/" in f.filename]
    outside = [f for f in frames if not in_suite(f.filename)]
    frame = (inside or outside or frames)[-1]
    return site(frame.filename, frame.lineno, frame.name)


def exception_site(exc: BaseException) -> str:
    """The site an exception points at: dynamo's traced user stack when it reaches outside this suite, else its
    traceback. (A backend that traces again under torch's tracing context, as ExecuTorch's lowering does, stamps
    the stack of whoever called it: the suite's check, not the code that failed.)"""
    stack = getattr(exc, "real_stack", None)
    if stack and any(not in_suite(frame.filename) for frame in stack):
        return site_of(stack)
    return site_of(traceback.extract_tb(exc.__traceback__))


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
