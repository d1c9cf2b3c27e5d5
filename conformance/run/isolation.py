"""Keeping one cell from taking the run down: time limits, crash notes, memory.

Contracts:

* `Deadline(seconds, grace, on_hard_timeout, dump_file)` guards one cell.
  `start()` arms it, `stop()` disarms it (always call it).

  - Soft limit: after `seconds`, `CellTimeout` is raised in the main thread
    (SIGALRM), but only inside a `with deadline.interruptible():` block, so
    pytest's own code is never interrupted. Code that swallows it (torch and
    dynamo wrap or catch exceptions) gets it again every `repeat` seconds
    until the block ends; `fired` stays True either way, so the caller turns
    the cell into `timeout` even if what came out of the block looks like an
    ordinary failure.
  - Hard limit: if the cell is still running `grace` seconds later (the
    soft limit could not end it: a C call, a swallowing loop), a watchdog
    thread calls `on_hard_timeout()` (which writes the cell's `timeout`
    record) and ends the process with `HARD_TIMEOUT_EXIT`. Under
    pytest-xdist the controller then replaces the worker and the run goes on.
  - Last resort: a hang that holds the GIL starves the watchdog thread;
    `faulthandler` (a C thread) dumps every thread's stack to `dump_file` and
    exits the process `grace` seconds after the hard limit.

* `write_note(path, note)` / `read_note(path)`: the cell a process is running
  (model, check, nodeid, deadline), written before the cell starts, so that
  whoever outlives a crashed process can say which cell it was and whether it
  was past its deadline.
* `crash_summary(path)`: one line from a faulthandler dump ("Fatal Python
  error: Aborted (in file.py:12, fn)") or, for an empty dump, what that means;
  `crash_frame(path)` the fatal error's message and the crashed thread's
  innermost Python frame (file, line, function), None without one.
* `peak_rss_mib()`: this process's peak resident memory in MiB.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import re
import resource
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Callable, TextIO

from conformance.report import io

HARD_TIMEOUT_EXIT = 70  # EX_SOFTWARE: the process ended itself because a cell hung


class CellTimeout(BaseException):
    """The cell ran past its time limit.

    A BaseException (like KeyboardInterrupt) so that the `except Exception`
    of checks and of torch's own error wrapping lets it through.
    """


class Deadline:
    """The time limits of one cell (see the module docstring)."""

    def __init__(self, seconds: float, grace: float, on_hard_timeout: Callable[[], None] | None = None,
                 dump_file: TextIO | None = None):
        if seconds <= 0 or grace <= 0:
            raise ValueError("seconds and grace must be positive")
        self.seconds = seconds
        self.grace = grace
        self.repeat = max(0.05, min(1.0, grace / 4))
        self.on_hard_timeout = on_hard_timeout
        self.dump_file = dump_file
        self.fired = False
        self.started = 0.0
        self._depth = 0
        self._done = threading.Event()
        self._watchdog: threading.Thread | None = None
        self._previous_handler = None
        self._uses_signal = False
        self._uses_faulthandler = False

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started if self.started else 0.0

    @property
    def expires_at(self) -> float:
        """Wall-clock time (time.time()) of the soft limit."""
        return time.time() - self.elapsed + self.seconds

    def reason(self) -> str:
        return f"ran past the cell time limit of {self.seconds:g} s"

    def start(self) -> "Deadline":
        self.started = time.monotonic()
        if hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
            self._previous_handler = signal.signal(signal.SIGALRM, self._on_alarm)
            signal.setitimer(signal.ITIMER_REAL, self.seconds, self.repeat)
            self._uses_signal = True
        self._watchdog = threading.Thread(target=self._watch, name="conformance-cell-watchdog", daemon=True)
        self._watchdog.start()
        if self.dump_file is not None:
            faulthandler.dump_traceback_later(self.seconds + 2 * self.grace, exit=True, file=self.dump_file)
            self._uses_faulthandler = True
        return self

    def stop(self) -> None:
        """Disarm every limit; idempotent."""
        self._done.set()
        if self._uses_signal:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous_handler or signal.SIG_DFL)
            self._uses_signal = False
        if self._uses_faulthandler:
            faulthandler.cancel_dump_traceback_later()
            self._uses_faulthandler = False

    @contextlib.contextmanager
    def interruptible(self):
        """Inside this block the soft limit raises CellTimeout."""
        self._depth += 1
        try:
            if self.fired:  # the limit passed before the block began
                raise CellTimeout(self.reason())
            yield self
        finally:
            self._depth -= 1

    def _on_alarm(self, signum, frame):
        self.fired = True
        if self._depth > 0:
            raise CellTimeout(self.reason())

    def _watch(self) -> None:
        if self._done.wait(self.seconds + self.grace):
            return
        self.fired = True
        try:
            if self.on_hard_timeout is not None:
                self.on_hard_timeout()
        finally:
            os._exit(HARD_TIMEOUT_EXIT)


class NoDeadline:
    """Stands in for a Deadline where a test has none (not a parametrized cell)."""

    fired = False
    elapsed = 0.0
    seconds = float("inf")

    def stop(self) -> None:
        pass

    @contextlib.contextmanager
    def interruptible(self):
        yield self

    def reason(self) -> str:
        return ""


# --------------------------------------------------------------------------- notes and crash dumps


def write_note(path: Path, note: dict) -> None:
    """Replace `path` with `note` as JSON (atomically: a reader never sees half)."""
    io.write_text_atomic(path, json.dumps(note, sort_keys=True))


def read_note(path: Path) -> dict | None:
    try:
        note = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return note if isinstance(note, dict) else None


_FATAL = re.compile(r"^Fatal Python error: (.+)$", re.M)
_FRAME = re.compile(r'^\s+File "([^"]+)", line (\d+) in (\S+)', re.M)


def _dump(path: Path) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def crash_frame(path: Path) -> tuple[str, tuple[str, int, str] | None] | None:
    """(the fatal error's message, the crashed thread's innermost frame as (file, line, function) or None), from
    the faulthandler dump at `path`; None when it holds no fatal error."""
    text = _dump(path)
    fatal = _FATAL.search(text)
    if not fatal:
        return None
    current = text[fatal.end():]
    marker = current.find("Current thread")
    frame = _FRAME.search(current, marker if marker >= 0 else 0)
    return fatal.group(1).strip(), ((frame.group(1), int(frame.group(2)), frame.group(3)) if frame else None)


def crash_summary(path: Path) -> str:
    """One line saying how a process died, from its faulthandler dump at `path`."""
    crashed = crash_frame(path)
    if crashed is None:
        if "Timeout (" in _dump(path):
            return "the cell hung without returning control to Python; the process was ended"
        return ("the process ended without a Python traceback (killed by a signal such as SIGKILL, "
                "e.g. out of memory, or it called os._exit)")
    message, frame = crashed
    where = f" (in {Path(frame[0]).name}:{frame[1]}, {frame[2]})" if frame else ""
    return f"Fatal Python error: {message}{where}"


def open_dump_file(path: Path) -> TextIO:
    """A file for faulthandler dumps, kept open for the life of the process."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return open(path, "w")


def enable_crash_dumps(handle: TextIO) -> None:
    """Send fatal-error tracebacks (segfault, abort) of this process to `handle`."""
    faulthandler.enable(file=handle, all_threads=True)


def peak_rss_mib() -> float:
    """Peak resident set size of this process, in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)
