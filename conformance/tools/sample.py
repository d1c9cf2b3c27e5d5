"""`conformance sample`: CI reruns a rotating sample of a published matrix and fails where a cell differs from it.

A published matrix is only worth what a rerun gives: CI reruns a few of its classes every day, in each version's
venv, and compares every rerun cell with the published one (`.ci/run`).

    conformance sample classes [--env ENV] [--date YYYY-MM-DD] [--budget S] [--exclude CLASSES] [--root DIR]
    conformance sample compare PUBLISHED.json RERUN.json

Contracts:

* `plain_columns(envelope)`: the columns of a plain run in the published matrix (no backend or dtype column, no
  opt-in or optional check's: `check_info`), the columns a CI rerun fills.
* `pick(envelope, day, budget, exclude=(), salt="")`: the classes of the day, deterministic for a date and
  different across days. The published classes whose plain cells are reproducible anywhere (none `timeout`, none
  of fingerprint kind `resources` or `crash`: those depend on the machine) and cost at most `budget` seconds of
  cells (the published seconds of their plain columns), less `exclude` (what the run checks anyway), are put in
  one fixed order (a hash of `salt` and the name); the day's window starts `day.toordinal() * stride` classes
  into it (`stride`: how many classes the budget holds on average) and takes classes in order while their
  seconds fit the budget, at least one. Consecutive days take consecutive windows, so every class comes round.
* `differences(published, rerun)`: every cell the rerun ran that is not the published one: its raw verdict
  (``observed``) or its fingerprint differs, or the published matrix lacks the class or the cell; each
  `Difference.line()` names the cell and both fingerprints.
* `add_commands(parser)` gives `conformance sample` its subcommands; `run_command(args)` runs the one given:
  `classes` prints the day's classes on one line, comma-separated (for `--models`), and on stderr what it chose
  from; `compare` prints each difference and a count, exit 1 when there is one. Bad input: a `CliError` (one line on
  stderr, exit 2, from `conformance`'s own `main`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

from conformance import versions
from conformance.report import envelope as report
from conformance.tools import jobs
from conformance.tools.errors import CliError

# Seconds of published cells a day's sample may take: on 2 workers about half of it in wall time, plus a run's start
# (imports, discovery, workers: about 40 s). The gate's sample, a run of its own, adds about 80 s to CI; another
# version's, run with its [ci] classes, about 40 s: under 3 minutes for the three.
DEFAULT_BUDGET = 80.0
MACHINE_KINDS = ("resources", "crash", "timeout")  # a cell that ended so says more about the machine than the model


def plain_columns(envelope: dict) -> list[str]:
    info = envelope.get("check_info", {})
    return [c for c in envelope["checks"] if "@" not in c and "~" not in c
            and not info.get(c, {}).get("opt_in") and not info.get(c, {}).get("extra")]


def _reproducible(cells: list[dict]) -> bool:
    return not any(cell["observed"] == "timeout" or (cell.get("fingerprint") or {}).get("kind") in MACHINE_KINDS
                   for cell in cells)


def candidates(envelope: dict, budget: float, exclude=()) -> dict[str, float]:
    """The classes a sample may take, with their published seconds of plain cells (see `pick`)."""
    envelope = report.upgraded(envelope)  # a file's cells as read: ``observed`` on each
    columns, skipped = plain_columns(envelope), set(exclude)
    found = {}
    for name, row in envelope["models"].items():
        cells = [row["cells"][c] for c in columns if c in row.get("cells", {})]
        seconds = round(sum(float(cell.get("seconds") or 0.0) for cell in cells), 3)
        if cells and name not in skipped and _reproducible(cells) and seconds <= budget:
            found[name] = seconds
    return found


def pick(envelope: dict, day: datetime.date, budget: float = DEFAULT_BUDGET, exclude=(), salt: str = "") -> list[str]:
    """The classes of `day` (see the module)."""
    found = candidates(envelope, budget, exclude)
    if not found:
        return []
    order = sorted(found, key=lambda name: (zlib.crc32(f"{salt}:{name}".encode()), name))
    windows: list[list[str]] = [[]]
    spent = 0.0
    for name in order:
        if windows[-1] and spent + found[name] > budget:
            windows.append([])
            spent = 0.0
        windows[-1].append(name)
        spent += found[name]
    chosen = windows[day.toordinal() % len(windows)]
    return sorted(chosen)


@dataclass(frozen=True)
class Difference:
    model: str
    check: str
    published: str  # the published raw verdict, or "absent"
    rerun: str
    published_fingerprint: dict | None
    rerun_fingerprint: dict | None

    def line(self) -> str:
        def side(verdict, fingerprint):
            return verdict + (f" {json.dumps(fingerprint, sort_keys=True)}" if fingerprint else "")

        return (f"{self.model} / {self.check}: published {side(self.published, self.published_fingerprint)}; "
                f"rerun {side(self.rerun, self.rerun_fingerprint)}")


def differences(published: dict, rerun: dict) -> list[Difference]:
    """Every cell of `rerun` whose raw verdict or fingerprint is not the published one's (see the module)."""
    published, rerun, found = report.upgraded(published), report.upgraded(rerun), []
    for model in sorted(rerun["models"]):
        published_cells = published["models"].get(model, {}).get("cells", {})
        for check, cell in sorted(rerun["models"][model].get("cells", {}).items()):
            before = published_cells.get(check)
            after_verdict, after_print = cell["observed"], cell.get("fingerprint") or None
            if before is None:
                found.append(Difference(model, check, "absent", after_verdict, None, after_print))
                continue
            before_verdict, before_print = before["observed"], before.get("fingerprint") or None
            if before_verdict != after_verdict or before_print != after_print:
                found.append(Difference(model, check, before_verdict, after_verdict, before_print, after_print))
    return found


