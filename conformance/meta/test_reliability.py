"""Meta tests of reliability: time limits, crashed workers, interrupted runs, part files.

The unit tests are fast (no torch). The end-to-end tests run pytest on fake
classes (conformance/meta/fake_cases.py) in a subprocess, because what they
prove (a hung or aborting cell, Ctrl-C, kill -9) ends or interrupts a
process; they take a few seconds each plus pytest's start-up.
"""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conformance.meta.fake_cases import TESTS, conftest
from conformance.report import io
from conformance import reasons
from conformance.run import guard, isolation
from conformance.run.records import PartsDir, find_record, peak_memory, plain_nodeid

# --------------------------------------------------------------------------- Deadline


def test_soft_limit_raises_inside_an_interruptible_block():
    deadline = isolation.Deadline(0.2, 5.0).start()
    try:
        started = time.monotonic()
        with pytest.raises(isolation.CellTimeout, match="0.2 s"):
            with deadline.interruptible():
                time.sleep(5)
        assert time.monotonic() - started < 4
        assert deadline.fired
    finally:
        deadline.stop()


def test_soft_limit_never_interrupts_code_outside_the_block():
    deadline = isolation.Deadline(0.1, 5.0).start()
    try:
        time.sleep(0.4)  # pytest's own code would run here: it must not be interrupted
    finally:
        deadline.stop()
    assert deadline.fired


def test_a_swallowed_interrupt_comes_again_and_the_limit_stays_fired():
    deadline = isolation.Deadline(0.1, 0.4).start()
    swallowed = 0
    try:
        with deadline.interruptible():
            while swallowed < 3:
                try:
                    time.sleep(5)
                except isolation.CellTimeout:
                    swallowed += 1
    finally:
        deadline.stop()
    assert swallowed == 3 and deadline.fired


def test_stop_disarms_the_limit_and_restores_the_alarm_handler():
    before = signal.getsignal(signal.SIGALRM)
    deadline = isolation.Deadline(0.1, 5.0).start()
    deadline.stop()
    deadline.stop()  # idempotent
    time.sleep(0.3)
    assert not deadline.fired
    assert signal.getsignal(signal.SIGALRM) == before


def _run_python(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout)


def test_hard_limit_records_then_ends_the_process():
    done = _run_python("""
        import time
        from conformance.run import isolation

        deadline = isolation.Deadline(0.2, 0.3, on_hard_timeout=lambda: print("recorded", flush=True)).start()
        with deadline.interruptible():
            while True:
                try:
                    time.sleep(5)
                except BaseException:
                    pass
    """)
    assert done.returncode == isolation.HARD_TIMEOUT_EXIT, done.stderr
    assert done.stdout.strip() == "recorded"


def test_a_hang_holding_the_gil_is_ended_by_faulthandler_with_a_dump(tmp_path):
    dump = tmp_path / "dump.txt"
    done = _run_python(f"""
        import ctypes
        from conformance.run import isolation

        handle = isolation.open_dump_file(__import__("pathlib").Path({str(dump)!r}))
        deadline = isolation.Deadline(0.2, 0.3, on_hard_timeout=lambda: print("unreachable"), dump_file=handle)
        deadline.start()
        libc, mutex = ctypes.PyDLL(None), ctypes.create_string_buffer(64)
        with deadline.interruptible():  # a C deadlock that keeps the GIL: no signal handler, no thread runs
            libc.pthread_mutex_lock(mutex)
            libc.pthread_mutex_lock(mutex)
    """)
    assert done.returncode == 1 and "unreachable" not in done.stdout
    assert "Timeout (" in dump.read_text()
    assert "hung without returning control to Python" in isolation.crash_summary(dump)


# --------------------------------------------------------------------------- crash dumps, notes, records

ABORT_DUMP = """Fatal Python error: Aborted

Thread 0x00007f7679bff6c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 324 in wait

Current thread 0x00007f767b00db80 (most recent call first):
  File "/tmp/x/conftest.py", line 53 in behave
  File "/work/main/conformance/checks/base.py", line 180 in run_check
"""


