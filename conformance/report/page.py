"""Stage 4, report: run envelopes -> one self-contained HTML page that answers "does it work?".

Contracts:

* `render_html(envelopes, sources)` is one HTML document built from the
  envelopes alone (a pure function: no clock, no filesystem but the page's
  own CSS and script beside this module). It loads nothing: the CSS, the
  script and the cells' data (as JSON) are inside, so it works offline and
  from ``file://``. Top to bottom: the first screen answers "does my model
  work with my backend?": the question, a search box (every word in the
  row's class name, model_type, aliases or checkpoint fields,
  `search_text`; punctuation ignored) and a row per class with a column per
  deploy path (`DEPLOY`: eager, compile, static cache, export, ONNX, AOTI,
  ExecuTorch, OpenVINO, transformers' exporters; then the quantized exports,
  `QUANTIZED_PATH`, and bf16 and fp16 where dtype runs are merged,
  `DTYPE_PATHS`; `deploy_group`), each cell
  the class's state there (`class_view.state`) in the newest run
  (`main_run`), linking to the column that says most (its first that does
  not work). Below: the legend, each run's summary (a headline, then a row
  per column: what it checks, its pass rate and counts), the matrix (a row
  per class, a column per check and run, each column header carrying its
  description on hover and its pass rate; sortable and filterable by check,
  verdict or answer, modality and model family; the search box filters it
  too), and the declared flags the checks contradict.
* A cell's detail shows its history where the page has one (`history`: the
  cell's answer on each published transformers version and in words,
  "works since 5.23", "broke in 5.24"), and the other columns of its deploy
  path with theirs.
* A cell's first colour answers "does it work here?" and its glyphs add the
  gate's state (`answer.answer`: works ✓, does not work ✗ — known, or new
  ✗! —, the suite could not check it 🚧, does not apply –, not run; ↑ an
  improvement the expectations should take). Its detail (a click, or
  Enter) says so in words with the column's description, the closeness to
  the tolerance (`worst_ratio`, `atol`, `rtol` or `tolerance` where the
  cell records them), the root cause (`findings.cause_of`), the reason, the
  metrics and the command that reruns it (`reproduce`). A click on a class opens its view
  (`class_view`): what works on which path, and what to do about the rest.
* Internal and not-standalone rows (`answer.hidden_reason`) are hidden
  until the "show internal" toggle is on.
* The URL fragment opens a class, a cell and the filters, and follows them:
  ``#Llava`` (the class's view), ``#Llava/export_dynamic`` (that cell's
  detail; ``/2`` after the check: the second run's column), then
  ``?check=…&verdict=…&modality=…&family=…&q=…&all=1``. A class is named
  by its full name or without ``ForConditionalGeneration``, in any case.
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

from conformance import columns as column_ids, versions
from conformance.checks.common import exporter_table
from conformance.report import answer, class_view, findings, flag_advice, history as cell_history, render, summary
from conformance.report.io import finite
from conformance.report.reproduce import reproducer_template
from conformance.verdicts import FAILING, VERDICTS

LABEL_FIELDS = ("transformers", "torch", "backend", "device", "dtype", "python", "device_name")
SUFFIX = "ForConditionalGeneration"  # every discovered class ends so: the table shows the rest
FILTER_VERDICTS = (("works", "✓ works"), ("broken", "✗ does not work (known or new)"),
                   ("nocheck", "🚧 the suite could not check"), ("new", "new: fail, error, timeout, xpass"),
                   ("notpass", "not passing"))
# A cell's closeness to its tolerance (where it records them) and the gate's note (why a listed cell is not xfail).
EXTRA_FIELDS = ("tolerance", "worst_ratio", "gate")
COUNTED = ("works", "broken", "nocheck", "na")
# The first screen's columns, in order: the paths people deploy through, each the columns whose check id starts so (the
# longest prefix that matches a column decides; a column no rule takes is only in the full matrix below).
DEPLOY = (
    ("eager", "the eager forward builds and runs (build)", ("build",)),
    ("compile", "torch.compile: prefill, decode, dynamic shapes, each backend (compile_*)", ("compile_",)),
    ("static cache", "generate with a static cache, as with a dynamic one (static_cache)", ("static_cache",)),
    ("export", "torch.export: forward, dynamic shapes, strict, static cache, generation (export_*)", ("export_",)),
    ("ONNX", "ONNX: torch.onnx and ONNX Runtime (export_onnx, onnx_generate), transformers.exporters' ONNX "
             "backend (exporter_onnx_*)", ("export_onnx", "onnx_", "exporter_onnx_")),
    ("AOTI", "AOTInductor packages served without Python (aoti_*)", ("aoti_",)),
    ("ExecuTorch", "ExecuTorch (executorch) and transformers.exporters' ExecuTorch backend (exporter_executorch_*)",
     ("executorch", "exporter_executorch_")),
    ("OpenVINO", "transformers.exporters' OpenVINO backend (exporter_openvino_*)", ("exporter_openvino_",)),
    ("exporters", "transformers.exporters' torch.export backend (exporter_dynamo_*; its other backends are under "
                  "ONNX, ExecuTorch and OpenVINO)", ("exporter_",)),
)
# transformers.exporters' quantized columns (`exporter_table.COLUMNS` rows with a quantizer) are a path of their own:
# "does my model work quantized?" is another question than the float export's, on the same backends.
QUANTIZED_PATH = ("quantized", "transformers.exporters' quantizers (PT2E, ONNX Runtime, NNCF) on each backend they "
                               "take: int8 export, SQNR from eager float (exporter_<backend>_<quantizer>_*)")
QUANTIZED = frozenset(row.id for row in exporter_table.COLUMNS if row.quantizer)
# A dtype run merged into the matrix (`static_cache~bf16`) is a path of its own on the first screen: "does my model
# work in bfloat16?" (the paths above are the run's own dtype's).
DTYPE_PATHS = {"bfloat16": ("bf16", "the same checks with the model and inputs in bfloat16: eager, compile, the caches, "
                                    "export (columns ~bf16)"),
               "float16": ("fp16", "the same checks with the model and inputs in float16: eager, compile, the caches, "
                                   "export (columns ~fp16)")}
STATE_GLYPHS = {"works": "✓", "partly": "◐", "broken": "✗", "nocheck": "🚧", "na": "–", "notrun": ""}
STATE_WORDS = {"works": "works", "partly": "works in part", "broken": "does not work",
               "nocheck": "the suite could not check it", "na": "does not apply", "notrun": "not run"}
SEARCH_FIELDS = ("model_type", "aliases", "checkpoint", "checkpoints", "family")  # what the search box matches


def _e(value) -> str:
    return escape(str(value), quote=True)


def _asset(name: str) -> str:
    return resources.files("conformance.report").joinpath(name).read_text(encoding="utf-8")


def _json_for_script(data) -> str:
    """Strict JSON (no NaN token: `io.finite`) that cannot end its <script> element or open another one."""
    text = json.dumps(finite(data), ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False)
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


def short_name(name: str) -> str:
    """The row's name without `SUFFIX`, an alias row's too (``Blip2:blip2-flan-t5``): the class column stays
    narrow enough for every path column to fit a laptop's first screen."""
    base, colon, alias = name.partition(":")
    return (base[: -len(SUFFIX)] if base.endswith(SUFFIX) and base != SUFFIX else base) + colon + alias


