"""Sharding and ordering of the cells by how long each class is expected to take.

Contract:

* `estimates(envelope, checks, backend)` gives each class of a run's
  envelope (the published matrix) its expected seconds: the sum of the
  seconds of its cells in the columns a run of `checks` under `backend`
  fills (the backend column ``<check>@<backend>``, `columns.column_id`,
  where the envelope has that column, else ``<check>``; all columns when
  `checks` is None), so that columns the run does not run (another
  backend's, opt-in, optional) do not weigh; a class
  with no cell in those columns has no estimate (a column never published
  gives none: the split is then by name, not every class in share 1).
* `published_estimates(checks=None, backend="eager")` reads them from the published
  matrix of this repository (`PUBLISHED`); a missing file gives none, a
  corrupt one raises `report.EnvelopeError` naming the file and the fix.
* `select_shard(items, "i/N", seconds, group)` keeps the items of share i (1-based)
  of N. Whole classes go to one shard (each tiny model is built once) and
  the N shares cover every item exactly once. With estimates, classes are
  dealt longest first, each to the share with the least expected seconds so
  far (ties: the lower share), so the shares take about the same time; a
  class without an estimate counts as the median of all estimates. Without
  estimates the split is a hash of the class name. Either way the split
  depends only on the items and the estimates, so every shard machine of a
  run computes the same one.
* `share_of(names, "i/N", seconds)` is the same split over class names.
* `longest_first(names, seconds)` orders classes longest first (xdist hands
  classes out in the order of the items, so the long ones do not end the run).
* `plan(names, seconds, budget, workers, overhead)` is the fewest shards
  of the classes `names` whose expected wall time, `overhead` plus the
  classes spread longest-first over `workers` processes (their seconds
  times `CELL_MARGIN`, for timing noise), is at most `budget` seconds each
  (one class a shard when even that does not fit).
"""

from __future__ import annotations

import statistics
import zlib
from dataclasses import dataclass
from pathlib import Path

from conformance import columns, locations
from conformance.report import envelope as report

PUBLISHED = locations.PUBLISHED_MATRIX
# Seconds a shard spends besides its cells on 2 cores: imports, discovery, the impact graph, starting two xdist
# workers, writing the envelope. Measured 31-40 s on 2 cores (8 shards, transformers 5.24).
OVERHEAD_SECONDS = 40.0
# Cells of a quiet gate took 0.84-1.11 times their published seconds (7 measured shards): plan for 1.15.
CELL_MARGIN = 1.15
UNKNOWN_SECONDS = 10.0  # a class when no class has an estimate


def parse(spec: str) -> tuple[int, int]:
    try:
        index, total = (int(x) for x in spec.split("/"))
    except ValueError:
        raise ValueError(f"expected i/N (e.g. 1/4), got {spec!r}") from None
    if not 1 <= index <= total:
        raise ValueError(f"expected 1 <= i <= N, got {spec!r}")
    return index, total


# -- estimates


def _run_cells(cells: dict, checks, backend: str) -> list[dict]:
    if checks is None:
        return list(cells.values())
    found = (cells.get(columns.column_id(check, backend)) or cells.get(check) for check in checks)
    return [cell for cell in found if cell]


def estimates(envelope: dict, checks=None, backend: str = "eager") -> dict[str, float]:
    """Expected seconds of each class of `envelope` in a run of `checks` (None: every column), by canonical name."""
    found = {name: _run_cells(row["cells"], checks, backend) for name, row in envelope["models"].items()}
    return {name: round(sum(float(cell.get("seconds") or 0.0) for cell in cells), 3)
            for name, cells in found.items() if cells}


def published_estimates(path: Path | None = None, checks=None, backend: str = "eager") -> dict[str, float]:
    path = path or PUBLISHED
    if not path.exists():
        return {}
    return estimates(report.load_envelope(path), None if checks is None else list(checks), backend)


def _expected(groups, seconds: dict[str, float]) -> dict[str, float]:
    """Expected seconds of each distinct group, in first-seen order."""
    default = statistics.median(seconds.values()) if seconds else UNKNOWN_SECONDS
    return {g: seconds.get(g, default) for g in groups}


def _longest_first(expected: dict[str, float]) -> list[str]:
    return sorted(expected, key=lambda g: (-expected[g], g))


def deal(expected: dict[str, float], bins: int) -> list[list[str]]:
    """Classes dealt longest first to the least-loaded of `bins` (ties: the lower bin)."""
    loads = [0.0] * bins
    dealt: list[list[str]] = [[] for _ in range(bins)]
    for group in _longest_first(expected):
        target = min(range(bins), key=lambda b: (loads[b], b))
        loads[target] += expected[group]
        dealt[target].append(group)
    return dealt


# -- items


def share_of(names, spec: str, seconds: dict[str, float] | None = None) -> list[str]:
    """The classes of `names` in share i of N (see `select_shard`), in the order of `names`."""
    index, total = parse(spec)
    groups = list(dict.fromkeys(names))  # names may repeat (one per cell)
    if seconds:
        mine = set(deal(_expected(groups, seconds), total)[index - 1])
    else:
        mine = {g for g in groups if zlib.crc32(g.encode()) % total == index - 1}
    return [g for g in groups if g in mine]


def select_shard(items: list, spec: str, seconds: dict[str, float] | None = None, group=None) -> list:
    """The items of share i of N; `group(item)` is its class (default: the item itself, e.g. a name)."""
    group = group or (lambda item: item)
    mine = set(share_of((group(item) for item in items), spec, seconds))
    return [item for item in items if group(item) in mine]


def expected_seconds(names, seconds: dict[str, float]) -> float:
    """Expected cell seconds of the classes `names` (one without an estimate: the median of all)."""
    return round(sum(_expected(names, seconds).values()), 1)


def longest_first(names, seconds: dict[str, float]) -> list[str]:
    """Class names, the longest expected first (ties by name)."""
    return _longest_first(_expected(names, seconds))


# -- planning


@dataclass(frozen=True)
class Plan:
    shards: int
    classes: int
    cell_seconds: float  # expected seconds of all cells, one process
    wall_seconds: float  # expected wall time of the slowest shard

    def specs(self) -> list[str]:
        return [f"{i}/{self.shards}" for i in range(1, self.shards + 1)]


def _wall(expected: dict[str, float], workers: int, overhead: float) -> float:
    if not expected:
        return overhead
    return overhead + CELL_MARGIN * max(sum(expected[g] for g in share) for share in deal(expected, workers))


def plan(names: list[str], seconds: dict[str, float], budget: float, workers: int = 2,
         overhead: float = OVERHEAD_SECONDS) -> Plan:
    """The fewest shards (at most one per class) whose expected wall time fits `budget`."""
    expected = _expected(names, seconds)
    total = 1
    while True:
        shares = deal(expected, total)
        wall = max(_wall({g: expected[g] for g in share}, workers, overhead) for share in shares)
        if wall <= budget or total >= max(len(names), 1):
            return Plan(total, len(names), round(sum(expected.values()), 1), round(wall, 1))
        total += 1