@pytest.mark.parametrize("text, expected", [
    (ABORT_DUMP, "Fatal Python error: Aborted (in conftest.py:53, behave)"),
    ("Fatal Python error: Segmentation fault\n\n", "Fatal Python error: Segmentation fault"),
    ("", "without a Python traceback"),
    ("Timeout (0:00:06)!\nThread 0x1 (most recent call first):\n", "hung without returning control"),
])
def test_crash_summary_is_one_line(tmp_path, text, expected):
    dump = tmp_path / "gw0.crash.txt"
    dump.write_text(text)
    summary = isolation.crash_summary(dump)
    assert expected in summary and "\n" not in summary


@pytest.mark.parametrize("innermost, verdict, kind", [
    # a backend no venv has: an installed one's real file would decide the qualname (executorch's: Method.execute)
    ('  File "/site-packages/planted_backend/runtime/__init__.py", line 147 in execute\n', "fail", "fatal_error"),
    (f'  File "{reasons.SUITE}/checks/common/served.py", line 9 in run\n', "error", "crash"),
    ("", "error", "crash"),  # a fatal error with no Python frame: whose, the suite cannot say
])
def test_a_crash_is_the_failure_of_the_code_that_called_the_native_code(tmp_path, innermost, verdict, kind):
    dump = tmp_path / "gw0.crash.txt"
    dump.write_text("Fatal Python error: Floating point exception\n\nCurrent thread 0x1 (most recent call first):\n"
                    + innermost + f'  File "{reasons.SUITE}/run/cell_life.py", line 3 in run_cell\n')
    outcome = guard.crashed_outcome(dump)
    assert (outcome.verdict, outcome.fingerprint.kind) == (verdict, kind)
    assert outcome.reason.startswith("worker crashed: Fatal Python error: Floating point exception")
    if kind == "fatal_error":
        assert outcome.fingerprint.where == "planted_backend.runtime:execute"
        assert outcome.fingerprint.what == "Floating point exception"


def test_a_process_that_died_without_a_traceback_or_while_building_is_the_suite_s_gap(tmp_path):
    outcome = guard.crashed_outcome(tmp_path / "none.txt")  # SIGKILL (out of memory), os._exit
    assert (outcome.verdict, outcome.fingerprint.kind) == ("error", "crash")
    dump = tmp_path / "gw0.crash.txt"
    dump.write_text('Fatal Python error: Aborted\n\nCurrent thread 0x1 (most recent call first):\n'
                    '  File "/site-packages/transformers/modeling_utils.py", line 1 in __init__\n')
    assert guard.crashed_outcome(dump, building=True).verdict == "error"
    assert guard.crashed_outcome(dump).verdict == "fail"


def test_crash_summary_of_a_missing_dump_says_what_that_means(tmp_path):
    assert "without a Python traceback" in isolation.crash_summary(tmp_path / "none.txt")


def test_running_note_round_trips_and_a_torn_note_reads_as_none(tmp_path):
    note = tmp_path / "gw0.running.json"
    isolation.write_note(note, {"nodeid": "t.py::test[A]", "deadline": 1.5})
    assert isolation.read_note(note) == {"nodeid": "t.py::test[A]", "deadline": 1.5}
    note.write_text('{"nodeid": "t.py::te')
    assert isolation.read_note(note) is None


def test_find_record_skips_a_torn_last_line(tmp_path):
    part = tmp_path / "gw0.jsonl"
    io.append_record(part, {"model": "A", "check": "build", "verdict": "pass", "nodeid": "n1"})
    io.append_record(part, {"model": "A", "check": "build", "verdict": "fail", "nodeid": "n1"})
    with open(part, "a") as handle:
        handle.write('{"model": "A", "check": "compile_prefill", "verdict": "pa')  # killed mid-write
    assert find_record(part, "n1")["verdict"] == "fail"
    assert find_record(part, "n2") is None
    assert find_record(tmp_path / "missing.jsonl", "n1") is None


def test_parts_dir_clear_removes_only_run_files(tmp_path):
    parts = PartsDir.of(tmp_path / "matrix.json")
    for name in ("gw0.jsonl", "gw1.jsonl", "gw0.running.json", "gw0.crash.txt", "environment.json"):
        (parts.path / name).parent.mkdir(parents=True, exist_ok=True)
        (parts.path / name).write_text("x")
    (parts.path / "notes.md").write_text("a person's file")
    assert parts.clear() == 2
    assert [p.name for p in parts.path.iterdir()] == ["notes.md"]


