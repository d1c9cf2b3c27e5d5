"""`conformance findings`: failing cells grouped by root cause, on synthetic envelopes with and without fingerprints."""

from __future__ import annotations

import copy
import json

import pytest

from conformance.meta.test_report import CHECK_INFO, ENV, cell
from conformance.report import envelope as report
from conformance.report import findings
from conformance.tools import cli, upstream

pytestmark = pytest.mark.meta

LOCK = {"kind": "unsupported", "where": "transformers.utils.output_capturing:install_hooks", "error": "Unsupported"}
GUARD = {"kind": "data_dependent_guard", "where": "transformers.models.a.modeling_a:AModel.get_image_features",
         "error": "GuardOnDataDependentSymNode"}
HARNESS = {"kind": "harness_error", "error": "KeyError"}
CHECKS = ["build", "compile_prefill", "compile_decode"]


def failing(verdict: str, reason: str, fingerprint: dict | None, seconds: float = 1.0, **extra) -> dict:
    made = {**cell(verdict, reason), "seconds": seconds, **extra}
    made["observed"] = extra.get("observed") or report.observation({**made, "observed": ""})
    if fingerprint:
        made["fingerprint"] = dict(fingerprint)
    return made


def make_run(backend: str = "eager", transformers: str = "5.24.0") -> dict:
    lock = "fullgraph compile failed: Unsupported: Unsupported context manager (at transformers/utils/output_capturing.py:239)"
    models = {
        "AForConditionalGeneration": {"cells": {
            "build": cell("pass"),
            "compile_prefill": failing("xfail", lock, LOCK, 3.0, expected="fail"),
            "compile_decode": failing("fail", "fullgraph compile failed: Could not guard on data-dependent (u0, 7)",
                                      {**GUARD, "sites": {"Data dependent @ transformers.models.a:f": 2}}, 2.0)}},
        "BForConditionalGeneration": {"cells": {
            "build": cell("pass"),
            "compile_prefill": failing("fail", lock.replace("239", "241"), LOCK, 0.5),
            "compile_decode": cell("pass")}},
        "CForConditionalGeneration": {"cells": {
            "build": cell("pass"),
            "compile_prefill": failing("xfail", lock, LOCK, 2.0, expected="fail"),
            "compile_decode": failing("xpass", "", None, observed="pass")}},
        "DForConditionalGeneration": {"cells": {c: failing("xfail", "tiny model or inputs could not be built", HARNESS,
                                                           expected="error") for c in CHECKS}},
        "EForConditionalGeneration": {"cells": {"build": cell("pass"), "compile_prefill": cell("skip", "n/a"),
                                                "compile_decode": cell("pass")}},
    }
    envelope = {"schema": report.SCHEMA, "created": "2026-11-30T00:00:00Z", "suite": {"version": "0", "commit": ""},
                "environment": {**ENV, "backend": backend, "transformers": transformers}, "checks": CHECKS,
                "check_info": {c: CHECK_INFO[c] for c in CHECKS}, "models": models}
    envelope["summary"] = report.summarize(models, CHECKS)
    return report.validate_envelope(envelope, "synthetic")


def without_fingerprints(envelope: dict) -> dict:
    envelope = copy.deepcopy(envelope)
    for row in envelope["models"].values():
        for made in row["cells"].values():
            made.pop("fingerprint", None)
    return envelope


def test_groups_by_kind_and_site_largest_first():
    groups = findings.group_failures([make_run()], ["run.json"])
    assert [(g.kind, g.where, g.classes) for g in groups] == [
        ("unsupported", LOCK["where"], ["AForConditionalGeneration", "BForConditionalGeneration",
                                        "CForConditionalGeneration"]),
        ("data_dependent_guard", GUARD["where"], ["AForConditionalGeneration"]),
        ("harness_error", "KeyError", ["DForConditionalGeneration"]),  # the suite's own gap: last
    ]
    lock, guard, harness = groups
    assert lock.upstream and guard.upstream and not harness.upstream
    assert lock.checks == {"compile_prefill": 3} and len(harness.cells) == 3
    assert lock.representative.model == "BForConditionalGeneration"  # the fastest cell
    assert lock.id.startswith("unsupported-") and lock.id == findings.group_id("unsupported", LOCK["where"], False)
    assert guard.sites() == {"Data dependent @ transformers.models.a:f": 2} and guard.errors == [GUARD["error"]]


def test_a_recompile_groups_by_its_failed_guard():
    envelope = make_run()
    guard = {"kind": "recompile", "recompiles": 1, "guard": "kwargs['cache'].layers[#].cumulative_length_int == # "
                                                             "@ cache_utils:update"}
    for name in ("BForConditionalGeneration", "CForConditionalGeneration"):
        envelope["models"][name]["cells"]["compile_decode"] = failing("fail", "decode step recompiled", guard)
    group = next(g for g in findings.group_failures([envelope]) if g.kind == "recompile")
    assert group.where == guard["guard"] and group.classes == ["BForConditionalGeneration", "CForConditionalGeneration"]
    section = "\n".join(findings.render_group(group, [envelope], ["run.json"]))
    assert "- **Failed guard**: `kwargs['cache'].layers[#].cumulative_length_int == # @ cache_utils:update`" in section


def test_without_fingerprints_groups_by_masked_reason_and_says_so():
    groups = findings.group_failures([without_fingerprints(make_run())], ["old.json"])
    lock = groups[0]  # line 239 and 241 mask to the same reason
    assert lock.by_reason and lock.kind == "" and len(lock.classes) == 3
    assert lock.where == ("fullgraph compile failed: Unsupported: Unsupported context manager "
                          "(at transformers/utils/output_capturing.py:#)")
    assert not groups[-1].upstream  # errors: not upstream, by their raw verdict
    text = findings.render_findings(groups, [without_fingerprints(make_run())], ["old.json"])
    assert "have no failure fingerprint" in text and "with numbers and shapes masked" in text


