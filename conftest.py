"""Root conftest: `pytest conformance` loads the conformance plugin (and pytester for the meta tests).

Hypothesis: the "ci" profile (derandomized, no deadline) is loaded when the
environment variable CI is set, so a CI run draws the same examples every time.
"""

import os

from hypothesis import settings

pytest_plugins = ["conformance.plugin", "pytester"]

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