def _date(text: str) -> datetime.date:
    try:
        return datetime.date.fromisoformat(text) if text else datetime.datetime.now(datetime.timezone.utc).date()
    except ValueError:
        raise CliError(f"--date {text!r}: not a date; give it as YYYY-MM-DD") from None


def _version(env: str) -> versions.Version:
    try:
        return jobs.version_of(env) if env else next(v for v in versions.supported()
                                                     if v.env == jobs.installed_env())
    except jobs.JobsError as exc:
        raise CliError(str(exc)) from None


def cmd_classes(args) -> int:
    version = _version(args.env)
    path = Path(args.published) if args.published else jobs.published_path(version, Path(args.root))
    if not path.exists():
        raise CliError(f"{path}: no published matrix of {version.env} to sample; pass --published PATH")
    envelope = report.load_envelope(path)
    exclude = [name.strip() for name in args.exclude.split(",") if name.strip()]
    day = _date(args.date)
    chosen = pick(envelope, day, args.budget, exclude, salt=version.env)
    if not chosen:
        raise CliError(f"{path}: no class of {version.env} to sample: none reproducible, not excluded and within "
                       f"{args.budget:g} s of published cells; raise --budget or exclude fewer")
    seconds = candidates(envelope, args.budget, exclude)
    print(f"sample of {day.isoformat()} ({version.env}, {path}): {len(chosen)} of {len(seconds)} classes, "
          f"{sum(seconds[n] for n in chosen):.0f} s of published cells (budget {args.budget:g} s)", file=sys.stderr)
    print(",".join(chosen))
    return 0


def cmd_compare(args) -> int:
    published, rerun = report.load_envelope(args.published), report.load_envelope(args.rerun)
    found = differences(published, rerun)
    for difference in found:
        print(difference.line())
    cells = sum(len(row.get("cells", {})) for row in rerun["models"].values())
    print(f"{len(found)} of {cells} rerun cell(s) differ from {args.published}"
          + (" (raw verdict or fingerprint)" if found else ""))
    return 1 if found else 0


DESCRIPTION = __doc__.split("\n\n")[1]


def add_commands(parser: argparse.ArgumentParser) -> None:
    """`parser` (`conformance sample`) given its subcommands, each with its function as `func`."""
    sub = parser.add_subparsers(dest="sample_command", required=True, metavar="COMMAND")
    p = sub.add_parser("classes", help="the day's classes of a version's published matrix, for --models")
    p.add_argument("--env", default="", help="the version's env (fixtures/versions.toml; default: the installed one)")
    p.add_argument("--date", default="", help="the day, YYYY-MM-DD (default: today, UTC)")
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET, help="seconds of published cells (default %(default)s)")
    p.add_argument("--exclude", default="", help="classes the run checks anyway, comma-separated")
    p.add_argument("--published", default="", help="the published matrix (default: the version's, under --root)")
    p.add_argument("--root", default=".", help="the repository (default: here)")
    p.set_defaults(func=cmd_classes)
    p = sub.add_parser("compare", help="rerun cells whose raw verdict or fingerprint is not the published one; exit 1")
    p.add_argument("published")
    p.add_argument("rerun")
    p.set_defaults(func=cmd_compare)


def run_command(args) -> int:
    """`conformance sample COMMAND` (see the module's contract)."""
    if args.sample_command == "classes" and not args.budget > 0:
        raise CliError("--budget must be a positive number of seconds")
    try:
        return args.func(args)
    except versions.VersionsError as exc:
        raise CliError(str(exc)) from None
