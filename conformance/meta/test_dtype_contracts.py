"""Dtype-true contracts: every comparison is judged at its run's dtype, through the one tolerance table.

A model right in every dtype passes in float32, bfloat16 and float16, the
cache contents comparison included, on the check and on the property test's
path (the regression of issue 52: Llava's and PaliGemma's layer 1 keys,
rounded differently by a static cache in bfloat16, were judged at float32's
1e-6). A model right in float32 and wrong only in half precision passes in
float32 and fails in half precision, saying why. And the code holds no
tolerance of its own anywhere but `conformance/tolerances.py`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import transformers

from conformance import tolerances
from conformance.checks.common.outcome import run_check
from conformance.checks.common.registry import load_all
from conformance.meta import planted, planted_dtype
from conformance.meta.planted_dtype import half_case
from conformance.tolerances import tolerance

load_all()

pytestmark = pytest.mark.skipif(
    int(transformers.__version__.split(".")[0]) < 5,
    reason=f"transformers {transformers.__version__}: the planted models need transformers 5's StaticCache and "
           "generate API (planted.py)")

DTYPES = (torch.float32, torch.bfloat16, torch.float16)
HALF = (torch.bfloat16, torch.float16)
RIGHT = {"TinyLM": planted.TinyLM, "two_layer_llama": planted_dtype.two_layer_llama}
SUITE = Path(__file__).resolve().parents[1]


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# --- right in every dtype ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
@pytest.mark.parametrize("model", RIGHT)
def test_a_right_model_passes_build_and_static_cache_in_every_dtype(model, dtype):
    case = half_case(RIGHT[model], dtype)
    build = run_check("build", case)
    assert build.verdict == "pass", build.reason
    assert ("fp32_max_diff" in build.metrics) == (dtype in HALF)  # the diagnostic, in half precision only
    static = run_check("static_cache", case)
    assert static.verdict == "pass", static.reason
    contents = tolerance(_name(dtype), "cache_contents")
    assert static.metrics["cache_compared"] > 0
    assert (static.metrics["cache_atol"], static.metrics["cache_rtol"]) == (contents.atol, contents.rtol)
    scores = tolerance(_name(dtype), "eager")
    assert (static.metrics["atol"], static.metrics["rtol"]) == (scores.atol, scores.rtol)


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_the_property_path_judges_the_cache_contents_at_the_run_dtype(dtype):
    """Issue 52's regression: sdpa rounds a static cache's layer 1 keys differently in half precision (0.00049
    in bfloat16); `test_static_cache_property` judged them at float32's 1e-6 and failed the right model."""
    from conformance.test_static_cache_property import compare_on

    case = half_case(planted_dtype.two_layer_llama, dtype)
    metrics = compare_on(case, case.generate_inputs(), 10)
    assert metrics["cache_compared"] > 0
    contents = tolerance(_name(dtype), "cache_contents")
    assert (metrics["cache_atol"], metrics["cache_rtol"]) == (contents.atol, contents.rtol)
    if dtype in HALF:
        assert metrics["cache_max_abs_diff"] > tolerances.CACHE[0]  # rounding float32's bound would have failed


# --- right in float32, wrong in half precision ------------------------------------------------------


def test_a_static_cache_that_computes_its_angles_in_the_dtype_fails_in_half_precision_only():
    float32 = run_check("static_cache", half_case(planted_dtype.StaticRopeInDtypeLM, torch.float32))
    assert float32.verdict == "pass", float32.reason
    for dtype in HALF:
        outcome = run_check("static_cache", half_case(planted_dtype.StaticRopeInDtypeLM, dtype))
        assert outcome.verdict == "fail", (dtype, outcome.reason)
        assert "static cache scores differ from the dynamic cache's at new token 0" in outcome.reason
        assert "float64 witness" in outcome.reason  # rounding: near 0 in float64, as the reason then shows


def test_a_float32_minimum_made_inside_the_forward_fails_build_in_half_precision_only():
    float32 = run_check("build", half_case(planted_dtype.Float32MinimumLM, torch.float32))
    assert float32.verdict == "pass", float32.reason
    for dtype in HALF:
        outcome = run_check("build", half_case(planted_dtype.Float32MinimumLM, dtype))
        assert outcome.verdict == "fail", (dtype, outcome.reason)
        assert "eager prefill logits are not finite" in outcome.reason


