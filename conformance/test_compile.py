"""The `compile_prefill` and `compile_decode` columns."""

import pytest

from conformance.plugin import run_cell


@pytest.mark.conformance_check("compile_prefill")
def test_compile_prefill(model_case, request):
    run_cell("compile_prefill", model_case, request)


@pytest.mark.conformance_check("compile_decode")
def test_compile_decode(model_case, request):
    run_cell("compile_decode", model_case, request)
