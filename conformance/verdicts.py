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
are a cell's raw verdicts, what every cell stores as ``observed``
(`report.envelope`); the gate's judgement (`gate.judging`) turns a listed
failure into xfail and a listed pass into xpass. Torch-free.
"""

from __future__ import annotations

VERDICTS = ("pass", "fail", "xfail", "xpass", "skip", "error", "timeout")
FAILING = ("fail", "error", "timeout")  # raw verdicts an expectation may list
PASSING = ("pass", "xpass")


def passed(cell: dict) -> bool:
    """Whether a cell's check passed: `pass`, or an `xpass` whose raw verdict (``observed``) was a pass (an
    "improved" xpass is a failure with fewer graph breaks or recompiles than listed: it still failed)."""
    verdict = cell.get("verdict")
    return verdict == "pass" or (verdict == "xpass" and cell["observed"] == "pass")
