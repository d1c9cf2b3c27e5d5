"""The generation-from-export columns: exported parts generate like eager; ExecuTorch runs them."""

import pytest

from conformance.plugin import run_cell


@pytest.mark.conformance_check("export_generate")
def test_export_generate(model_case, request):
    run_cell("export_generate", model_case, request)


@pytest.mark.conformance_check("executorch")
def test_executorch(model_case, request):
    run_cell("executorch", model_case, request)
