"""Check `exporter_executorch_generate`: transformers' own decomposition for generation, greedy on ExecuTorch with XNNPACK.

Contract (`conformance.checks.common.exporters.export_generation`): a fresh
model exported with ``export_for_generation(model, request,
Config(dynamic=True), generation_config=<static cache>)``; another fresh
instance's submodules and forward routed to the components' runners
(ExecutorchModelRunner), its own ``generate`` the glue; for the sample's
second prompt and the same prompt at another length, the greedy tokens equal
eager ``generate``'s (same static cache), then every step's logits within the
export tolerance. Where the installed transformers has no
``transformers.exporters`` the column does not apply; encoder-decoder classes
are not decomposed by it.
Optional: it requires the ``[executorch]`` extra; where it is not installed the column is not run.
Failure: the exporter's (or runner's) own first line, the component it names
and the innermost transformers site; or the first token / step that differs.
Metrics: `backend`, `components`, `variant`, `export_seconds`,
`generate_seconds`, `routed_calls`, `new_tokens`, `max_abs_diff`.
"""

from __future__ import annotations

from conformance.cases.case import Case
from conformance.checks.common import exporters
from conformance.checks.common.registry import check


@check("exporter_executorch_generate", column=107, tolerance="export", **exporters.registration("executorch"))
def check_exporter_executorch_generate(case: Case) -> dict:
    return exporters.export_generation(case, "executorch")
