"""Stage 6, run: the pytest plugin (entry point `pytest11`, also named by the root conftest.py).

Contract:

* The plugin is active when the run targets the suite: a path argument (or
  ``--pyargs`` module) inside the `conformance` package, or above it where
  the package is a checkout (not in site-packages: a host project's own
  venv is not the suite), or a conftest that supplies a case source
  (`pytest_conformance_case_source`).
* A run of nothing but an installed package (`pytest --pyargs conformance`
  of a wheel, no --confcutdir given) loads no conftest.py from outside the
  package: those of a host project around the venv, or of the folder the
  run starts in, are not the suite's (and would take its option names).
* Active, it sets the suite's environment defaults (`conformance.hermetic`:
  offline hub, one math thread per xdist worker), loads `pytester` (the
  meta tests use it) and gives every option its short name (`--device`)
  where no other plugin or conftest.py of the run took it (`options`).
  In any other pytest run of the same environment it only declares its
  `--conformance-*` options: no environment variable, option name or
  fixture of that run changes.
* The suite's own tests (``conformance/meta``) are collected only when the
  run asks for them: ``--meta``, or a path (or ``--pyargs`` module) under
  ``conformance/meta``; ``pytest --pyargs conformance`` and ``pytest
  conformance`` are the matrix alone.
* Every registered check gets a test function, parametrized over the
  selected classes of the run's case source (`cells`; ids = class names),
  grouped per class so that with ``-n N --dist loadgroup`` one worker builds
  each tiny model once.
* `run_cell(check_id, case, request)` runs a check, applies the
  expectations (gate) and turns the verdict into a pytest outcome (pass,
  fail, xfail, skip; an xpass fails with "remove this expectation").
* Every cell gets exactly one record, appended to its process's part file in
  ``<matrix-out>.parts/`` as soon as it is known: a cell past
  ``--cell-timeout`` is `timeout` (`isolation`: soft limit, then the worker
  ends itself), a cell past its memory limit (``--cell-memory``, else its
  column's, `memory`) is `fail` kind `resources`, a cell a limit stopped
  while other work ran is rerun alone at the end (`rerun`), a cell whose
  worker process died is `error` "worker
  crashed: ..." (written by the xdist controller), a cell that ended in a
  harness error without a verdict (a fixture error) is `error` (`guard`).
* At session end (also after Ctrl-C) the controller merges all parts into the
  envelope at ``--matrix-out`` (written atomically), also added under the key
  ``conformance`` of pytest-json-report's file when it is active
  (`lifecycle`); after a kill -9, `conformance merge --parts DIR -o OUT.json`
  rebuilds it.
* Bad options and input files end the run before anything runs or is
  written, with one line naming the option or file and the fix (`options`).
* Every cell starts with Python's and numpy's generators seeded (torch's is
  seeded by run_check); each process's peak RSS goes into the envelope's
  environment (`peak_rss_mib`, `peak_rss_mib_by_process`).
* Under pytest-xdist, ``--dist loadgroup`` uses a scheduler that survives
  crashed workers, classes run longest first and ``--shard i/N`` keeps a
  share (`scheduling`, `shards`); a test module that fails to import is a
  collection error that does not stop the other modules.

This module stays light: torch, transformers and the stages are imported
only once the plugin is active.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

import conformance
from conformance.run import options
from conformance.run.hooks import CaseSourceHooks

MAX_WORKER_RESTARTS = 100
PACKAGE = Path(conformance.__file__).resolve().parent
META = PACKAGE / "meta"


def pytest_addhooks(pluginmanager):
    pluginmanager.add_hookspecs(CaseSourceHooks)


def pytest_addoption(parser):
    options.add_options(parser)


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config, parser, args):
    """Once the conftest.py files that precede parsing have declared their options: the suite's own run gets
    the short option names nobody took (then `pytest ... --device cpu` parses), its environment and pytester.
    Before them: a run of an installed package alone loads no conftest.py from outside it (`_fence`)."""
    if not any(arg == "--confcutdir" or arg.startswith("--confcutdir=") for arg in args) and _fence(early_config, args):
        early_config.known_args_namespace.confcutdir = str(PACKAGE)
    result = yield
    if targets_the_suite(early_config, args):
        _activate(early_config)
        options.add_short_names(parser)
    return result


def pytest_configure(config):
    config.addinivalue_line("markers", "conformance_check(id): the check a test runs")
    config.addinivalue_line("markers", "meta: fast tests of the harness itself")
    config.addinivalue_line("markers", "conformance_models(*names): a test over those of these classes the run "
                            "selects (takes property_model)")
    if not targets_the_suite(config):
        return
    _activate(config)
    options.use_short_dests(config)
    from conformance.run import cells, guard, lifecycle, scheduling
    from conformance.run.session import SESSION_KEY, Session

    _hypothesis_profile(config)
    # A test module that fails to import loses its own column, not the run.
    config.option.continue_on_collection_errors = True
    # xdist's default (4 per worker) would end the run after a few crashed or hung cells.
    if getattr(config.option, "numprocesses", None) and getattr(config.option, "maxworkerrestart", "") is None:
        config.option.maxworkerrestart = str(MAX_WORKER_RESTARTS)
    session = Session(config)
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(cells, "conformance-cells")
    for name, hooks in (("conformance-lifecycle", lifecycle.LifecycleHooks(session)),
                        ("conformance-order", scheduling.OrderHooks(session)),
                        ("conformance-xdist", scheduling.XdistHooks(session)),
                        ("conformance-guard", guard.GuardHooks(session))):
        config.pluginmanager.register(hooks, name)


def pytest_ignore_collect(collection_path, config):
    """The suite's run collects its own tests (conformance/meta) only when asked (`wants_meta`): a run of the
    package (`pytest --pyargs conformance`, `pytest conformance`) is the matrix."""
    if collection_path.name == META.name and collection_path.resolve() == META and targets_the_suite(config):
        return None if wants_meta(config) else True
    return None


def wants_meta(config) -> bool:
    """Whether the run asks for the meta tests: --meta, or a path (or --pyargs module) under conformance/meta."""
    if getattr(config.option, options.dest("meta"), False):
        return True
    return any(path == META or META in path.parents for path in _target_paths(config, None))


def targets_the_suite(config, early_args: list[str] | None = None) -> bool:
    """Whether this pytest run runs the suite (see the module's contract); with `early_args` (the command
    line), decided before pytest has parsed it into `config.args` (see `_early_args`)."""
    if config.pluginmanager.hook.pytest_conformance_case_source.get_hookimpls():
        return True
    return any(targets_path(path) for path in _target_paths(config, early_args))


def _fence(config, args: list[str]) -> bool:
    """Whether the run collects nothing but an installed package (`fences`), decided from the command line."""
    return fences(_target_paths(config, args))


def fences(paths: list[Path], package: Path = PACKAGE) -> bool:
    """Whether a run of `paths` is a run of nothing but an installed `package` (`pytest --pyargs conformance` of
    a wheel): then the conftest.py files on the way to it (a host project whose .venv holds the package, the
    folder the run starts in) are not the suite's, and pytest would load them (late ones would take its options)."""
    return _installed(package) and bool(paths) and all(p == package or package in p.parents for p in paths)


