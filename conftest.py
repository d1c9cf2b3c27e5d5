"""Root conftest: `pytest conformance` in a checkout loads the suite's plugin.

An installed package loads it through its `pytest11` entry point (named
after the module, so that this line is then a no-op); this line keeps a
checkout that is only on sys.path working too.
"""

pytest_plugins = ["conformance.run.plugin"]
