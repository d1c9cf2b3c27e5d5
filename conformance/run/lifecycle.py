"""The run's start and end: validation and the parts folder first; the envelope, its report lines last.

Contracts (the hooks of `LifecycleHooks`):

* at session start every option and input file is resolved (a bad one ends
  the run with one line, before anything runs or is written); the
  controller removes the part files an interrupted run left and writes the
  run's environment into the parts folder; a ``--collect-only`` run writes
  nothing (no parts folder, no envelope);
* after collection the collector is kept off what is alive by then
  (`gc.freeze`: torch, transformers, every discovered class);
* at session end the controller first reruns alone each cell a limit
  stopped while other work ran (`rerun`; not after Ctrl-C): a rerun that
  fails makes the run fail, one that passes leaves no failure; then (also
  after Ctrl-C) it writes the envelope once, the full Markdown matrix and the HTML page beside it
  (`report.pages`), adds the envelope under ``conformance`` to
  pytest-json-report's file when that plugin is active, and clears the parts;
* the terminal header says which expectations files apply under which
  conditions (the envelope's `environment.expectations` too), what a
  selection or shard option chose, and which checks are not run because
  their required packages are missing (one line for every extra not
  installed, each with its install command) or they are opt-in columns --checks did not name (one
  line per group, with the --checks that runs them); the terminal ends with the run's short summary
  (`report.summary`: counts per check, regressions and stale expectations by
  name, the files written), after pytest's own summary lines;
* an impact selection of no class from real files (a docs-only change) says
  so in one line, in the header and at the end ("nothing to check: <files>
  affect no discovered class"), writes its envelope without cells (the
  selection in `environment.selection`) and ends the run with
  `options.NOTHING_TO_CHECK` instead of pytest's 0 (or 5): a CI job can tell
  it from a run that checked classes and passed. Any other status (a
  failure, an interruption) is left as it is.
"""

from __future__ import annotations

import gc
import os
import sys

import pytest

from conformance import locations
from conformance.report import io, pages, summary
from conformance.run import isolation, options, rerun, shards
from conformance.verdicts import FAILING


def _columns_known(config) -> bool:
    """Whether the header knows the columns a run fills: not when -k, -m or a node id picks among its cells
    (the estimate, summed over every column, would not be this run's)."""
    return not (config.option.keyword or config.option.markexpr or any("::" in str(a) for a in config.args))


def not_run_lines(not_run: dict[str, str]) -> list[str]:
    """`conformance: not run: a, b (needs ..., not installed: pip install ...)`: one line for every optional extra
    not installed (their reasons joined by "; "), one line per other reason (an opt-in group)."""
    by_reason: dict[str, list[str]] = {}
    for check_id, why in not_run.items():
        by_reason.setdefault(why, []).append(check_id)
    groups = [f"{', '.join(ids)} ({why})" for why, ids in by_reason.items()]
    missing = [g for g, why in zip(groups, by_reason) if "not installed" in why]
    others = [g for g, why in zip(groups, by_reason) if "not installed" not in why]
    return ([f"conformance: not run: {'; '.join(missing)}"] if missing else []) + \
        [f"conformance: not run: {g}" for g in others]


