"""Checks `exporter_<backend>_{forward,generate}`: transformers' own exporters, one check per row of the table.

`conformance.checks.common.exporter_table.COLUMNS` declares the columns (backend, part, column number,
quantizer); this module registers one check per row: its id, number and tolerance from the row, its packages
and extra (or opt-in group) from its backend (`exporter_table.registration`), its contract from
`exporter_table.contract` (the check function's docstring, what `registry.description` and the reader see).
A forward row runs `exporters.export_forward`, a generate row `exporters.export_generation`, on its backend; a
row with a quantizer runs `quantized.export_forward` / `quantized.export_generation` with it.
"""

from __future__ import annotations

from typing import Callable

from conformance.cases.case import Case
from conformance.checks.common import exporter_table, exporters, quantized
from conformance.checks.common.registry import check

# A row's part -> its function in `exporters` (the float export) or `quantized` (a row with a quantizer).
RUNS = {"forward": "export_forward", "generate": "export_generation"}


def register(row: exporter_table.Column) -> Callable[[Case], dict]:
    """Register the check of one table row; the registered function."""
    run = RUNS[row.part]

    def check_exporter_column(case: Case) -> dict:
        if row.quantizer:
            return getattr(quantized, run)(case, row)
        return getattr(exporters, run)(case, row.backend)

    check_exporter_column.__name__ = check_exporter_column.__qualname__ = f"check_{row.id}"
    check_exporter_column.__doc__ = exporter_table.contract(row)
    return check(row.id, column=row.number, tolerance=row.tolerance,
                 **exporter_table.row_registration(row))(check_exporter_column)


for _row in exporter_table.COLUMNS:
    register(_row)
