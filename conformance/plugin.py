"""The pytest plugin: options, parametrization, per-cell records, the envelope.

Loaded by the root conftest.py. Contract:

* every test that takes the `model_case` fixture is parametrized over the
  selected classes of the run's case source (conformance.case_source; ids =
  class names), grouped per class so that with ``-n N --dist loadgroup`` one
  worker builds each tiny model once;
* `run_cell(check_id, case, request)` runs a check, applies the expectations
  (gate) and turns the verdict into a pytest outcome (pass, fail, xfail,
  skip; an xpass fails with "remove this expectation");
* every cell gets exactly one record, appended to its process's part file
  in ``<matrix-out>.parts/`` as soon as it is known: a cell past
  ``--cell-timeout`` is `timeout` (conformance.isolation: soft limit, then
  the worker ends itself), a cell whose worker process died is `error`
  "worker crashed: ..." (written by the xdist controller), a cell that ended
  in a harness error without a verdict (a fixture error) is `error`;
* at session end (also after Ctrl-C) the controller merges all parts into
  the envelope at ``--matrix-out`` (written atomically), also added under the
  key ``conformance`` of pytest-json-report's file when it is active; after
  a kill -9, `conformance merge --parts DIR -o OUT.json` rebuilds it;
* bad options and input files end the run before anything runs or is
  written, with one line naming the option or file and the fix;
* every cell starts with Python's and numpy's generators seeded (torch's
  is seeded by run_check); each process's peak RSS goes into the
  envelope's environment (`peak_rss_mib`, `peak_rss_mib_by_process`);
* under pytest-xdist, ``--dist loadgroup`` uses a scheduler that survives
  crashed workers (conformance.xdist_sched), and the worker restart limit
  defaults to MAX_WORKER_RESTARTS; a test module that fails to import is a
  collection error that does not stop the other modules.

A conftest may provide the models through `pytest_conformance_case_source`
(the harness's own tests run the plugin on fake classes that way).
"""

from __future__ import annotations

import gc
import os
import random
import sys
import time
from pathlib import Path

import pytest

from conformance import isolation, report, shard
from conformance.case_source import CaseSourceHooks, TransformersCases
from conformance.checks.base import CHECK_IDS, Case, Outcome, one_line, run_check
from conformance.options import (UsageError, check_backend, check_ids, check_seconds, check_shard, check_writable,
                                  load_expectations, resolve_device, select_models, split)
from conformance.records import PartsDir, find_record, gated, make_record, peak_memory, plain_nodeid

CELL_KEY = pytest.StashKey[dict]()
DEADLINE_KEY = pytest.StashKey[object]()
HARNESS_FAILURE_KEY = pytest.StashKey[str]()
SESSION_KEY = pytest.StashKey["Session"]()
SELECTED_KEY = "conformance_selected"  # workerinput key: the class names the controller selected
DEFAULT_OUT = Path("reports/latest/matrix.json")
DEFAULT_GRACE = 30.0
MAX_WORKER_RESTARTS = 100


def pytest_addhooks(pluginmanager):
    pluginmanager.add_hookspecs(CaseSourceHooks)


