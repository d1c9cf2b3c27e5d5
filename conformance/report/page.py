"""Stage 4, report: run envelopes -> one self-contained HTML page, the matrix as a person explores it.

Contracts:

* `render_html(envelopes, sources)` is one HTML document built from the
  envelopes alone (a pure function: no clock, no filesystem but the page's
  own CSS and script beside this module). It loads nothing: the CSS, the
  script and the cells' data (as JSON) are inside, so it works offline and
  from ``file://``. It holds the legend, each run's summary, the matrix
  (a row per class, a column per check and run, sortable and filterable
  by check, verdict, modality and model family), each cell's reason,
  metrics and reproducer one click away (`reproduce`), and the declared
  flags the checks contradict.
* Several envelopes are columns grouped per run, labelled by what differs
  between their environments (else by `sources`, the file names).
* Nothing from an envelope becomes markup: text is HTML-escaped, the JSON
  has ``<``, ``>`` and ``&`` escaped, and the script sets text with
  `textContent` (a reason's http(s) URLs become plain links).
"""

from __future__ import annotations

import json
from html import escape
from importlib import resources
from typing import Sequence

from conformance.report import render, summary
from conformance.report.reproduce import reproducer_template
from conformance.verdicts import VERDICTS

LABEL_FIELDS = ("transformers", "torch", "backend", "device", "dtype", "python", "device_name")
SUFFIX = "ForConditionalGeneration"  # every discovered class ends so: the table shows the rest
FILTER_VERDICTS = (("new", "new: fail, error, timeout, xpass"), ("notpass", "not passing"))


def _e(value) -> str:
    return escape(str(value), quote=True)


def _asset(name: str) -> str:
    return resources.files("conformance.report").joinpath(name).read_text(encoding="utf-8")


