"""A command's options read as the pytest plugin reads its own, so that `conformance plan`, `conformance jobs gate`
and a job list's classes are selected (`run.options.resolve_selection`) exactly as a run selects them.

Contract: `PytestOptions(values).getoption(name)` is ``values.<name>`` (parsed arguments, or a namespace of the
options a caller sets).
"""

from __future__ import annotations

from typing import Any


class PytestOptions:
    """Named option values behind pytest's `config.getoption(name)`."""

    def __init__(self, values: Any):
        self.values = values

    def getoption(self, name: str):
        return getattr(self.values, name)