# --- the table ----------------------------------------------------------------------------------------


def test_every_kind_has_a_row_per_dtype_and_float32_keeps_its_values():
    assert tolerance("float32", "cache_contents") == tolerances.Tolerance(1e-6, 3e-5)
    assert tolerance("float32", "batch_repeat") == tolerances.Tolerance(1e-4, 0.0)
    for kind in tolerances.KINDS:
        for dtype in ("bfloat16", "float16"):
            assert tolerance(dtype, kind) == tolerance(dtype, "eager"), (kind, dtype)
    assert tolerance("torch.bfloat16", "cache_contents") == tolerances.Tolerance(1e-2, 1.6e-2)
    assert tolerance("float64", "cache_contents") == tolerance("float32", "cache_contents")


def test_a_reproducer_pastes_the_tolerance_of_its_run_dtype():
    from conformance.report.repro_templates.common import tolerance_constants

    for dtype in ("float32", "bfloat16", "float16"):
        constants = tolerance_constants(SimpleNamespace(dtype=dtype), "export")
        row = tolerance(dtype, "export")
        assert constants == {"ATOL": repr(row.atol), "RTOL": repr(row.rtol)}


# --- the code holds no tolerance of its own ---------------------------------------------------------

# Small numbers outside the table that are no tolerance: (module, value) -> why.
NOT_TOLERANCES = {
    ("cases/tiny.py", 0.02): "the standard deviation that wakes all-zero weights",
    ("tools/bench.py", 1e-9): "a division guard of a rate (seconds)",
}
COMPARING = {"closeness", "judge_close", "assert_close", "compare_contents", "compare_logits", "compare_static_dynamic",
             "close", "allclose", "isclose", "assert_allclose"}
TOLERANCE_LITERAL = re.compile(r"\b\d(\.\d+)?e-\d+\b")


def _modules():
    for path in sorted(SUITE.rglob("*.py")):
        relative = path.relative_to(SUITE).as_posix()
        if relative.startswith("meta/") or relative == "tolerances.py":
            continue
        yield relative, ast.parse(path.read_text(), filename=relative)


def _callee(node: ast.Call) -> str:
    return node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")


def test_no_module_but_the_table_holds_a_tolerance_or_asks_for_a_dtype_of_its_own():
    found = []
    for relative, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, float) and 0 < abs(node.value) < 0.05:
                if (relative, node.value) not in NOT_TOLERANCES:
                    found.append(f"{relative}:{node.lineno}: the constant {node.value!r}")
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and TOLERANCE_LITERAL.search(node.value):
                if relative.startswith("report/repro"):  # a pasted comparison's source
                    found.append(f"{relative}:{node.lineno}: a tolerance written into pasted source")
            if not isinstance(node, ast.Call):
                continue
            name = _callee(node)
            if name == "Tolerance":
                found.append(f"{relative}:{node.lineno}: a Tolerance made outside the table")
            if name == "tolerance" and node.args and isinstance(node.args[0], ast.Constant):
                found.append(f"{relative}:{node.lineno}: tolerance() asked for the dtype {node.args[0].value!r}, "
                             "not its run's")
            if name in COMPARING and any(isinstance(a, ast.Constant) and isinstance(a.value, float)
                                         for a in [*node.args, *(k.value for k in node.keywords)]):
                found.append(f"{relative}:{node.lineno}: {name}() with a number for its tolerance")
    assert not found, "take these from conformance/tolerances.py for the run's dtype:\n" + "\n".join(found)


def test_every_comparing_function_takes_its_tolerance_without_a_default():
    """A default would be one dtype's tolerance (float32's, as `compare_static_dynamic`'s contents once was)."""
    found = []
    for relative, tree in _modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef) or node.name not in COMPARING:
                continue
            positional = [p.arg for p in (*node.args.posonlyargs, *node.args.args)]
            defaulted = set(positional[len(positional) - len(node.args.defaults):])
            defaulted |= {p.arg for p, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d is not None}
            for param in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
                if re.search(r"tol|contents", param.arg) and param.arg in defaulted:
                    found.append(f"{relative}:{node.lineno}: {node.name}({param.arg}=...)")
    assert not found, "a comparison's tolerance has no default:\n" + "\n".join(found)
