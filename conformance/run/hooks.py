"""The hooks this plugin adds to pytest."""

from __future__ import annotations

import pytest


class CaseSourceHooks:
    """Hook specifications the plugin adds to pytest."""

    @pytest.hookspec(firstresult=True)
    def pytest_conformance_case_source(self, config):
        """Return the case source of this run (see conformance.cases.case), or None for the default."""
