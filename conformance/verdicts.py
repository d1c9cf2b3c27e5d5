"""The verdicts of a cell: the one vocabulary of checks, runs, reports and the gate.

| verdict | meaning |
| --- | --- |
| `pass` | the check ran and its contract held |
| `fail` | it ran and the contract was violated, and no expectation lists it |
| `xfail` | violated, and the expectations list the cell |
| `xpass` | listed as failing, but passed: the expectation must go |
| `skip` | the check does not apply to the model (the reason says why) |
| `error` | the harness could not set the cell up (a gap of the suite) |
| `timeout` | the cell ran past its time limit |

A check, run, says pass, fail, skip, or error (it could not set itself up,
or the suite's own code raised: `conformance.checks.common.outcome`); the
harness adds error (the tiny model could not be built) and timeout. These
are a cell's raw verdicts (`raw`); the gate turns a listed failure into
xfail and a listed pass into xpass. Torch-free.
"""

from __future__ import annotations

VERDICTS = ("pass", "fail", "xfail", "xpass", "skip", "error", "timeout")
FAILING = ("fail", "error", "timeout")  # raw verdicts an expectation may list
PASSING = ("pass", "xpass")


def passed(cell: dict) -> bool:
    """Whether a cell's check passed: `pass`, or an `xpass` whose raw verdict was a pass (an "improved" xpass
    is a failure with fewer graph breaks or recompiles than listed: it still failed)."""
    verdict = cell.get("verdict")
    return verdict == "pass" or (verdict == "xpass" and cell.get("observed", "pass") == "pass")


def raw(cell: dict, listed: str | None = None) -> str:
    """What the check itself said of a recorded cell: `observed` where the gate changed the verdict, else the
    verdict; a run file older than `observed`: an xfail's `listed` verdict (the one its expectation lists now,
    where the caller knows it), else its recorded `expected`, else fail; an xpass's pass."""
    verdict = cell.get("verdict", "")
    if cell.get("observed"):
        return cell["observed"]
    if verdict == "xfail":
        if listed is not None:
            return listed
        return cell["expected"] if cell.get("expected") in FAILING else "fail"
    if verdict == "xpass":
        return "pass"
    return verdict
