"""Installed, the suite is a good citizen: an unrelated pytest project of the same environment runs as without it.

The `pytest11` entry point loads the plugin into every pytest run of the environment. A host project's run
(pytester, in a subprocess, the plugin loaded as an installed one is: `-p conformance.run.plugin` or the entry
point) sees the environment, fixtures and options of a run with the plugin blocked, and its own conftest.py's
`--device` gets its value; the suite's own run still gets its environment defaults and its options, short names
and `--conformance-*` alike. The subprocesses import this checkout's package (PYTHONPATH), not another install.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import conformance
from conformance.meta.fake_cases import TESTS, conftest
from conformance.run import options, plugin

pytestmark = pytest.mark.meta

ROOT = Path(conformance.__file__).resolve().parents[1]
PLUGIN = "conformance.run.plugin"
SUITE_VARIABLES = (*conformance.DEFAULTS, *conformance.WORKER_DEFAULTS)
PER_RUN_VARIABLES = {"PYTEST_XDIST_TESTRUNUID"}  # a fresh id in every run, plugin or not

HOST_CONFTEST = '''
import pytest


def pytest_addoption(parser):
    parser.addoption("--device", default="cpu", help="the host project's own option (common in ML repositories)")


@pytest.fixture
def device(request):
    return request.config.getoption("device")
'''

HOST_TESTS = '''
import json
import os


def test_sees_its_own_world(device, request):
    seen = {"device": device, "environ": dict(os.environ),
            "conformance": request.config.pluginmanager.has_plugin("conformance.run.plugin"),
            "pytester": request.config.pluginmanager.has_plugin("pytester")}
    (request.config.rootpath / "seen.json").write_text(json.dumps(seen))


def test_gets_no_pytester_unless_it_asks(pytester):
    pass
'''

PROBE = '''
import json
import os


def test_probe(request):
    import torch

    option = request.config.getoption
    seen = {"environ": {name: os.environ.get(name) for name in NAMES}, "threads": torch.get_num_threads(),
            "pytester": request.config.pluginmanager.has_plugin("pytester"),
            "options": {name: option(name) for name in ("device", "models", "matrix_out", "cell_timeout")}}
    (request.config.rootpath / "seen.json").write_text(json.dumps(seen))
'''


@pytest.fixture
def subprocess_env(monkeypatch):
    """The environment of a pytest run before the suite touched it: none of its defaults, this checkout first."""
    for name in SUITE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))


def has_entry_point() -> bool:
    return any(ep.name == PLUGIN for ep in importlib.metadata.entry_points(group="pytest11"))


def host_run(pytester, *args: str) -> tuple[pytest.RunResult, dict]:
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=180)
    seen = pytester.path / "seen.json"
    return result, json.loads(seen.read_text()) if seen.exists() else {}


def fixtures_line(result: pytest.RunResult) -> str:
    """pytest's "available fixtures: ..." line of the failed `pytester` request: every fixture the run has."""
    (line,) = {line.strip() for line in result.stdout.lines if "available fixtures:" in line}
    return line


@pytest.mark.parametrize("loader, extra", [
    (["-p", PLUGIN], []),
    ([], []),  # the pytest11 entry point, as `pip install` leaves it
    (["-p", PLUGIN], ["-n", "1"]),  # in a pytest-xdist worker, where the suite sets one math thread
], ids=["-p", "entry-point", "-p,-n1"])
def test_a_host_project_runs_as_without_the_plugin(pytester, subprocess_env, loader, extra):
    if not loader and not has_entry_point():
        pytest.skip("the package is not installed here: no pytest11 entry point")
    pytester.makeconftest(HOST_CONFTEST)
    pytester.makepyfile(test_host=HOST_TESTS)
    blocked, without = host_run(pytester, "-p", f"no:{PLUGIN}", "--device", "cuda:7", *extra)
    result, seen = host_run(pytester, *loader, "--device", "cuda:7", *extra)
    out = result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1, errors=1)
    assert "fixture 'pytester' not found" in out
    assert seen["conformance"] and not without["conformance"], "the plugin was not loaded (or not blocked)"
    assert seen["device"] == "cuda:7"
    assert not seen["pytester"]
    assert [name for name in SUITE_VARIABLES if name in seen["environ"]] == []
    changed = {k for k in seen["environ"].keys() | without["environ"].keys()
               if seen["environ"].get(k) != without["environ"].get(k)} - PER_RUN_VARIABLES
    assert changed == set(), f"the plugin changed the host run's environment: {sorted(changed)}"
    assert fixtures_line(result) == fixtures_line(blocked), "the plugin changed the host run's fixtures"
    assert not (pytester.path / "reports").exists()


