"""Meta tests of conformance.report.render, and the check that the README shows the published run."""

from __future__ import annotations

import copy

import pytest

from conformance import locations
from conformance.meta.test_report import cell, make_envelope
from conformance.report import envelope as report
from conformance.report import render

pytestmark = pytest.mark.meta

ALPHA, BETA, GAMMA = (f"{n}ForConditionalGeneration" for n in ("Alpha", "Beta", "Gamma"))


def _section(markdown: str, title: str) -> str:
    """The text of the `## title` section of a rendered document."""
    start = markdown.index(f"## {title}")
    end = markdown.find("\n## ", start + 1)
    return markdown[start:] if end < 0 else markdown[start:end]


def test_readme_section_matches_published_run():
    """The README's matrix is exactly what `conformance publish reports/matrix.json` writes."""
    envelope_path = locations.PUBLISHED_MATRIX
    if not envelope_path.exists():
        pytest.fail(f"{envelope_path} is missing: publish a run with `conformance publish RUN.json` "
                    "(it writes reports/matrix.json, reports/MATRIX.md and the README section)", pytrace=False)
    envelope = report.load_envelope(envelope_path)
    readme = (locations.REPOSITORY / "README.md").read_text()
    stale = "is stale: rerun `conformance publish reports/matrix.json`"
    assert render.extract_section(readme) == render.readme_section(envelope), f"README.md matrix section {stale}"
    matrix = locations.REPOSITORY / "reports" / "MATRIX.md"
    assert matrix.exists() and matrix.read_text() == render.render_markdown(envelope), f"reports/MATRIX.md {stale}"


def test_every_verdict_has_a_distinct_symbol_in_the_legend():
    assert set(render.SYMBOLS) == set(report.VERDICTS)
    assert len(set(render.SYMBOLS.values())) == len(report.VERDICTS)
    legend = render.legend()
    assert all(symbol in legend for symbol in render.SYMBOLS.values())


@pytest.mark.parametrize("verdicts, expected", [
    (["pass"] * 80 + ["fail"] * 6, "93% (80/86)"),
    (["pass", "xpass"] + ["skip"] * 5 + ["error"] * 2, "50% (2/4)"),
    (["pass", "pass", "fail"], "66% (2/3)"),  # rounded down: never shows more than was passed
    (["skip"] * 3, "n/a (0/0)"),
])
def test_pass_rate(verdicts, expected):
    assert render.pass_rate([cell(v) for v in verdicts]) == expected


def test_an_improved_xpass_still_failed():
    cells = [{"verdict": "xpass", "observed": "fail"}, {"verdict": "xpass", "observed": "pass"}, {"verdict": "pass"}]
    assert render.pass_rate(cells) == "66% (2/3)"


def test_image_text_classes_come_first_then_the_others():
    markdown = render.render_markdown(make_envelope())
    image_text = _section(markdown, "Image-text-to-text classes (2)")
    others = _section(markdown, "Other classes (1)")
    assert markdown.index(image_text) < markdown.index(others)
    assert f"| {ALPHA} | ✅ | ❌ | ⚠️ | ✅ |" in image_text
    assert f"| {BETA} | ✅ | ✅ | ➖ | ✅ |" in image_text
    assert GAMMA not in image_text and f"| {GAMMA} | 💥 | 💥 | 💥 | 💥 |" in others


def test_summary_lines_per_check():
    summary = _section(render.render_markdown(make_envelope()), "Summary")
    assert "| `compile_prefill` | 33% (1/3) | 1 | 1 | 0 | 0 | 0 | 1 | 0 |" in summary
    assert "| `compile_decode` | 0% (0/2) |" in summary


def test_declared_vs_observed_lists_both_directions():
    section = _section(render.render_markdown(make_envelope()), "Declared vs observed")
    over = section[section.index("Declared but not observed"):section.index("Observed but not declared")]
    under = section[section.index("Observed but not declared"):]
    assert ALPHA in over and "`_can_compile_fullgraph = True`" in over and "Tensor.item()" in over
    assert BETA in under and "`_can_compile_fullgraph = False`" in under
    assert GAMMA not in section  # errors observe nothing


def test_a_false_flag_with_a_failing_check_is_no_disagreement():
    envelope = make_envelope()
    envelope["models"][BETA]["cells"]["compile_decode"] = cell("fail", "recompiled")
    overclaimed, underclaimed = render.disagreements(envelope)
    assert [r[0] for r in overclaimed] == [ALPHA] and underclaimed == []


def test_failures_carry_their_reasons_and_collapse_a_shared_reason():
    section = _section(render.render_markdown(make_envelope()), "Failures")
    assert f"❌ {ALPHA} / `compile_prefill`: `graph break: Tensor.item() (at transformers/a.py:12)`" in section
    assert f"⚠️ {ALPHA} / `compile_decode`: `recompiled: guard on cache_position`" in section
    errors = [line for line in section.splitlines() if line.startswith(f"- 💥 {GAMMA}")]
    assert errors == [f"- 💥 {GAMMA} / `build`, `compile_prefill`, `compile_decode`, `legacy_cache`: "
                      "`tiny model or inputs could not be built: KeyError: 'x'`"]


