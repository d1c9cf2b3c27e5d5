"""Root conftest: `pytest conformance` loads the conformance plugin."""

pytest_plugins = ["conformance.plugin"]
