"""The registry of checks: the matrix's columns are the checks that registered here.

A check is one module directly in `conformance/checks/` (shared code lives
in `conformance/checks/common/`). It registers its function once::

    @check("compile_prefill", column=20, observes=("_can_compile_fullgraph",))
    def check_compile_prefill(case) -> dict: ...

A module may register a family of checks declared as a table, one function
per row (`exporter_columns`: ``check(row.id, column=row.number, ...)(fn)``,
the contract in each function's docstring).

Contract:

* `check(id, column, observes)` registers a function under a stable id
  (a JSON key and a matrix column); `column` orders the columns (ascending);
  `observes` names the declared capability flags of a model class
  (`_can_compile_fullgraph`, ...) whose claim this check observes, for the
  report's "declared vs observed"; `lists` = (metric, what it says) names a
  metric whose values the report lists class by class; `compares` names the
  metrics that are a comparison the check asserts within a tolerance (the
  logits or scores of two runs; default `tolerances.COMPARISON_METRICS`:
  `max_abs_diff` and its kin), and
  `tolerance` the backend whose tolerance applies (`conformance.tolerances`;
  None: the backend the cell runs under), so that a reader of a run file can
  prove that no passing cell records a comparison beyond its tolerance
  (`conformance.report.truth`); `requires` names the packages (import names)
  the check needs beyond the suite's own dependencies and `extra` the pip
  extra that installs them (an optional column:
  ``requires=("onnxruntime",), extra="onnx"``); `opt_in` names a group of
  columns too costly for every run (an opt-in column:
  ``opt_in="dynamic"``; the group's name is also its tox env, ``tox -e
  dynamic``). Registering another function under an id already taken by a
  different module raises ValueError.
* `declared_tolerance(case)` is the `Tolerance` the running check judges
  with, the one place a check asks for it: `tolerances.tolerance` at the
  case's dtype for the backend its `check(tolerance=...)` names, else the
  case's backend; `declared_tolerance(case, kind)` that of a comparison
  with its own kind (`tolerances.KINDS`: ``cache_contents``). It answers while a check runs (`Check.run`, what
  `run_check` calls); anywhere else it raises RuntimeError (a helper used
  outside a check takes its tolerance as an argument).
* `Check.missing()` is the required packages not installed here (no import:
  `importlib.util.find_spec` of the top-level name); `unavailable(id)` says
  in one line why a check cannot run here (the missing packages and the
  install command), "" when it can. A check that cannot run is not run at
  all: the run deselects its cells (`conformance.run`), `run_check` raises
  `NotInstalled`, the report says "not run" (never "does not apply").
* `opt_in_reason(id)` says in one line why an opt-in column is not in a run
  that did not name it, and how to run it (``--checks`` with its group's
  ids, the tox env); "" for any other check. An opt-in column runs only
  when ``--checks`` names it: a run without ``--checks`` deselects its cells
  and records it in `not_run` with that reason, exactly as a column whose
  extra is missing (the report says "not run"); `run_check` and `explain`,
  which name the check, run it.
* `load_all()` imports every check module once and returns the registered
  checks in column order; `check_ids()` is their ids in that order (what the
  run, its tests, shards, render and explain use); `get(id)` one check
  (KeyError naming the known ids); `describe(ids)` what the run file says
  of each check (column, observes, lists, compares, tolerance, requires, extra, opt_in), so that reports
  need no registry, and `description`, the one line that says what the check
  checks: the first line of the check function's docstring, else its
  module's first line when that reads ``Check `<id>`: <description>`` (that
  prefix dropped from either; the page shows it on the column; omitted when
  neither has one).

Registering is all a new check needs: the run generates its test
(`conformance.run.cells`), the envelope and the matrix get its column.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import pkgutil
import sys
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable

from conformance import tolerances

CHECKS: dict[str, "Check"] = {}
CHECKS_PACKAGE = "conformance.checks"
_loaded = False
_running: ContextVar[str | None] = ContextVar("running_check", default=None)  # the id of the check running


@dataclass(frozen=True)
class Check:
    id: str
    run: Callable[..., dict]
    column: int
    observes: tuple[str, ...] = ()
    lists: tuple[str, str] | None = None  # (metric, what its value says)
    compares: tuple[str, ...] = tolerances.COMPARISON_METRICS  # metrics asserted within the tolerance
    tolerance: str | None = None  # the backend whose tolerance applies; None: the cell's own
    requires: tuple[str, ...] = ()  # packages (import names) beyond the suite's dependencies
    extra: str = ""  # the pip extra that installs them
    opt_in: str = ""  # the opt-in group (and tox env) of a column that runs only when --checks names it
    backend_columns: bool = False  # a column per other dynamo backend merged in (`conformance.columns`)

    @property
    def module(self) -> str:
        return self.run.__module__

    def missing(self) -> list[str]:
        """The required packages (top-level import names) not installed here, found without importing them."""
        return [name for name in self.requires if importlib.util.find_spec(name) is None]

    @property
    def install_hint(self) -> str:
        return f"pip install 'vlm-conformance[{self.extra}]'" if self.extra else f"pip install {' '.join(self.requires)}"


class NotInstalled(RuntimeError):
    """A check was asked to run without the packages it requires; the message is one line with the fix."""


def check(check_id: str, *, column: int, observes: tuple[str, ...] = (), lists: tuple[str, str] | None = None,
          compares: tuple[str, ...] | None = None, tolerance: str | None = None, requires: tuple[str, ...] = (),
          extra: str = "", opt_in: str = "", backend_columns: bool = False):
    """Register a check function under its stable id."""
    if extra and not requires:
        raise ValueError(f"check {check_id!r}: `extra` names how to install what `requires` lists; give both")

    def decorate(fn):
        existing = CHECKS.get(check_id)
        if existing is not None and existing.module != fn.__module__:
            raise ValueError(f"check id {check_id!r} is registered twice: {existing.module} and {fn.__module__}")
        CHECKS[check_id] = Check(check_id, _running_as(check_id, fn), column, tuple(observes),
                                 tuple(lists) if lists else None,
                                 tolerances.COMPARISON_METRICS if compares is None else tuple(compares), tolerance,
                                 tuple(requires), extra, opt_in, backend_columns)
        fn.check_id = check_id
        return fn

    return decorate


def _running_as(check_id: str, fn: Callable[..., dict]) -> Callable[..., dict]:
    """`fn`, which while it runs is the running check `check_id` (what `declared_tolerance` answers for)."""
    @functools.wraps(fn)
    def run(case) -> dict:
        running = _running.set(check_id)
        try:
            return fn(case)
        finally:
            _running.reset(running)

    return run


def declared_tolerance(case, kind: str = "") -> tolerances.Tolerance:
    """The tolerance the running check judges `case` with: its declared backend's (`check(tolerance=...)`), else
    the case's, at the case's dtype; with `kind`, that kind of comparison's (`tolerances.KINDS`, e.g.
    ``cache_contents``) at the case's dtype. RuntimeError outside a running check."""
    check_id = _running.get()
    if check_id is None:
        raise RuntimeError("declared_tolerance() asked outside a running check: pass the tolerance in instead")
    return tolerances.tolerance(str(case.dtype), kind or CHECKS[check_id].tolerance or case.backend)


