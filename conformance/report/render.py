"""Stage 4, report: a run envelope -> Markdown (the full matrix, the README section).

Contracts:

* `render_markdown(envelope)` is reports/MATRIX.md: environment, legend,
  per-check summary with pass rates (a column the run could not run says
  "not run" and why), the image-text matrix (rows whose
  `tasks` contain "image-text-to-text"), the matrix of the other classes,
  declared flags vs observations, failures with their one-line reasons
  (a dtype column's failure that the run's own dtype does not share says
  so: `dtype_only`, "bfloat16 only: passes in float32"),
  the metrics the checks list class by class (the legacy-tuple handling), and coverage (built, or error + reason).
* `readme_section(envelope)` is the compact README part: environment line,
  summary, image-text matrix (the run's own dtype), the same classes deployed by
  runtime, and by precision where dtype runs were merged (`precision_section`:
  a check's verdicts in float32, bfloat16 and float16 side by side in one cell),
  a link to reports/MATRIX.md. It depends only on
  the envelope, so the README can be checked against reports/matrix.json.
* `replace_section(text, section)` puts a section between the README markers.

A cell the run did not include (no cell in the envelope: a column whose
extra was not installed, an opt-in column the run did not name, or a class
another run file covered) is `NOT_RUN`,
never ➖ (the check ran and does not apply). Both outputs are pure functions
of the envelope (no clock, no filesystem).
"""

from __future__ import annotations

from typing import NamedTuple

from conformance import columns, tolerances
from conformance.report import summary
from conformance.verdicts import FAILING, VERDICTS, passed

START_MARKER = "<!-- matrix:start -->"
END_MARKER = "<!-- matrix:end -->"
IMAGE_TEXT_TASK = "image-text-to-text"
FULL_REPORT_LINK = "reports/MATRIX.md"

SYMBOLS = {
    "pass": "✅",
    "fail": "❌",
    "xfail": "⚠️",
    "xpass": "❗",
    "skip": "➖",
    "error": "💥",
    "timeout": "⏱️",
}
MEANINGS = {
    "pass": "pass",
    "fail": "fail",
    "xfail": "known failure (listed in fixtures/expectations with this failure's fingerprint)",
    "xpass": "better than listed: passes, or fails with fewer graph breaks or recompiles (update the expectation)",
    "skip": "does not apply",
    "error": "harness error: the suite could not build the tiny model or inputs, or its own code failed",
    "timeout": "ran past its time limit",
}
# An xfail cell whose listed verdict is `error`: a known gap of the suite (kind harness_error: the tiny model or its
# inputs could not be built, or the check could not set itself up), so the cell says nothing about the model.
KNOWN_ERROR = ("🚧", "known harness gap: the suite could not build the model or inputs or set up the check "
                     "(listed in fixtures/expectations; the suite's own, not a finding)")
# No cell: the run did not include it (e.g. an optional column whose extra was not installed, an opt-in column).
# Not a verdict.
NOT_RUN = ("⬜", "not run (not in this run, e.g. an optional column whose extra was not installed: see the summary)")
DID_NOT_HOLD = ("fail", "xfail", "timeout")  # a check that ran and did not hold (error: never ran)


REASON_LIMIT = 1000
TABLE_REASON_LIMIT = 300
PASS_RATE_NOTE = "Pass rate: cells whose check passed (pass, or xpass of a pass) / (all cells − skip), rounded down."


# --------------------------------------------------------------------------- small pieces


def pass_rate(cells: list[dict]) -> str:
    """`93% (80/86)`: the cells whose check passed (`verdicts.passed`) over those that apply (all but skip)."""
    applicable = [cell for cell in cells if cell["verdict"] != "skip"]
    if not applicable:
        return "n/a (0/0)"
    count = sum(passed(cell) for cell in applicable)
    return f"{100 * count // len(applicable)}% ({count}/{len(applicable)})"


def column(envelope: dict, check_id: str) -> list[dict]:
    """The cells of one check, over every class that has it."""
    return [row["cells"][check_id] for row in envelope["models"].values() if check_id in row["cells"]]


def code(text: str, table: bool = False) -> str:
    """`text` as a one-line Markdown code span (backticks inside become quotes).

    In a table cell a `|` would end the cell even inside a code span, so it is
    escaped there (GitHub renders `\\|` in a table cell as `|`).
    """
    text = " ".join(str(text).split()).replace("`", "'")
    limit = TABLE_REASON_LIMIT if table else REASON_LIMIT
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    if table:
        text = text.replace("|", "\\|")
    return f"`{text}`" if text else ""


