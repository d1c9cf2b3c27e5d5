"""Stage 2, build: a finding about the model, or a gap of the harness?

When the tiny model or its prefill cannot be made, the row used to be a
harness ``error`` whatever the cause. Some causes are the model's own code
failing on inputs a user could pass; those are findings about the model, and
their row says ``fail`` (a known failure in the expectations with the upstream
location), never ``error``. The rules are conservative: anything they do not
recognize stays a harness ``error``, so a harness gap is never reported as a
model failure.

A failure is the model's when one of these holds:

1. **Construction.** Building the tiny model (its shrunk config, or the class
   from it) raised, and building the class from its own *default* config
   (``config_class()``, unshrunk, no fixture, on the meta device: nothing of
   the harness involved) raises the same exception type with the same
   message. A missing optional dependency (``ImportError``) is the
   environment's gap, never the model's.
2. **Forward.** The eager prefill over the strategy's sample raised a
   programming error, ``AttributeError`` or ``NameError``, whose raise point
   is reached from transformers' model code (a frame under
   ``transformers/models/``) through transformers frames only, and, for an
   ``AttributeError``, on an object of a transformers class that is not one
   of the sample's inputs (e.g. the model reads a field its own output or
   config class does not have). No input value can cause such an error; a
   shape, dtype or value error (which a wrong input can cause) stays ``error``.

The sample was produced by a strategy that cross-checks it against the model
(placeholder counts from the model's own encoders), see
`conformance.cases.samples`.

A missing optional dependency that transformers names (``X requires the
timm library but it was not found``: `missing_dependency`) is neither: the
class cannot be run here, so its cells are not run (⬜, with the install
line), as an optional column whose extra is missing (`MissingDependency`).

`RowVerdict` is what the cases stage raises to decide a whole row without a
case: `ModelFailure` (every cell ``fail``) and `NotStandalone` (every cell
``skip``, see `conformance.discover.not_standalone`; its ``build`` cell says
whether the class can be built at all). A cell's life (`conformance.run.cell_life`, the run's and
`explain`'s) turns it into each cell's outcome with `RowVerdict.cell(check_id)`.
"""

from __future__ import annotations

import re
from types import TracebackType

from conformance.fingerprints import Fingerprint, of_exception
from conformance.reasons import one_line

CODE_ERRORS = (AttributeError, NameError)  # NameError covers UnboundLocalError
ENVIRONMENT_ERRORS = (ImportError,)
REQUIRES = re.compile(r"(\w+) requires the (\S+) library but it was not found")
INSTALL = re.compile(r"`(pip install [^`]+)`")


class MissingDependency(Exception):
    """The class needs a package that is not installed: its cells are not run; the message says what and how."""


def missing_dependency(exc: BaseException) -> str:
    """``needs timm (TimmWrapperModel), not installed: pip install timm`` when `exc` (or what caused it) is
    transformers' own missing-backend ImportError, else ""."""
    while exc is not None:
        found = REQUIRES.search(str(exc)) if isinstance(exc, ImportError) else None
        if found:
            install = INSTALL.search(str(exc))
            how = install.group(1) if install else f"pip install {found.group(2)}"
            return f"needs {found.group(2)} ({found.group(1)}), not installed: {how}"
        exc = exc.__cause__ or exc.__context__
    return ""
MODELS_DIR = "/transformers/models/"
PACKAGE_DIR = "/transformers/"


class RowVerdict(Exception):
    """The cases stage decided every cell of a row: `verdict` and `reason`, except the `build` cell
    when `build` = (verdict, reason) is given."""

    verdict = "error"

    def __init__(self, reason: str, build: tuple[str, str] | None = None):
        super().__init__(reason)
        self.reason = reason
        self.build = build

    def cell(self, check_id: str) -> tuple[str, str]:
        if check_id == "build" and self.build is not None:
            return self.build
        return self.verdict, self.reason

    def fingerprint(self, check_id: str) -> Fingerprint | None:
        """What failed where, for a cell this decides as ``fail``: the model's own exception behind it.
        None otherwise (the gate fingerprints a harness error by its reason)."""
        if self.cell(check_id)[0] == "fail" and self.__cause__ is not None:
            return of_exception(self.__cause__)
        return None


class ModelFailure(RowVerdict):
    """The model's own code fails (rules in the module docstring)."""

    verdict = "fail"


class NotStandalone(RowVerdict):
    """The class is not a model a user runs on its own: no check applies."""

    verdict = "skip"


def _frames(tb: TracebackType | None):
    while tb is not None:
        yield tb.tb_frame.f_code, tb.tb_lineno
        tb = tb.tb_next


def model_frame(exc: BaseException) -> str:
    """`transformers/models/<family>/<file>.py:<line> in <Qualified.name>` of the innermost frame in
    transformers' model code ("" when no frame is)."""
    found = ""
    for code, line in _frames(exc.__traceback__):
        if MODELS_DIR in code.co_filename:
            path = code.co_filename.split(PACKAGE_DIR, 1)[1]
            found = f"transformers/{path}:{line} in {getattr(code, 'co_qualname', code.co_name)}"
    return found


def _reached_from_model_code(exc: BaseException) -> bool:
    """The raise point is in transformers, reached from a model-code frame through transformers frames only."""
    frames = list(_frames(exc.__traceback__))
    last_model = max((i for i, (code, _) in enumerate(frames) if MODELS_DIR in code.co_filename), default=None)
    if last_model is None:
        return False
    return all(PACKAGE_DIR in code.co_filename for code, _ in frames[last_model:])


def describe(exc: BaseException) -> str:
    """`Type: message (at <model frame>)` on one line: `one_line` located at the model's own frame."""
    return one_line(exc, location=model_frame(exc))


def default_construction_error(info) -> BaseException | None:
    """What building `info`'s class from its own default config on the meta device raises (None: it builds)."""
    import torch

    from conformance.discover import quiet_transformers

    if info.config_class is None:
        return None
    try:
        with quiet_transformers(), torch.device("meta"):
            info.model_class(info.config_class())
    except Exception as exc:  # any failure is data for the caller
        return exc
    return None


def construction_failure(info, exc: BaseException) -> str:
    """Rule 1: the reason when building the tiny model failed the way the class's default config fails, else ""."""
    if isinstance(exc, ENVIRONMENT_ERRORS):
        return ""
    default = default_construction_error(info)
    if default is None or isinstance(default, ENVIRONMENT_ERRORS):
        return ""
    if type(default) is not type(exc) or str(default) != str(exc):
        return ""
    return ("the class cannot be built from its own default config (transformers bug): "
            f"{describe(default)}")


def forward_failure(exc: BaseException, inputs: dict) -> str:
    """Rule 2: the reason when the eager prefill failed with a programming error of the model's code, else ""."""
    if not isinstance(exc, CODE_ERRORS) or not _reached_from_model_code(exc):
        return ""
    if isinstance(exc, AttributeError):
        obj = getattr(exc, "obj", None)
        if obj is None or not type(obj).__module__.startswith("transformers."):
            return ""
        if any(obj is value for value in inputs.values()):
            return ""
    return f"the model's own forward fails on valid inputs (transformers bug): {describe(exc)}"