def deploy_group(column: str) -> str:
    """The first screen's column (`DEPLOY`'s label, or a dtype column's `DTYPE_PATHS` label) that `column` belongs
    to; "" for none."""
    dtype = column_ids.split_dtype(column)[1]
    if dtype:
        return DTYPE_PATHS[dtype][0] if dtype in DTYPE_PATHS else ""
    check = column_ids.split(column)[0]
    if check in QUANTIZED:
        return QUANTIZED_PATH[0]
    matches = [(len(start), label) for label, _, starts in DEPLOY for start in starts if check.startswith(start)]
    return max(matches)[1] if matches else ""


def deploy_groups(checks: Sequence[str]) -> list[tuple[str, str, list[str]]]:
    """(label, what it covers, its columns of `checks`) per `DEPLOY` path, the quantized path, then `DTYPE_PATHS`
    path, that has a column here, in that order."""
    paths = [(label, about) for label, about, _ in DEPLOY] + [QUANTIZED_PATH] + list(DTYPE_PATHS.values())
    found = [(label, about, [c for c in checks if deploy_group(c) == label]) for label, about in paths]
    return [group for group in found if group[2]]


def search_text(name: str, row: dict) -> str:
    """What the search box matches a row by, lower case: its class name, short name and `SEARCH_FIELDS`
    (a string or a list of strings each; a checkpoint id like ``llava-hf/llava-1.5-7b-hf`` too)."""
    words = [name, short_name(name)]
    for field in SEARCH_FIELDS:
        value = row.get(field)
        words += [value] if isinstance(value, str) else [str(v) for v in value or () if v]
    return " ".join(w for w in words if w).lower()


