"""The `legacy_cache` column: the legacy tuple cache contract of the installed transformers."""

import pytest

from conformance.plugin import run_cell


@pytest.mark.conformance_check("legacy_cache")
def test_legacy_cache(model_case, request):
    run_cell("legacy_cache", model_case, request)