def test_reasons_cannot_break_markdown():
    envelope = make_envelope()
    envelope["models"][ALPHA]["cells"]["compile_prefill"]["reason"] = "a | b `c`\nd"
    markdown = render.render_markdown(envelope)
    row = next(line for line in markdown.splitlines() if line.startswith(f"| {ALPHA} | `_can"))
    assert "a \\| b 'c' d" in row and row.count(" | ") == 3
    assert "`compile_prefill`: `a | b 'c' d`" in markdown


def test_coverage_and_legacy_tuple_metric():
    markdown = render.render_markdown(make_envelope())
    coverage = _section(markdown, "Coverage")
    assert "2 of 3 classes built (2 built, 1 error)." in coverage
    assert f"| {ALPHA} | `alpha` | multimodal-decoder-only | built | 52,832 | auto | pixels |  |" in coverage
    assert f"| {GAMMA} | `gamma` | text-encoder-decoder | error |" in coverage and "KeyError" in coverage
    legacy = _section(markdown, "`legacy_cache`")
    assert f"| `rejected_unclear` | 1 | {BETA} |" in legacy


def test_coverage_status_of_a_failing_build_check():
    row = {"cells": {"build": cell("fail", "pixels ignored")}}
    assert render.coverage_status(row) == ("build check fails", "pixels ignored")
    assert render.coverage_status({"cells": {}}) == ("not run", "")
    part = {"cells": {"build": {"verdict": "skip", "reason": "not a standalone model: a part"},
                      "compile_prefill": {"verdict": "skip", "reason": "not a standalone model: a part"}}}
    assert render.coverage_status(part) == ("does not apply", "not a standalone model: a part")


def test_readme_section_is_compact_and_links_the_full_report():
    envelope = make_envelope()
    section = render.readme_section(envelope)
    assert section.startswith("transformers 5.24.0 · torch 2.13.0 · device cpu (x86_64) · dtype float32 · "
                              "backend eager · 2026-11-29\n")
    assert "| `build` | 66% (2/3) |" in section
    assert ALPHA in section and GAMMA not in section
    assert "[reports/MATRIX.md](reports/MATRIX.md)" in section
    assert render.readme_section(copy.deepcopy(envelope)) == section


def test_replace_and_extract_section_round_trip():
    readme = f"# title\n\nintro\n\n{render.START_MARKER}\nold\n{render.END_MARKER}\n\nafter\n"
    new = render.replace_section(readme, "new table\n")
    assert new == f"# title\n\nintro\n\n{render.START_MARKER}\nnew table\n{render.END_MARKER}\n\nafter\n"
    assert render.extract_section(new) == "new table\n"
    assert render.replace_section(new, "new table\n") == new


@pytest.mark.parametrize("text, message", [
    ("no markers at all\n", "found 0 start and 0 end"),
    (f"{render.START_MARKER}\n{render.START_MARKER}\n{render.END_MARKER}\n", "found 2 start and 1 end"),
    (f"{render.END_MARKER}\n{render.START_MARKER}\n", "comes before"),
])
def test_bad_markers_give_one_line(text, message):
    with pytest.raises(render.SectionError, match=message) as info:
        render.replace_section(text, "x\n", "README.md")
    assert "\n" not in str(info.value) and "README.md" in str(info.value)


def test_a_listed_build_error_has_its_own_symbol_not_the_known_failure_one():
    envelope = make_envelope()
    cells = envelope["models"][BETA]["cells"]
    cells["compile_prefill"] = {**cell("xfail", "tiny model or inputs could not be built: KeyError: 'x'",
                                     observed="error"), "expected": "error"}
    cells["build"] = {**cell("xfail", "graph break"), "expected": "fail"}
    row = next(line for line in render.render_markdown(envelope).splitlines() if line.startswith(f"| {BETA} |"))
    assert row.startswith(f"| {BETA} | ⚠️ | {render.KNOWN_ERROR[0]} |")
    assert render.KNOWN_ERROR[0] in render.legend()
    assert render.KNOWN_ERROR[0] not in render.SYMBOLS.values()


def test_a_listed_harness_gap_is_neither_a_known_failure_nor_a_flag_disagreement():
    """The suite's own listed error is 🚧 in its own list, and observes no flag (the class declares the flag
    and its other observing check passed: nothing disagrees)."""
    envelope = make_envelope()
    gap = {**cell("xfail", "harness error: the suite's own code raised: RuntimeError: x (at conformance/c.py:1)"),
           "expected": "error", "observed": "error", "fingerprint": {"kind": "harness_error", "where": "c:f"}}
    envelope["models"][ALPHA]["cells"]["compile_prefill"] = gap
    envelope["models"][ALPHA]["cells"]["compile_decode"] = cell("pass")
    markdown = render.render_markdown(envelope)
    failures = _section(markdown, "Failures")
    known = failures[failures.index("### Known failures"):failures.index("### Known harness gaps")]
    gaps = failures[failures.index("### Known harness gaps"):]
    assert ALPHA not in known and f"- {render.KNOWN_ERROR[0]} {ALPHA} / `compile_prefill`: `harness error" in gaps
    overclaimed, _ = render.disagreements(envelope)
    assert ALPHA not in [r[0] for r in overclaimed]


