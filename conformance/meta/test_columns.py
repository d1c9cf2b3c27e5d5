"""`conformance.columns`: the backend columns' ids, numbers, declaration and the backend that decides a flag; the
dtype columns (``static_cache~bf16``): ids, merged order, the expectations that judge them, their half-only marker.

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


# --- dtype columns (issue 52) -----------------------------------------------------------------


def test_a_dtype_column_id_is_built_and_split_back():
    assert columns.dtype_column("static_cache", "bfloat16") == "static_cache~bf16"
    assert columns.dtype_column("compile_prefill@inductor", "float16") == "compile_prefill@inductor~fp16"
    assert columns.split_dtype("compile_prefill@inductor~fp16") == ("compile_prefill@inductor", "float16")
    assert columns.split_dtype("static_cache") == ("static_cache", "")
    assert columns.split("compile_prefill@inductor~bf16") == ("compile_prefill", "inductor")
    assert columns.split("static_cache~bf16") == ("static_cache", "")
    assert columns.dtype_number(20, "bfloat16") < columns.dtype_number(10, "float16")


FP = {"kind": "exception", "error": "ValueError", "where": "m:f"}
OTHER_FP = {"kind": "exception", "error": "RuntimeError", "where": "m:g"}


def dtype_run(dtype: str, backend: str, cells: dict[str, dict]) -> dict:
    from conformance.meta.test_report import ENV
    from conformance.report.envelope import build_envelope

    records = [{"model": "A", "check": c, "reason": f"{c} in {dtype}", "seconds": 0.1, "metrics": {}, "nodeid": "",
                **cell} for c, cell in cells.items()]
    env = {**ENV, "dtype": dtype, "backend": backend, "command": f"pytest --dtype {dtype} --backend {backend}"}
    return build_envelope(records, env, list(cells), {"A": {"model_type": "a"}}, describe(list(cells)))


def half_precision_matrix(tmp_path) -> dict:
    """float32 (eager and inductor) and bfloat16 (eager and inductor) runs merged as one matrix, judged against an
    expectations file that lists static_cache's failure for float32 and bfloat16 alike."""
    from conformance.gate.judging import judge_envelope
    from conformance.report.envelope import merge_envelopes

    failing = {"verdict": "fail", "fingerprint": FP}
    runs = [dtype_run("float32", "eager", {"build": {"verdict": "pass"}, "static_cache": failing,
                                           "compile_prefill": {"verdict": "pass"}}),
            dtype_run("float32", "inductor", {"compile_prefill": {"verdict": "pass"}}),
            dtype_run("bfloat16", "eager", {"build": {"verdict": "fail", "fingerprint": OTHER_FP},
                                            "static_cache": failing, "compile_prefill": {"verdict": "pass"}}),
            dtype_run("bfloat16", "inductor", {"compile_prefill": {"verdict": "fail", "fingerprint": OTHER_FP}})]
    merged = merge_envelopes(runs, ["f32.json", "f32-inductor.json", "bf16.json", "bf16-inductor.json"])
    listed = tmp_path / "5.24.toml"
    listed.write_text('[[cell]]\nmodel = "A"\ncheck = "static_cache"\nverdict = "fail"\nreason = "known"\n'
                      'conditions = { dtype = ["bfloat16", "float32"] }\n[cell.fingerprint]\nkind = "exception"\n'
                      'error = "ValueError"\nwhere = "m:f"\n')
    return judge_envelope(merged, listed)[0]


def test_a_run_in_another_dtype_merges_as_its_own_columns_after_the_main_runs(tmp_path):
    matrix = half_precision_matrix(tmp_path)
    assert matrix["checks"] == ["build", "compile_prefill", "compile_prefill@inductor", "static_cache", "build~bf16",
                                "compile_prefill~bf16", "compile_prefill@inductor~bf16", "static_cache~bf16"]
    assert matrix["environment"]["dtype"] == "float32" and set(matrix["environment"]["dtypes"]) == {"bfloat16"}
    assert columns.dtype_of(matrix, "compile_prefill@inductor~bf16") == "bfloat16"
    assert columns.backend_of(matrix, "compile_prefill@inductor~bf16") == "inductor"
    assert columns.dtype_of(matrix, "compile_prefill@inductor") == "float32"
    verdicts = {c: cell["verdict"] for c, cell in matrix["models"]["A"]["cells"].items()}
    assert verdicts["static_cache"] == verdicts["static_cache~bf16"] == "xfail"  # one entry, both dtypes
    assert verdicts["build~bf16"] == verdicts["compile_prefill@inductor~bf16"] == "fail"
    assert matrix["environment"]["dtypes"]["bfloat16"]["expectations"][0]["conditions"]["dtype"] == "bfloat16"


def test_a_failure_of_half_precision_only_is_named_so_in_the_markdown(tmp_path):
    from conformance.report import render

    matrix = half_precision_matrix(tmp_path)
    assert render.dtype_only(matrix, "A", "build~bf16") == "bfloat16 only: passes in float32"
    assert render.dtype_only(matrix, "A", "compile_prefill@inductor~bf16") == "bfloat16 only: passes in float32"
    assert render.dtype_only(matrix, "A", "static_cache~bf16") == ""  # the same failure in float32
    assert render.dtype_only(matrix, "A", "static_cache") == ""
    text = render.render_markdown(matrix)
    assert "`build~bf16`" in text and "(columns `~bf16`: dtype bfloat16)" in text
    line = next(line for line in text.splitlines() if "A / `build~bf16`" in line)
    assert line.endswith("(bfloat16 only: passes in float32)")
    assert not any("static_cache~bf16" in line and "only" in line for line in text.splitlines())


def test_an_update_from_a_matrix_merged_with_another_dtype_is_refused(tmp_path):
    from conformance.gate.expectations import ExpectationsError
    from conformance.gate.update import update_expectations

    from conformance.report.envelope import merge_envelopes

    runs = [dtype_run(dtype, "eager", {"build": {"verdict": "pass"}}) for dtype in ("float32", "float16")]
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(merge_envelopes(runs, ["f32.json", "fp16.json"])))
    with pytest.raises(ExpectationsError, match="update from each dtype's own run file"):
        update_expectations(path, tmp_path / "5.24.toml")
