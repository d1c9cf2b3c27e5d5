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
  - Memory (with `memory=MemoryLimit(...)`): the watchdog samples the
    resident memory of the process and its children every `interval`
    seconds (`peak_mib` keeps the highest). Past `limit_mib`, or where the
    machine's available memory falls below `reserve_mib` (before the
    kernel's OOM killer would pick a process), it kills the children and
    raises `CellOutOfMemory` in the main thread the same way (only inside
    `interruptible`, again every `repeat` seconds); `stopped_by` is
    "memory", `machine` says which of the two. If the cell has not stopped
    `grace` seconds later, or its memory keeps growing (`hard_mib`, or half
    the reserve left), `on_hard_timeout()` records it and the process ends
    (as for time).
  - `under_load` is what the `under_load()` given says (other work running)
    when a limit fires, for time as for memory.

* `write_note(path, note)` / `read_note(path)`: the cell a process is running
  (model, check, nodeid, deadline), written before the cell starts, so that
  whoever outlives a crashed process can say which cell it was and whether it
  was past its deadline.
* `crash_summary(path)`: one line from a faulthandler dump ("Fatal Python
  error: Aborted (in file.py:12, fn)") or, for an empty dump, what that means;
  `crash_frame(path)` the fatal error's message and the crashed thread's
  innermost Python frame (file, line, function), None without one.
* `others_running(parts_dir, own)`: whether another process of the run is
  running a cell now (its note not ended, its pid alive).
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

from conformance.report import io
from conformance.run import memory as machine

HARD_TIMEOUT_EXIT = 70  # EX_SOFTWARE: the process ended itself because a cell hung


class CellStopped(BaseException):
    """A limit of the cell stopped it.

    A BaseException (like KeyboardInterrupt) so that the `except Exception`
    of checks and of torch's own error wrapping lets it through.
    """


class CellTimeout(CellStopped):
    """The cell ran past its time limit."""


class CellOutOfMemory(CellStopped):
    """The cell's memory went past its limit, or past what the machine can give."""


@dataclass
class MemoryLimit:
    """The memory limit of one cell (see the module): `limit_mib` for the process `pid` and its children, the
    machine's `reserve_mib`, sampled every `interval` seconds; `under_load()` says whether other work runs."""

    limit_mib: float
    reserve_mib: float = 0.0
    pid: int = field(default_factory=os.getpid)
    interval: float = 0.1

    @property
    def hard_mib(self) -> float:
        """Past this, a cell that did not stop ends its process at once."""
        return self.limit_mib + max(256.0, self.limit_mib / 4)


class Deadline:
    """The time limits of one cell (see the module docstring)."""

    def __init__(self, seconds: float, grace: float, on_hard_timeout: Callable[[], None] | None = None,
                 dump_file: TextIO | None = None, memory: MemoryLimit | None = None,
                 under_load: Callable[[], bool] | None = None):
        if seconds <= 0 or grace <= 0:
            raise ValueError("seconds and grace must be positive")
        self.seconds = seconds
        self.grace = grace
        self.repeat = max(0.05, min(1.0, grace / 4))
        self.on_hard_timeout = on_hard_timeout
        self.dump_file = dump_file
        self.memory = memory
        self._under_load = under_load
        self.fired = False
        self.stopped_by = ""  # "time" or "memory": the limit that fired first
        self.machine = False  # memory: the machine's reserve, not the cell's limit
        self.under_load = False
        self.peak_mib = 0.0
        self._memory_fired_at = 0.0
        self._signalled = 0
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
        if self.stopped_by == "memory":
            if self.machine:
                return (f"resident memory reached {self.peak_mib:.0f} MiB, all the machine could give (it keeps "
                        f"{self.memory.reserve_mib:.0f} MiB free); the cell was stopped")
            return (f"resident memory reached {self.peak_mib:.0f} MiB, past the cell memory limit of "
                    f"{self.memory.limit_mib:.0f} MiB; the cell was stopped")
        return f"ran past the cell time limit of {self.seconds:g} s"

    def stopped(self) -> CellStopped:
        """The exception of the limit that fired."""
        return (CellOutOfMemory if self.stopped_by == "memory" else CellTimeout)(self.reason())

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
        """Inside this block the soft limit raises CellTimeout (CellOutOfMemory for memory)."""
        self._depth += 1
        try:
            if self.fired:  # the limit passed before the block began
                raise self.stopped()
            yield self
        finally:
            self._depth -= 1

    def _on_alarm(self, signum, frame):
        if not self.fired:
            self._fire("time")
        if self._depth > 0:
            raise self.stopped()

    def _fire(self, by: str) -> None:
        self.stopped_by = self.stopped_by or by
        self.fired = True
        try:
            self.under_load = bool(self._under_load and self._under_load())
        except Exception:  # a note that cannot be read says nothing about load
            self.under_load = False

    def _watch(self) -> None:
        hard_at = self.started + self.seconds + self.grace
        interval = self.memory.interval if self.memory is not None else None
        while not self._done.wait(interval if interval else max(0.0, hard_at - time.monotonic())):
            if time.monotonic() >= hard_at or (self.memory is not None and self._memory_hard()):
                break
        else:
            return
        if not self.fired:
            self._fire("time")
        try:
            if self.on_hard_timeout is not None:
                self.on_hard_timeout()
        finally:
            os._exit(HARD_TIMEOUT_EXIT)

    def _memory_hard(self) -> bool:
        """Sample the memory; stop the cell past a limit; True when it must end its process now."""
        limit = self.memory
        rss = machine.rss_mib(limit.pid)
        self.peak_mib = max(self.peak_mib, rss)
        available = machine.available_mib() if limit.reserve_mib else None
        short = available is not None and available < limit.reserve_mib
        if self.stopped_by != "memory":
            if rss <= limit.limit_mib and not short:
                return False
            if self.fired:  # stopped by time already: its verdict stands
                return False
            self.machine = rss <= limit.limit_mib
            self._fire("memory")
            self._memory_fired_at = time.monotonic()
        machine.stop_children(limit.pid)
        if rss > limit.hard_mib or (available is not None and available < limit.reserve_mib / 2) or \
                time.monotonic() - self._memory_fired_at > self.grace:
            return True
        if self._uses_signal and time.monotonic() - self._memory_fired_at >= self._signalled * self.repeat:
            self._signalled += 1
            signal.pthread_kill(threading.main_thread().ident, signal.SIGALRM)
        return False


class NoDeadline:
    """Stands in for a Deadline where a test has none (not a parametrized cell)."""

    fired = False
    stopped_by = ""
    under_load = False
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


def others_running(parts_dir: Path, own: str) -> bool:
    """Whether a process of the run other than `own` is running a cell now (a note without `ended`, its pid
    alive)."""
    for path in Path(parts_dir).glob("*.running.json"):
        if path.name == f"{own}.running.json":
            continue
        note = read_note(path)
        if not note or note.get("ended") or not isinstance(note.get("pid"), int):
            continue
        try:
            os.kill(note["pid"], 0)
        except ProcessLookupError:
            continue
        except PermissionError:
            pass
        return True
    return False


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
