"""Keeping each cell to its limits, and giving every cell a record even when it dies.

Contracts (the hooks of `GuardHooks`):

* each cell runs with Python's and numpy's generators seeded, under a
  `isolation.Deadline` (soft limit ``--cell-timeout``, then the worker ends
  itself after ``--cell-timeout-grace``; the memory limit of its column,
  `Session.memory_limit`), with a running note naming it, marked ``ended``
  when the cell ends (`isolation.others_running` reads them: a limit that
  fires while another process runs a cell fires under load);
* a cell that ended without a verdict (a fixture error, a test that did not
  call run_cell) gets an `error` record saying where the harness failed;
* a cell past its hard limit gets its record from the watchdog thread
  before the process ends (`timeout`, or `fail` kind `resources` past its
  memory: `cell_life.stopped_outcome`; without xdist the run stops there,
  the envelope written);
* a cell a limit stopped under load is reported to pytest as skipped
  ("rerun alone"): the controller reruns it alone at the end (`rerun`),
  and that record is the cell's;
* under xdist, the controller records the cell a dead worker was running:
  `timeout` when past its deadline, else "worker crashed: ..." with the
  faulthandler dump's first line (`crashed_outcome`): `fail` with a
  `fatal_error` fingerprint at the crashed thread's innermost Python frame
  when that frame is outside the suite (native code the model, torch or a
  backend called, e.g. ExecuTorch's runtime executing a program: theirs to
  fix), else `error` with a `crash` fingerprint (no traceback, or the suite's
  own call: the suite cannot say whose it was; a crash while building). A
  build that ended the process fails the class's later cells at once.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from conformance import reasons
from conformance.checks.common.outcome import Outcome
from conformance.fingerprints import Fingerprint, mask
from conformance.run import cell_life, isolation, rerun
from conformance.run.cells import CELL_KEY, DEADLINE_KEY, cell_of
from conformance.run.records import find_record, plain_nodeid

HARNESS_FAILURE_KEY = pytest.StashKey[str]()


class GuardHooks:
    """The hooks around each cell; one instance per pytest config."""

    def __init__(self, session):
        self.session = session

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        cell = cell_of(item)
        if cell is None:
            return (yield)
        model, check_id = cell
        state = self.session
        random.seed(0)
        try:
            import numpy

            numpy.random.seed(0)
        except ImportError:
            pass
        deadline = isolation.Deadline(state.cell_timeout, state.grace,
                                      on_hard_timeout=lambda: self._hard_timeout(item, model, check_id, deadline),
                                      dump_file=state.dump_file(), memory=state.memory_limit(check_id),
                                      under_load=state.others_running)
        isolation.write_note(state.parts.note(state.worker),
                             {"nodeid": item.nodeid, "model": model, "check": check_id, "pid": os.getpid(),
                              "started": time.time(), "deadline": time.time() + state.cell_timeout})
        item.stash[DEADLINE_KEY] = state.deadline = deadline
        state.note_active = True
        deadline.start()
        try:
            result = yield
        finally:
            deadline.stop()
            state.mark_note(ended=time.time())
            state.note_active = False
            state.deadline = None
        if CELL_KEY not in item.stash:
            self._unfinished(item, model, check_id)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        rep = yield
        if rep.failed and HARNESS_FAILURE_KEY not in item.stash and CELL_KEY not in item.stash:
            crash = getattr(rep.longrepr, "reprcrash", None)
            lines = str(rep.longrepr).strip().splitlines()
            message = getattr(crash, "message", "") or (lines[-1] if lines else "failed")
            where = f" (at {Path(crash.path).name}:{crash.lineno})" if crash is not None else ""
            item.stash[HARNESS_FAILURE_KEY] = f"{rep.when}: {' '.join(message.split())}{where}"
        return rep

    def _unfinished(self, item, model: str, check_id: str) -> None:
        """The safety net: a cell that ended without a verdict (a fixture error, a test that did not record)."""
        what = item.stash.get(HARNESS_FAILURE_KEY, "the test ended without recording a verdict (run_cell not called)")
        outcome = Outcome("error", f"harness error in {what}")
        item.stash[CELL_KEY] = self.session.record(item.nodeid, model, check_id, outcome)

    def _hard_timeout(self, item, model: str, check_id: str, deadline) -> None:
        """In the watchdog thread: the cell ignored its soft limit (time or memory); record it before the process
        ends."""
        state = self.session
        reason = (f"{deadline.reason()} and did not stop within {state.grace:g} s more" if deadline.stopped_by == "time"
                  else f"{deadline.reason()}; it did not stop") + f"; the process running it ({state.worker}) was ended"
        outcome = cell_life.stopped_outcome(deadline, reason)
        state.record(item.nodeid, model, check_id, outcome)
        if state.building == model:
            state.parts.add_build_failure(model, outcome.verdict, reason)
        message = f"\nconformance: {item.nodeid}: {reason}.\n"
        if not state.is_worker:
            try:
                state.write_envelope()
                message += (f"conformance: the run stops here (run with -n N to go on past a hung cell); "
                            f"cells so far are in {state.matrix_out}\n")
            except BaseException as exc:  # best effort: the parts stay
                message += (f"conformance: could not write the envelope ({exc}); rebuild it with "
                            f"`conformance merge --parts {state.parts.path} -o {state.matrix_out}`\n")
        os.write(state.console_fd, message.encode())

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem, report, sched):
        """Record the cell a dead worker was running: `timeout` if past its deadline, else `error`."""
        state = self.session
        worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "")
        note = isolation.read_note(state.parts.note(worker)) if worker else None
        if not note or plain_nodeid(note.get("nodeid", "")) != plain_nodeid(crashitem):
            return None  # not a conformance cell (or it crashed before starting)
        model, check_id = note["model"], note["check"]
        dump = state.parts.crash_dump(worker)
        record = find_record(state.parts.records(worker), crashitem)
        if record is None:
            if time.time() >= note.get("deadline", float("inf")):
                outcome = Outcome("timeout", f"ran past the cell time limit of {state.cell_timeout:g} s; "
                                  f"worker {worker} ended ({isolation.crash_summary(dump)})")
                if isolation.others_running(state.parts.path, worker):
                    outcome.metrics["under_load"] = True
            else:
                outcome = crashed_outcome(dump, building=bool(note.get("building")))
            if note.get("building"):
                state.parts.add_build_failure(model, outcome.verdict, outcome.reason)
                outcome.reason = f"building the tiny model and inputs: {outcome.reason}"
            outcome.metrics["seconds"] = round(time.time() - note.get("started", time.time()), 3)
            record = state.record(crashitem, model, check_id, outcome)
        line = f"{record['verdict'].upper()} {model} / {check_id}: {record['reason']}"
        try:
            details = dump.read_text(errors="replace").strip()
        except OSError:
            details = ""
        report.longrepr = line + (f"\n{details}" if details else "")
        if rerun.pending(record):
            report.outcome = "skipped"
            report.longrepr = (str(crashitem).split("::")[0], 0, f"Skipped: {rerun.PENDING}: {line}")
        elif record["verdict"] == "xfail":
            report.outcome = "skipped"
            report.wasxfail = record["reason"]
        return None


def crashed_outcome(dump: Path, building: bool = False) -> Outcome:
    """The outcome of a cell whose process died before its deadline, from the faulthandler dump (see the module's
    contract): the failure of whoever called the native code that crashed, when that is not the suite. A crash
    while building the tiny model stays the suite's gap (its later cells fail with the build's error)."""
    summary = isolation.crash_summary(dump)
    crashed = isolation.crash_frame(dump)
    frame = crashed[1] if crashed else None
    if frame is not None and not building and not reasons.in_suite(frame[0]):
        return Outcome("fail", f"worker crashed: {summary}",
                       fingerprint=Fingerprint("fatal_error", where=reasons.site(*frame), what=mask(crashed[0])))
    return Outcome("error", f"worker crashed: {summary}", fingerprint=Fingerprint("crash", what=mask(summary)))
