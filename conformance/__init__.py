"""vlm-conformance: compile, static-cache and export conformance of transformers models.

Importing the package changes nothing in a process that is not the suite's:
the `pytest11` entry point imports it in every pytest run of the
environment, and such a run keeps its environment. The suite's own
processes get `hermetic()`: the pytest plugin once it is active for the
run, the `conformance` command (its script's name) on import. No hub
access, ever (models are built from configs with random weights), and one
math thread per pytest-xdist worker so that `-n N` on N cores does not
oversubscribe them. A variable already set keeps its value.
"""

import os
import re
import sys

DEFAULTS = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
WORKER_DEFAULTS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # in a pytest-xdist worker only


def hermetic() -> None:
    """Set the suite's environment defaults (see the module); call it before torch or transformers is imported."""
    for name, value in DEFAULTS.items():
        os.environ.setdefault(name, value)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        for name, value in WORKER_DEFAULTS.items():
            os.environ.setdefault(name, value)


def _is_the_command() -> bool:
    """Whether this process is the `conformance` command (the console script; `conformance.exe` on Windows)."""
    script = os.path.basename(sys.argv[0]) if sys.argv else ""
    return re.sub(r"(-script\.pyw?|\.exe)$", "", script) == "conformance"


if _is_the_command():
    hermetic()
