"""The run's start and end: validation and the parts folder first; the envelope, its report lines last.

Contracts (the hooks of `LifecycleHooks`):

* at session start every option and input file is resolved (a bad one ends
  the run with one line, before anything runs or is written); the
  controller removes the part files an interrupted run left and writes the
  run's environment into the parts folder;
* after collection the collector is kept off what is alive by then
  (`gc.freeze`: torch, transformers, every discovered class);
* at session end (also after Ctrl-C) the controller writes the envelope
  once, adds it under ``conformance`` to pytest-json-report's file when that
  plugin is active, and clears the parts;
* the terminal header says what a selection or shard option chose, and
  which checks are not run because their required packages are missing
  (one line per missing extra, with the install command); the summary says
  how many cells were written where.
"""

from __future__ import annotations

import gc
import os
import sys

import pytest

from conformance.report import envelope as report
from conformance.report import io
from conformance.run import isolation, shards


def not_run_lines(not_run: dict[str, str]) -> list[str]:
    """`conformance: not run: a, b (needs ..., not installed: pip install ...)`, one line per reason."""
    by_reason: dict[str, list[str]] = {}
    for check_id, why in not_run.items():
        by_reason.setdefault(why, []).append(check_id)
    return [f"conformance: not run: {', '.join(ids)} ({why})" for why, ids in by_reason.items()]


class LifecycleHooks:
    """The hooks of the run's start and end; one instance per pytest config."""

    def __init__(self, session):
        self.session = session

    # -- start

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session):
        state = self.session
        state.validate()
        if state.is_worker:
            isolation.enable_crash_dumps(state.dump_file())
            return
        removed = state.parts.clear()
        if removed:
            sys.stderr.write(f"conformance: removed {removed} part file(s) an earlier interrupted run left in "
                             f"{state.parts.path}\n")
        io.write_json_atomic(state.parts.environment,
                             report.environment(state.device, state.dtype_name, state.backend))

    def pytest_collection_finish(self, session):
        # What is alive now (torch, transformers, every discovered class) lives until the end. Freezing it keeps
        # the collector from walking it again in each collection while dynamo and export trace (a few % of a cell).
        gc.collect()
        gc.freeze()

    def pytest_report_header(self, config):
        """What a selection or shard option chose, and which checks cannot run here, before anything runs."""
        state, option = self.session, config.getoption
        if state.is_worker:
            return None
        lines = not_run_lines(state.not_run)
        if not (state.has_selection() or option("shard")):
            return lines or None
        names = state.selected_models()
        how = "impacted by the change" if option("changed_files") or option("since") else "selected"
        line = f"conformance: {len(names)} classes {how}"
        if option("shard"):
            names = shards.share_of(names, option("shard"), state.estimates())
            line += f"; shard {option('shard')}: {len(names)} of them"
        if any(name in state.estimates() for name in names):
            line += f", about {shards.expected_seconds(names, state.estimates()):.0f} s of cells in one process"
        return [line] + lines

    # -- end

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if not self.session.is_worker:
            self._ensure_envelope()

    def _ensure_envelope(self) -> dict | None:
        """Write the envelope once (pytest-json-report may ask first), then clear the parts."""
        state = self.session
        if state.envelope is None and state.parts.path.is_dir():
            state.envelope = state.write_envelope()
            if state.envelope is not None or not state.parts.part_files():
                state.parts.clear()
        return state.envelope

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report):
        envelope = self._ensure_envelope()
        if envelope is not None:
            json_report["conformance"] = envelope

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        envelope = self.session.envelope
        if envelope is not None:
            cells = sum(len(r["cells"]) for r in envelope["models"].values())
            peak = envelope["environment"].get("peak_rss_mib")
            terminalreporter.write_line(f"conformance: {cells} cells written to {self.session.matrix_out}"
                                        + (f" (peak RSS {peak:.0f} MiB)" if peak else ""))

    def pytest_unconfigure(self, config):
        os.close(self.session.console_fd)