def environment_line(envelope: dict) -> str:
    env = envelope["environment"]
    device = env["device"] + (f" ({env['device_name']})" if env.get("device_name") else "")
    date = str(envelope.get("created", ""))[:10]
    others = "".join(f" (columns `{columns.suffix(b)}`: backend {b})" for b in env.get("backends") or {})
    others += "".join(f" (columns `{columns.dtype_column('', d)}`: dtype {d})" for d in env.get("dtypes") or {})
    return (f"transformers {env['transformers']} · torch {env['torch']} · device {device} · "
            f"dtype {env['dtype']} · backend {env['backend']}{others} · {date}")


def legend() -> str:
    items = [f"{SYMBOLS[v]} {MEANINGS[v]}" for v in VERDICTS] + [" ".join(KNOWN_ERROR)]
    return "Legend: " + " · ".join(items + [" ".join(NOT_RUN)]) + "."


def is_image_text(row: dict) -> bool:
    return IMAGE_TEXT_TASK in row.get("tasks", ())


def _table(header: list[str], rows: list[list[str]], align: list[str]) -> list[str]:
    marks = {"l": "---", "c": ":---:", "r": "---:"}
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(marks[a] for a in align) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def _verdict(cell: dict | None) -> str:
    return cell["verdict"] if cell else ""


def _symbol(cell: dict | None) -> str:
    if cell is None:
        return NOT_RUN[0]
    if summary.is_gap(cell):
        return KNOWN_ERROR[0]
    return SYMBOLS.get(_verdict(cell), "")


# --------------------------------------------------------------------------- sections


def not_run_columns(envelope: dict) -> dict[str, str]:
    """Column -> why the run did not run it (the envelope's `not_run`; none in older run files)."""
    return {c: why for c, why in (envelope.get("not_run") or {}).items()}


def summary_section(envelope: dict) -> list[str]:
    summary = envelope["summary"]
    checks = [c for c in envelope["checks"]] + [c for c in summary if c not in envelope["checks"]]
    not_run = not_run_columns(envelope)
    rows = []
    for check_id in checks:
        counts = summary.get(check_id, {})
        rate = f"{NOT_RUN[0]} not run" if check_id in not_run else pass_rate(column(envelope, check_id))
        rows.append([f"`{check_id}`", rate] + [str(counts.get(v, 0)) for v in VERDICTS])
    lines = _table(["check", "pass rate"] + [SYMBOLS[v] for v in VERDICTS], rows, ["l", "r"] + ["r"] * len(VERDICTS))
    by_reason: dict[str, list[str]] = {}
    for check_id, why in not_run.items():
        by_reason.setdefault(why, []).append(f"`{check_id}`")
    if by_reason:
        lines += [""] + [f"Not run: {', '.join(ids)}: {code(why)}." for why, ids in by_reason.items()]
    classes: dict[str, list[str]] = {}
    for model, why in not_run_classes(envelope).items():
        classes.setdefault(why, []).append(f"`{model}`")
    if classes:
        lines += [""] + [f"Classes not run (every cell ⬜): {', '.join(names)}: {code(why)}."
                         for why, names in classes.items()]
    return lines


def not_run_classes(envelope: dict) -> dict[str, str]:
    """Class -> why none of its cells ran (a package it needs is not installed: the row's `not_run`)."""
    return {m: row["not_run"] for m, row in envelope["models"].items() if row.get("not_run") and not row["cells"]}


RUNTIMES = {"onnx": "ONNX Runtime", "executorch": "ExecuTorch", "openvino": "OpenVINO"}  # an extra's runtime


def runtime_groups(envelope: dict) -> list[tuple[str, list[str]]]:
    """The columns of a run grouped for reading: ("", the columns that need only torch and transformers), then
    one (runtime, columns) per extra that installs a deployment runtime (`check_info[c]["extra"]`), in the order
    the run's columns first name them. The README gives each its table."""
    info = envelope.get("check_info") or {}
    groups: dict[str, list[str]] = {"": []}
    for check_id in envelope["checks"]:
        extra = (info.get(check_id) or {}).get("extra", "")
        groups.setdefault(RUNTIMES.get(extra, extra), []).append(check_id)
    return [(name, checks) for name, checks in groups.items() if checks or not name]


