"""The matrix's tests: one test function per registered check, parametrized over the selected classes.

Contracts:

* `matrix_tests()` is ``{"test_<check id>": test}`` for every registered
  check (`conformance.checks.common.registry`), in column order; each test
  carries the mark ``conformance_check(<id>)`` and takes the `model_case`
  fixture. `conformance/test_matrix.py` is nothing but these tests, so a
  registered check has its tests without writing any.
* Every test that takes `model_name` is parametrized over the run's
  selected classes (ids = class names), grouped per class
  (``xdist_group``), so that one worker builds each tiny model once. A
  test marked ``conformance_models(*names)`` that takes `property_model`
  (a test of some classes, no cell of the matrix) is parametrized over
  those of `names` the run selects (none: it is deselected, `is_unselected`).
* A cell's life is `cell_life.live`, in two halves: `model_case` is the
  built case of the class (pytest's setup); a build failure is the cell's
  `error` (a build past the time limit its `timeout`); a row the cases stage
  decided (`RowVerdict`: the model's own code fails, or the class is not a
  standalone model) is the cell's `fail` or `skip` with the reason; a class
  that needs a package not installed here has no cell (not run: the
  envelope's row says why).
* `run_cell(check_id, case, request)` runs the check, applies the
  expectations and ends the test with the gated verdict (`finish`: the
  record kept in the process's part file, the pytest outcome).
* `check_of(item)`, `cell_of(item)`, `model_of(item)`: the one reader of
  an item's check id and class.
"""

from __future__ import annotations

import pytest

from conformance.cases.case import Case
from conformance.checks.common.registry import load_all
from conformance.run import isolation, rerun
from conformance.run.session import session_of

CELL_KEY = pytest.StashKey[dict]()  # the cell's record; {} for a cell that is not run (no record, by design)
DEADLINE_KEY = pytest.StashKey[object]()


# --------------------------------------------------------------------------- the tests


def _cell_test(check_id: str):
    def test(model_case, request):
        run_cell(check_id, model_case, request)

    test.__name__ = test.__qualname__ = f"test_{check_id}"
    test.__doc__ = f"The `{check_id}` column: one cell per selected class."
    return pytest.mark.conformance_check(check_id)(test)


def matrix_tests() -> dict:
    """`test_<id>` for every registered check, in column order."""
    return {f"test_{check_id}": _cell_test(check_id) for check_id in load_all()}


def pytest_generate_tests(metafunc):
    only = metafunc.definition.get_closest_marker("conformance_models")
    if only is not None and "property_model" in metafunc.fixturenames:
        # A test of some classes only, no cell of the matrix: those of them the run selects (none: deselected).
        selected = session_of(metafunc.config).selected_models()
        metafunc.parametrize("property_model", [n for n in only.args if n in selected])
    if "model_name" not in metafunc.fixturenames:
        return
    names = session_of(metafunc.config).selected_models()
    metafunc.parametrize(
        "model_name",
        [pytest.param(n, id=n, marks=pytest.mark.xdist_group(n)) for n in names],
    )


# --------------------------------------------------------------------------- which cell an item is


def check_of(item) -> str | None:
    marker = item.get_closest_marker("conformance_check")
    return marker.args[0] if marker else None


def model_of(item) -> str:
    """The class an item is parametrized over ('' for other tests, and for the placeholder item pytest makes of a
    test whose selection is empty: it is no cell)."""
    callspec = getattr(item, "callspec", None)
    value = callspec.params.get("model_name", "") if callspec else ""
    return value if isinstance(value, str) else ""


def is_unselected(item) -> bool:
    """Whether `item` is the placeholder of a ``conformance_models`` test whose classes the run does not select."""
    callspec = getattr(item, "callspec", None)
    value = callspec.params.get("property_model") if callspec else None
    return item.get_closest_marker("conformance_models") is not None and not isinstance(value, str)


def cell_of(item) -> tuple[str, str] | None:
    """(model, check) of a parametrized cell, None for other tests."""
    check_id, model = check_of(item), model_of(item)
    return (model, check_id) if check_id and model else None


# --------------------------------------------------------------------------- running a cell


def deadline_of(node):
    return node.stash.get(DEADLINE_KEY, None) or isolation.NoDeadline()


@pytest.fixture
def model_case(request, model_name) -> Case:
    """The built case of the parametrized class (the first half of the cell's life, `cell_life.live`); a case
    that could not be had ends the cell here: its `error`, `timeout`, or the row's `fail` or `skip`."""
    session = session_of(request.config)
    cell = session.live(request.node.nodeid, model_name, check_of(request.node),
                        deadline=deadline_of(request.node), stop_when_built=True)
    if cell.not_run:  # not run here: no cell, the row says why
        session.record_not_run(model_name, cell.not_run)
        request.node.stash[CELL_KEY] = {}
        pytest.skip(f"not run: {cell.not_run}")
    if cell.outcome is None:
        return cell.case
    finish(request.node, cell, session)


def run_cell(check_id: str, case: Case, request) -> None:
    """Run `check_id` on `case` (the rest of the cell's life, `cell_life.live`) and end the test with the gated
    verdict."""
    session = session_of(request.config)
    cell = session.live(request.node.nodeid, case.info.name, check_id, case=case, deadline=deadline_of(request.node))
    finish(request.node, cell, session)


def finish(node, cell, session) -> None:
    """Keep the record of a cell `cell_life` ended and end the test accordingly."""
    record = node.stash[CELL_KEY] = session.keep(cell)
    model, check_id, outcome, expectation = cell.model, cell.check, cell.outcome, cell.expectation
    verdict, note = record["verdict"], record.get("gate", "")
    if verdict == "pass":
        return
    if rerun.pending(record):
        pytest.skip(f"{rerun.PENDING}: {outcome.reason}")
    if verdict == "skip":
        pytest.skip(outcome.reason)
    if verdict == "xfail":
        pytest.xfail(f"{expectation.reason} | observed: {outcome.reason}")
    if verdict == "xpass":
        pytest.fail(f"XPASS {model} / {check_id}: listed as {expectation.verdict} ({expectation.reason}): {note} "
                    f"(in {', '.join(s['file'] for s in session.expectations_applied())})", pytrace=False)
    prefix = f"{note} | observed: " if note else ""
    pytest.fail(f"{verdict.upper()} {model} / {check_id}: {prefix}{outcome.reason}", pytrace=False)
