"""Root conftest: `pytest conformance` in a checkout loads the suite's plugin.

An installed package loads it through its `pytest11` entry point (named
after the module, so that this line is then a no-op); this line keeps a
checkout that is only on sys.path working too. A run in a checkout is the
suite's: its short option names (`--device`, ...) are declared here, for a
checkout whose plugin loads only now (too late for the plugin's own
`pytest_load_initial_conftests`); once declared, the plugin adds none twice.
"""

from conformance.run import options

pytest_plugins = ["conformance.run.plugin"]


def pytest_addoption(parser):
    options.add_short_names(parser)
