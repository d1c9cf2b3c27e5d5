"""The `build` column: every discovered class gets a tiny model and real inputs."""

import pytest

from conformance.plugin import run_cell


@pytest.mark.conformance_check("build")
def test_build(model_case, request):
    run_cell("build", model_case, request)
