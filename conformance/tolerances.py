"""How close two logits must be: the tolerances of design.md, one table.

Contract: `tolerance(dtype_name, backend)` is the largest max-abs difference
of logits a check accepts, for a dtype name (``float32``, ``bfloat16``,
``float16``) and a backend (a dynamo backend, or ``export`` for exported
programs run anywhere): float32 1e-5 for the eager and aot_eager backends,
1e-4 for inductor and exported programs; any backend 1e-2 in bfloat16 and
float16. Torch-free, so a reader of a run file can apply it too.
"""

from __future__ import annotations

FLOAT32 = {
    "eager": 1e-5,
    "aot_eager": 1e-5,
    "inductor": 1e-4,
    "export": 1e-4,
}
FLOAT32_OTHER = 1e-4  # any other backend
LOW_PRECISION = 1e-2
LOW_PRECISION_DTYPES = ("bfloat16", "float16")


def tolerance(dtype_name: str, backend: str) -> float:
    if dtype_name.removeprefix("torch.") in LOW_PRECISION_DTYPES:
        return LOW_PRECISION
    return FLOAT32.get(backend, FLOAT32_OTHER)