def matrix_section(envelope: dict, names: list[str], checks: list[str] | None = None,
                   headers: list[str] | None = None) -> list[str]:
    checks = envelope["checks"] if checks is None else checks
    rows = []
    for name in names:
        cells = envelope["models"][name]["cells"]
        rows.append([name] + [_symbol(cells.get(c)) for c in checks])
    return _table(["class"] + (headers or [f"`{c}`" for c in checks]), rows, ["l"] + ["c"] * len(checks))


def precision_columns(envelope: dict, checks: list[str]) -> list[tuple[str, list[str | None]]]:
    """Of `checks`, each column of the run's own dtype that a merged dtype run widens (``static_cache`` with
    ``static_cache~bf16``), with its columns in every dtype of the matrix, the run's own first, then
    `columns.DTYPES`' order (None where that dtype has no such column); [] for a matrix of one dtype."""
    dtypes = matrix_dtypes(envelope)
    if len(dtypes) == 1:
        return []
    present = set(checks)
    found = []
    for check_id in checks:
        if columns.split_dtype(check_id)[1]:
            continue
        widened = [check_id] + [c if (c := columns.dtype_column(check_id, d)) in present else None
                                for d in dtypes[1:]]
        if any(widened[1:]):
            found.append((check_id, widened))
    return found


def matrix_dtypes(envelope: dict) -> list[str]:
    """The dtypes of a matrix's columns: the run's own, then those of the dtype runs merged in (`dtype_rank`)."""
    env = envelope["environment"]
    return [env.get("dtype", "float32")] + sorted(env.get("dtypes") or {}, key=dtype_rank)


def dtype_rank(dtype: str) -> int:
    """Where a dtype's columns go among the matrix's dtypes: `columns.DTYPES`' order, any other last."""
    return columns.DTYPES.index(dtype) if dtype in columns.DTYPES else len(columns.DTYPES)


def precision_section(envelope: dict, names: list[str], checks: list[str]) -> list[str]:
    """One column per check that a dtype run widens, each cell the class's verdicts in every dtype of the matrix,
    side by side (``✅ ✅ ⚠️``: float32, bfloat16, float16; ⬜ where that dtype has no such column)."""
    widened = precision_columns(envelope, checks)
    rows = []
    for name in names:
        cells = envelope["models"][name]["cells"]
        rows.append([name] + [" ".join(_symbol(cells.get(c)) if c else NOT_RUN[0] for c in group)
                              for _, group in widened])
    return _table(["class"] + [f"`{c}`" for c, _ in widened], rows, ["l"] + ["c"] * len(widened))


def split_classes(envelope: dict) -> tuple[list[str], list[str]]:
    """(image-text class names, other class names), each sorted."""
    names = sorted(envelope["models"])
    image_text = [n for n in names if is_image_text(envelope["models"][n])]
    return image_text, [n for n in names if n not in image_text]


def flag_checks(envelope: dict) -> dict[str, tuple[str, ...]]:
    """Declared capability flag -> the checks of the run that observe it (the run's `check_info`), in the run's own
    dtype: a flag declares what the code can do in any dtype, so a half-precision column (``~bf16``) decides none (a
    failure in half precision only is a finding of its own, `precision_diff`)."""
    info = envelope.get("check_info") or {}
    flags: dict[str, list[str]] = {}
    for check_id in envelope["checks"]:
        if columns.split_dtype(check_id)[1]:
            continue
        for flag in (info.get(check_id) or {}).get("observes", []):
            flags.setdefault(flag, []).append(check_id)
    return {flag: tuple(checks) for flag, checks in flags.items()}


def listed_metrics(envelope: dict) -> dict[str, tuple[str, str]]:
    """Check -> (metric, what it says) whose values the report lists class by class."""
    info = envelope.get("check_info") or {}
    return {c: (info[c]["lists"]["metric"], info[c]["lists"]["what"])
            for c in envelope["checks"] if (info.get(c) or {}).get("lists")}


def observing_cells(envelope: dict, row: dict, flag: str, checks) -> dict[str, dict]:
    """The cells of `checks` that decide `flag` for one class (`columns.deciding_cells`: for a flag whose
    observation depends on the backend, the preferred backend's columns where the class has one that applies)."""
    cells = {c: row["cells"][c] for c in checks if c in row["cells"]}
    return columns.deciding_cells(envelope, flag, cells)


