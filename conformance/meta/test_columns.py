"""`conformance.columns`: the backend columns' ids, numbers, declaration and the backend that decides a flag.

The registry is held to the module's two promises: a check's declaration
(``@check(..., backend_columns=True)``) is what a run file's ``check_info``
says of it, and no check takes the number of another's backend columns.
"""

from __future__ import annotations

import json

import pytest

from conformance import columns, locations
from conformance.checks.common.registry import describe, load_all

pytestmark = pytest.mark.meta

DECLARED = ("compile_prefill", "compile_dynamic", "compile_decode")  # the checks with backend columns


def test_a_column_id_is_built_and_split_back():
    assert columns.column_id("compile_prefill", "inductor") == "compile_prefill@inductor"
    assert columns.split("compile_prefill@inductor") == ("compile_prefill", "inductor")
    assert columns.split("compile_prefill") == ("compile_prefill", "")
    assert columns.suffix("inductor") == "@inductor"


def test_the_declared_checks_are_the_ones_with_backend_columns():
    assert tuple(c.id for c in load_all().values() if c.backend_columns) == DECLARED


def test_a_run_file_records_each_checks_declaration():
    for spec in load_all().values():
        assert columns.has_backend_columns(describe([spec.id])[spec.id]) == spec.backend_columns, spec.id


def test_no_check_takes_the_number_of_a_backend_column():
    registered = {c.id: c.column for c in load_all().values()}
    assert columns.collisions(registered, [c.id for c in load_all().values() if c.backend_columns]) == []
    assert columns.collisions({"a": 20, "b": 21, "c": 30}, ["a"]) == ["b (column 21) takes the number of a's backend "
                                                                       "columns"]
    assert columns.number(20) == 21


def test_the_published_backend_columns_are_of_declared_checks():
    published = json.loads(locations.PUBLISHED_MATRIX.read_text())
    backend_columns = [c for c in published["checks"] if columns.split(c)[1]]
    assert backend_columns, "the published matrix has no backend column"
    for column in backend_columns:
        check, backend = columns.split(column)
        assert check in DECLARED and columns.backend_of(published, column) == backend


def envelope(cells_backend: dict[str, str]) -> dict:
    return {"environment": {"backend": "eager"},
            "check_info": {c: {"backend": b} for c, b in cells_backend.items() if b}}


def test_the_preferred_backend_decides_a_backend_flag_where_it_applies():
    run = envelope({"compile_prefill": "", "compile_prefill@inductor": columns.PREFERRED_BACKEND})
    flag = columns.BACKEND_FLAGS[0]
    eager, inductor = {"verdict": "pass"}, {"verdict": "fail"}
    both = {"compile_prefill": eager, "compile_prefill@inductor": inductor}
    assert columns.backend_of(run, "compile_prefill") == "eager"
    assert columns.deciding_cells(run, flag, both) == {"compile_prefill@inductor": inductor}
    skipped = {**both, "compile_prefill@inductor": {"verdict": "skip"}}
    assert columns.deciding_cells(run, flag, skipped) == {"compile_prefill": eager}
    assert columns.deciding_cells(run, "_supports_static_cache", both) == both