def test_records_and_envelope_keep_the_listed_verdict_of_an_xfail_cell():
    """A record is the cell's observation judged (`gate.judging.judge_cell`); the envelope keeps the judgement, the
    listed verdict and what the check said (``observed``, on every cell)."""
    from conformance.fingerprints import Fingerprint
    from conformance.gate.expectations import Expectation
    from conformance.gate.judging import judge_cell
    from conformance.run.records import make_record

    slow = Fingerprint("timeout", what="past the cell time limit")
    listed = Expectation(ALPHA, "build", "error", "slow", fingerprint=slow)
    record = judge_cell(make_record(model=ALPHA, check="build", observed="timeout", reason="r", seconds=0.0,
                                    metrics={}, nodeid="n", process="main", fingerprint=slow.to_data()), listed)
    envelope = report.build_envelope([record], {}, ["build"], {})
    built = envelope["models"][ALPHA]["cells"]["build"]
    assert (built["verdict"], built["expected"], built["observed"]) == ("xfail", "error", "timeout")
    plain = judge_cell(make_record(model=ALPHA, check="build", observed="pass", reason="", seconds=0.0, metrics={},
                                   nodeid="n", process="main"), None)
    assert plain["verdict"] == plain["observed"] == "pass" and "expected" not in plain and "gate" not in plain


def test_the_readme_puts_deployment_columns_in_their_own_table_grouped_by_runtime():
    """Columns that need an extra's runtime (ONNX Runtime, ExecuTorch, OpenVINO) leave the torch table for a
    second one, grouped by runtime in column order, each header naming its runtime."""
    from conformance.meta.test_report import CHECK_INFO, cell, make_envelope
    from conformance.report.envelope import summarize

    envelope = make_envelope()
    envelope["checks"] = [*envelope["checks"], "export_onnx", "executorch", "exporter_onnx_forward"]
    envelope["check_info"] = {**CHECK_INFO, "export_onnx": {"column": 93, "extra": "onnx"},
                              "executorch": {"column": 100, "extra": "executorch"},
                              "exporter_onnx_forward": {"column": 104, "extra": "onnx"}}
    for row in envelope["models"].values():
        row["cells"].update({c: cell("pass") for c in ("export_onnx", "executorch", "exporter_onnx_forward")})
    envelope["summary"] = summarize(envelope["models"], envelope["checks"])
    assert render.runtime_groups(envelope) == [
        ("", ["build", "compile_prefill", "compile_decode", "legacy_cache"]),
        ("ONNX Runtime", ["export_onnx", "exporter_onnx_forward"]), ("ExecuTorch", ["executorch"])]
    section = render.readme_section(envelope)
    torch_table, deployed = section.split("The same classes deployed, by runtime:")
    assert "`export_onnx`" not in torch_table.split("torch and transformers only")[1]
    header = next(line for line in deployed.splitlines() if line.startswith("| class"))
    assert header == ("| class | `export_onnx`<br>ONNX Runtime | `exporter_onnx_forward`<br>ONNX Runtime | "
                      "`executorch`<br>ExecuTorch |")


def test_the_readme_shows_each_check_in_every_dtype_side_by_side():
    """A float32 matrix with bfloat16 and float16 runs merged: their columns leave the torch table for one whose
    cell is the class's verdict in float32, bfloat16 and float16 (⬜ where a dtype has no such column)."""
    from conformance.meta.test_report import CHECK_INFO, cell, make_envelope
    from conformance.report.envelope import summarize

    envelope = make_envelope()
    half = {"build~bf16": "pass", "compile_prefill~bf16": "fail", "build~fp16": "xfail"}
    envelope["checks"] = [*envelope["checks"], *half]
    envelope["check_info"] = {**CHECK_INFO, **{c: {"column": 1000 + i} for i, c in enumerate(half)}}
    envelope["environment"]["dtypes"] = {"float16": {}, "bfloat16": {}}
    for row in envelope["models"].values():
        row["cells"].update({c: cell(verdict) for c, verdict in half.items()})
    envelope["summary"] = summarize(envelope["models"], envelope["checks"])
    section = render.readme_section(envelope)
    torch_table, by_dtype = section.split("The same classes by precision:")
    assert "~bf16" not in torch_table.split("Image-text-to-text classes")[1]
    assert "float32, bfloat16 and float16, side by side" in by_dtype.splitlines()[0]
    header, _, first = [line for line in by_dtype.splitlines() if line.startswith("|")][:3]
    assert header == "| class | `build` | `compile_prefill` |"
    plain = envelope["models"][first.split(" | ")[0].removeprefix("| ")]["cells"]
    assert first.split(" | ")[1:] == [f"{render._symbol(plain['build'])} ✅ ⚠️",
                                      f"{render._symbol(plain['compile_prefill'])} ❌ ⬜ |"]
    one_dtype = make_envelope()
    assert "by precision" not in render.readme_section(one_dtype)