class Disagreement(NamedTuple):
    """A declared flag that the observing checks contradict; `first_failure` is (check, reason) of a true flag."""

    model: str
    flag: str
    declared: object
    observed: dict[str, str]  # observing check -> its verdict ("gap" for a listed harness gap, `summary.is_gap`)
    first_failure: tuple[str, str] | None


def flag_disagreements(envelope: dict) -> tuple[list[Disagreement], list[Disagreement]]:
    """(declared but not observed, observed but not declared), by class.

    The observing cells are `observing_cells` (inductor's decide the compile
    flag where the class has them). A true flag disagrees when any observing check fails (fail, xfail,
    timeout, or an xpass that failed with fewer breaks than listed; a listed harness gap, `summary.is_gap`,
    observed nothing and never disagrees). A false flag disagrees ("could be flipped") when every
    observing check that ran and applies passed, at least one of them.
    """
    overclaimed, underclaimed = [], []
    for name, row in sorted(envelope["models"].items()):
        declared = row.get("declared", {})
        for flag, checks in flag_checks(envelope).items():
            if flag not in declared:
                continue
            cells = observing_cells(envelope, row, flag, checks)
            if not cells:
                continue
            observed = {c: "gap" if summary.is_gap(cell) else cell["verdict"] for c, cell in cells.items()}
            if declared[flag]:
                failing = [(c, cell.get("reason", "")) for c, cell in cells.items() if not summary.is_gap(cell)
                           and (cell["verdict"] in DID_NOT_HOLD or (cell["verdict"] == "xpass" and not passed(cell)))]
                if failing:
                    overclaimed.append(Disagreement(name, flag, declared[flag], observed, failing[0]))
            elif any(passed(c) for c in cells.values()) and all(passed(c) or c["verdict"] == "skip"
                                                              for c in cells.values()):
                underclaimed.append(Disagreement(name, flag, declared[flag], observed, None))
    return overclaimed, underclaimed


def disagreements(envelope: dict) -> tuple[list[list[str]], list[list[str]]]:
    """`flag_disagreements` as Markdown table rows: class, flag, observations (and the first failure)."""
    def observed(d: Disagreement) -> str:
        return ", ".join(f"`{c}` {KNOWN_ERROR[0] if v == 'gap' else SYMBOLS[v]} {v}" for c, v in d.observed.items())

    overclaimed, underclaimed = flag_disagreements(envelope)
    return ([[d.model, f"`{d.flag} = {d.declared}`", observed(d), code(": ".join(d.first_failure), table=True)]
             for d in overclaimed],
            [[d.model, f"`{d.flag} = {d.declared}`", observed(d)] for d in underclaimed])


def declared_section(envelope: dict) -> list[str]:
    lines = ["## Declared vs observed", ""]
    if not flag_checks(envelope):
        return lines + ["This run file does not say which of its checks observe a declared flag (no `check_info`): "
                        "nothing to compare.", ""]
    preferred = columns.PREFERRED_BACKEND
    if any(columns.backend_of(envelope, c) == preferred for c in envelope["checks"]):
        lines += [f"`{', '.join(columns.BACKEND_FLAGS)}` is judged by the `{columns.suffix(preferred)}` columns where "
                  f"a class has them (what users compile with: {preferred} can fail where dynamo's eager trace "
                  "passes), else by the eager columns.", ""]
    overclaimed, underclaimed = disagreements(envelope)
    if not overclaimed and not underclaimed:
        return lines + ["Every declared flag agrees with what the checks observed.", ""]
    lines += [f"### Declared but not observed ({len(overclaimed)})", ""]
    if overclaimed:
        lines += _table(["class", "declared", "observed", "first failure"], overclaimed, ["l", "l", "l", "l"])
    else:
        lines.append("None.")
    lines += ["", f"### Observed but not declared: the flag could be flipped ({len(underclaimed)})", ""]
    if underclaimed:
        lines += _table(["class", "declared", "observed"], underclaimed, ["l", "l", "l"])
    else:
        lines.append("None.")
    return lines + [""]


FAILURE_GROUPS = (
    (("fail", "timeout"), "Failures"),
    (("xpass",), "Stale expectations (passing, or failing less than listed)"),
    (("error",), "Harness errors (the suite could not set the cell up)"),
    (("xfail",), "Known failures (listed in fixtures/expectations)"),
    (("gap",), "Known harness gaps (listed in fixtures/expectations; the suite's own, not a finding about the model)"),
)


