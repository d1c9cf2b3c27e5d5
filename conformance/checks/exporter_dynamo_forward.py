"""Check `exporter_dynamo_forward`: transformers' own exporter, one dynamic graph, on torch.export.

Contract (`conformance.checks.common.exporters.export_forward`): a fresh model
exported with ``transformers.exporters.DynamoExporter().export(model, inputs,
Config(dynamic=True))`` runs through the backend's runner (DynamoModelRunner) on the sample
and on a sample of another prompt length, each call within the export tolerance
of eager on the non-padding positions. Where the installed transformers has no
``transformers.exporters`` the column does not apply.
An opt-in column (group ``exporters``, ``tox -e exporters``): it runs only when ``--checks`` names it.
Failure: the exporter's (or runner's) own first line and the innermost
transformers site (``transformers/exporters/`` included). Metrics: `backend`,
`variant`, `export_seconds`, `runner_seconds`, `max_abs_diff`,
`compared_positions`.
"""

from __future__ import annotations

from conformance.cases.case import Case
from conformance.checks.common import exporters
from conformance.checks.common.registry import check


@check("exporter_dynamo_forward", column=102, tolerance="export", **exporters.registration("dynamo"))
def check_exporter_dynamo_forward(case: Case) -> dict:
    return exporters.export_forward(case, "dynamo")
