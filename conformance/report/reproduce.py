"""Stage 4, report: the one-line pytest command that runs exactly one cell (the one home of that string).

Contract: `reproducer(model, check_id, device, dtype, backend)` is
``pytest conformance/test_matrix.py::test_<check> --models <Class> --checks <check> [options]``,
an option written only where it differs from the run's default; a column of
another backend (``compile_prefill@inductor``) runs its check under that
backend, a column of another dtype (``static_cache~bf16``) in that dtype
(`column_dtype`: the dtype a column's cells ran in, for every view that names it);
`reproducer_template(environment)` is the same command for a run's
environment with the placeholders `MODEL` and `CHECK` in place of the class
and check (the HTML page fills them in). Torch-free.
"""

from __future__ import annotations

from conformance.columns import split as split_column
from conformance.columns import split_dtype

MATRIX_TESTS = "conformance/test_matrix.py"  # where the run generates every check's test (conformance.run.cells)
MODEL, CHECK = "{model}", "{check}"


def column_dtype(column: str, run_dtype: str) -> str:
    """The dtype a column's cells ran in: a dtype column's own (``static_cache~bf16``: bfloat16), else the run's."""
    return split_dtype(column)[1] or run_dtype


def reproducer(model: str, check_id: str, device: str, dtype: str, backend: str) -> str:
    """The one-line pytest command that runs exactly this cell."""
    dtype = column_dtype(check_id, dtype)
    check_id, column_backend = split_column(check_id)
    backend = column_backend or backend
    options = [f"--models {model}", f"--checks {check_id}"]
    for name, value, default in (("device", device, "auto"), ("dtype", dtype, "float32"),
                                 ("backend", backend, "eager")):
        if value != default:
            options.append(f"--{name} {value}")
    return f"pytest {MATRIX_TESTS}::test_{check_id} {' '.join(options)} -p no:randomly"


def reproducer_template(environment: dict, check_id: str = CHECK) -> str:
    """`reproducer` for a run's environment, with `MODEL` (and, without `check_id`, `CHECK`) left to fill in."""
    return reproducer(MODEL, check_id, environment.get("device", "auto"), environment.get("dtype", "float32"),
                      environment.get("backend", "eager"))
