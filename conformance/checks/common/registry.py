"""The registry of checks: the matrix's columns are the checks that registered here.

A check is one module directly in `conformance/checks/` (shared code lives
in `conformance/checks/common/`). It registers its function once::

    @check("compile_prefill", column=20, observes=("_can_compile_fullgraph",))
    def check_compile_prefill(case) -> dict: ...

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
  None: the run's backend), so that a reader of a run file can prove that no
  passing cell records a comparison beyond its tolerance
  (`conformance.report.truth`). Registering another
  function under an id already taken by a different module raises ValueError.
* `load_all()` imports every check module once and returns the registered
  checks in column order; `check_ids()` is their ids in that order (what the
  run, its tests, shards, render and explain use); `get(id)` one check
  (KeyError naming the known ids); `describe(ids)` what the run file says
  of each check (column, observes, lists, compares, tolerance), so that reports need no registry.

Registering is all a new check needs: the run generates its test
(`conformance.run.cells`), the envelope and the matrix get its column.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable

from conformance import tolerances

CHECKS: dict[str, "Check"] = {}
CHECKS_PACKAGE = "conformance.checks"
_loaded = False


@dataclass(frozen=True)
class Check:
    id: str
    run: Callable[..., dict]
    column: int
    observes: tuple[str, ...] = ()
    lists: tuple[str, str] | None = None  # (metric, what its value says)
    compares: tuple[str, ...] = tolerances.COMPARISON_METRICS  # metrics asserted within the tolerance
    tolerance: str | None = None  # the backend whose tolerance applies; None: the run's

    @property
    def module(self) -> str:
        return self.run.__module__


def check(check_id: str, *, column: int, observes: tuple[str, ...] = (), lists: tuple[str, str] | None = None,
          compares: tuple[str, ...] | None = None, tolerance: str | None = None):
    """Register a check function under its stable id."""

    def decorate(fn):
        existing = CHECKS.get(check_id)
        if existing is not None and existing.module != fn.__module__:
            raise ValueError(f"check id {check_id!r} is registered twice: {existing.module} and {fn.__module__}")
        CHECKS[check_id] = Check(check_id, fn, column, tuple(observes), tuple(lists) if lists else None,
                                 tolerances.COMPARISON_METRICS if compares is None else tuple(compares), tolerance)
        fn.check_id = check_id
        return fn

    return decorate


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


def describe(ids) -> dict[str, dict]:
    """What a run file records of each check of `ids` (known ones): column, observed flags, listed metric,
    compared metrics and the backend of their tolerance."""
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
        described[check_id] = entry
    return described