def _json_for_script(data) -> str:
    """JSON that cannot end its <script> element or open another one."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    for char, code in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                       ("\u2029", "\\u2029")):
        text = text.replace(char, code)
    return text


def run_labels(envelopes: Sequence[dict], sources: Sequence[str]) -> list[str]:
    """One label per run: the environment fields that differ between them, else the source name."""
    if len(envelopes) == 1:
        return [render.environment_line(envelopes[0])]
    envs = [e["environment"] for e in envelopes]
    differing = [k for k in LABEL_FIELDS if len({str(env.get(k)) for env in envs}) > 1]
    labels = [" · ".join(f"{k} {env.get(k)}" for k in differing) for env in envs]
    if len(set(labels)) < len(labels):
        labels = [" · ".join(filter(None, (label, source))) for label, source in zip(labels, sources)]
    return labels


def _symbol(cell: dict | None) -> tuple[str, str]:
    """(css class, symbol) of a cell; a listed build error is `kerr` 🚧."""
    if cell is None:
        return "none", ""
    if cell["verdict"] == "xfail" and cell.get("expected") == "error":
        return "xfail kerr", render.KNOWN_ERROR[0]
    return cell["verdict"], render.SYMBOLS[cell["verdict"]]


def _cell_data(cell: dict | None, reasons: dict[str, int]) -> list | int:
    if cell is None:
        return 0
    reason = cell.get("reason", "")
    index = reasons.setdefault(reason, len(reasons)) if reason else -1
    return [cell["verdict"], index, cell.get("seconds", 0), cell.get("metrics", {}), cell.get("expected", "")]


def short_name(name: str) -> str:
    return name[: -len(SUFFIX)] if name.endswith(SUFFIX) and name != SUFFIX else name


def _rows(envelopes: Sequence[dict]) -> dict[str, dict]:
    """Class -> its row metadata (from the first run that has it), over all runs, sorted."""
    rows: dict[str, dict] = {}
    for envelope in envelopes:
        for name, row in envelope["models"].items():
            rows.setdefault(name, row)
    return dict(sorted(rows.items()))


def legend_html() -> str:
    items = [f'<span class="key"><span class="v {v}">{render.SYMBOLS[v]}</span> {_e(render.MEANINGS[v])}</span>'
             for v in VERDICTS]
    items.append(f'<span class="key"><span class="v xfail kerr">{render.KNOWN_ERROR[0]}</span> '
                 f'{_e(render.KNOWN_ERROR[1])}</span>')
    items.append('<span class="key"><span class="v none"></span> not run</span>')
    return '<p class="legend">' + " ".join(items) + "</p>"


def summary_html(envelope: dict) -> str:
    rows = []
    for check_id, t in summary.tally(envelope).items():
        detail = ", ".join(f"{n} {v}" for v, n in t.new_by_verdict.items())
        rows.append(f"<tr><th>{_e(check_id)}</th><td>{_e(render.pass_rate(render.column(envelope, check_id)))}"
                    f'</td><td class="pass">{t.passed}</td><td class="xfail">{t.known}</td>'
                    f'<td class="{"fail" if t.new else ""}" title="{_e(detail)}">{t.new}</td>'
                    f'<td class="skip">{t.not_applicable}</td></tr>')
    parts = ['<table class="summary"><thead><tr><th>check</th><th>pass rate</th><th>pass</th><th>known</th>'
             '<th>new</th><th>n/a</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>"]
    for title, cells in (("Regressions: fail, error or timeout, not listed in the expectations",
                          summary.regressions(envelope)),
                         ("Stale expectations: passed, but listed as failing (remove them)", summary.stale(envelope))):
        items = "".join(f"<li>{_e(c.model)} / {_e(c.check)}: {_e(c.verdict)}"
                        f"{': ' + _e(c.reason) if c.reason else ''}</li>" for c in cells)
        parts.append(f'<details class="named"{" open" if cells else ""}><summary>{_e(title)} ({len(cells)})</summary>'
                     f'<ul>{items or "<li>none</li>"}</ul></details>')
    return "".join(parts)


def declared_html(envelope: dict) -> str:
    if not render.flag_checks(envelope):
        return ("<p>This run file does not say which of its checks observe a declared flag (no "
                "<code>check_info</code>): nothing to compare.</p>")
    overclaimed, underclaimed = render.flag_disagreements(envelope)

    def observed(d) -> str:
        return ", ".join(f'{_e(c)} <span class="v {v}">{render.SYMBOLS[v]}</span>' for c, v in d.observed.items())

    over = "".join(f"<tr><td>{_e(d.model)}</td><td><code>{_e(d.flag)} = {_e(d.declared)}</code></td>"
                   f"<td>{observed(d)}</td><td>{_e(': '.join(d.first_failure))}</td></tr>" for d in overclaimed)
    under = "".join(f"<tr><td>{_e(d.model)}</td><td><code>{_e(d.flag)} = {_e(d.declared)}</code></td>"
                    f"<td>{observed(d)}</td></tr>" for d in underclaimed)
    return (f"<details><summary>Declared but not observed ({len(overclaimed)})</summary>"
            '<table class="plain"><thead><tr><th>class</th><th>declared</th><th>observed</th><th>first failure</th>'
            f"</tr></thead><tbody>{over}</tbody></table></details>"
            f"<details><summary>Observed but not declared: the flag could be flipped ({len(underclaimed)})</summary>"
            '<table class="plain"><thead><tr><th>class</th><th>declared</th><th>observed</th></tr></thead>'
            f"<tbody>{under}</tbody></table></details>")


def matrix_html(envelopes: Sequence[dict], labels: Sequence[str], rows: dict[str, dict]) -> str:
    several = len(envelopes) > 1
    span = ' rowspan="2"' if several else ""
    head = [f'<th{span} data-key="name" class="name">class (…{SUFFIX})</th><th{span} data-key="family">model_type</th>'
            f'<th{span} data-key="modalities">modalities</th>']
    checks_row = []
    for r, (envelope, label) in enumerate(zip(envelopes, labels)):
        if several:
            head.append(f'<th class="run" colspan="{len(envelope["checks"])}" data-run="{r}">{_e(label)}</th>')
        checks_row += [f'<th class="check" data-key="col" data-run="{r}" data-check="{_e(c)}"><span>{_e(c)}</span></th>'
                       for c in envelope["checks"]]
    thead = (f'<tr class="runs">{"".join(head)}</tr><tr class="checks">{"".join(checks_row)}</tr>' if several
             else f'<tr class="checks">{"".join(head + checks_row)}</tr>')
    body = []
    for name, row in rows.items():
        modalities = " ".join(row.get("modalities", ()))
        cells = []
        for envelope in envelopes:
            own = envelope["models"].get(name, {}).get("cells", {})
            for check_id in envelope["checks"]:
                css, symbol = _symbol(own.get(check_id))
                cells.append(f'<td class="v {css}" tabindex="0">{symbol}</td>')
        body.append(f'<tr data-family="{_e(row.get("model_type", ""))}" data-modalities="{_e(modalities)}">'
                    f'<th class="name">{_e(short_name(name))}</th><td>{_e(row.get("model_type", ""))}</td>'
                    f'<td>{_e(", ".join(row.get("modalities", ())))}</td>{"".join(cells)}</tr>')
    return f'<table id="matrix"><thead>{thead}</thead><tbody>{"".join(body)}</tbody></table>'


def filters_html(envelopes: Sequence[dict], rows: dict[str, dict]) -> str:
    def select(name: str, label: str, options: list[tuple[str, str]]) -> str:
        opts = "".join(f'<option value="{_e(v)}">{_e(t)}</option>' for v, t in [("", "all")] + options)
        return f'<label>{_e(label)} <select id="f-{name}">{opts}</select></label>'

    families: dict[str, int] = {}
    modalities: dict[str, int] = {}
    for row in rows.values():
        families[row.get("model_type", "")] = families.get(row.get("model_type", ""), 0) + 1
        for m in row.get("modalities", ()):
            modalities[m] = modalities.get(m, 0) + 1
    checks = list(dict.fromkeys(c for e in envelopes for c in e["checks"]))
    verdicts = [(v, f"{render.SYMBOLS[v]} {v}") for v in VERDICTS] + list(FILTER_VERDICTS)
    return ('<form id="filters" onsubmit="return false">'
            '<label>class <input id="f-text" type="search" placeholder="name or model_type"></label>'
            + select("check", "check", [(c, c) for c in checks])
            + select("verdict", "verdict", verdicts)
            + select("modality", "modality", [(m, f"{m} ({n})") for m, n in sorted(modalities.items())])
            + select("family", "model family", [(f, f"{f} ({n})") for f, n in sorted(families.items())])
            + f'<output id="shown">{len(rows)} of {len(rows)} classes</output></form>')


def render_html(envelopes: Sequence[dict], sources: Sequence[str] = ()) -> str:
    """The page (see the module's contract); `sources` name the runs when their environments agree."""
    envelopes = list(envelopes)
    sources = list(sources) + [f"run {i + 1}" for i in range(len(sources), len(envelopes))]
    labels = run_labels(envelopes, sources)
    rows = _rows(envelopes)
    reasons: dict[str, int] = {}
    cells = {name: [[_cell_data(e["models"].get(name, {}).get("cells", {}).get(c), reasons) for c in e["checks"]]
                    for e in envelopes] for name in rows}
    data = {"runs": [{"label": label, "checks": e["checks"],
                      "reproducers": {c: reproducer_template(e["environment"], c) for c in e["checks"]}}
                     for e, label in zip(envelopes, labels)],
            "meanings": {**{v: [render.SYMBOLS[v], render.MEANINGS[v]] for v in VERDICTS},
                         "kerr": list(render.KNOWN_ERROR)},
            "names": list(rows), "reasons": list(reasons), "cells": cells}
    several = len(envelopes) > 1
    per_run = "".join((f"<h3>{_e(label)}</h3>" if several else "") + summary_html(e)
                      for e, label in zip(envelopes, labels))
    declared = "".join((f"<h3>{_e(label)}</h3>" if several else "") + declared_html(e)
                       for e, label in zip(envelopes, labels))
    environments = "".join(f"<li>{_e(render.environment_line(e))}"
                           f"{' (' + _e(s) + ')' if several else ''}</li>" for e, s in zip(envelopes, sources))
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>vlm-conformance matrix</title>
<style>
{_asset("page.css")}</style>
</head>
<body>
<header><h1>vlm-conformance matrix</h1><ul class="env">{environments}</ul>{legend_html()}
<p class="hint">Click a cell for its reason, metrics and the command that reruns it; click a column header to sort.</p>
</header>
<main>
<section id="matrix-section"><h2>Matrix</h2>{filters_html(envelopes, rows)}
<div class="scroll">{matrix_html(envelopes, labels, rows)}</div></section>
<section id="summary"><h2>Summary</h2><p>{_e(render.PASS_RATE_NOTE)} New: fail, error, timeout or xpass;
known: listed in fixtures/expectations; n/a: does not apply.</p>{per_run}</section>
<section id="declared"><h2>Declared vs observed</h2>{declared}</section>
</main>
<aside id="detail" hidden><button type="button" id="detail-close" aria-label="close">×</button>
<div id="detail-body"></div></aside>
<script type="application/json" id="data">{_json_for_script(data)}</script>
<script>
{_asset("page.js")}</script>
</body>
</html>
"""
