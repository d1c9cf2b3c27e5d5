"""The findings name the failures that only half precision has (issue 52): a dtype column's failing cell whose
check passes in the run's own dtype, with its site and reason; a failure in both dtypes is only counted."""

from __future__ import annotations

import pytest

from conformance.report import precision_diff

pytestmark = pytest.mark.meta


def _cell(observed: str, reason: str = "", fingerprint: dict | None = None) -> dict:
    return {"verdict": observed, "observed": observed, "reason": reason, **({"fingerprint": fingerprint}
                                                                            if fingerprint else {})}


def _envelope() -> dict:
    upcast = {"kind": "exception", "where": "transformers.models.a.modeling_a:A.forward", "error": "RuntimeError"}
    return {"environment": {"dtype": "float32"}, "models": {
        "AForConditionalGeneration": {"cells": {
            "static_cache": _cell("pass"),
            "static_cache~bf16": _cell("fail", "RuntimeError: expected scalar type Float but found BFloat16 (at "
                                       "modeling_a.py:811)", upcast),
            "build": _cell("fail", "no", {"kind": "exception", "where": "m:f"}),
            "build~bf16": _cell("fail", "no", {"kind": "exception", "where": "m:f"}),
            "export_forward": _cell("pass"), "export_forward~bf16": _cell("pass"),
            "legacy_cache~fp16": _cell("fail", "differ", {"kind": "numerical_mismatch", "what": "logits differ"}),
            "legacy_cache": _cell("pass"),
            "compile_decode": _cell("fail", "logits differ by 0.0097 > 1e-05"), "compile_decode~bf16": _cell("pass")}}}}


def test_a_cell_failing_only_in_half_precision_is_named_with_its_site_and_one_failing_in_both_is_counted():
    found = precision_diff.half_only([_envelope()])
    assert [(f.column, f.dtype, f.kind, f.site) for f in found] == [
        ("legacy_cache", "float16", "numerical_mismatch", ""),
        ("static_cache", "bfloat16", "exception", "transformers.models.a.modeling_a:A.forward")]
    text = "\n".join(precision_diff.render([_envelope()]))
    assert "bfloat16: 1 cell(s) fail in bfloat16 and pass in the run's own dtype; 1 fail in both" in text
    assert "/ legacy_cache: numerical_mismatch (passes in float32): differ" in text
    assert "1 cell(s) pass in bfloat16 and fail in float32" in text and "0.0097 > 1e-05" in text
    assert "modeling_a.py:811" in text and text.index("bfloat16:") < text.index("\nfloat16: 1")


def test_a_run_without_dtype_columns_has_no_section():
    plain = {"environment": {"dtype": "float32"}, "models": {"A": {"cells": {"build": _cell("fail")}}}}
    assert precision_diff.render([plain]) == []
