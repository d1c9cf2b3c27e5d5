"""A cell's life, in one place: build or reuse the case, run the check, fingerprint, judge, make the record.

Contract of `live(model, check_id, case_for, expectations, ...)` -> `Cell`:

* The case is `case` when the caller has it already (the run's fixture
  built it), else ``case_for(model)``, under `deadline`. A case that could
  not be had decides the cell without running the check:

  - `MissingDependency`: no cell (`Cell.not_run` says why: no outcome, no
    record; the run's row says it);
  - a row the cases stage decided (`RowVerdict`): its verdict and reason for
    this check (`RowVerdict.cell`) and its fingerprint;
  - past the deadline (`isolation.CellTimeout`, `BuildTimedOut`): `timeout`;
  - past the memory limit (`isolation.CellOutOfMemory`, `BuildOutOfMemory`):
    `fail`, fingerprint kind `resources` (`stopped_outcome`);
  - any other failure: `error`, reason ``tiny model or inputs could not be
    built: <one line>``, fingerprinted ``harness_error`` where it was raised
    (`build_failure`: the run's `Session` keeps the same error for the
    class's later cells).

  With `stop_when_built` a built case ends the call there (`Cell.outcome`
  None): pytest builds in a fixture and runs the check in the test, which
  calls `live` again with the case.
* The check runs with `run_check` under `deadline` (default: none) and
  inside `watch()` when given (explain's dynamo logs); a check the deadline
  stopped is `stopped_outcome(deadline)` (dynamo reset, garbage collected):
  `timeout` past its time, `fail` with fingerprint kind `resources` past its
  memory (metrics `peak_rss_mib` and `memory_limit_mib`, or
  `machine_reserve_mib` where the machine could give no more); either with
  metric `under_load` when other work of the run was running then (the run
  reruns it alone: `rerun`).
* `end(...)`: every failing outcome gets a fingerprint (`harness_fingerprint`
  when nothing gave one); `Cell.record` is the cell's observation
  (`records.make_record`; a built `build` cell carries its tiny model's
  facts) judged against ``expectations[(model, check_id)]``
  (`gate.judging.judge_cell`, the one judgement of a cell, publishing's
  too), and `Cell.judgement` that judgement's verdict and note. Writing the
  record is the caller's: the run appends it to its part file, explain
  prints from it.

Nothing here needs pytest; the run's time limits and crash handling stay
the run's (`guard`, `isolation`): `live` only honours the deadline it is given.
"""

from __future__ import annotations

import gc
import traceback
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Callable, Mapping

import torch

from conformance.cases.case import BUILD_FAILED, Case
from conformance.cases.model_failure import MissingDependency, RowVerdict
from conformance.checks.common.outcome import Outcome, run_check
from conformance.fingerprints import Fingerprint, mask, of_exception
from conformance.gate.judging import judge_cell
from conformance.gate.ratchet import Judgement
from conformance.reasons import one_line
from conformance.run import isolation
from conformance.run.records import make_record
from conformance.verdicts import FAILING


class BuildError(RuntimeError):
    """The harness could not set up the tiny model or its inputs; `fingerprint` says what failed where."""

    def __init__(self, message: str, fingerprint: Fingerprint | None = None):
        super().__init__(message)
        self.fingerprint = fingerprint


class BuildTimedOut(BuildError):
    """Building the tiny model ran past the cell time limit; `under_load` when other work of the run was running
    then (the class's later cells, failed with it, are rerun alone as its first is)."""

    def __init__(self, message: str, under_load: bool = False):
        super().__init__(message)
        self.under_load = under_load


class BuildOutOfMemory(BuildError):
    """Building the tiny model went past the cell memory limit; `outcome` is that cell's."""

    def __init__(self, message: str, outcome: Outcome):
        super().__init__(message, outcome.fingerprint)
        self.outcome = outcome


def stopped_outcome(deadline, reason: str = "") -> Outcome:
    """The outcome of a cell a limit of `deadline` stopped (see the module); `reason` replaces the deadline's."""
    metrics = {"seconds": round(deadline.elapsed, 3)}
    if getattr(deadline, "under_load", False):
        metrics["under_load"] = True
    if getattr(deadline, "stopped_by", "") != "memory":
        return Outcome("timeout", reason or deadline.reason(), metrics)
    limit = deadline.memory
    metrics["peak_rss_mib"] = round(deadline.peak_mib, 1)
    if deadline.machine:
        metrics["machine_reserve_mib"] = limit.reserve_mib
    else:
        metrics["memory_limit_mib"] = limit.limit_mib
    what = "the machine's available memory" if deadline.machine else "resident memory past the cell memory limit"
    return Outcome("fail", reason or deadline.reason(), metrics, fingerprint=Fingerprint("resources", what=what))