def dtype_only(envelope: dict, model: str, column: str) -> str:
    """Of a failing cell of a dtype column (``static_cache~bf16``), why it fails in that dtype only, where it does:
    "bfloat16 only: passes in float32" when the same check of the same class passes in the run's own dtype,
    "bfloat16 only: fails otherwise in float32" when it fails there with another fingerprint; else "" (the same
    failure in both, a column of the run's own dtype, or no such cell: nothing to compare)."""
    contrast = dtype_contrast(envelope, model, column)
    if not contrast:
        return ""
    return f"{columns.split_dtype(column)[1]} only: {contrast} in {envelope['environment'].get('dtype', 'float32')}"


def dtype_contrast(envelope: dict, model: str, column: str) -> str:
    """`dtype_only`'s rule, in one place: "passes" or "fails otherwise" (what the same check of the same class does
    in the run's own dtype, where a dtype column's cell fails), else ""."""
    base, dtype = columns.split_dtype(column)
    main = envelope["environment"].get("dtype", "float32")
    row = envelope["models"].get(model, {}).get("cells", {})
    cell, other = row.get(column), row.get(base)
    if not dtype or dtype == main or cell is None or other is None or cell["observed"] not in FAILING:
        return ""
    if passed(other):
        return "passes"
    if other["observed"] in FAILING and None not in (cell.get("fingerprint"), other.get("fingerprint")) and \
            cell["fingerprint"] != other["fingerprint"]:
        return "fails otherwise"
    return ""


def _failure_group(cell: dict) -> str:
    """The `FAILURE_GROUPS` key of a cell: its verdict, "gap" for a listed harness gap (`summary.is_gap`)."""
    return "gap" if summary.is_gap(cell) else cell["verdict"]


def failures_section(envelope: dict) -> list[str]:
    """Every non-passing applicable cell with its reason; a class's cells sharing a reason share a line."""
    lines = ["## Failures", ""]
    checks = envelope["checks"]
    order = {c: i for i, c in enumerate(checks)}
    for verdicts, title in FAILURE_GROUPS:
        found = []
        for name, row in sorted(envelope["models"].items()):
            by_reason: dict[tuple[str, str], list[str]] = {}
            for check_id, cell in sorted(row["cells"].items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])):
                if _failure_group(cell) in verdicts:
                    reason = cell.get("reason", "")
                    if cell.get("gate"):  # a listed cell that is not xfail: why, then what was observed
                        reason = f"{cell['gate']} | observed: {reason}"
                    only = dtype_only(envelope, name, check_id)
                    by_reason.setdefault((_failure_group(cell), reason, only), []).append(check_id)
            for (verdict, reason, only), ids in by_reason.items():
                where = ", ".join(f"`{c}`" for c in ids)
                mark = KNOWN_ERROR[0] if verdict == "gap" else SYMBOLS[verdict]
                found.append(f"- {mark} {name} / {where}: {code(reason) or '(no reason recorded)'}"
                             + (f" ({only})" if only else ""))
        lines += [f"### {title} ({len(found)})", ""] + (found or ["None."]) + [""]
    return lines + near_edge_section(envelope)


def near_edge_section(envelope: dict) -> list[str]:
    """The comparing cells whose worst ratio to the allowed difference is within `tolerances.NEAR_EDGE` of 1 on
    their side: the verdicts another machine or day could flip, named before a red CI names them."""
    edge = summary.near_edge(envelope)
    found = [f"- {SYMBOLS[verdict]} {model} / `{check}`: worst ratio {ratio:.2f} of the allowed difference"
             for model, check, verdict, ratio in edge]
    lines = [f"### Near the edge (within {tolerances.NEAR_EDGE:g}x of the tolerance) ({len(found)})", ""] + \
        (found or ["None."]) + [""]
    unplaced = unplaced_comparisons(envelope)
    if unplaced:
        lines += ["Compared without a recorded worst ratio (cells published before it was recorded: their distance "
                  "to the edge is unknown until the column is rerun): " +
                  ", ".join(f"`{check}` {count}" for check, count in unplaced.items()) + ".", ""]
    return lines