def test_a_host_project_has_no_short_option_of_the_suite(pytester, subprocess_env):
    pytester.makepyfile(test_host="def test_one():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", PLUGIN, "--models", "Llava*")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "unrecognized arguments: --models" in result.stderr.str()
    prefixed = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", PLUGIN, "--conformance-models", "Llava*")
    prefixed.assert_outcomes(passed=1)


@pytest.mark.parametrize("spelling, where", [("short", "xdist-worker"), ("prefixed", "in-process")])
def test_the_suite_run_gets_its_defaults_and_its_options(pytester, subprocess_env, spelling, where):
    """The short names in a subprocess with one xdist worker (its environment from scratch: the worker's math
    threads too), the prefixed ones in process (quick)."""
    pytester.makeconftest(conftest())
    pytester.makepyfile(test_fake=TESTS, test_probe=f"NAMES = {SUITE_VARIABLES!r}\n{PROBE}")
    (pytester.path / "none.toml").write_text("")
    out = pytester.path / "out" / "matrix.json"
    values = {"device": "cpu", "models": "OkForConditionalGeneration", "matrix-out": str(out),
              "expectations": str(pytester.path / "none.toml"), "cell-timeout": "120"}
    prefix = "--" if spelling == "short" else "--conformance-"
    args = ["-p", "no:cacheprovider", *(arg for name, value in values.items() for arg in (prefix + name, value))]
    if where == "xdist-worker":
        result = pytester.runpytest_subprocess("-n", "1", *args, timeout=300)
    else:
        import torch._dynamo  # noqa: F401  (imported before the run: pytester drops the modules a run imports)
        import transformers  # noqa: F401

        result = pytester.runpytest_inprocess(*args)
    result.assert_outcomes(passed=3)
    seen = json.loads((pytester.path / "seen.json").read_text())
    # In process, this test's own process is the suite's run too: under `-n 2` it is an xdist worker already.
    worker = where == "xdist-worker" or bool(os.environ.get("PYTEST_XDIST_WORKER"))
    threads = {name: value if worker else None for name, value in conformance.WORKER_DEFAULTS.items()}
    assert seen["environ"] == {**conformance.DEFAULTS, **threads}
    assert seen["pytester"] and (seen["threads"] == 1 or not worker)
    assert seen["options"] == {"device": "cpu", "models": "OkForConditionalGeneration", "matrix_out": str(out),
                               "cell_timeout": 120.0}
    rows = json.loads(out.read_text())["models"]
    assert list(rows) == ["OkForConditionalGeneration"]
    assert {c: cell["verdict"] for c, cell in rows["OkForConditionalGeneration"]["cells"].items()
            if cell["verdict"] != "not_run"} == {"build": "pass", "compile_prefill": "pass"}


