"""Stage 6, run: the pytest plugin (entry point `pytest11`, also named by the root conftest.py).

Contract:

* The plugin is active when the run targets the suite: a path argument (or
  ``--pyargs`` module) inside or above the `conformance` package, or a
  conftest that supplies a case source (`pytest_conformance_case_source`).
  In any other pytest run of the same environment it only adds its options.
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
  ends itself), a cell whose worker process died is `error` "worker
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

from conformance.run import options
from conformance.run.hooks import CaseSourceHooks

pytest_plugins = ["pytester"]  # the harness's own tests (conformance/meta) use it

MAX_WORKER_RESTARTS = 100


def pytest_addhooks(pluginmanager):
    pluginmanager.add_hookspecs(CaseSourceHooks)


def pytest_addoption(parser):
    options.add_options(parser)


def pytest_configure(config):
    config.addinivalue_line("markers", "conformance_check(id): the check a test runs")
    config.addinivalue_line("markers", "meta: fast tests of the harness itself")
    if not targets_the_suite(config):
        return
    from conformance.run import cells, guard, lifecycle, scheduling
    from conformance.run.session import SESSION_KEY, Session

    _hypothesis_profile()
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


def targets_the_suite(config) -> bool:
    """Whether this pytest run runs the suite (see the module's contract)."""
    if config.pluginmanager.hook.pytest_conformance_case_source.get_hookimpls():
        return True
    package = Path(__file__).resolve().parents[1]
    base = Path(config.invocation_params.dir)
    for arg in config.args:
        target = arg.split("::")[0]
        if config.option.pyargs:
            found = _module_path(target)
            if found is not None:
                target = str(found)
        path = (base / target).resolve()
        if path == package or package in path.parents or path in package.parents:
            return True
    return False


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


def _hypothesis_profile() -> None:
    """The "ci" profile (derandomized, no deadline) when the environment variable CI is set."""
    try:
        from hypothesis import settings
    except ImportError:
        return
    settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
    if os.environ.get("CI"):
        settings.load_profile("ci")
