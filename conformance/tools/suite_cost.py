"""`conformance bench --suite`: what the matrix itself costs, per check, and against an earlier run.

Contract of `main(argv) -> int`:

* ``conformance bench --suite RUN.json [EARLIER.json]`` reads pytest-json-report
  files (the README's first command writes ``reports/latest/pytest.json``)
  and prints one Markdown table: per column (``test_<check>`` of
  `conformance/test_matrix.py`), the meta tests and any other test, the
  number of tests and the seconds of their setup (where a class's tiny
  model and inputs are built: in the setup of its first cell), call and
  teardown, summed over the run's processes; then the run's wall time
  (pytest's own ``duration``) and the sum of all. With a second file the
  table gives both runs and the change, so a change to the suite can be
  compared with the run before it.
* ``--out PATH`` also writes the table's numbers as JSON (schema
  `SCHEMA`).
* A missing or unreadable file, or one that is not a pytest-json-report, is
  one line naming the file and the fix (exit 2).

Seconds are what pytest measured on the machine that ran it: compare runs
of the same machine; nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from conformance.tools.errors import CliError, CommandParser

SCHEMA = "vlm-conformance-suite-cost/1"
MATRIX_TEST = re.compile(r"test_matrix\.py::test_(\w+)\[")
META = "meta tests"
OTHER = "other tests"


class CostError(Exception):
    """A report that cannot be read: the message names it and the fix."""


@dataclass
class Cost:
    tests: int = 0
    setup: float = 0.0
    call: float = 0.0
    teardown: float = 0.0

    @property
    def total(self) -> float:
        return self.setup + self.call + self.teardown

    def add(self, test: dict) -> None:
        self.tests += 1
        for phase in ("setup", "call", "teardown"):
            setattr(self, phase, getattr(self, phase) + float((test.get(phase) or {}).get("duration") or 0.0))


@dataclass
class SuiteCost:
    wall: float
    rows: dict[str, Cost]

    @property
    def total(self) -> float:
        return sum(cost.total for cost in self.rows.values())


def group_of(nodeid: str) -> str:
    """The table row of a test: its check for a matrix cell, else meta or other tests."""
    found = MATRIX_TEST.search(nodeid)
    if found:
        return found.group(1)
    return META if "/meta/" in nodeid or nodeid.startswith("meta/") else OTHER


def read(path: Path) -> SuiteCost:
    try:
        report = json.loads(Path(path).read_text())
    except OSError as exc:
        raise CostError(f"{path}: cannot read it ({exc.strerror}): give the pytest-json-report file of a run "
                        "(the README's first command writes reports/latest/pytest.json)") from None
    except ValueError:
        raise CostError(f"{path}: not JSON: give the pytest-json-report file of a run "
                        "(--json-report-file), not a matrix envelope or a log") from None
    if not isinstance(report, dict) or not isinstance(report.get("tests"), list) or "duration" not in report:
        raise CostError(f"{path}: not a pytest-json-report file (no 'tests' and 'duration'): run pytest with "
                        "--json-report --json-report-file PATH and give that PATH")
    rows: dict[str, Cost] = {}
    for test in report["tests"]:
        rows.setdefault(group_of(str(test.get("nodeid", ""))), Cost()).add(test)
    return SuiteCost(wall=float(report["duration"]), rows=rows)


def _order(names) -> list[str]:
    tail = [META, OTHER]
    return sorted((n for n in names if n not in tail), key=lambda n: (n != "build", n)) + [n for n in tail
                                                                                       if n in names]


def table(run: SuiteCost, earlier: SuiteCost | None = None) -> str:
    """The Markdown table of one run, or of an earlier run and this one with the change."""
    names = _order(set(run.rows) | set(earlier.rows if earlier else ()))
    if earlier is None:
        lines = ["| row | tests | setup s | call s | total s | share |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for name in names:
            cost = run.rows[name]
            share = cost.total / run.total if run.total else 0.0
            lines.append(f"| `{name}` | {cost.tests} | {cost.setup:.0f} | {cost.call:.0f} | {cost.total:.0f} | "
                         f"{share:.0%} |")
        lines.append(f"| all tests (sum over processes) | {sum(c.tests for c in run.rows.values())} | | | "
                     f"{run.total:.0f} | |")
        lines.append(f"| **wall** | | | | **{run.wall:.0f}** | |")
        return "\n".join(lines) + "\n"
    lines = ["| row | tests | earlier s | now s | change |", "| --- | ---: | ---: | ---: | ---: |"]

    def change(before: float, now: float) -> str:
        return f"{(now - before) / before:+.0%}" if before else "new"

    for name in names:
        before, now = earlier.rows.get(name, Cost()), run.rows.get(name, Cost())
        lines.append(f"| `{name}` | {now.tests} | {before.total:.0f} | {now.total:.0f} | "
                     f"{change(before.total, now.total)} |")
    lines.append(f"| all tests (sum over processes) | | {earlier.total:.0f} | {run.total:.0f} | "
                 f"{change(earlier.total, run.total)} |")
    lines.append(f"| **wall** | | **{earlier.wall:.0f}** | **{run.wall:.0f}** | {change(earlier.wall, run.wall)} |")
    return "\n".join(lines) + "\n"


def as_json(run: SuiteCost, path: Path) -> dict:
    return {"schema": SCHEMA, "report": str(path), "wall_seconds": round(run.wall, 3),
            "sum_seconds": round(run.total, 3),
            "rows": {name: {**asdict(cost), "total": round(cost.total, 3)} for name, cost in run.rows.items()}}


def parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="conformance bench --suite", description=__doc__.split("\n\n")[0])
    p.add_argument("report", type=Path, help="pytest-json-report file of the run (reports/latest/pytest.json)")
    p.add_argument("earlier", type=Path, nargs="?", help="the same file of an earlier run, to compare with")
    p.add_argument("--out", type=Path, help="also write the numbers as JSON here")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        run = read(args.report)
        earlier = read(args.earlier) if args.earlier else None
    except (CliError, CostError) as exc:
        print(f"conformance bench --suite: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(table(run, earlier))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(as_json(run, args.report), indent=2) + "\n")
    return 0