def load_all() -> dict[str, Check]:
    """Every check module imported once; the registered checks in column order."""
    global _loaded
    if not _loaded:
        package = importlib.import_module(CHECKS_PACKAGE)
        for module in pkgutil.iter_modules(package.__path__):
            if not module.ispkg and not module.name.startswith("_"):
                importlib.import_module(f"{CHECKS_PACKAGE}.{module.name}")
        _loaded = True
    return dict(sorted(CHECKS.items(), key=lambda item: (item[1].column, item[0])))


def check_ids() -> tuple[str, ...]:
    return tuple(load_all())


def get(check_id: str) -> Check:
    checks = load_all()
    if check_id not in checks:
        raise KeyError(f"unknown check id {check_id!r}; known: {', '.join(checks)}")
    return checks[check_id]


def unavailable(check_id: str) -> str:
    """Why `check_id` cannot run here (missing packages and the install command); "" when it can."""
    spec = get(check_id)
    missing = spec.missing()
    if not missing:
        return ""
    return f"needs {', '.join(missing)}, not installed: {spec.install_hint}"


def opt_in_reason(check_id: str) -> str:
    """Why an opt-in column is not in a run that did not name it, and how to run it; "" for other checks."""
    group = get(check_id).opt_in
    if not group:
        return ""
    ids = ",".join(c.id for c in load_all().values() if c.opt_in == group)
    return f"opt-in column, run only when named: --checks {ids} (tox -e {group})"


def description(spec: Check) -> str:
    """The one line that says what a check checks: its function's docstring's first line (without a leading
    ``Check `<id>`:``), else its module's ``Check `<id>`: ...`` first line without that prefix; "" when neither
    says."""
    prefix = f"Check `{spec.id}`:"
    doc = inspect.getdoc(spec.run)
    if doc:
        first = doc.splitlines()[0].strip()
        return first[len(prefix):].strip() if first.startswith(prefix) else first
    lines = (getattr(sys.modules.get(spec.module), "__doc__", None) or "").strip().splitlines()
    return lines[0][len(prefix):].strip() if lines and lines[0].startswith(prefix) else ""


def describe(ids) -> dict[str, dict]:
    """What a run file records of each check of `ids` (known ones): column, observed flags, listed metric,
    compared metrics and the backend of their tolerance, required packages and their extra, the opt-in group,
    the one-line description (`description`, when there is one)."""
    checks = load_all()
    described = {}
    for check_id in ids:
        spec = checks.get(check_id)
        if spec is None:
            continue
        entry: dict = {"column": spec.column, "observes": list(spec.observes)}
        if spec.lists:
            entry["lists"] = {"metric": spec.lists[0], "what": spec.lists[1]}
        entry["compares"] = list(spec.compares)
        if spec.tolerance:
            entry["tolerance"] = spec.tolerance
        if spec.requires:
            entry["requires"] = list(spec.requires)
            entry["extra"] = spec.extra
        if spec.opt_in:
            entry["opt_in"] = spec.opt_in
        if description(spec):
            entry["description"] = description(spec)
        described[check_id] = entry
    return described