def test_peak_memory_is_the_maximum_over_processes():
    records = [{"process": {"id": "gw0", "peak_rss_mib": 900.0}}, {"process": {"id": "gw0", "peak_rss_mib": 950.5}},
               {"process": {"id": "gw1", "peak_rss_mib": 1200.0}}, {"model": "old record without process"}]
    assert peak_memory(records, {"main": 300.0}) == {
        "peak_rss_mib": 1200.0, "peak_rss_mib_by_process": {"gw0": 950.5, "gw1": 1200.0, "main": 300.0}}


@pytest.mark.parametrize("nodeid, plain", [
    ("t.py::test_build[Llava]@Llava", "t.py::test_build[Llava]"),
    ("t.py::test_x@group", "t.py::test_x"),
    ("t.py::test_build[a@b]", "t.py::test_build[a@b]"),
    ("d@x/t.py::test_y", "d@x/t.py::test_y"),
])
def test_plain_nodeid_drops_only_a_loadgroup_suffix(nodeid, plain):
    assert plain_nodeid(nodeid) == plain


def test_peak_rss_of_this_process_is_plausible():
    assert 10 < isolation.peak_rss_mib() < 1024 * 1024


# --------------------------------------------------------------------------- the loadgroup scheduler


class FakeNode:
    count = 0

    def __init__(self):
        FakeNode.count += 1
        self.gateway = type("Gateway", (), {"id": f"gw{FakeNode.count}"})()
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indices):
        self.sent.extend(indices)

    def shutdown(self):
        self.shutting_down = True


def test_crashed_test_is_not_rerun_and_finished_groups_are_not_requeued(pytester):
    from conformance.run.scheduling import CrashTolerantGroupScheduling

    config = pytester.parseconfig("--tx=2*popen", "--dist=loadgroup")
    sched = CrashTolerantGroupScheduling(config)
    collection = ["t.py::test[a1]@A", "t.py::test[a2]@A", "t.py::test[a3]@A",
                  "t.py::test[b1]@B", "t.py::test[b2]@B", "t.py::test[c1]@C"]
    first, second = FakeNode(), FakeNode()
    for node in (first, second):
        sched.add_node(node)
        sched.add_node_collection(node, collection)
    sched.schedule()
    assert [collection[i] for i in first.sent] == collection[:3]

    sched.mark_test_complete(first, 0)  # a1 done, then the worker dies running a2
    assert sched.remove_node(first) == "t.py::test[a2]@A"
    replacement = FakeNode()
    sched.add_node(replacement)
    sched.add_node_collection(replacement, collection)
    sched.schedule()
    assert [collection[i] for i in replacement.sent] == ["t.py::test[a3]@A"]  # not a2 again
    assert replacement.shutting_down  # one item and nothing else to send: it must not wait for a second one

    collecting = FakeNode()  # a replacement that has not sent its collection yet gets nothing
    sched.add_node(collecting)
    for index in (3, 4):  # B done, then the second worker dies running c1
        sched.mark_test_complete(second, index)
    assert sched.remove_node(second) == "t.py::test[c1]@C"
    assert not sched.workqueue  # neither the finished group B nor the crashed-only group C is sent again
    assert collecting.sent == []


# --------------------------------------------------------------------------- end to end, in a subprocess


