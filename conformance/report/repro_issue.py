"""An upstream issue text for one findings group, ready to paste into the tracker of whoever owns the site.

Contract: `render_issue(group, envelopes, script, entry)` is Markdown: a title naming the symptom and the site
(``[torch.export] data-dependent guard in transformers.integrations.sdpa_attention:sdpa_attention_forward``),
the tracker it belongs to (`findings.site_in`), the environment lines (the run's versions; the backend only for a
compile check; the packages the check needs besides torch and transformers), the reproducer script inline
(`script`, its source, named `repro.py`; "" when the group has none: then the one-line pytest command that runs
its cell), the error as observed (the verified script's own exception and message when `entry` was verified, else
the suite's reason for the cell, unmasked), what was expected (the check's one-line description from the run file), the affected classes and
checks, and the upstream issues and pull requests the findings already link (`Group.threads`). Torch-free.
"""

from __future__ import annotations

from conformance.columns import split as split_column
from conformance.report import findings
from conformance.report.reproduce import column_dtype, reproducer

SYMPTOMS = {
    "data_dependent_guard": "data-dependent guard", "graph_break": "graph break under fullgraph",
    "unsupported": "unsupported construct", "recompile": "recompiles every decode step",
    "call_order": "compile verdict depends on an earlier eager call", "export_error": "export fails",
    "exception": "raises", "numerical_mismatch": "wrong numbers", "contract": "contract broken",
    "backend": "backend compile fails", "specialisation": "dynamic dimension specialised",
}
STAGES = (("exporter_", "transformers.exporters"), ("export_onnx", "ONNX"), ("onnx_", "ONNX"),
          ("export_", "torch.export"), ("compile_", "torch.compile"), ("executorch", "ExecuTorch"),
          ("static_cache", "StaticCache"), ("legacy_cache", "legacy cache"), ("build", "eager"))
CLASS_LIMIT = 30


def stage(check: str) -> str:
    return next((name for prefix, name in STAGES if check.startswith(prefix)), check)


def title(group: findings.Group, check: str) -> str:
    symptom = SYMPTOMS.get(group.kind, group.kind or "failure")
    where = group.where if len(group.where) <= 100 else group.where[:97] + "..."
    return f"[{stage(check)}] {symptom}: {where} ({len(group.classes)} model class(es))"


def _expected(envelope: dict, check: str) -> str:
    base = check.split("@", 1)[0]
    described = (envelope.get("check_info") or {}).get(base, {}).get("description", "")
    return f"`{base}`: {described}" if described else f"`{base}` passes"


def _observed(entry, reason: str) -> str:
    """The verified script's exception as it printed it (type, message, the frame it names), else the reason."""
    seen = entry.observed if entry is not None and entry.verified else {}
    if not seen.get("message") and not seen.get("error"):
        return reason
    text = f"{seen.get('error', '')}: {seen.get('message', '')}".strip(": ")
    return text + (f"\n(raised at {seen['where']})" if seen.get("where") else "")


def _environment(envelope: dict, check: str) -> list[str]:
    env = envelope["environment"]
    base, column_backend = split_column(check)
    backend = column_backend or env.get("backend", "eager")
    compiles = base.startswith("compile_")
    needs = (envelope.get("check_info") or {}).get(base, {}).get("requires") or []
    return [f"- transformers {env.get('transformers')}, torch {env.get('torch')}, python {env.get('python', '?')}",
            f"- device {env.get('device')}, dtype {column_dtype(check, env.get('dtype', 'float32'))}"
            + (f", torch.compile backend {backend}" if compiles else ""),
            *([f"- also needs: {', '.join(needs)}"] if needs else [])]


def _as_repro(script: str, entry) -> str:
    """The script as the issue names it (`repro.py`), its count pointing at the Affected section."""
    if entry is not None and entry.script:
        script = script.replace(entry.script, "repro.py")
    return script.replace("(index.json lists them)", "(listed under Affected)").rstrip()


def render_issue(group: findings.Group, envelopes: list[dict], script: str = "", entry=None) -> str:
    cell = next((c for c in group.cells if entry is not None and c.model == entry.model and c.check == entry.check),
                group.representative)
    env = envelopes[cell.run]["environment"]
    observed = _observed(entry, cell.reason)
    lines = [f"# {title(group, cell.check)}", "",
             f"Tracker: {findings.site_in(group)} (where the failing frame is).", "",
             "## Environment", "", *_environment(envelopes[cell.run], cell.check), "",
             "## Reproduction", ""]
    if script:
        lines += ["A tiny random model (no weights, no network); run it with `python repro.py`:", "",
                  "```python", _as_repro(script, entry), "```"]
    else:
        lines += ["No standalone script for this group; the cell reproduces in the suite with:", "",
                  "```", reproducer(cell.model, cell.check, env.get("device", "auto"), env.get("dtype", "float32"),
                                    env.get("backend", "eager")), "```"]
    lines += ["", "## Observed", "", "```", observed.strip(), "```", "",
              "## Expected", "", _expected(envelopes[cell.run], cell.check), "",
              "## Affected", "",
              f"{len(group.classes)} class(es), {len(group.cells)} cell(s): "
              + ", ".join(f"`{c}` x{n}" for c, n in group.checks.items()) + ".", "",
              ", ".join(group.classes[:CLASS_LIMIT])
              + (f" and {len(group.classes) - CLASS_LIMIT} more" if len(group.classes) > CLASS_LIMIT else "")]
    links = group.threads
    if links:
        lines += ["", "## Related", "", *(f"- [{text}]({url})" for url, text in links)]
    lines += ["", f"(Found by vlm-conformance, findings group `{group.id}`.)"]
    return "\n".join(lines) + "\n"