def _target_paths(config, early_args: list[str] | None) -> list[Path]:
    if early_args is None:
        args, pyargs = config.args, config.option.pyargs
    else:
        args, pyargs = _early_args(config, early_args)
    base, paths = Path(config.invocation_params.dir), []
    for arg in args:
        target = arg.split("::")[0]
        if pyargs and target.split(".")[0] == PACKAGE.name:  # a module of another package is not the suite's
            found = _module_path(target)
            if found is not None:
                target = str(found)
        paths.append((base / target).resolve())
    return paths


def _installed(package: Path) -> bool:
    return any(part in ("site-packages", "dist-packages") for part in package.parts)


def targets_path(path: Path, package: Path = PACKAGE) -> bool:
    """Whether collecting `path` collects the suite: the package or a part of it, or a folder above a checkout
    of it (an installed package is never collected from above: pytest skips virtual environments)."""
    if path == package or package in path.parents:
        return True
    return not _installed(package) and path in package.parents


def _early_args(config, args: list[str]) -> tuple[list[str], bool]:
    """The run's paths and --pyargs before pytest decides `config.args`: the command line's paths, else
    testpaths (run from the rootdir), else the invocation folder, as pytest decides them."""
    known = config.known_args_namespace
    pyargs = bool(getattr(known, "pyargs", False))
    given = list(getattr(known, "file_or_dir", None) or [])
    for value in _short_option_values(args):
        if value in given:
            given.remove(value)
    if given:
        return given, pyargs
    base = Path(config.invocation_params.dir)
    testpaths = list(config.getini("testpaths")) if base == config.rootpath else []
    return testpaths or [str(base)], pyargs


def _short_option_values(args: list[str]) -> list[str]:
    """The values given to the suite's short options in `args` (`--models X`): not yet declared when pytest
    first parses the command line, they are not options to it, and it takes their values for paths."""
    nargs = {f"--{name}": attrs.get("nargs") for name, attrs in options.OPTIONS if "action" not in attrs}
    values, i = [], 0
    while i < len(args):
        flag, i = args[i], i + 1
        if flag not in nargs:
            continue
        while i < len(args) and not args[i].startswith("-"):
            values.append(args[i])
            i += 1
            if nargs[flag] != "+":
                break
    return values


def _activate(config) -> None:
    """The suite's own run: its environment defaults and the meta tests' pytester (each step idempotent)."""
    conformance.hermetic()
    config.pluginmanager.import_plugin("pytester")


def _module_path(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    return Path(spec.origin) if spec.origin else None


def _hypothesis_profile(config) -> None:
    """The "ci" profile (derandomized, no deadline) when the environment variable CI is set. A collect-only run
    writes no file: hypothesis, which caches what it reads of a test module under `.hypothesis/` in the current
    directory while collecting it, keeps its files in a temporary folder removed at the end."""
    try:
        from hypothesis import settings
        from hypothesis.configuration import set_hypothesis_home_dir
    except ImportError:
        return
    settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
    if os.environ.get("CI"):
        settings.load_profile("ci")
    if config.option.collectonly:
        import shutil
        import tempfile

        home = tempfile.mkdtemp(prefix="conformance-collect-")
        set_hypothesis_home_dir(home)
        config.add_cleanup(lambda: shutil.rmtree(home, ignore_errors=True))