def main_run(envelopes: Sequence[dict]) -> int:
    """The run the first screen shows: the newest transformers (the first of equals)."""
    def order(e: dict) -> tuple:
        minor = versions.major_minor(str(e["environment"].get("transformers", "")))
        return tuple(int(p) if p.isdigit() else -1 for p in minor.split("."))
    keys = [order(e) for e in envelopes]
    return keys.index(max(keys))


def _group_target(cells: dict, group: list[str]) -> str:
    """The column a first-screen cell opens: its first that does not work, else could not be checked, else works,
    else its first."""
    for wanted in ("broken", "nocheck", "works"):
        for column in group:
            if answer.answer(cells.get(column))[0] == wanted:
                return column
    return group[0]


def _change_mark(history: dict, name: str, group: list[str]) -> tuple[str, str]:
    """(the mark, its words) of what changed on the path in the newest version: ↓ a column broke, ↑ one works."""
    broke, fixed = cell_history.latest_changes(history, name, group)
    newest = history["versions"][-1] if history else ""
    words = "; ".join(f"{what} {newest}: {', '.join(cols)}" for what, cols in (("broke in", broke),
                                                                                ("works since", fixed)) if cols)
    return ("↓" if broke else "↑" if fixed else ""), words


def deploy_html(envelope: dict, run: int, rows: dict[str, dict], history: dict | None = None) -> str:
    """The first screen's table: a row per class, a column per deploy path (`deploy_groups`), each cell the
    class's state on that path (`class_view`'s states) linking to the cell that says most about it, marked ↓ where
    a column of it broke in the newest published version, ↑ where one works since (where `history` ends with the
    run's version)."""
    groups = deploy_groups(envelope["checks"])
    minor = versions.major_minor(str(envelope["environment"].get("transformers", "")))
    history = history if history and history["versions"][-1] == minor else {}
    head = "".join(f'<th title="{_e(about)}" data-group="{_e(label)}">{_e(label)}</th>' for label, about, _ in groups)
    body = []
    for name, row in rows.items():
        cells = envelope["models"].get(name, {}).get("cells", {})
        tds = []
        why = envelope["models"].get(name, {}).get("not_run", "") if not cells else ""
        if why:  # a row the run could not check at all says why in one cell
            tds.append(f'<td class="g s-notrun why" colspan="{len(groups)}">not run: {_e(why)}</td>')
        for label, _, group in (() if why else groups):
            answers = [answer.answer(cells.get(c))[0] for c in group]
            state = class_view.state(answers)
            applicable = [a for a in answers if a not in ("na", "notrun")]
            works = sum(a == "works" for a in applicable)
            count = f'<span class="n">{works}/{len(applicable)}</span>' if state == "partly" else ""
            title = f"{label}: {STATE_WORDS[state]}" + (f" ({works} of {len(applicable)} columns)" if count else "")
            mark, changed = _change_mark(history, name, group)
            title += f"; {changed}" if changed else ""
            count += f'<span class="chg">{mark}</span>' if mark else ""
            target = _group_target(cells, group)
            tds.append(f'<td class="g s-{state}" data-group="{_e(label)}" title="{_e(title)}">'
                       f'<a href="#{_e(short_name(name))}/{_e(target)}" data-check="{_e(target)}" '
                       f'data-run="{run}">{_e(STATE_GLYPHS[state])}{count}</a></td>')
        hidden = ' data-internal="1" hidden' if answer.hidden_reason(name, row) else ""
        body.append(f'<tr data-name="{_e(name)}"{hidden}><th class="name"><a href="#{_e(short_name(name))}">'
                    f'{_e(short_name(name))}</a> <span class="type">{_e(row.get("model_type", ""))}</span></th>'
                    f'{"".join(tds)}</tr>')
    return (f'<table id="deploy"><thead><tr><th class="name">model <span class="type">model_type</span></th>{head}'
            f'</tr></thead><tbody>{"".join(body)}</tbody></table>')


