"""Which part of `torch.compile` failed: dynamo's trace, or the backend after it (inductor).

A compile check under a code-generating backend fails either while dynamo
traces (a graph break, a data-dependent guard: the same under every backend)
or after it: AOTAutograd, inductor's lowering and code generation, or the
generated code at run time (a size/stride assertion, a wrong fake kernel).

Contract:

* `raised_in_backend(exc)` is True when a frame of the exception (or of an
  exception it was raised from) is in AOTAutograd, inductor, or code inductor
  generated, or the exception is the wrapper dynamo raises around a
  backend's failure. A hint only: a check confirms it with `dynamo_alone`.
* `backend_site(exc)` is the innermost such frame as ``module:qualname`` (`backend_site_of(frames)` of frames
  known apart from an exception);
  code inductor generated (hash-named files in its cache directory,
  wherever TORCHINDUCTOR_CACHE_DIR puts it) is ``<inductor generated
  code>:<function>``, stable across runs.
* `backend_failure(exc, backend)` is the one-line reason and the fingerprint
  (kind ``backend``, the site, the inner exception type, the masked first
  line of its message) of a failure that `dynamo_alone` showed is the backend's.
* `dynamo_alone(call)` runs `call("eager")` (the same compile with dynamo's
  eager backend: tracing, no code generation) and says whether it raised
  nothing: then dynamo traced fullgraph and the failure under the other
  backend is that backend's own.
* `blame_backend(backend, failures, call)` is the step every compile check
  takes with these: for each of a check's failures (exceptions, or None),
  `backend_failure(exc, backend)` where the backend is to blame, else None.
  The backend is to blame for a failure raised in it (`raised_in_backend`)
  when it is not dynamo's own ``eager`` and `dynamo_alone(call)` holds;
  `call` runs at most once, and not at all when no failure is a suspect.
"""

from __future__ import annotations

import traceback
from typing import Callable, Sequence

import torch

from conformance.fingerprints import Fingerprint, mask
from conformance.reasons import exception_chain, site

BACKEND_PARTS = ("/torch/_inductor/", "/torch/_functorch/")
GENERATED_MARKERS = ("torchinductor_", "<inductor", "codegen(")
WRAPPERS = ("BackendCompilerFailed", "InductorError")
GENERATED_SITE = "<inductor generated code>"
MESSAGE_LIMIT = 240


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception, then what it was raised from (its cause or context, and a wrapper's inner exception)."""
    return exception_chain(exc, context=True, inner=True)


def _frames(exc: BaseException) -> list[traceback.FrameSummary]:
    return [f for e in _chain(exc) for f in traceback.extract_tb(e.__traceback__)]


def _inductor_cache_dir() -> str:
    """Where inductor writes the code it generates (TORCHINDUCTOR_CACHE_DIR, else /tmp/torchinductor_<user>)."""
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir
    except ImportError:
        return ""
    return cache_dir()


def _generated(filename: str) -> bool:
    root = _inductor_cache_dir()
    return any(marker in filename for marker in GENERATED_MARKERS) or bool(root and filename.startswith(root))


def _in_backend(filename: str) -> bool:
    return _generated(filename) or any(part in filename for part in BACKEND_PARTS)


def raised_in_backend(exc: BaseException) -> bool:
    if any(type(e).__name__ in WRAPPERS for e in _chain(exc)):
        return True
    return any(_in_backend(f.filename) for f in _frames(exc))


def backend_site(exc: BaseException) -> str:
    return backend_site_of(_frames(exc))


def backend_site_of(frames) -> str:
    """`backend_site` of frames known apart from an exception (a printed traceback's, every exception's)."""
    frames = [f for f in frames if _in_backend(f.filename)]
    if not frames:
        return ""
    frame = frames[-1]
    if _generated(frame.filename):
        return f"{GENERATED_SITE}:{frame.name}"
    return site(frame.filename, frame.lineno, frame.name)


def _inner(exc: BaseException) -> BaseException:
    """The exception a backend wrapper (BackendCompilerFailed, InductorError) was raised for."""
    chain = _chain(exc)
    return next((e for e in chain if type(e).__name__ not in WRAPPERS), chain[-1])


def backend_failure(exc: BaseException, backend: str) -> tuple[str, Fingerprint]:
    inner = _inner(exc)
    message = next((line.strip() for line in str(inner).splitlines() if line.strip()), "") or repr(inner)
    message = " ".join(message.split())
    if len(message) > MESSAGE_LIMIT:
        message = message[: MESSAGE_LIMIT - 3] + "..."
    where = backend_site(exc)
    stage = "its generated code raised" if where.startswith(GENERATED_SITE) else "compiling the traced graph failed"
    reason = (f"{backend} failed where dynamo alone traces the same call fullgraph (backend eager): {stage}: "
              f"{type(inner).__name__}: {message}" + (f" (at {where})" if where else ""))
    return reason, Fingerprint("backend", where=where, error=type(inner).__name__, what=mask(message))


def dynamo_alone(call: Callable[[str], object]) -> bool:
    torch._dynamo.reset()
    try:
        call("eager")
    except Exception:
        return False
    finally:
        torch._dynamo.reset()
    return True


def blame_backend(backend: str, failures: Sequence[BaseException | None],
                  call: Callable[[str], object]) -> list[tuple[str, Fingerprint] | None]:
    """Per failure, the backend's own reason and fingerprint where dynamo alone (`call`) compiles what failed,
    else None (see the module)."""
    if backend == "eager":  # dynamo's own backend generates no code: nothing after the trace to blame
        return [None] * len(failures)
    suspects = [exc is not None and raised_in_backend(exc) for exc in failures]
    if not any(suspects) or not dynamo_alone(call):
        return [None] * len(failures)
    return [backend_failure(exc, backend) if suspect else None for exc, suspect in zip(failures, suspects)]
