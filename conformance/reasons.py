"""One-line reasons: how an exception becomes the text of a matrix cell.

Contract: `one_line(exc)` is ``Type: message (at file:line)`` on one line,
the message clipped to `limit` characters, located by `where(exc)` unless a
`location` is given (a caller that knows a better frame); `where(exc)` is the ``file:line``
of the innermost traceback frame inside transformers (else the innermost
frame), as ``transformers/<path>:<line>``. Torch-free.
"""

from __future__ import annotations

import traceback


def where(exc: BaseException) -> str:
    """`file:line` of the innermost frame inside transformers (else innermost)."""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        if "/transformers/" in frame.filename:
            path = frame.filename.split("/transformers/", 1)[1]
            return f"transformers/{path}:{frame.lineno}"
    if frames:
        return f"{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}"
    return ""


def one_line(exc: BaseException, limit: int = 300, location: str | None = None) -> str:
    """`Type: message (at file:line)` on one line, for a matrix cell."""
    text = " ".join(str(exc).split()) or repr(exc)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    location = where(exc) if location is None else location
    return f"{type(exc).__name__}: {text}" + (f" (at {location})" if location else "")