def state_keys_html() -> str:
    return '<span class="keys">' + "".join(
        f'<span class="key"><span class="g s-{state}">{_e(glyph or " ")}</span> {_e(STATE_WORDS[state])}</span>'
        for state, glyph in STATE_GLYPHS.items() if state != "notrun") + "</span>"


def cell_css(cell: dict | None) -> str:
    """The cell's classes: its verdict (``none``: not run), its answer ``a-…``, its mark ``m-…`` (and ``kerr``
    for a known harness gap)."""
    what, mark = answer.answer(cell)
    parts = [cell["verdict"] if cell else "none", f"a-{what}"] + ([f"m-{mark}"] if mark else [])
    return " ".join(parts + (["kerr"] if mark == "gap" else []))


def _cell_data(cell: dict | None, reasons: dict[str, int]) -> list | int:
    if cell is None:
        return 0
    reason = cell.get("reason", "")
    index = reasons.setdefault(reason, len(reasons)) if reason else -1
    cause = findings.cause_of(cell) if cell["observed"] in FAILING else ""
    extra = {k: cell[k] for k in EXTRA_FIELDS if cell.get(k) not in (None, "")}
    return [cell["verdict"], index, cell.get("seconds", 0), cell.get("metrics", {}), cell.get("expected", ""),
            *answer.answer(cell), cause, extra]


def _rows(envelopes: Sequence[dict]) -> dict[str, dict]:
    """Class -> its row metadata (from the first run that has it), over all runs, sorted."""
    rows: dict[str, dict] = {}
    for envelope in envelopes:
        for name, row in envelope["models"].items():
            rows.setdefault(name, row)
    return dict(sorted(rows.items()))


def _key(css: str, glyph: str, text: str) -> str:
    return f'<span class="key"><span class="v {css}">{_e(glyph)}</span> {_e(text)}</span>'


def legend_html() -> str:
    answers = "".join(_key(f"a-{a}" + (" m-gap kerr" if a == "nocheck" else ""), glyph, text)
                      for a, (glyph, text) in answer.ANSWERS.items())
    marks = (_key("a-broken m-listed", "✗", answer.MARKS["listed"][1])
             + _key("a-broken m-new", "✗!", answer.MARKS["new"][1])
             + _key("a-works m-improved", "✓↑", answer.MARKS["improved"][1])
             + _key("a-nocheck m-gap kerr", "🚧", answer.MARKS["gap"][1]))
    return (f'<div class="legend"><p><strong>Does it work here?</strong> (the colour) {answers}</p>'
            f'<p><strong>The gate\'s state</strong> (the mark) {marks}</p></div>')


def counts(cells: list[dict]) -> dict[str, int]:
    """Answer -> how many of `cells` (`answer.answer`), with ``new``: the failures the expectations do not list."""
    found = {a: 0 for a in COUNTED + ("new",)}
    for cell in cells:
        what, mark = answer.answer(cell)
        found[what] = found.get(what, 0) + 1
        found["new"] += what == "broken" and mark == "new"
    return found


