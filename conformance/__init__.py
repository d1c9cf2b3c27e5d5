"""vlm-conformance: compile, static-cache and export conformance of transformers models.

Importing the package makes the run hermetic: no hub access, ever (models are
built from configs with random weights), and one math thread per pytest-xdist
worker so that `-n N` on N cores does not oversubscribe them.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
