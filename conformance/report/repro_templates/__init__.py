"""The reproducer templates: one per check family, and the table of which template writes which check.

Contracts:

* `steps` is what a template is given and gives back (`Context`, `Steps`, `NoTemplate`); `common` what the
  templates share (the suite's tolerances, a sub-module's path); `compile_checks`, `export_checks`,
  `exporter_checks` (float exports), `quantized_checks` (quantized exports) and `aoti_checks` the templates of
  each check family.
* `TEMPLATES` maps a check id to the template that writes its failures; `template_for(check)` finds it (None
  for a check without one).
"""

from __future__ import annotations

from typing import Callable

from conformance.checks.common import exporter_table
from conformance.report.repro_templates import (aoti_checks, compile_checks, export_checks, exporter_checks,
                                                quantized_checks)
from conformance.report.repro_templates.steps import Context, Steps

TEMPLATES: dict[str, Callable[[Context], Steps]] = {
    "build": compile_checks.build,
    "compile_prefill": compile_checks.compile_prefill,
    "compile_dynamic": compile_checks.compile_dynamic,
    "compile_decode": compile_checks.compile_decode,
    "static_cache": compile_checks.static_cache,
    "legacy_cache": compile_checks.legacy_cache,
    "export_forward": export_checks.export_forward,
    "export_forward_strict": export_checks.export_forward,
    "export_dynamic": export_checks.export_dynamic,
    "export_static_cache": export_checks.export_static_cache,
    "export_generate": export_checks.export_generate,
    "export_onnx": export_checks.export_onnx,
    "onnx_generate": export_checks.onnx_generate,
    "aoti_forward": aoti_checks.aoti_forward,
    "aoti_generate": aoti_checks.aoti_generate,
    # a float exporter row's script exports in float, a quantized row's quantizes with the row's recipe
    **{row.id: (exporter_checks if row.quantizer is None else quantized_checks).TEMPLATES[row.part]
       for row in exporter_table.COLUMNS},
}


def template_for(check: str) -> Callable[[Context], Steps] | None:
    return TEMPLATES.get(check)
