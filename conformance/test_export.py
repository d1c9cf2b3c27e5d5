"""The export columns: torch.export of the prefill forward and of the static-cache wrapper."""

import pytest

from conformance.plugin import run_cell


@pytest.mark.conformance_check("export_forward")
def test_export_forward(model_case, request):
    run_cell("export_forward", model_case, request)


@pytest.mark.conformance_check("export_forward_strict")
def test_export_forward_strict(model_case, request):
    run_cell("export_forward_strict", model_case, request)


@pytest.mark.conformance_check("export_static_cache")
def test_export_static_cache(model_case, request):
    run_cell("export_static_cache", model_case, request)