def test_a_host_option_the_suite_would_read_is_one_clear_error(pytester):
    """Running the suite where a host conftest.py owns `--device` (default cpu; the suite's: auto): the suite
    cannot read its own value there. (Where both hold the same value, the suite reads it and runs.)"""
    pytester.makeconftest(conftest() + HOST_CONFTEST.replace("import pytest\n", "", 1))
    pytester.makepyfile(test_fake=TESTS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--matrix-out", str(pytester.path / "m.json"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and "--conformance-device" in errors[0] and "'device'" in errors[0], errors
    assert not (pytester.path / "m.json").exists()


INSTALLED = "/proj/.venv/lib/python3.11/site-packages/conformance"


@pytest.mark.parametrize("path, package, targets", [
    ("/proj", INSTALLED, False),  # a host project whose own venv holds the package: pytest skips venvs
    (f"{INSTALLED}/meta", INSTALLED, True),
    ("/src/vlm-conformance", "/src/vlm-conformance/conformance", True),  # a checkout's root
    ("/src", "/src/vlm-conformance/conformance", True),
    ("/src/other", "/src/vlm-conformance/conformance", False),
])
def test_only_the_suite_is_the_suite(path, package, targets):
    assert plugin.targets_path(Path(path), Path(package)) is targets


@pytest.mark.parametrize("paths, package, fenced", [
    ([INSTALLED], INSTALLED, True),  # pytest --pyargs conformance
    ([f"{INSTALLED}/meta/test_plugin.py"], INSTALLED, True),
    ([INSTALLED, "/proj/tests"], INSTALLED, False),  # the host's tests too: its conftest.py files apply
    ([], INSTALLED, False),
    (["/src/vlm-conformance/conformance"], "/src/vlm-conformance/conformance", False),  # a checkout: its conftest.py
])
def test_a_run_of_the_installed_package_alone_is_fenced_off_the_host(paths, package, fenced):
    assert plugin.fences([Path(p) for p in paths], Path(package)) is fenced


def test_the_short_options_values_are_not_paths():
    args = ["--pyargs", "conformance", "--models", "Llava*", "--changed-files", "a.py", "b.py", "-k", "x",
            "--device=cpu", "--matrix-out", "m.json", "tests"]
    assert plugin._short_option_values(args) == ["Llava*", "a.py", "b.py", "m.json"]


def test_the_suite_installed_in_a_host_projects_venv(pytester, subprocess_env, monkeypatch):
    """The package copied into the host project's own .venv (as `pip install` there puts it; that project's
    conftest.py declares --device): the host's run is its own, and `pytest --pyargs conformance --device cpu`
    run from the project is the suite's, without the host's conftest.py."""
    import shutil

    site = pytester.path / ".venv" / "lib" / "python3.11" / "site-packages"
    shutil.copytree(ROOT / "conformance", site / "conformance", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("PYTHONPATH", str(site))
    pytester.makeconftest(HOST_CONFTEST)
    pytester.makepyfile(test_host=HOST_TESTS)
    host, seen = host_run(pytester, "-p", PLUGIN, "--device", "cuda:7")
    host.assert_outcomes(passed=1, errors=1)
    assert seen["conformance"] and seen["device"] == "cuda:7"
    assert [name for name in SUITE_VARIABLES if name in seen["environ"]] == []
    assert not (pytester.path / "reports").exists()
    suite = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", PLUGIN, "--pyargs", "conformance", "--co",
                                          "-q", "-k", "test_matrix", "--models", "LlavaForConditionalGeneration",
                                          "--device", "cpu", "--matrix-out", str(pytester.path / "m.json"),
                                          timeout=180)
    assert suite.ret == pytest.ExitCode.OK, suite.stdout.str() + suite.stderr.str()
    assert "conformance/test_matrix.py::test_build[LlavaForConditionalGeneration]" in suite.stdout.str()


def test_every_option_has_a_prefixed_name_and_a_short_one():
    names = [name for name, _ in options.OPTIONS]
    assert len(set(map(options.dest, names))) == len(names)
    assert all(options.dest(n).startswith("conformance_") for n in names)
    assert {"device", "models", "checks", "matrix-out", "shard", "cell-timeout"} <= set(names)


def test_the_conformance_command_is_hermetic_and_an_import_is_not(subprocess_env):
    code = "import os, sys; sys.argv[0] = sys.argv[1]; import conformance; print(os.environ.get('HF_HUB_OFFLINE'))"
    seen = {script: subprocess.run([sys.executable, "-c", code, script], capture_output=True, text=True,
                                   check=True).stdout.strip()
            for script in ("/venv/bin/conformance", "/venv/bin/python", "/venv/bin/pytest")}
    assert seen == {"/venv/bin/conformance": "1", "/venv/bin/python": "None", "/venv/bin/pytest": "None"}


def test_the_package_says_its_license():
    if not (ROOT / "pyproject.toml").exists():
        pytest.skip("an installed package: no pyproject.toml")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("Copyright 2026 The vlm-conformance authors\n") and "Version 2.0, January 2004" in text
    assert {"Homepage", "Repository", "Issues"} <= set(project["urls"])
    assert "Framework :: Pytest" in project["classifiers"]