@pytest.fixture
def fake_project(pytester):
    """A directory with the fake classes; returns a function starting pytest there in a subprocess."""
    import torch._dynamo  # noqa: F401  (pytester snapshots modules; keep torch imported once)

    pytester.makeconftest(conftest())
    pytester.makepyfile(test_fake=TESTS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "CI"))}

    def start(*args: str, expectations: str = "") -> subprocess.Popen:
        exp = pytester.path / "expectations.toml"
        exp.write_text(expectations)
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--expectations", str(exp), *args]
        # SIGINT back to its default: a shell without job control starts background jobs with SIGINT ignored,
        # and the ignored disposition would pass to this run, which the Ctrl-C test then could not interrupt.
        return subprocess.Popen(command, cwd=pytester.path, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    start.path = pytester.path
    return start


def _cells(envelope: dict) -> dict[tuple[str, str], dict]:
    return {(m, c): cell for m, row in envelope["models"].items() for c, cell in row["cells"].items()}


def _verdicts(envelope: dict) -> dict[tuple[str, str], str]:
    return {key: cell["verdict"] for key, cell in _cells(envelope).items()}


def _wait_for(predicate, process: subprocess.Popen, seconds: float = 120) -> None:
    end = time.monotonic() + seconds
    while not predicate():
        if process.poll() is not None:
            raise AssertionError(f"pytest ended early ({process.returncode}):\n{process.stdout.read()}")
        if time.monotonic() > end:
            process.kill()
            raise AssertionError("timed out waiting for the run")
        time.sleep(0.1)


# Limits for the fake runs: the fake cells themselves take about a second on a busy 2-core machine.
LIMIT, GRACE = "6", "2"
EXPECTED_CRASH = '[[cell]]\nmodel = "AbortsForConditionalGeneration"\ncheck = "compile_prefill"\n' \
                 'verdict = "fail"\nreason = "known to crash"\n[cell.fingerprint]\nkind = "fatal_error"\n' \
                 'where = "conftest:behave"\nwhat = "Aborted"\n'


def test_with_xdist_every_cell_reports_despite_hangs_crashes_and_errors(fake_project):
    """-n 2 --dist loadgroup: one envelope with every worker's cells, also in pytest-json-report's file."""
    process = fake_project("-n", "2", "--dist", "loadgroup", "-v", "--cell-timeout", LIMIT, "--cell-timeout-grace", GRACE,
                           "--json-report", "--json-report-file", "report.json", expectations=EXPECTED_CRASH)
    output, _ = process.communicate(timeout=600)
    assert process.returncode == pytest.ExitCode.TESTS_FAILED, output
    envelope = json.loads((fake_project.path / "reports/latest/matrix.json").read_text())
    e, p, t = "error", "pass", "timeout"
    assert _verdicts(envelope) == {
        ("AbortsForConditionalGeneration", "build"): p,
        ("AbortsForConditionalGeneration", "compile_prefill"): "xfail",  # crashed in "its" code, listed as known
        ("BuildAbortsForConditionalGeneration", "build"): e,  # the worker crashed while building: the suite's gap
        ("BuildAbortsForConditionalGeneration", "compile_prefill"): e,  # not built again: no second crash
        ("BuildFailsForConditionalGeneration", "build"): e,
        ("BuildFailsForConditionalGeneration", "compile_prefill"): e,
        ("FixtureErrorsForConditionalGeneration", "build"): p,
        ("FixtureErrorsForConditionalGeneration", "compile_prefill"): e,
        ("ModelBugForConditionalGeneration", "build"): "fail",  # the cases stage found a model failure
        ("ModelBugForConditionalGeneration", "compile_prefill"): "fail",
        ("NotStandaloneForConditionalGeneration", "build"): "fail",  # its default config does not build
        ("NotStandaloneForConditionalGeneration", "compile_prefill"): "skip",  # not a standalone model
        ("OkForConditionalGeneration", "build"): p,
        ("OkForConditionalGeneration", "compile_prefill"): p,
        ("RaisesForConditionalGeneration", "build"): p,
        ("RaisesForConditionalGeneration", "compile_prefill"): "fail",
        ("SleepsForConditionalGeneration", "build"): p,
        ("SleepsForConditionalGeneration", "compile_prefill"): t,  # soft limit
        ("SwallowsForConditionalGeneration", "build"): p,
        ("SwallowsForConditionalGeneration", "compile_prefill"): t,  # hard limit: the worker ended itself
        ("WrapsForConditionalGeneration", "build"): p,
        ("WrapsForConditionalGeneration", "compile_prefill"): t,  # interrupt wrapped in a RuntimeError
    }
    cells = _cells(envelope)
    assert cells[("AbortsForConditionalGeneration", "compile_prefill")]["reason"].startswith(
        "worker crashed: Fatal Python error: Aborted (in conftest.py:")
    assert "was ended" in cells[("SwallowsForConditionalGeneration", "compile_prefill")]["reason"]
    crashed_build = "building the tiny model and inputs: worker crashed: Fatal Python error: Aborted"
    assert cells[("BuildAbortsForConditionalGeneration", "build")]["reason"].startswith(crashed_build)
    assert cells[("BuildAbortsForConditionalGeneration", "compile_prefill")]["reason"].endswith(
        "(in an earlier cell of this class)")
    assert output.count("replacing crashed worker") == 3  # Aborts, BuildAborts (once), Swallows
    assert "harness error in setup: RuntimeError: fixture exploded" in \
        cells[("FixtureErrorsForConditionalGeneration", "compile_prefill")]["reason"]
    workers = [k for k in envelope["environment"]["peak_rss_mib_by_process"] if k.startswith("gw")]
    assert len(workers) >= 2  # one envelope holds the cells of several worker processes
    assert envelope["environment"]["peak_rss_mib"] > 0
    assert json.loads((fake_project.path / "report.json").read_text())["conformance"]["models"] == envelope["models"]
    assert not (fake_project.path / "reports/latest/matrix.json.parts").exists()
    assert "maximum crashed workers" not in output
    for model in ("OkForConditionalGeneration", "RaisesForConditionalGeneration"):  # one worker builds each class
        workers = set(re.findall(rf"^\[(gw\d+)\] .*\[{model}\]@{model}", output, re.M))
        assert len(workers) == 1, output
    assert all("@" not in cell["nodeid"] for cell in cells.values())  # `pytest <nodeid>` reruns a cell


def test_without_xdist_a_soft_timeout_goes_on_and_a_hard_one_ends_the_run_with_the_envelope(fake_project):
    process = fake_project("--models", "Ok*,Raises*,Sleeps*,Swallows*", "--cell-timeout", LIMIT,
                           "--cell-timeout-grace", GRACE)
    output, _ = process.communicate(timeout=300)
    assert process.returncode == isolation.HARD_TIMEOUT_EXIT, output
    assert "the run stops here (run with -n N" in output
    envelope = json.loads((fake_project.path / "reports/latest/matrix.json").read_text())
    assert _verdicts(envelope) == {
        ("OkForConditionalGeneration", "build"): "pass",
        ("OkForConditionalGeneration", "compile_prefill"): "pass",
        ("RaisesForConditionalGeneration", "build"): "pass",
        ("RaisesForConditionalGeneration", "compile_prefill"): "fail",
        ("SleepsForConditionalGeneration", "build"): "pass",
        ("SleepsForConditionalGeneration", "compile_prefill"): "timeout",
        ("SwallowsForConditionalGeneration", "build"): "pass",
        ("SwallowsForConditionalGeneration", "compile_prefill"): "timeout",
    }


@pytest.mark.parametrize("how", ["ctrl-c", "kill -9"])
def test_an_interrupted_run_keeps_its_finished_cells(fake_project, monkeypatch, tmp_path, how):
    """Ctrl-C: the envelope (and the JSON report) is still written; kill -9: the parts rebuild it."""
    process = fake_project("--models", "Ok*,Sleeps*", "--cell-timeout", "300",
                           "--json-report", "--json-report-file", "report.json")
    parts = fake_project.path / "reports/latest/matrix.json.parts"

    def sleeping_cell_started():
        note = isolation.read_note(parts / "main.running.json") or {}
        return note.get("nodeid", "").endswith("test_compile_prefill[SleepsForConditionalGeneration]")

    _wait_for(sleeping_cell_started, process)
    process.send_signal(signal.SIGINT if how == "ctrl-c" else signal.SIGKILL)
    output, _ = process.communicate(timeout=120)
    finished = {("OkForConditionalGeneration", "build"): "pass",
                ("OkForConditionalGeneration", "compile_prefill"): "pass",
                ("SleepsForConditionalGeneration", "build"): "pass"}
    out = fake_project.path / "reports/latest/matrix.json"
    if how == "ctrl-c":
        assert process.returncode == pytest.ExitCode.INTERRUPTED, output
        assert _verdicts(json.loads(out.read_text())) == finished
        assert _verdicts(json.loads((fake_project.path / "report.json").read_text())["conformance"]) == finished
        return
    assert process.returncode == -signal.SIGKILL and not out.exists()
    assert [r["verdict"] for r in io.read_records([parts / "main.jsonl"])] == ["pass"] * 3
    from conformance import discover
    from conformance.tools import cli

    monkeypatch.setattr(discover, "by_name", lambda: {})  # the fake classes are not in transformers
    rebuilt = tmp_path / "rebuilt.json"
    assert cli.main(["merge", "--parts", str(parts), "-o", str(rebuilt)]) == 0
    envelope = json.loads(rebuilt.read_text())
    assert _verdicts(envelope) == finished
    assert envelope["environment"]["backend"] == "eager"  # from the run's environment.json