def build_failure(exc: Exception) -> BuildError:
    """The `BuildError` of a build that raised `exc`: its one line, fingerprinted `harness_error` at its site."""
    found = of_exception(exc)
    return BuildError(one_line(exc), Fingerprint("harness_error", where=found.where, error=found.error))


def harness_fingerprint(outcome: Outcome) -> Fingerprint:
    """The fingerprint of a cell the harness ended: a timeout, or a harness error in its reason's words."""
    if outcome.verdict == "timeout":
        return Fingerprint("timeout")
    return Fingerprint("harness_error", what=mask(outcome.reason))


@dataclass
class Cell:
    """One cell at the end of `live` (or of its build, with `stop_when_built`)."""

    model: str
    check: str
    case: Case | None = None
    outcome: Outcome | None = None  # None: not run here, or built and waiting for its check
    expectation: object = None  # the gate.expectations.Expectation that applies, if any
    judgement: Judgement | None = None
    record: dict | None = None
    not_run: str = ""  # why the class is not run here (a missing package)


def live(model: str, check_id: str, case_for: Callable[[str], Case], expectations: Mapping, *,
         case: Case | None = None, stop_when_built: bool = False, deadline=None,
         watch: Callable | None = None, nodeid: str = "", process: str = "main") -> Cell:
    """The life of one cell (see the module)."""
    if deadline is None:
        deadline = isolation.NoDeadline()
    if case is None:
        try:
            with deadline.interruptible():
                case = case_for(model)
        except MissingDependency as exc:
            return Cell(model, check_id, not_run=str(exc))
        except (isolation.CellStopped, Exception) as exc:  # a limit, a row decided, a build that failed
            return end(model, check_id, _build_outcome(exc, check_id, deadline), expectations, deadline=deadline,
                       nodeid=nodeid, process=process)
        if stop_when_built:
            return Cell(model, check_id, case=case)
    outcome = None
    try:
        with deadline.interruptible(), (watch or nullcontext)():
            outcome = run_check(check_id, case)
    except isolation.CellStopped:
        pass
    if deadline.fired or outcome is None:
        # Whatever came out of the check (torch may wrap the interrupt), it was stopped by the limit.
        outcome = stopped_outcome(deadline)
        torch._dynamo.reset()
        gc.collect()
    return end(model, check_id, outcome, expectations, case=case, deadline=deadline, nodeid=nodeid, process=process)


def _build_outcome(exc: BaseException, check_id: str, deadline) -> Outcome:
    """The outcome of a cell whose case could not be had (see the module)."""
    if isinstance(exc, BuildTimedOut):
        return Outcome("timeout", str(exc), {"seconds": round(deadline.elapsed, 3),
                                             **({"under_load": True} if exc.under_load else {})})
    if isinstance(exc, BuildOutOfMemory):
        return Outcome(exc.outcome.verdict, str(exc), dict(exc.outcome.metrics), fingerprint=exc.fingerprint)
    if isinstance(exc, isolation.CellStopped):
        return stopped_outcome(deadline, f"building the tiny model and inputs: {deadline.reason()}")
    if isinstance(exc, RowVerdict):
        return Outcome(*exc.cell(check_id), traceback=traceback.format_exc(), fingerprint=exc.fingerprint(check_id))
    failure = exc if isinstance(exc, BuildError) else build_failure(exc)
    return Outcome("error", f"{BUILD_FAILED}: {failure}", traceback=traceback.format_exc(),
                   fingerprint=failure.fingerprint)


def end(model: str, check_id: str, outcome: Outcome, expectations: Mapping, *, case: Case | None = None,
        deadline=None, nodeid: str = "", process: str = "main") -> Cell:
    """A cell with its outcome decided: fingerprinted, judged against its expectation, its record made."""
    if deadline is not None:
        deadline.stop()  # the cell has its verdict: what its caller does next is not the cell's time
    if outcome.verdict in FAILING and outcome.fingerprint is None:
        outcome.fingerprint = harness_fingerprint(outcome)
    expectation = expectations.get((model, check_id))
    tiny = None
    if case is not None and check_id == "build":
        tiny = {"parameters": outcome.metrics.get("parameters", 0), "source": case.tiny.source,
                "strategy": case.sample.strategy}
    record = judge_cell(make_record(model=model, check=check_id, observed=outcome.verdict, reason=outcome.reason,
                                    seconds=outcome.metrics.get("seconds", 0.0),
                                    metrics={k: v for k, v in outcome.metrics.items() if k != "seconds"},
                                    nodeid=nodeid, process=process, tiny=tiny,
                                    fingerprint=outcome.fingerprint.to_data() if outcome.fingerprint else None),
                        expectation)
    judgement = Judgement(record["verdict"], record.get("gate", ""))
    return Cell(model, check_id, case=case, outcome=outcome, expectation=expectation, judgement=judgement,
                record=record)