def headline(envelope: dict, hidden: int) -> str:
    """One sentence: how many classes and columns, how many cells work, do not, could not be checked."""
    cells = [cell for row in envelope["models"].values() for c, cell in row["cells"].items()
             if c in envelope["checks"]]
    n = counts(cells)
    works, applicable = n["works"], len(cells) - n["na"]
    hidden_text = f" ({hidden} internal or not standalone, hidden until you show them)" if hidden else ""
    return (f"{len(envelope['models'])} classes{hidden_text} × {len(envelope['checks'])} columns. "
            f"Of the {applicable} cells that apply, {works} work ({100 * works // max(applicable, 1)}%), "
            f"{n['broken']} do not ({n['broken'] - n['new']} known, {n['new']} new) and the suite could not "
            f"check {n['nocheck']}; {n['na']} do not apply.")


def _swatch(css: str, glyph: str, text: str) -> str:
    return f'<th><span class="v {css}">{_e(glyph)}</span> {_e(text)}</th>'


def summary_html(envelope: dict, hidden: int = 0) -> str:
    not_run = render.not_run_columns(envelope)
    described = any(answer.column_description(envelope, c) and c not in not_run for c in envelope["checks"])
    rows = []
    for check_id in list(envelope["checks"]) + [c for c in not_run if c not in envelope["checks"]]:
        cells = render.column(envelope, check_id)
        n = counts(cells)
        desc = f'<td class="desc">{_e(answer.column_description(envelope, check_id))}</td>' if described else ""
        if check_id in not_run and not cells:
            rows.append(f'<tr><th>{_e(check_id)}</th>{desc}<td colspan="6" class="notrun">not run: '
                        f"{_e(not_run[check_id])}</td></tr>")
            continue
        rows.append(f'<tr><th><a href="#?check={_e(check_id)}">{_e(check_id)}</a></th>{desc}'
                    f'<td>{_e(render.pass_rate(cells))}</td><td>{n["works"]}</td><td>{n["broken"] - n["new"]}</td>'
                    f'<td class="{"some" if n["new"] else ""}">{n["new"]}</td><td>{n["nocheck"]}</td>'
                    f'<td>{n["na"]}</td></tr>')
    head = ("<th>column</th>" + ("<th>what it checks</th>" if described else "") + "<th>pass rate</th>"
            + _swatch("a-works", "✓", "works") + _swatch("a-broken m-listed", "✗", "known")
            + _swatch("a-broken m-new", "✗!", "new") + _swatch("a-nocheck m-gap kerr", "🚧", "could not check")
            + _swatch("a-na", "–", "n/a"))
    missing = ("" if described else '<p class="note">This run file has no column descriptions (it is older than '
               "them): the next run's file has them.</p>")
    parts = [f'<p class="headline">{_e(headline(envelope, hidden))}</p>{missing}',
             f'<table class="summary"><thead><tr>{head}</tr></thead><tbody>' + "".join(rows) + "</tbody></table>"]
    for title, cells in (("Regressions: fail, error or timeout, not listed in the expectations",
                          summary.regressions(envelope)),
                         ("Stale expectations: passed, but listed as failing (remove them)", summary.stale(envelope))):
        items = "".join(f"<li>{_e(c.model)} / {_e(c.check)}: {_e(c.verdict)}{': ' + _e(c.reason) if c.reason else ''} "
                        f'<a href="#{_e(short_name(c.model))}/{_e(c.check)}">open</a></li>' for c in cells)
        parts.append(f'<details class="named"{" open" if cells else ""}><summary>{_e(title)} ({len(cells)})</summary>'
                     f'<ul>{items or "<li>none</li>"}</ul></details>')
    return "".join(parts)


def declared_html(envelope: dict) -> str:
    if not render.flag_checks(envelope):
        return ("<p>This run file does not say which of its checks observe a declared flag (no "
                "<code>check_info</code>): nothing to compare.</p>")
    overclaimed, underclaimed = render.flag_disagreements(envelope)

    def observed(d) -> str:
        return ", ".join(f"{_e(c)} {_e(v)}" for c, v in d.observed.items())

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


def _check_header(envelope: dict, run: int, check_id: str) -> str:
    cells = render.column(envelope, check_id)
    rate = render.pass_rate(cells) if cells or check_id not in render.not_run_columns(envelope) else "not run"
    desc = answer.column_description(envelope, check_id)
    title = f"{check_id}: {desc} Pass rate {rate}." if desc else f"{check_id}: pass rate {rate}."
    return (f'<th class="check" data-key="col" data-run="{run}" data-check="{_e(check_id)}" title="{_e(title)}">'
            f'<span class="id">{_e(check_id)}</span><span class="rate">{_e(rate.split(" (")[0])}</span></th>')


