"""Per-process state of a run: options resolved once, the case source, the class being built.

Contract: `Session(config)` holds what every hook of the run needs;
`validate()` resolves every option and input file (a bad one raises
`options.UsageError`, one line) and is called before anything runs or is
written; `not_run` is then the checks the run would include but that
cannot run here (their required packages are missing: id -> why; naming
one in --checks is a UsageError instead) and, without --checks, the opt-in
columns (`registry.opt_in_reason`); `case_for(name)` builds a class's `Case` once per process (the
previous one freed), raising `cell_life.BuildError` (or `BuildTimedOut`) when the tiny
model or its inputs cannot be made, the cases stage's `RowVerdict` when it
decided the whole row (a model failure, a class that is not standalone),
`MissingDependency` when the class needs a package not installed here (its
cells are not run: `record_not_run`, a row with the reason and no cells), and
failing at once a class whose build ended an earlier process; `live(...)` is
`cell_life.live` with this process's case source, expectations and name;
`keep(cell)` appends a cell's record to this process's part file, `record(...)`
judges an outcome the harness decided (`guard`) and keeps it; `write_envelope()` merges every part file into the
envelope at ``--matrix-out``, its environment with the run's command
(`run_environment`: paths as names anyone can resolve, `report.provenance`):
with an impact option it records the selection (`environment.selection`: the
changed files, the --since ref, the classes), and an impact selection of no
class (`nothing_to_check()`) still writes one, without cells.
`session_of(config)` is the run's Session.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

from conformance.cases.case import Case, TransformersCases
from conformance.cases.model_failure import MissingDependency, RowVerdict
from conformance.checks.common.outcome import Outcome
from conformance.checks.common.registry import check_ids, describe, opt_in_reason, unavailable
from conformance.gate.expectations import run_conditions
from conformance.report import envelope as report
from conformance.report import io, provenance
from conformance import columns
from conformance.run import cell_life, isolation, memory, options, shards
from conformance.run.cell_life import BuildError, BuildOutOfMemory, BuildTimedOut, Cell, build_failure
from conformance.run.records import PartsDir, peak_memory

SESSION_KEY = pytest.StashKey["Session"]()
SELECTED_KEY = "conformance_selected"  # workerinput key: the class names the controller selected


def session_of(config) -> "Session":
    return config.stash[SESSION_KEY]


class Session:
    """Per-process state: options resolved once, the case source, the current built model."""

    def __init__(self, config):
        self.config = config
        self.is_worker = hasattr(config, "workerinput")
        self.collect_only = bool(getattr(config.option, "collectonly", False))  # a run that writes nothing
        self.worker = config.workerinput.get("workerid", "gw") if self.is_worker else "main"
        self.source = config.hook.pytest_conformance_case_source(config=config) or TransformersCases()
        self.matrix_out = Path(config.getoption("matrix_out"))
        self.parts = PartsDir.of(self.matrix_out)
        self.cell_timeout = config.getoption("cell_timeout")
        self.grace = config.getoption("cell_timeout_grace")
        self.cell_memory = config.getoption("cell_memory")
        self.dtype_name = config.getoption("dtype")
        self.backend = config.getoption("backend")
        self.checks = options.split(config.getoption("checks"))
        self.not_run: dict[str, str] = {}  # check -> why this run does not run it (missing packages, opt-in)
        self.expectations: dict = {}  # (model, check) -> the Expectation that applies to this run
        self.applied = None  # gate.expectations.Applied: which files, under which conditions
        self.conditions: dict = {}
        self.device = ""
        self._selection: options.Selection | None = None
        self._estimates: dict[str, float] | None = None
        self._built: tuple[str, object] | None = None
        self._not_run_recorded: set[str] = set()
        self.building: str | None = None  # the class being built right now (read by the watchdog)
        self.deadline = None  # the running cell's isolation.Deadline (set by guard)
        self.note_active = False  # a cell of this process is running and has a note
        self._dump_file = None
        self.envelope: dict | None = None
        # The terminal, for a message from the watchdog thread while pytest captures fd 2 (not yet at configure).
        self.console_fd = os.dup(2)

    # -- validation, before anything runs or is written

    def validate(self) -> None:
        """Resolve every option; a bad one raises UsageError (one line)."""
        import torch

        options.check_data()
        options.check_ids(self.checks, check_ids())
        self.not_run = options.unavailable_checks(self.checks, check_ids(), unavailable, opt_in_reason)
        options.check_shard(self.config.getoption("shard"))
        options.check_seconds("--cell-timeout", self.cell_timeout)
        options.check_seconds("--cell-timeout-grace", self.grace)
        options.check_memory(self.cell_memory)
        self.device = options.resolve_device(self.config.getoption("device"))
        self.dtype = getattr(torch, self.dtype_name)
        options.check_backend(self.backend)
        if self.has_selection():
            self.selected_models()  # can fail: say so now (with no selection option, discovery waits for collection)
        self.estimates()
        self.conditions = run_conditions(self.device, self.dtype_name, self.backend, torch.__version__)
        self.applied = options.load_expectations(self.config.getoption("expectations"), self.source, self.conditions)
        self.expectations = self.applied.cells
        if not self.is_worker and not self.collect_only:
            options.check_writable(self.matrix_out)

    def expectations_applied(self) -> list[dict]:
        """The expectations files this run applied, with their conditions and how many cells each."""
        if self.applied is None:
            return []
        return [{"file": provenance.portable(str(Path(s.path).resolve())), "conditions": s.conditions,
                 "cells": s.cells} for s in self.applied.sources]

    def run_environment(self) -> dict:
        """The environment of this run (`report.environment`) with its command (`provenance.run_command`)."""
        env = report.environment(self.device or "cpu", self.dtype_name, self.backend)
        params = self.config.invocation_params
        env["command"] = provenance.run_command(params.args, params.dir)
        return env

    def has_selection(self) -> bool:
        """Whether --models or an impact option narrows the classes."""
        return bool(self.config.getoption("models") or self.has_impact_selection())

    def has_impact_selection(self) -> bool:
        """Whether --changed-files or --since narrows the classes."""
        option = self.config.getoption
        return bool(option("changed_files") or option("since"))

    def nothing_to_check(self) -> str:
        """The controller's one line when the impact options selected no class (`Selection.nothing_to_check`),
        else ''."""
        if self.is_worker or not self.has_impact_selection():
            return ""
        return self.selection().nothing_to_check

    def run_checks(self) -> list[str]:
        """The columns this run fills: --checks (else every registered check) less those it cannot run."""
        return [c for c in check_ids() if (not self.checks or c in self.checks) and c not in self.not_run]

    def estimates(self) -> dict[str, float]:
        """Expected seconds per class in this run's columns, from the published matrix (none when there is
        none); read once."""
        if self._estimates is None:
            try:
                self._estimates = shards.published_estimates(checks=self.run_checks(), backend=self.backend)
            except report.EnvelopeError as exc:
                # load_envelope's remedy names its committed copy where git has one (not in an installed package)
                raise options.UsageError(f"{exc} (shards and the run order come from it)") from None
        return self._estimates

    def selected_models(self) -> list[str]:
        """Class names selected by --models and the impact options (sorted)."""
        return self.selection().classes

    def selection(self) -> options.Selection:
        """The run's selection (`options.resolve_selection`), resolved once; a worker gets the controller's
        classes (no changed files: only the controller reports and records them)."""
        if self._selection is None and self.is_worker and SELECTED_KEY in self.config.workerinput:
            self._selection = options.Selection(list(self.config.workerinput[SELECTED_KEY]))
        if self._selection is None:
            self._selection = options.resolve_selection(self.config, self.source)
        return self._selection

    # -- building

    def case_for(self, name: str) -> Case:
        """The built case of class `name`; built once, the previous one freed.

        A build that ended an earlier process (crash, hang past the hard
        limit) is not tried again: its cells fail the same way at once.
        """
        if not (self._built and self._built[0] == name):
            self._built = None
            gc.collect()
            # What survives a class is kept by torch's process-wide caches (dynamo, fake tensors, export): frozen,
            # the collector stops walking it, in this collect and in those while later classes trace. Unfrozen,
            # it grew the collect to 3-4 s per class and the cells by a third over a full run.
            gc.freeze()
            self.building = name
            self.mark_note(building=True)
            try:
                earlier = self._earlier_build_failure(name)
                if earlier is not None:
                    raise earlier
                value = self.source.build(name, self.device or "cpu", self.dtype, self.backend)
            except isolation.CellTimeout as exc:
                under_load = bool(self.deadline is not None and self.deadline.under_load)
                self._built = (name, BuildTimedOut(f"building the tiny model and inputs {exc} "
                                                   "(in the first cell of this class)", under_load))
                raise
            except isolation.CellOutOfMemory as exc:
                self._built = (name, self._out_of_memory(exc))
                raise
            except (BuildError, RowVerdict, MissingDependency) as exc:  # decided for the row: kept for its cells
                value = exc
            except Exception as exc:
                value = build_failure(exc)
            finally:
                self.building = None
                self.mark_note(building=False)
            self._built = (name, value)
        value = self._built[1]
        if isinstance(value, Exception):
            raise value
        return value

    def _out_of_memory(self, exc) -> BuildOutOfMemory:
        """What the class's later cells say of a build its memory limit stopped."""
        if self.deadline is not None and self.deadline.fired:
            outcome = cell_life.stopped_outcome(self.deadline)
        else:
            outcome = Outcome("fail", str(exc), fingerprint=cell_life.Fingerprint("resources"))
        return BuildOutOfMemory(f"building the tiny model and inputs: {exc} (in the first cell of this class)",
                                outcome)

    def _earlier_build_failure(self, name: str) -> BuildError | None:
        failure = self.parts.build_failures().get(name)
        if failure is None:
            return None
        if failure["verdict"] == "timeout":
            return BuildTimedOut(f"building the tiny model and inputs {failure['reason']} "
                                 "(in an earlier cell of this class)")
        return BuildError(f"{failure['reason']} (in an earlier cell of this class)")

    # -- limits

    def memory_limit(self, check_id: str) -> isolation.MemoryLimit:
        """The memory limit of a cell of `check_id` in this run (`memory.limit_mib` of its column)."""
        column = columns.column_id(check_id, self.backend) if self.backend != "eager" else check_id
        return isolation.MemoryLimit(memory.limit_mib(column, self.cell_memory), memory.reserve_mib())

    def others_running(self) -> bool:
        """Whether another process of this run is running a cell now."""
        return isolation.others_running(self.parts.path, self.worker)

    # -- files

    def mark_note(self, **fields) -> None:
        """Update the running note of the current cell (no cell running: nothing to do)."""
        path = self.parts.note(self.worker)
        note = isolation.read_note(path) if self.note_active else None
        if note is not None:
            isolation.write_note(path, {**note, **fields})

    @property
    def part_file(self) -> Path:
        return self.parts.records(self.worker)

    def dump_file(self):
        """This process's faulthandler dump file (opened once)."""
        if self._dump_file is None:
            self._dump_file = isolation.open_dump_file(self.parts.crash_dump(self.worker))
        return self._dump_file

    def live(self, node_id: str, model: str, check_id: str, *, deadline, case: Case | None = None,
             stop_when_built: bool = False) -> Cell:
        """`cell_life.live` of a cell of this run: this process's cases, expectations and name."""
        return cell_life.live(model, check_id, self.case_for, self.expectations, case=case,
                              stop_when_built=stop_when_built, deadline=deadline, nodeid=node_id,
                              process=self.worker)

    def keep(self, cell: Cell) -> dict:
        """Append a cell's record to this process's part file; the record."""
        io.append_record(self.part_file, cell.record)
        return cell.record

    def record(self, node_id: str, model: str, check_id: str, outcome: Outcome) -> dict:
        """Judge an outcome the harness decided (no case: a cell unfinished, past its hard limit, crashed) and
        append the cell's record (`cell_life.end`)."""
        return self.keep(cell_life.end(model, check_id, outcome, self.expectations, nodeid=node_id,
                                       process=self.worker))

    def record_not_run(self, model: str, why: str) -> None:
        """Record once per process that class `model` is not run here (a missing dependency) and why."""
        if model not in self._not_run_recorded:
            self._not_run_recorded.add(model)
            io.append_record(self.part_file, {"model": model, "not_run": why})

    def write_envelope(self) -> dict | None:
        """Merge every part file into the envelope at --matrix-out.

        None when no cell finished, except with --shard: an empty shard still
        writes its (empty) envelope, so that merging the shards never misses a file.
        """
        everything = list(io.read_records(self.parts.part_files()))
        records = [r for r in everything if {"model", "check", "verdict"} <= set(r)]
        not_run_classes = {r["model"]: r["not_run"] for r in everything if set(r) == {"model", "not_run"}}
        nothing = bool(self.nothing_to_check()) and not self.config.option.collectonly
        if not records and not not_run_classes and not self.config.getoption("shard") and not nothing:
            return None
        models = sorted({r["model"] for r in records} | set(not_run_classes))
        # The columns: those with cells, and those this run would have had but could not run (said so, not hidden);
        # nothing to check: the columns it would have filled.
        checks = [c for c in check_ids() if c in self.not_run or any(r["check"] == c for r in records)
                  or (nothing and c in self.run_checks())]
        env = self.run_environment()
        env.update(peak_memory(records, {self.worker: isolation.peak_rss_mib()}))
        env["expectations"] = self.expectations_applied()
        if self.has_impact_selection():
            env["selection"] = self.selection().record()
        rows = self.source.rows(models)
        for model, why in not_run_classes.items():  # a row without cells, saying why (⬜ in every column)
            rows[model] = {**rows.get(model, {}), "not_run": why}
        envelope = report.build_envelope(records, env, checks, rows, describe(checks), not_run=self.not_run)
        io.write_json_atomic(self.matrix_out, envelope)
        return envelope