class LifecycleHooks:
    """The hooks of the run's start and end; one instance per pytest config."""

    def __init__(self, session):
        self.session = session
        self.written: list = []  # the files the run wrote for a person to open (the envelope first)
        self.pages_error = ""
        self.interrupted = False
        self.reruns_failed = 0
        self.rerun_lines: list[str] = []

    # -- start

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session):
        state = self.session
        state.validate()
        if state.collect_only:  # --collect-only writes nothing: no parts folder, so no envelope at the end
            return
        if state.is_worker:
            isolation.enable_crash_dumps(state.dump_file())
            return
        removed = state.parts.clear()
        if removed:
            sys.stderr.write(f"conformance: removed {removed} part file(s) an earlier interrupted run left in "
                             f"{state.parts.path}\n")
        io.write_json_atomic(state.parts.environment, state.run_environment())

    def pytest_collection_finish(self, session):
        # What is alive now (torch, transformers, every discovered class) lives until the end. Freezing it keeps
        # the collector from walking it again in each collection while dynamo and export trace (a few % of a cell).
        gc.collect()
        gc.freeze()

    def pytest_report_header(self, config):
        """Which expectations apply under which conditions, what a selection or shard option chose, and which
        checks cannot run here, before anything runs."""
        state = self.session
        if state.is_worker:
            return None
        return [self._expectations_line()] + self._selection_lines(config) + not_run_lines(state.not_run)

    def _expectations_line(self) -> str:
        state = self.session
        run = ", ".join(f"{k} {v}" for k, v in state.conditions.items())
        applied = state.applied.sources if state.applied is not None else ()
        if not applied:
            looked = ", ".join(locations.shown(p) for p in state.applied.considered) if state.applied else ""
            return (f"conformance: no expectations apply to this run ({run})" +
                    (f"; looked in {looked}" if looked else "") + ": every failing cell is red")
        return f"conformance: expectations for this run ({run}): " + "; ".join(s.describe() for s in applied)

    def _selection_lines(self, config) -> list[str]:
        """What a selection or shard option chose, before anything runs (none without one)."""
        state, option = self.session, config.getoption
        if not (state.has_selection() or option("shard")):
            return []
        if state.nothing_to_check():
            return [f"conformance: {state.nothing_to_check()}"]
        names = state.selected_models()
        how = "impacted by the change" if option("changed_files") or option("since") else "selected"
        line = f"conformance: {len(names)} {'class' if len(names) == 1 else 'classes'} {how}"
        if option("shard"):
            names = shards.share_of(names, option("shard"), state.estimates())
            line += f"; shard {option('shard')}: {len(names)} of them"
        if _columns_known(config) and any(name in state.estimates() for name in names):
            line += (f", about {shards.expected_seconds(names, state.estimates()):.0f} s of cells in one process as "
                     "published (start-up and model builds come on top)")
        return [line]

    # -- end

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if not self.session.is_worker:
            self.interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
            self._ensure_envelope()
            if self.reruns_failed and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            if self.session.nothing_to_check() and session.exitstatus in (pytest.ExitCode.OK,
                                                                          pytest.ExitCode.NO_TESTS_COLLECTED):
                session.exitstatus = options.NOTHING_TO_CHECK

    def _ensure_envelope(self) -> dict | None:
        """Write the envelope once (pytest-json-report may ask first), then clear the parts."""
        state = self.session
        if state.envelope is None and state.parts.path.is_dir():
            if not self.interrupted and not state.collect_only:
                self._rerun_alone()
            state.envelope = state.write_envelope()
            if state.envelope is not None or not state.parts.part_files():
                state.parts.clear()
            if state.envelope is not None:
                self._write_pages(state.envelope)
        return state.envelope

    def _rerun_alone(self) -> None:
        """Rerun alone the cells a limit stopped under load (`rerun`); say what each gave."""
        for record in rerun.rerun_all(self.session.config, self.session.parts):
            verdict = record["verdict"]
            self.reruns_failed += verdict in FAILING or verdict == "xpass"
            self.rerun_lines.append(f"conformance: rerun alone: {verdict.upper()} {record['model']} / "
                                    f"{record['check']}" + (f": {record['reason']}" if record.get("reason") else ""))

    def _write_pages(self, envelope: dict) -> None:
        self.written = [self.session.matrix_out]
        try:
            self.written += pages.write_beside(envelope, self.session.matrix_out)
        except OSError as exc:  # the envelope is written; the pages can be made again with `conformance render`
            self.pages_error = (f"conformance: the Markdown and HTML pages could not be written beside "
                                f"{self.session.matrix_out} ({exc}); make them with `conformance render --html "
                                f"{self.session.matrix_out} -o PAGE.html`")

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report):
        envelope = self._ensure_envelope()
        if envelope is not None:
            json_report["conformance"] = envelope

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        result = yield  # pytest's failures and short summary first: the run's summary is what stays on screen
        envelope = self.session.envelope
        nothing = self.session.nothing_to_check()
        if nothing:
            terminalreporter.write_sep("=", "conformance")
            terminalreporter.write_line(f"{nothing} (exit status {options.NOTHING_TO_CHECK}: no class was checked)")
            if envelope is not None:
                written = ", ".join(locations.shown(path) for path in self.written or [self.session.matrix_out])
                terminalreporter.write_line(f"wrote {written} (the selection, no cells)")
        elif envelope is not None:
            terminalreporter.write_sep("=", "conformance")
            for line in self.rerun_lines:
                terminalreporter.write_line(line)
            for line in summary.summary_lines(envelope, self.written or [self.session.matrix_out]):
                terminalreporter.write_line(line)
            if self.pages_error:
                terminalreporter.write_line(self.pages_error)
        return result

    def pytest_unconfigure(self, config):
        os.close(self.session.console_fd)