def matrix_html(envelopes: Sequence[dict], labels: Sequence[str], rows: dict[str, dict]) -> str:
    several = len(envelopes) > 1
    span = ' rowspan="2"' if several else ""
    head = [f'<th{span} data-key="name" class="name" title="class name without …{SUFFIX}">class</th>'
            f'<th{span} data-key="family">model_type</th><th{span} data-key="modalities">modalities</th>']
    checks_row = []
    for r, (envelope, label) in enumerate(zip(envelopes, labels)):
        if several:
            head.append(f'<th class="run" colspan="{len(envelope["checks"])}" data-run="{r}">{_e(label)}</th>')
        checks_row += [_check_header(envelope, r, c) for c in envelope["checks"]]
    thead = (f'<tr class="runs">{"".join(head)}</tr><tr class="checks">{"".join(checks_row)}</tr>' if several
             else f'<tr class="checks">{"".join(head + checks_row)}</tr>')
    body = []
    for name, row in rows.items():
        modalities = " ".join(row.get("modalities", ()))
        cells = []
        for envelope in envelopes:
            own = envelope["models"].get(name, {}).get("cells", {})
            for check_id in envelope["checks"]:
                cell = own.get(check_id)
                cells.append(f'<td class="v {cell_css(cell)}" tabindex="0">{_e(answer.symbol(cell))}</td>')
        hidden = ' class="internal" data-internal="1" hidden' if answer.hidden_reason(name, row) else ""
        body.append(f'<tr data-family="{_e(row.get("model_type", ""))}" data-modalities="{_e(modalities)}"{hidden}>'
                    f'<th class="name"><a href="#{_e(short_name(name))}">{_e(short_name(name))}</a></th>'
                    f'<td>{_e(row.get("model_type", ""))}</td>'
                    f'<td>{_e(", ".join(row.get("modalities", ())))}</td>{"".join(cells)}</tr>')
    return f'<table id="matrix"><thead>{thead}</thead><tbody>{"".join(body)}</tbody></table>'


def filters_html(envelopes: Sequence[dict], rows: dict[str, dict], hidden: int) -> str:
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
    verdicts = list(FILTER_VERDICTS) + [(v, f"verdict {v}") for v in VERDICTS]
    return ('<form id="filters" onsubmit="return false">'
            + select("check", "check", [(c, c) for c in checks])
            + select("verdict", "cells", verdicts)
            + select("modality", "modality", [(m, f"{m} ({n})") for m, n in sorted(modalities.items())])
            + select("family", "model family", [(f, f"{f} ({n})") for f, n in sorted(families.items())])
            + f'<label><input id="f-all" type="checkbox"> show internal and not-standalone classes ({hidden})</label>'
            + '<span class="note">(the search box at the top filters these rows too)</span></form>')


def class_data(envelopes: Sequence[dict], sources: Sequence[str], rows: dict[str, dict]) -> dict[str, dict]:
    """Class -> what its view shows: row facts, why it is hidden, and per run its paths and what to do."""
    advice = [flag_advice.advise_one(e, s) for e, s in zip(envelopes, sources)]
    groups = [findings.group_failures([e]) for e in envelopes]
    data = {}
    for name, row in rows.items():
        views = [{"states": class_view.states(e, name), "todo": class_view.todo(e, name, s, a, g)}
                 if name in e["models"] else None for e, s, a, g in zip(envelopes, sources, advice, groups)]
        data[name] = {"short": short_name(name), "hidden": answer.hidden_reason(name, row),
                      "facts": [row.get("model_type", ""), ", ".join(row.get("modalities", ())), row.get("kind", ""),
                                (row.get("tiny") or {}).get("parameters", "")], "views": views}
    return data