def test_markdown_is_ready_to_paste():
    envelope = make_run()
    groups = findings.group_failures([envelope], ["run.json"])
    links = {("AForConditionalGeneration", "compile_prefill"): "https://github.com/huggingface/transformers/issues/1"}
    text = findings.render_findings(groups, [envelope], ["run.json"], links)
    assert text.startswith("# Findings: failing cells by root cause\n")
    assert "7 failing cell(s)" in text and "3 group(s): 2 upstream finding(s) (4 cells), 1 gap(s) of the suite" in text
    assert f"| 1 | [`{groups[0].id}`](#{groups[0].id}) | unsupported |" in text
    section = findings.render_findings(groups, [envelope], ["run.json"], links, only=groups[0].id)
    assert section.startswith("### `unsupported at transformers.utils.output_capturing:install_hooks`")
    assert "- **Seen on**: transformers 5.24.0, torch 2.13.0, cpu / float32 / backend eager" in section
    assert ("pytest conformance/test_matrix.py::test_compile_prefill --models BForConditionalGeneration "
            "--checks compile_prefill --device cpu -p no:randomly") in section
    assert "conformance explain BForConditionalGeneration compile_prefill --device cpu" in section
    assert "| AForConditionalGeneration | `compile_prefill` | xfail | [listed](https://github.com/" in section
    assert "| BForConditionalGeneration | `compile_prefill` | fail | not listed |" in section
    assert "| CForConditionalGeneration | `compile_prefill` | xfail | listed |" in section
    with pytest.raises(KeyError):
        findings.render_findings(groups, [envelope], ["run.json"], only="nope")


def test_several_runs_name_the_versions_seen_on():
    runs = [make_run(), make_run(backend="inductor", transformers="5.23.0")]
    groups = findings.group_failures(runs, ["a.json", "b.json"])
    assert len(groups[0].cells) == 6 and groups[0].runs == [0, 1]
    text = findings.render_findings(groups, runs, ["a.json", "b.json"])
    assert "transformers 5.24.0, torch 2.13.0, cpu / float32 / backend eager; transformers 5.23.0" in text
    assert "| class | check | verdict | expectation | run |" in text


def test_no_failure():
    envelope = make_run()
    envelope["models"] = {"EForConditionalGeneration": envelope["models"]["EForConditionalGeneration"]}
    assert findings.group_failures([envelope]) == []
    assert findings.render_findings([], [envelope], ["run.json"]).endswith("No failing cell.\n")


def test_cli_findings(tmp_path, capsys, monkeypatch):
    run_json = tmp_path / "run.json"
    run_json.write_text(json.dumps(make_run()))
    monkeypatch.setattr(upstream, "expectation_links", lambda envelopes: ({}, ""))
    assert cli.main(["findings", str(run_json)]) == 0
    assert capsys.readouterr().out.startswith("# Findings")
    groups = findings.group_failures([make_run()])
    assert cli.main(["findings", str(run_json), "--group", groups[1].id]) == 0
    assert capsys.readouterr().out.startswith("### `data_dependent_guard at ")
    assert cli.main(["findings", str(run_json), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [g["id"] for g in data] == [g.id for g in groups]
    assert data[0]["cells"][0] == ["AForConditionalGeneration", "compile_prefill", "xfail", str(run_json)]
    assert cli.main(["findings", str(run_json), "--group", "nope"]) == cli.USAGE_ERROR
    assert "no group 'nope'" in capsys.readouterr().err
    assert cli.main(["findings", str(run_json), "-o", str(tmp_path / "f.md")]) == 0
    assert (tmp_path / "f.md").read_text().startswith("# Findings")


def test_expectation_links_of_the_runs_version(tmp_path):
    links, note = upstream.expectation_links([make_run()])  # the shipped 5.24 file: readable, a few links
    assert note == "" and all(link.startswith("https://") for link in links.values())


def test_a_group_of_a_dtype_or_backend_column_reproduces_in_that_columns_dtype_and_backend():
    """A float32 matrix's `compile_prefill~bf16@...` cells ran in bfloat16 (and `@inductor` under inductor): the
    commands the findings print run them so, never in the matrix's own dtype or backend."""
    from conformance.report.reproduce import column_dtype, reproducer

    envelope = make_run()
    row = envelope["models"]["BForConditionalGeneration"]["cells"]
    row["compile_prefill~bf16"] = row.pop("compile_prefill")
    envelope["check_info"]["compile_prefill~bf16"] = dict(envelope["check_info"]["compile_prefill"])
    envelope["checks"] = [*envelope["checks"], "compile_prefill~bf16"]
    groups = findings.group_failures([envelope], ["run.json"])
    group = next(g for g in groups if any(c.check == "compile_prefill~bf16" for c in g.cells))
    section = findings.render_findings(groups, [envelope], ["run.json"], only=group.id)
    assert "--checks compile_prefill --device cpu --dtype bfloat16 -p no:randomly" in section
    assert "conformance explain BForConditionalGeneration compile_prefill --device cpu --dtype bfloat16 " \
           "--backend eager" in section
    assert column_dtype("static_cache~fp16", "float32") == "float16" == column_dtype("static_cache", "float16")
    assert reproducer("A", "compile_prefill@inductor", "cpu", "float32", "eager").endswith(
        "--checks compile_prefill --device cpu --backend inductor -p no:randomly")