def unplaced_comparisons(envelope: dict) -> dict[str, int]:
    """Per comparing column, how many cells recorded a comparison but no worst ratio."""
    info = envelope.get("check_info", {})
    found: dict[str, int] = {}
    for check in envelope["checks"]:
        if not info.get(check, {}).get("compares"):
            continue
        for row in envelope["models"].values():
            metrics = row["cells"].get(check, {}).get("metrics") or {}
            if any(k in metrics for k in tolerances.COMPARISON_METRICS) and \
                    not any(k in metrics for k in summary.RATIOS):
                found[check] = found.get(check, 0) + 1
    return found


def listed_metrics_section(envelope: dict) -> list[str]:
    lines = []
    for check_id, (metric, what) in listed_metrics(envelope).items():
        by_value: dict[str, list[str]] = {}
        for name, row in sorted(envelope["models"].items()):
            value = row["cells"].get(check_id, {}).get("metrics", {}).get(metric)
            if value is not None:
                by_value.setdefault(str(value), []).append(name)
        if not by_value:
            continue
        rows = [[f"`{v}`", str(len(names)), ", ".join(names)] for v, names in sorted(by_value.items())]
        lines += [f"## `{check_id}`: {what} (`{metric}`)", ""]
        lines += _table(["value", "classes", "which"], rows, ["l", "r", "l"]) + [""]
    return lines


def coverage_status(row: dict) -> tuple[str, str]:
    """(status, reason) of one class: built, build check fails, does not apply, error, timeout, not run."""
    cells = row.get("cells", {})
    build = cells.get("build")
    if build is not None:
        verdict = build["verdict"]
        if passed(build):
            return "built", ""
        if verdict == "skip":  # not a standalone model (conformance.discover.not_standalone): no check applies
            return "does not apply", build.get("reason", "")
        if verdict in ("fail", "xfail"):
            return "build check fails", build.get("reason", "")
        if verdict in ("error", "timeout"):
            return verdict, build.get("reason", "")
    errors = [cell for cell in cells.values() if cell["verdict"] == "error"]
    if errors:
        return "error", errors[0].get("reason", "")
    return ("built", "") if cells else ("not run", "")


def coverage_section(envelope: dict) -> list[str]:
    rows, counts = [], {}
    for name, row in sorted(envelope["models"].items()):
        status, reason = coverage_status(row)
        counts[status] = counts.get(status, 0) + 1
        tiny = row.get("tiny", {})
        size = f"{tiny['parameters']:,}" if isinstance(tiny.get("parameters"), int) and tiny["parameters"] else ""
        rows.append([name, f"`{row.get('model_type', '')}`", row.get("kind", ""), status, size,
                     tiny.get("source", ""), tiny.get("strategy", ""), code(reason, table=True)])
    total = len(envelope["models"])
    tally = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    lines = ["## Coverage", "", f"{counts.get('built', 0)} of {total} classes built ({tally}).", ""]
    lines += _table(["class", "model_type", "kind", "status", "tiny parameters", "config", "inputs", "reason"],
                    rows, ["l", "l", "l", "l", "r", "l", "l", "l"])
    return lines + [""]


# --------------------------------------------------------------------------- documents


def render_markdown(envelope: dict) -> str:
    """The full matrix document (reports/MATRIX.md)."""
    image_text, others = split_classes(envelope)
    suite = envelope.get("suite", {})
    lines = ["# vlm-conformance matrix", "", environment_line(envelope), ""]
    if suite.get("version") or suite.get("commit"):
        lines += [f"Suite {suite.get('version', '')} at commit {suite.get('commit') or 'unknown'}; "
                  f"python {envelope['environment'].get('python', '')}. {cell_code_line(envelope)}", ""]
    lines += [legend(), "", PASS_RATE_NOTE, ""]
    lines += ["## Summary", ""] + summary_section(envelope) + [""]
    lines += [f"## Image-text-to-text classes ({len(image_text)})", ""]
    lines += (matrix_section(envelope, image_text) if image_text else ["None."]) + [""]
    lines += [f"## Other classes ({len(others)})", ""]
    lines += (matrix_section(envelope, others) if others else ["None."]) + [""]
    lines += declared_section(envelope)
    lines += failures_section(envelope)
    lines += listed_metrics_section(envelope)
    lines += coverage_section(envelope)
    return "\n".join(lines).rstrip("\n") + "\n"


