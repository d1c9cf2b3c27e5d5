"""Meta tests of a cell's limits as verdicts: memory past the cell's limit is the cell's `fail` (kind `resources`),
and a cell stopped by its time limit while other work ran is rerun alone once before it is called a timeout.

The unit tests are fast (no pytest run). The end-to-end tests run pytest on fake classes
(`fake_cases.LIMIT_CLASSES`) in a subprocess; no test asserts a timing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from conformance.fingerprints import Fingerprint
from conformance.gate import expectations
from conformance.meta.fake_cases import TESTS, conftest
from conformance.run import cell_life, isolation, memory, rerun

pytestmark = pytest.mark.meta


# --------------------------------------------------------------------------- units


def test_the_limit_of_a_column_is_its_published_peak_times_the_factor_never_below_the_floor():
    table = {"factor": 1.25, "floor_mib": 4096, "reserve_mib": 1024,
             "peak_mib": {"big": 16000.0, "small": 1400.0, "compile_prefill": 8000.0}}
    assert memory.limit_mib("big", table=table) == 20000.0
    assert memory.limit_mib("small", table=table) == 4096.0
    assert memory.limit_mib("unpublished", table=table) == 4096.0
    assert memory.limit_mib("compile_prefill@inductor", table=table) == 10000.0  # the check's own peak
    assert memory.limit_mib("big", override=512, table=table) == 512.0
    assert memory.limit_mib("exporter_executorch_forward") > memory.limit_mib("build")  # the fixtures' table


def test_an_allocation_past_the_limit_stops_the_cell_with_its_peak():
    deadline = isolation.Deadline(60, 5, memory=isolation.MemoryLimit(memory.rss_mib(os.getpid()) + 200,
                                                                     interval=0.02)).start()
    held = []
    try:
        with pytest.raises(isolation.CellOutOfMemory, match="past the cell memory limit"):
            with deadline.interruptible():
                for _ in range(30):  # 300 MB against 200 MB more than now
                    block = bytearray(10 * 1024 * 1024)
                    block[::4096] = b"x" * len(block[::4096])
                    held.append(block)
                time.sleep(30)
    finally:
        deadline.stop()
        held.clear()
    outcome = cell_life.stopped_outcome(deadline)
    assert outcome.verdict == "fail" and outcome.fingerprint.kind == "resources"
    assert outcome.metrics["peak_rss_mib"] > outcome.metrics["memory_limit_mib"]
    assert "under_load" not in outcome.metrics


def test_a_resources_failure_is_listable_as_a_model_failure_and_not_the_suite_s_own():
    from conformance.fingerprints import SUITE_OWN_KINDS

    text = ('[[cell]]\nmodel = "M2M100ForConditionalGeneration"\ncheck = "exporter_executorch_forward"\n'
            'verdict = "fail"\nreason = "the exporter needs more than 20 GB"\n[cell.fingerprint]\n'
            'kind = "resources"\nwhat = "resident memory past the cell memory limit"\n')
    parsed = expectations.parse(text, "x.toml")
    assert parsed is not None
    assert "resources" not in SUITE_OWN_KINDS
    assert Fingerprint.from_data({"kind": "resources", "what": "x"}).kind == "resources"


@pytest.mark.parametrize("record, waits", [
    ({"verdict": "timeout", "metrics": {"under_load": True}}, True),
    ({"verdict": "xfail", "observed": "timeout", "metrics": {"under_load": True}}, True),
    ({"verdict": "fail", "fingerprint": {"kind": "resources"}, "metrics": {"under_load": True}}, True),
    ({"verdict": "timeout", "metrics": {}}, False),  # alone: a timeout
    ({"verdict": "timeout", "metrics": {"under_load": True, "rerun_alone": True}}, False),  # rerun once
    ({"verdict": "fail", "fingerprint": {"kind": "exception"}, "metrics": {"under_load": True}}, False),
])
def test_which_records_wait_for_a_rerun_alone(record, waits):
    assert rerun.pending(record) is waits


def test_another_process_s_note_is_load_until_it_ends_or_its_process_is_gone(tmp_path):
    assert not isolation.others_running(tmp_path, "gw0")
    isolation.write_note(tmp_path / "gw0.running.json", {"pid": os.getpid()})
    assert not isolation.others_running(tmp_path, "gw0")  # its own
    isolation.write_note(tmp_path / "gw1.running.json", {"pid": os.getpid()})
    assert isolation.others_running(tmp_path, "gw0")
    isolation.write_note(tmp_path / "gw1.running.json", {"pid": os.getpid(), "ended": 1.0})
    assert not isolation.others_running(tmp_path, "gw0")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    isolation.write_note(tmp_path / "gw2.running.json", {"pid": gone.pid})
    assert not isolation.others_running(tmp_path, "gw0")


# --------------------------------------------------------------------------- end to end, in a subprocess


@pytest.fixture
def limits_project(pytester):
    import torch._dynamo  # noqa: F401  (pytester snapshots modules; keep torch imported once)

    pytester.makeconftest(conftest(["AllocatesForConditionalGeneration", "HogsForConditionalGeneration",
                                    "OkForConditionalGeneration", "SlowAlwaysForConditionalGeneration",
                                    "SlowUnderLoadForConditionalGeneration"]))
    pytester.makepyfile(test_fake=TESTS)
    (pytester.path / "none.toml").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "CI"))}

    def run(*args: str) -> tuple[int, str, dict]:
        done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "--expectations",
                               "none.toml", *args], cwd=pytester.path, env=env, capture_output=True, text=True,
                              timeout=600)
        output = done.stdout + done.stderr
        out = pytester.path / "reports/latest/matrix.json"
        assert out.exists(), output
        envelope = json.loads(out.read_text())
        cells = {(m, c): cell for m, row in envelope["models"].items() for c, cell in row["cells"].items()}
        return done.returncode, output, cells

    return run


def test_a_cell_past_its_memory_limit_fails_with_kind_resources_and_the_next_cell_runs(limits_project):
    status, output, cells = limits_project("--models", "Allocates*,Ok*", "--cell-memory", "1000")
    assert status == pytest.ExitCode.TESTS_FAILED, output
    stopped = cells[("AllocatesForConditionalGeneration", "compile_prefill")]
    assert stopped["verdict"] == "fail", stopped
    assert stopped["fingerprint"] == {"kind": "resources", "what": "resident memory past the cell memory limit"}
    assert stopped["metrics"]["memory_limit_mib"] == 1000.0
    assert stopped["metrics"]["peak_rss_mib"] > 1000.0
    assert "past the cell memory limit of 1000 MiB" in stopped["reason"]
    # The same process went on: the next class's cells ran after it, and passed.
    lines = [line for line in output.splitlines() if "::test_" in line]
    after = lines[[i for i, line in enumerate(lines) if "compile_prefill[Allocates" in line][0] + 1:]
    assert any("test_build[Ok" in line and "PASSED" in line for line in after), output
    assert cells[("OkForConditionalGeneration", "compile_prefill")]["verdict"] == "pass"
    assert "replacing crashed worker" not in output and "worker crashed" not in output


def test_a_cell_that_ignores_its_memory_stop_under_xdist_is_recorded_as_resources_not_a_crash(limits_project):
    """The hard path under pytest-xdist: the watchdog records the cell before it ends the worker, and the controller
    keeps that record (`fail`, kind `resources`), not "worker crashed"."""
    status, output, cells = limits_project("--models", "Hogs*,Ok*", "--cell-memory", "600", "-n", "2",
                                           "--dist", "loadgroup")
    assert status == pytest.ExitCode.TESTS_FAILED, output
    ended = cells[("HogsForConditionalGeneration", "compile_prefill")]
    assert ended["verdict"] == "fail", ended
    assert ended["fingerprint"]["kind"] == "resources", ended
    assert "past the cell memory limit of 600 MiB" in ended["reason"] and "was ended" in ended["reason"], ended
    assert "worker crashed" not in ended["reason"], ended
    assert cells[("OkForConditionalGeneration", "compile_prefill")]["verdict"] == "pass"


def test_a_cell_that_times_out_under_load_is_rerun_alone_once(limits_project):
    status, output, cells = limits_project("--models", "Slow*", "--cell-timeout", "3", "--cell-timeout-grace", "2", "-rs")
    assert status == pytest.ExitCode.TESTS_FAILED, output  # SlowAlways is a timeout alone too
    passed = cells[("SlowUnderLoadForConditionalGeneration", "compile_prefill")]
    assert passed["verdict"] == "pass", passed
    assert passed["metrics"]["rerun_alone"] is True
    assert "ran past the cell time limit of 3 s" in passed["metrics"]["first_reason"]
    assert {"first_seconds", "max_abs_diff"} <= set(passed["metrics"]) and "seconds" in passed
    timed_out = cells[("SlowAlwaysForConditionalGeneration", "compile_prefill")]
    assert timed_out["verdict"] == "timeout", timed_out
    assert timed_out["metrics"]["rerun_alone"] is True and "first_seconds" in timed_out["metrics"]
    assert "alone too" in timed_out["reason"]
    assert "conformance: rerun alone: PASS SlowUnderLoadForConditionalGeneration / compile_prefill" in output
    assert "conformance: rerun alone: TIMEOUT SlowAlwaysForConditionalGeneration / compile_prefill" in output
    assert rerun.PENDING in output, output  # reported as waiting for the rerun, not as failures
