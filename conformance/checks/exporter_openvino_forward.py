"""Check `exporter_openvino_forward`: transformers' own exporter, one dynamic graph, on OpenVINO CPU.

Contract (`conformance.checks.common.exporters.export_forward`): a fresh model
exported with ``transformers.exporters.OpenVINOExporter().export(model, inputs,
Config(dynamic=True))`` runs through the backend's runner (OpenVINOModelRunner) on the sample
and on a sample of another prompt length, each call within the export tolerance
of eager on the non-padding positions. Where the installed transformers has no
``transformers.exporters`` the column does not apply.
Optional: it requires the ``[openvino]`` extra; where it is not installed the column is not run.
Failure: the exporter's (or runner's) own first line and the innermost
transformers site (``transformers/exporters/`` included). Metrics: `backend`,
`variant`, `export_seconds`, `runner_seconds`, `max_abs_diff`,
`compared_positions`.
"""

from __future__ import annotations

from conformance.cases.case import Case
from conformance.checks.common import exporters
from conformance.checks.common.registry import check


@check("exporter_openvino_forward", column=108, tolerance="export", **exporters.registration("openvino"))
def check_exporter_openvino_forward(case: Case) -> dict:
    return exporters.export_forward(case, "openvino")