def cell_code_line(envelope: dict) -> str:
    """Whether one commit's checks made every cell (`conformance.report.cell_code`), in one sentence."""
    runs = (envelope.get("environment") or {}).get("runs")
    codes = [r.get("cell_code") or "" for r in runs] if isinstance(runs, list) else \
        [(envelope.get("suite") or {}).get("cell_code") or ""]
    commits = sorted({r.get("suite") for r in runs if r.get("suite")}) if isinstance(runs, list) else []
    at = f" (runs at commits {', '.join(commits)})" if len(commits) > 1 else ""
    if len(set(codes)) == 1 and codes[0]:
        return f"Every cell was made by cell code {codes[0]}, one commit's checks{at}."
    counted = ", ".join(f"{code or 'unknown'}: {codes.count(code)} run(s)" for code in dict.fromkeys(codes))
    return f"The cells were made by more than one commit's checks, or by unknown ones ({counted})."


def readme_section(envelope: dict) -> str:
    """The README part between the markers (markers excluded), ending with a newline."""
    image_text, others = split_classes(envelope)
    lines = [environment_line(envelope), "", legend(), "", PASS_RATE_NOTE, ""]
    lines += summary_section(envelope) + [""]
    groups = runtime_groups(envelope)
    torch_only = [c for c in groups[0][1] if not columns.split_dtype(c)[1]]  # dtype columns: their own table
    widened = precision_columns(envelope, groups[0][1])
    deployed = [(runtime, c) for runtime, checks in groups[1:] for c in checks]
    lines += [f"Image-text-to-text classes ({len(image_text)})"
              + (": torch.compile, the caches and torch.export (torch and transformers only)" if deployed else "")
              + ":", ""]
    lines += (matrix_section(envelope, image_text, torch_only) if image_text else ["None."]) + [""]
    if deployed and image_text:
        runtimes = ", ".join(f"{runtime} (`{_extra_of(envelope, checks[0])}` extra: "
                             f"{', '.join(f'`{c}`' for c in checks)})" for runtime, checks in groups[1:])
        lines += [f"The same classes deployed, by runtime: {runtimes}:", ""]
        lines += matrix_section(envelope, image_text, [c for _, c in deployed],
                                headers=[f"`{c}`<br>{runtime}" for runtime, c in deployed]) + [""]
    if widened and image_text:
        dtypes = matrix_dtypes(envelope)
        named = ", ".join(dtypes[:-1]) + f" and {dtypes[-1]}"
        lines += [f"The same classes by precision: each cell is the check's verdict in {named}, side by side "
                  f"(the columns `{columns.dtype_column('CHECK', dtypes[1])}` and the like; the full report names "
                  "each failure that only half precision has):", ""]
        lines += precision_section(envelope, image_text, groups[0][1]) + [""]
    lines += [f"Full report (the other classes ({len(others)}), declared flags vs observations, failures with "
              f"their reasons, coverage): [{FULL_REPORT_LINK}]({FULL_REPORT_LINK})."]
    return "\n".join(lines) + "\n"


def _extra_of(envelope: dict, check_id: str) -> str:
    return ((envelope.get("check_info") or {}).get(check_id) or {}).get("extra", "")


class SectionError(ValueError):
    """The README lacks usable markers; the message is one line for a person."""


def extract_section(text: str, source: str = "README.md") -> str:
    """The text between the markers (exclusive), as written by `replace_section`."""
    start, end = _marker_positions(text, source)
    return text[start + len(START_MARKER):end].removeprefix("\n")


def replace_section(text: str, section: str, source: str = "README.md") -> str:
    """`text` with everything between the markers replaced by `section`."""
    start, end = _marker_positions(text, source)
    return text[: start + len(START_MARKER)] + "\n" + section + text[end:]


def _marker_positions(text: str, source: str) -> tuple[int, int]:
    fix = f"add a line {START_MARKER} and, below it, a line {END_MARKER} where the matrix goes"
    if text.count(START_MARKER) != 1 or text.count(END_MARKER) != 1:
        found = f"{text.count(START_MARKER)} start and {text.count(END_MARKER)} end markers"
        raise SectionError(f"{source}: expected exactly one pair of matrix markers, found {found}; {fix}")
    start, end = text.index(START_MARKER), text.index(END_MARKER)
    if end < start:
        raise SectionError(f"{source}: {END_MARKER} comes before {START_MARKER}; {fix}")
    return start, end