def pytest_addoption(parser):
    group = parser.getgroup("conformance")
    group.addoption("--device", default="auto", help="cpu, cuda, cuda:N or auto (cuda when present)")
    group.addoption("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    group.addoption("--backend", default="eager", help="dynamo backend: eager, aot_eager, inductor")
    group.addoption("--models", default="", help="comma-separated class names or globs (default: all)")
    group.addoption("--checks", default="", help="comma-separated check ids (default: all)")
    group.addoption("--matrix-out", default=str(DEFAULT_OUT), help="where the JSON envelope is written")
    group.addoption("--expectations", default="", help="expectations TOML (default: fixtures/expectations/<major.minor>.toml)")
    group.addoption("--shard", default="", help="i/N: run the i-th of N shares of the classes, balanced by the published seconds")
    group.addoption("--changed-files", nargs="+", default=[], help="run only classes impacted by these transformers files")
    group.addoption("--since", default="", help="git ref: impacted classes from `git diff REF` in --transformers-repo")
    group.addoption("--transformers-repo", default="", help="a transformers checkout, for --since")
    group.addoption("--no-graph-break-count", action="store_true",
                    help="skip the trace that only counts a failing compile's graph breaks (verdicts unchanged; "
                         "for the PR gate: about half its time)")
    group.addoption("--cell-timeout", type=float, default=300.0, help="seconds before a cell becomes `timeout`")
    group.addoption("--cell-timeout-grace", type=float, default=DEFAULT_GRACE,
                    help="seconds after --cell-timeout before a cell that ignores it ends its worker process")


# --------------------------------------------------------------------------- per-process state


class BuildError(RuntimeError):
    """The harness could not set up the tiny model or its inputs."""


class BuildTimedOut(BuildError):
    """Building the tiny model ran past the cell time limit."""


class Session:
    """Per-process state: options resolved once, the case source, the current built model."""

    def __init__(self, config):
        self.config = config
        self.is_worker = hasattr(config, "workerinput")
        self.worker = config.workerinput.get("workerid", "gw") if self.is_worker else "main"
        self.source = config.hook.pytest_conformance_case_source(config=config) or TransformersCases()
        self.matrix_out = Path(config.getoption("matrix_out"))
        self.parts = PartsDir.of(self.matrix_out)
        self.cell_timeout = config.getoption("cell_timeout")
        self.grace = config.getoption("cell_timeout_grace")
        self.dtype_name = config.getoption("dtype")
        self.backend = config.getoption("backend")
        self.checks = split(config.getoption("checks"))
        self.expectations: dict = {}
        self.expectations_file: Path | None = None
        self.device = ""
        self._selected: list[str] | None = None
        self._estimates: dict[str, float] | None = None
        self._built: tuple[str, object] | None = None
        self.building: str | None = None  # the class being built right now (read by the watchdog)
        self.note_active = False  # a cell of this process is running and has a note
        self._dump_file = None
        self.envelope: dict | None = None
        # The terminal, for a message from the watchdog thread while pytest captures fd 2 (not yet at configure).
        self.console_fd = os.dup(2)

    # -- validation, before anything runs or is written

    def validate(self) -> None:
        """Resolve every option; a bad one raises UsageError (one line)."""
        import torch

        check_ids(self.checks, CHECK_IDS)
        check_shard(self.config.getoption("shard"))
        check_seconds("--cell-timeout", self.cell_timeout)
        check_seconds("--cell-timeout-grace", self.grace)
        self.device = resolve_device(self.config.getoption("device"))
        self.dtype = getattr(torch, self.dtype_name)
        check_backend(self.backend)
        if self.has_selection():
            self.selected_models()  # can fail: say so now (with no selection option, discovery waits for collection)
        self.estimates()
        self.expectations_file, self.expectations = load_expectations(self.config.getoption("expectations"),
                                                                      self.source)
        if not self.is_worker:
            check_writable(self.matrix_out)

    def has_selection(self) -> bool:
        """Whether --models or an impact option narrows the classes."""
        option = self.config.getoption
        return bool(option("models") or option("changed_files") or option("since"))

    @property
    def count_graph_breaks(self) -> bool:
        return not self.config.getoption("no_graph_break_count")

    def estimates(self) -> dict[str, float]:
        """Expected seconds per class, from the published matrix (none when there is none); read once."""
        if self._estimates is None:
            try:
                self._estimates = shard.published_estimates(self.count_graph_breaks)
            except report.EnvelopeError as exc:
                raise UsageError(f"{exc} (shards and the run order come from it: restore it with "
                                 f"`git checkout -- {shard.PUBLISHED}`)") from None
        return self._estimates

    def selected_models(self) -> list[str]:
        """Class names selected by --models and the impact options (sorted)."""
        if self._selected is None and self.is_worker and SELECTED_KEY in self.config.workerinput:
            self._selected = list(self.config.workerinput[SELECTED_KEY])
        if self._selected is None:
            self._selected = select_models(self.config, self.source)
        return self._selected

    # -- building

    def case_for(self, name: str) -> Case:
        """The built case of class `name`; built once, the previous one freed.

        A build that ended an earlier process (crash, hang past the hard
        limit) is not tried again: its cells fail the same way at once.
        """
        if not (self._built and self._built[0] == name):
            self._built = None
            gc.collect()
            self.building = name
            self.mark_note(building=True)
            try:
                earlier = self._earlier_build_failure(name)
                if earlier is not None:
                    raise earlier
                value = self.source.build(name, self.device or "cpu", self.dtype, self.backend)
                if isinstance(value, Case):
                    value.count_graph_breaks = self.count_graph_breaks
            except isolation.CellTimeout as exc:
                self._built = (name, BuildTimedOut(f"building the tiny model and inputs {exc} "
                                                   "(in the first cell of this class)"))
                raise
            except BuildError as exc:
                value = exc
            except Exception as exc:
                value = BuildError(one_line(exc))
            finally:
                self.building = None
                self.mark_note(building=False)
            self._built = (name, value)
        value = self._built[1]
        if isinstance(value, Exception):
            raise value
        return value

    def _earlier_build_failure(self, name: str) -> BuildError | None:
        failure = self.parts.build_failures().get(name)
        if failure is None:
            return None
        if failure["verdict"] == "timeout":
            return BuildTimedOut(f"building the tiny model and inputs {failure['reason']} "
                                 "(in an earlier cell of this class)")
        return BuildError(f"{failure['reason']} (in an earlier cell of this class)")

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

    def write(self, node_id: str, model: str, check_id: str, outcome: Outcome, verdict: str,
              tiny: dict | None = None, expected: str = "") -> dict:
        record = make_record(model=model, check=check_id, verdict=verdict, reason=outcome.reason,
                             seconds=outcome.metrics.get("seconds", 0.0),
                             metrics={k: v for k, v in outcome.metrics.items() if k != "seconds"},
                             nodeid=node_id, process=self.worker, tiny=tiny, expected=expected)
        report.write_record(self.part_file, record)
        return record

    def write_envelope(self) -> dict | None:
        """Merge every part file into the envelope at --matrix-out.

        None when no cell finished, except with --shard: an empty shard still
        writes its (empty) envelope, so that merging the shards never misses a file.
        """
        records = [r for r in report.read_records(self.parts.part_files()) if {"model", "check", "verdict"} <= set(r)]
        if not records and not self.config.getoption("shard"):
            return None
        models = sorted({r["model"] for r in records})
        checks = [c for c in CHECK_IDS if any(r["check"] == c for r in records)]
        env = report.environment(self.device or "cpu", self.dtype_name, self.backend)
        env.update(peak_memory(records, {self.worker: isolation.peak_rss_mib()}))
        envelope = report.build_envelope(records, env, checks, self.source.rows(models))
        report.write_atomic(self.matrix_out, envelope)
        return envelope


def _session(config) -> Session:
    return config.stash[SESSION_KEY]


def selected_models(config) -> list[str]:
    """Class names selected by --models and impact options (sorted)."""
    return _session(config).selected_models()


def pytest_configure(config):
    config.addinivalue_line("markers", "conformance_check(id): the check a test runs")
    # A test module that fails to import loses its own column, not the run.
    config.option.continue_on_collection_errors = True
    # xdist's default (4 per worker) would end the run after a few crashed or hung cells.
    if getattr(config.option, "numprocesses", None) and getattr(config.option, "maxworkerrestart", "") is None:
        config.option.maxworkerrestart = str(MAX_WORKER_RESTARTS)
    session = Session(config)
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(RunHooks(session), "conformance-run")


# --------------------------------------------------------------------------- collection


def pytest_generate_tests(metafunc):
    if "model_name" not in metafunc.fixturenames:
        return
    names = selected_models(metafunc.config)
    metafunc.parametrize(
        "model_name",
        [pytest.param(n, id=n, marks=pytest.mark.xdist_group(n)) for n in names],
    )


def _check_of(item) -> str | None:
    marker = item.get_closest_marker("conformance_check")
    return marker.args[0] if marker else None


def _cell_of(item) -> tuple[str, str] | None:
    """(model, check) of a parametrized cell, None for other tests."""
    callspec = getattr(item, "callspec", None)
    check_id = _check_of(item)
    if check_id and callspec is not None and "model_name" in callspec.params:
        return str(callspec.params["model_name"]), check_id
    return None


def pytest_collection_modifyitems(session, config, items):
    checks = _session(config).checks
    kept = [item for item in items if not (_check_of(item) and checks and _check_of(item) not in checks)]
    seconds = _session(config).estimates()
    shard_spec = config.getoption("shard")
    if shard_spec:
        kept = shard.select_shard(kept, shard_spec, seconds)
    # Cells of one model run together, the longest models first, checks in their stable order; then the rest.
    order = {c: i for i, c in enumerate(CHECK_IDS)}

    def model_of(item) -> str:
        callspec = getattr(item, "callspec", None)
        return str(callspec.params.get("model_name", "")) if callspec else ""

    rank = {m: i for i, m in enumerate(shard.longest_first(filter(None, map(model_of, kept)), seconds))}

    def key(item):
        model = model_of(item)
        return (0 if model else 1, rank.get(model, 0), order.get(_check_of(item), len(order)), item.nodeid)

    kept.sort(key=key)
    if len(kept) != len(items):
        kept_ids = {id(i) for i in kept}
        config.hook.pytest_deselected(items=[i for i in items if id(i) not in kept_ids])
    items[:] = kept


# --------------------------------------------------------------------------- running a cell


def _deadline_of(node):
    return node.stash.get(DEADLINE_KEY, None) or isolation.NoDeadline()


@pytest.fixture
def model_case(request, model_name) -> Case:
    """The built case of the parametrized class; a build failure is the cell's `error`."""
    session = _session(request.config)
    check_id = _check_of(request.node)
    deadline = _deadline_of(request.node)
    try:
        with deadline.interruptible():
            return session.case_for(model_name)
    except (isolation.CellTimeout, BuildTimedOut) as exc:
        outcome = Outcome("timeout", str(exc) if isinstance(exc, BuildTimedOut) else
                          f"building the tiny model and inputs {deadline.reason()}",
                          {"seconds": round(deadline.elapsed, 3)})
    except BuildError as exc:
        outcome = Outcome("error", f"tiny model or inputs could not be built: {exc}")
    _finish(request.node, model_name, check_id, outcome, session)


def _finish(node, model: str, check_id: str, outcome: Outcome, session: Session, case=None):
    """Apply the gate to a raw outcome, record the cell, and end the test accordingly."""
    _deadline_of(node).stop()  # the cell has its verdict: what pytest does next is not the cell's time
    verdict, expectation = gated(outcome.verdict, session.expectations, model, check_id)
    tiny = None
    if case is not None and check_id == "build":
        tiny = {"parameters": outcome.metrics.get("parameters", 0), "source": case.tiny.source,
                "strategy": case.sample.strategy}
    expected = expectation.verdict if expectation is not None and verdict in ("xfail", "xpass") else ""
    node.stash[CELL_KEY] = session.write(node.nodeid, model, check_id, outcome, verdict, tiny, expected)
    if verdict == "pass":
        return
    if verdict == "skip":
        pytest.skip(outcome.reason)
    if verdict == "xfail":
        pytest.xfail(f"{expectation.reason} | observed: {outcome.reason}")
    if verdict == "xpass":
        pytest.fail(f"XPASS {model} / {check_id}: expected to {expectation.verdict} ({expectation.reason}) "
                    f"but passed; remove this expectation from {session.expectations_file}", pytrace=False)
    pytest.fail(f"{verdict.upper()} {model} / {check_id}: {outcome.reason}", pytrace=False)


def run_cell(check_id: str, case: Case, request) -> None:
    """Run `check_id` on `case` and end the test with the gated verdict."""
    import torch

    from conformance.checks.base import load_all_checks

    load_all_checks()
    session = _session(request.config)
    deadline = _deadline_of(request.node)
    outcome = None
    try:
        with deadline.interruptible():
            outcome = run_check(check_id, case)
    except isolation.CellTimeout:
        pass
    if deadline.fired or outcome is None:
        # Whatever came out of the check (torch may wrap the interrupt), it was stopped by the limit.
        outcome = Outcome("timeout", deadline.reason(), {"seconds": round(deadline.elapsed, 3)})
        torch._dynamo.reset()
        gc.collect()
    _finish(request.node, case.info.name, check_id, outcome, session, case)


# --------------------------------------------------------------------------- session-level hooks


class RunHooks:
    """The plugin's hooks that need the run's Session (one instance per pytest config)."""

    def __init__(self, session: Session):
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
        report.write_atomic(state.parts.environment,
                            report.environment(state.device, state.dtype_name, state.backend))

    def pytest_collection_finish(self, session):
        # What is alive now (torch, transformers, every discovered class) lives until the end. Freezing it keeps
        # the collector from walking it again in each collection while dynamo and export trace (a few % of a cell).
        gc.collect()
        gc.freeze()

    # -- one cell

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        cell = _cell_of(item)
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
                                      dump_file=state.dump_file())
        isolation.write_note(state.parts.note(state.worker),
                             {"nodeid": item.nodeid, "model": model, "check": check_id, "pid": os.getpid(),
                              "started": time.time(), "deadline": time.time() + state.cell_timeout})
        item.stash[DEADLINE_KEY] = deadline
        state.note_active = True
        deadline.start()
        try:
            result = yield
        finally:
            deadline.stop()
            state.note_active = False
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
        verdict, _ = gated("error", self.session.expectations, model, check_id)
        item.stash[CELL_KEY] = self.session.write(item.nodeid, model, check_id, outcome, verdict)

    def _hard_timeout(self, item, model: str, check_id: str, deadline) -> None:
        """In the watchdog thread: the cell ignored its soft limit; record it before the process ends."""
        state = self.session
        reason = (f"{deadline.reason()} and did not stop within {state.grace:g} s more; "
                  f"the process running it ({state.worker}) was ended")
        outcome = Outcome("timeout", reason, {"seconds": round(deadline.elapsed, 3)})
        verdict, _ = gated("timeout", state.expectations, model, check_id)
        state.write(item.nodeid, model, check_id, outcome, verdict)
        if state.building == model:
            state.parts.add_build_failure(model, "timeout", reason)
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

    # -- crashed workers (pytest-xdist controller)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        if self.session.is_worker and getattr(config.option, "loadgroup", False):
            from conformance.xdist_sched import restore_group_suffix

            restore_group_suffix(items)  # after xdist's own hook, which no longer works on pytest >= 9.2

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node):
        """Hand the controller's impact selection to each worker, so no worker builds the code graph again."""
        if self.session._selected is not None:
            node.workerinput[SELECTED_KEY] = list(self.session._selected)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config, log):
        if config.getvalue("dist") == "loadgroup":
            from conformance.xdist_sched import CrashTolerantGroupScheduling

            return CrashTolerantGroupScheduling(config, log)
        return None

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
            else:
                outcome = Outcome("error", f"worker crashed: {isolation.crash_summary(dump)}")
            if note.get("building"):
                state.parts.add_build_failure(model, outcome.verdict, outcome.reason)
                outcome.reason = f"building the tiny model and inputs: {outcome.reason}"
            outcome.metrics["seconds"] = round(time.time() - note.get("started", time.time()), 3)
            verdict, _ = gated(outcome.verdict, state.expectations, model, check_id)
            record = state.write(crashitem, model, check_id, outcome, verdict)
        line = f"{record['verdict'].upper()} {model} / {check_id}: {record['reason']}"
        try:
            details = dump.read_text(errors="replace").strip()
        except OSError:
            details = ""
        report.longrepr = line + (f"\n{details}" if details else "")
        if record["verdict"] == "xfail":
            report.outcome = "skipped"
            report.wasxfail = record["reason"]
        return None

    # -- end

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session, exitstatus):
        state = self.session
        if state.is_worker:
            return
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

    def pytest_unconfigure(self, config):
        os.close(self.session.console_fd)

    def pytest_report_header(self, config):
        """What a selection or shard option chose, before anything runs (no line without one)."""
        state, option = self.session, config.getoption
        if state.is_worker or not (state.has_selection() or option("shard")):
            return None
        names = state.selected_models()
        how = "impacted by the change" if option("changed_files") or option("since") else "selected"
        line = f"conformance: {len(names)} classes {how}"
        if option("shard"):
            names = shard.share_of(names, option("shard"), state.estimates())
            line += f"; shard {option('shard')}: {len(names)} of them"
        if any(name in state.estimates() for name in names):
            line += f", about {shard.expected_seconds(names, state.estimates()):.0f} s of cells in one process"
        return line

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        envelope = self.session.envelope
        if envelope is not None:
            cells = sum(len(r["cells"]) for r in envelope["models"].values())
            peak = envelope["environment"].get("peak_rss_mib")
            terminalreporter.write_line(f"conformance: {cells} cells written to {self.session.matrix_out}"
                                        + (f" (peak RSS {peak:.0f} MiB)" if peak else ""))
