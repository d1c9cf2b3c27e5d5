"""Fake models for running the real plugin in the harness's own tests (pytester).

`CONFTEST` supplies a case source (the plugin's `pytest_conformance_case_source`
hook) whose "classes" are names, each built instantly into a stand-in Case,
and an autouse fixture that replaces the `build` check by `draws` (a pass) and the
`compile_prefill` check by `behave`, which does what the class name says:
pass, raise, sleep past the limit, swallow the interrupt, wrap it, or abort
the process (the last ones only in a subprocess run). Two classes are decided
by the cases stage without a case (`conformance.cases.model_failure.RowVerdict`).
`LIMIT_CLASSES` (not in the default run) test the cell's limits: memory, and
a timeout under load (the check writes the running note of a busy process
of the run, `LOAD_NOTE`, unless it is the rerun alone).
"""

FAKE_CLASSES = {
    "AbortsForConditionalGeneration": "os.abort() in the check: the process dies",
    "BuildAbortsForConditionalGeneration": "os.abort() while building the tiny model",
    "BuildFailsForConditionalGeneration": "the tiny model cannot be built",
    "FixtureErrorsForConditionalGeneration": "a fixture of the test raises",
    "ModelBugForConditionalGeneration": "the cases stage finds the model's own code failing (a RowVerdict: fail)",
    "NotStandaloneForConditionalGeneration": "the cases stage finds a class that is not a standalone model (skip)",
    "OkForConditionalGeneration": "passes",
    "RaisesForConditionalGeneration": "the check raises",
    "SleepsForConditionalGeneration": "the check sleeps past the limit",
    "SwallowsForConditionalGeneration": "the check sleeps and swallows every interrupt",
    "WrapsForConditionalGeneration": "the check sleeps and wraps the interrupt in a RuntimeError",
}

LIMIT_CLASSES = {
    "AllocatesForConditionalGeneration": "the check allocates 50 MB at a time, up to 1500 MB",
    "HogsForConditionalGeneration": "the check allocates 50 MB at a time, up to 1500 MB, swallowing every interrupt",
    "SlowUnderLoadForConditionalGeneration": "the check sleeps past the limit while other work runs, passes alone",
    "SlowAlwaysForConditionalGeneration": "the check sleeps past the limit, under load and alone",
}
LOAD_NOTE = "reports/latest/matrix.json.parts/load.running.json"

_SOURCE = '''
import os
import time
from types import SimpleNamespace

import pytest

pytest_plugins = ["conformance.run.plugin"]

NAMES = {names!r}
LOAD_NOTE = {load_note!r}


class FakeCases:
    def index(self):
        return {{n: n for n in NAMES}}

    def names(self):
        return sorted(NAMES)

    def build(self, name, device, dtype, backend):
        from conformance.cases.case import Case

        if name.startswith("BuildFails"):
            raise RuntimeError("no tiny config for this fake")
        if name.startswith("BuildAborts"):
            os.abort()
        if name.startswith("NeedsPackage"):
            from conformance.cases.model_failure import MissingDependency

            raise MissingDependency("needs fakepkg (FakeTower), not installed: pip install fakepkg")
        if name.startswith("ModelBug"):
            from conformance.cases.model_failure import ModelFailure

            raise ModelFailure("the model's own forward fails on valid inputs (transformers bug): fake")
        if name.startswith("NotStandalone"):
            from conformance.cases.model_failure import NotStandalone

            raise NotStandalone("not a standalone model: a fake part", build=("fail", "fake default config bug"))
        return Case(info=SimpleNamespace(name=name), tiny=SimpleNamespace(source="fake"),
                    sample=SimpleNamespace(strategy="fake"))

    def rows(self, names):
        return {{n: {{"model_type": "fake", "modalities": ["text"]}} for n in names}}


def pytest_conformance_case_source(config):
    return FakeCases()
'''

_CHECKS = '''

def hold_50_mb(held):
    block = bytearray(50 * 1024 * 1024)
    block[::4096] = b"x" * len(block[::4096])  # touch every page: resident, not only reserved
    held.append(block)
    time.sleep(0.05)


def behave(case):
    name = case.info.name
    if name.startswith("Raises"):
        raise ValueError("the fake model failed")
    if name.startswith("Sleeps"):
        time.sleep(600)
    if name.startswith("Swallows"):
        while True:
            try:
                time.sleep(600)
            except BaseException:
                pass
    if name.startswith("Wraps"):
        try:
            time.sleep(600)
        except BaseException as exc:
            raise RuntimeError("wrapped by the framework") from exc
    if name.startswith("Aborts"):
        os.abort()
    if name.startswith("Allocates"):
        held = []
        for _ in range(30):
            hold_50_mb(held)
    if name.startswith("Hogs"):  # ignores the soft stop: only the watchdog's hard path ends it
        held = []
        while len(held) < 30:
            try:
                hold_50_mb(held)
            except BaseException:
                pass
        while True:
            try:
                time.sleep(600)
            except BaseException:
                pass
    if name.startswith("Slow"):
        from conformance.run import rerun

        if not os.environ.get(rerun.RERUN_ENV):  # another process of the run is busy with a cell
            import json
            from pathlib import Path

            Path(LOAD_NOTE).write_text(json.dumps({"pid": os.getpid(), "nodeid": "load", "started": time.time()}))
        if name.startswith("SlowAlways") or not os.environ.get(rerun.RERUN_ENV):
            time.sleep(600)
    return {"max_abs_diff": 0.0}


def draws(case):
    """Passes, recording a draw of each global random generator (equal in every cell when seeded per cell)."""
    import random

    import numpy

    return {"parameters": 1, "python_draw": random.random(), "numpy_draw": float(numpy.random.rand())}


@pytest.fixture(autouse=True)
def fake_checks(monkeypatch):
    import dataclasses

    from conformance.checks.common import registry

    for check_id, run in (("build", draws), ("compile_prefill", behave)):
        monkeypatch.setitem(registry.CHECKS, check_id, dataclasses.replace(registry.get(check_id), run=run))
'''

TESTS = '''
import pytest

from conformance.run.cells import run_cell


@pytest.mark.conformance_check("build")
def test_build(model_case, request):
    run_cell("build", model_case, request)


@pytest.fixture
def extra(model_name):
    if model_name.startswith("FixtureErrors"):
        raise RuntimeError("fixture exploded")


@pytest.mark.conformance_check("compile_prefill")
def test_compile_prefill(model_case, extra, request):
    run_cell("compile_prefill", model_case, request)
'''


def conftest(names=None) -> str:
    """The conftest of a pytester run over `names` (default: every class of `FAKE_CLASSES`); a name starting
    with ``NeedsPackage`` needs a package that is not installed (its cells are not run)."""
    return _SOURCE.format(names=sorted(names or FAKE_CLASSES), load_note=LOAD_NOTE) + _CHECKS


def fake_project(pytester):
    """Lay out an in-process pytester run over the fake classes (conftest, tests, an empty expectations file);
    returns that file's path. torch and transformers are imported first: pytester drops the modules a run imports."""
    import torch._dynamo  # noqa: F401
    import transformers  # noqa: F401

    pytester.makeconftest(conftest())
    pytester.makepyfile(test_fake=TESTS)
    empty = pytester.path / "none.toml"
    empty.write_text("")
    return empty
