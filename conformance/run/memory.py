"""A cell's memory: its limit per column, and what a process and the machine hold now.

Contracts:

* `limit_mib(column, override=None, table=None)`: the memory limit of a cell
  of `column` (a check id, ``check@backend`` for a backend column): `override`
  (``--cell-memory``) when given, else ``max(peak_mib[column] * factor,
  floor_mib)`` from `fixtures/cell_memory.toml` (data: the published peaks),
  `floor_mib` for a column without a published peak (a backend column
  without its own takes its check's).
* `reserve_mib(table=None)`: what the machine keeps free; a cell is stopped
  before the machine's available memory falls below it (so the kernel's OOM
  killer never picks a worker).
* `rss_mib(pid)`: the resident memory of process `pid` and all its
  descendants (Linux /proc; 0 where it cannot be read).
* `available_mib()`: the machine's available memory (MemAvailable), None
  where unknown.
* `stop_children(pid)`: SIGKILL every descendant of `pid` (a child the cell
  started holds the cell's memory).

Torch-free.
"""

from __future__ import annotations

import functools
import os
import signal
import tomllib
from pathlib import Path

from conformance import locations

TABLE = locations.DATA / "cell_memory.toml"
_PAGE_MIB = os.sysconf("SC_PAGE_SIZE") / (1024 * 1024) if hasattr(os, "sysconf") else 4096 / (1024 * 1024)


@functools.cache
def _table(path: Path = TABLE) -> dict:
    with open(path, "rb") as handle:
        return tomllib.load(handle)


def limit_mib(column: str, override: float | None = None, table: dict | None = None) -> float:
    """The memory limit of a cell of `column`, in MiB (see the module)."""
    if override:
        return float(override)
    table = table if table is not None else _table()
    floor = float(table["floor_mib"])
    peaks = table.get("peak_mib", {})
    peak = peaks.get(column) or peaks.get(column.partition("@")[0])
    return round(max(float(peak) * float(table["factor"]), floor) if peak else floor, 1)


def reserve_mib(table: dict | None = None) -> float:
    table = table if table is not None else _table()
    return float(table["reserve_mib"])


def _children(pid: int) -> list[int]:
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            found += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except (OSError, ValueError):
            pass
    return found


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, their children, ...)."""
    found, todo = [], _children(pid)
    while todo:
        child = todo.pop()
        found.append(child)
        todo += _children(child)
    return found


def _own_rss_mib(pid: int) -> float:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE_MIB
    except (OSError, ValueError, IndexError):
        return 0.0


def rss_mib(pid: int) -> float:
    """Resident memory of `pid` and its descendants, in MiB."""
    return round(sum(_own_rss_mib(p) for p in [pid, *descendants(pid)]), 1)


def available_mib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def stop_children(pid: int) -> None:
    for child in descendants(pid):
        try:
            os.kill(child, signal.SIGKILL)
        except OSError:
            pass