def render_html(envelopes: Sequence[dict], sources: Sequence[str] = (), history: dict | None = None) -> str:
    """The page (see the module's contract); `sources` name the runs when their environments agree; `history`
    is `history.of` the published versions (None: `history.of(envelopes)`, none unless they span two versions)."""
    envelopes = list(envelopes)
    history = cell_history.of(envelopes) if history is None else history
    sources = list(sources) + [f"run {i + 1}" for i in range(len(sources), len(envelopes))]
    labels = run_labels(envelopes, sources)
    rows = _rows(envelopes)
    main = main_run(envelopes)
    hidden = sum(bool(answer.hidden_reason(name, row)) for name, row in rows.items())
    reasons: dict[str, int] = {}
    cells = {name: [[_cell_data(e["models"].get(name, {}).get("cells", {}).get(c), reasons) for c in e["checks"]]
                    for e in envelopes] for name in rows}
    data = {"runs": [{"label": label, "checks": e["checks"], "source": source, "paths": class_view.paths(e),
                      "descriptions": {c: answer.column_description(e, c) for c in e["checks"]},
                      "reproducers": {c: reproducer_template(e["environment"], c) for c in e["checks"]}}
                     for e, label, source in zip(envelopes, labels, sources)],
            "meanings": {**{v: [render.SYMBOLS[v], render.MEANINGS[v]] for v in VERDICTS},
                         "kerr": list(render.KNOWN_ERROR)},
            "answers": {a: list(v) for a, v in answer.ANSWERS.items()},
            "marks": {m: list(v) for m, v in answer.MARKS.items()},
            "names": list(rows), "reasons": list(reasons), "cells": cells,
            "classes": class_data(envelopes, sources, rows),
            "search": {name: search_text(name, row) for name, row in rows.items()},
            "history": cell_history.embedded(history, list(rows),
                                             list(dict.fromkeys(c for e in envelopes for c in e["checks"]))),
            "deploy": {"run": main, "groups": [[label, group] for label, _, group in
                                               deploy_groups(envelopes[main]["checks"])]}}
    several = len(envelopes) > 1
    per_run = "".join((f"<h3>{_e(label)}</h3>" if several else "") + summary_html(e, hidden)
                      for e, label in zip(envelopes, labels))
    declared = "".join((f"<h3>{_e(label)}</h3>" if several else "") + declared_html(e)
                       for e, label in zip(envelopes, labels))
    history_line = (f" History: {' → '.join(history['versions'])}, the published runs of each version."
                    if history else "")
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
<header id="top"><h1>Does my model work with my backend?</h1>
<p class="env">vlm-conformance: every <code>*ForConditionalGeneration</code> class of transformers, built tiny and
checked on each path. {_e(render.environment_line(envelopes[main]))}{_e(history_line)}</p>
<form id="find" onsubmit="return false"><label for="f-text">Your model</label>
<input id="f-text" type="search" placeholder="class, model_type or checkpoint: llava, qwen2-vl, PaliGemma…"
autocomplete="off"> <output id="shown">{len(rows) - hidden} of {len(rows)} classes</output>
{state_keys_html()}</form>
</header>
<main>
<section id="deploy-section">{deploy_html(envelopes[main], main, rows, history)}
<p class="hint">A cell is the class's state on that path (◐ with how many of its columns work; ↓ a column broke in
the newest published version, ↑ one works since); click it for the
column that says most, its reason, its history across transformers versions and the command that reruns it; click
a class for what works on which path and what to do about the rest. The address follows (copy it to link here).
Below: <a href="#summary">the summary per column</a>, <a href="#matrix-section">every column</a>,
<a href="#declared">declared vs observed flags</a>.</p></section>
<section id="about"><h2>Reading the full matrix</h2><ul class="env">{environments}</ul>{legend_html()}</section>
<section id="summary"><h2>Summary</h2><p class="note">{_e(render.PASS_RATE_NOTE)} Known: listed in
fixtures/expectations; new: not listed (the gate fails on it); could not check: the suite's own gap; n/a: does not
apply.</p>{per_run}</section>
<section id="matrix-section"><h2>Matrix</h2>{filters_html(envelopes, rows, hidden)}
<div class="scroll">{matrix_html(envelopes, labels, rows)}</div></section>
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
