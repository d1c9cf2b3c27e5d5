"""How close two logits must be: the tolerances of design.md, one table.

Contract: `tolerance(dtype_name, backend)` is the largest max-abs difference
of logits a check accepts, for a dtype name (``float32``, ``bfloat16``,
``float16``) and a backend (a dynamo backend, or ``export`` for exported
programs run anywhere): float32 1e-5 for the eager and aot_eager backends,
1e-4 for inductor and exported programs; any backend 1e-2 in bfloat16 and
float16. Torch-free, so a reader of a run file can apply it too.
`COMPARISON_METRICS` are the metric names a check records for a comparison
it asserts within that tolerance (a check registers its own list when it
differs: `conformance.checks.common.registry`).
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
# Worst difference against the reference, against a forward without cache, between two calls of one program.
COMPARISON_METRICS = ("max_abs_diff", "max_abs_diff_no_cache", "repeat_diff")


def tolerance(dtype_name: str, backend: str) -> float:
    if dtype_name.removeprefix("torch.") in LOW_PRECISION_DTYPES:
        return LOW_PRECISION
    return FLOAT32.get(backend, FLOAT32_OTHER)
