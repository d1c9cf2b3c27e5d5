"""`conformance findings` ranking and `--repro`: unlock counts on synthetic envelopes, the reproducers' pieces, and
three scripts of the published matrix verified in a subprocess that cannot import the suite."""

from __future__ import annotations

import json
import math
import re
import textwrap
from pathlib import Path

import pytest
import torch

from conformance.meta.test_findings import GUARD, HARNESS, LOCK, failing, make_run
from conformance.report import envelope as report
from conformance import reasons
from conformance.report import findings, repro, repro_report, repro_verify
from conformance.report.repro_values import Inputs, literal
from conformance.tools import cli

pytestmark = pytest.mark.meta

PUBLISHED = Path(__file__).resolve().parents[2] / "reports" / "matrix.json"
FAMILIES = ("export_forward_strict", "static_cache", "legacy_cache", "build", "export_forward")  # fast ones first


def by_id(groups):
    return {g.id: g for g in groups}


# --------------------------------------------------------------------------- ranking


def test_unlocks_count_cells_and_whole_paths_a_group_alone_blocks():
    run = make_run()
    groups = findings.group_failures([run])
    found = findings.unlocks(groups, [run])
    lock, guard = (findings.group_id(f["kind"], f["where"], False) for f in (LOCK, GUARD))
    assert sorted(found[lock].cells) == [(m, "compile_prefill") for m in ("AForConditionalGeneration",
                                                                          "BForConditionalGeneration",
                                                                          "CForConditionalGeneration")]
    # A's compile path is blocked by two groups; B's decode passes, C's is an xpass (a pass): both unlocked
    assert found[lock].paths == {"compile": ["BForConditionalGeneration", "CForConditionalGeneration"]}
    assert found[guard].cells == [("AForConditionalGeneration", "compile_decode")] and found[guard].paths == {}
    ranked = findings.rank(groups, [run])
    assert [g.id for g, _ in ranked] == [lock, guard]  # the harness error is no upstream finding: not ranked
    assert ranked[0][1].summary() == "3 cell(s); whole path: compile ×2"


def test_a_cell_failing_for_another_cause_in_another_run_is_not_unlocked():
    first, second = make_run(), make_run(backend="inductor")
    second["models"]["BForConditionalGeneration"]["cells"]["compile_prefill"] = failing(
        "fail", "Could not guard on data-dependent", GUARD)
    groups = findings.group_failures([first, second])
    found = findings.unlocks(groups, [first, second])
    lock = by_id(groups)[findings.group_id(LOCK["kind"], LOCK["where"], False)]
    assert ("BForConditionalGeneration", "compile_prefill") not in found[lock.id].cells
    assert found[lock.id].paths == {"compile": ["CForConditionalGeneration"]}


def test_a_path_needs_each_of_its_columns_in_the_run():
    run = make_run()
    for row in run["models"].values():
        row["cells"].pop("compile_decode")
    found = findings.unlocks(findings.group_failures([run]), [run])
    assert all(not u.paths for u in found.values())


def test_the_deployment_columns_are_paths_too():
    """A group that alone blocks a class's generation through transformers' exporter unlocks that exporter's path
    (forward passing): the published deployment columns rank like the compile and export ones."""
    run = make_run()
    decompose = {"kind": "contract", "where": "transformers.exporters.utils:decompose_for_generation"}
    for name, row in run["models"].items():
        row["cells"]["exporter_dynamo_forward"] = {**cell_of(row, "build")}
        row["cells"]["exporter_dynamo_generate"] = failing("fail", "image_encoder left out", decompose)
    groups = findings.group_failures([run])
    found = findings.unlocks(groups, [run])
    left_out = next(g.id for g in groups if g.where == decompose["where"])
    assert "exporter:dynamo" in findings.PATHS
    assert found[left_out].paths == {"exporter:dynamo": sorted(
        n for n, row in run["models"].items() if row["cells"]["build"]["verdict"] == "pass")}


def test_a_group_that_alone_blocks_the_aoti_generation_unlocks_the_aoti_path():
    """AOTInductor's columns are a path: a group failing only aoti_generate, aoti_forward passing, unlocks it."""
    run = make_run()
    baked = {"kind": "specialisation", "where": "transformers.models.x.modeling_x:XModel.forward",
             "what": "export: input_ids dim 1 in part step"}
    for row in run["models"].values():
        row["cells"]["aoti_forward"] = {**cell_of(row, "build")}
        row["cells"]["aoti_generate"] = failing("fail", "export: part step bakes", baked)
    groups = findings.group_failures([run])
    found = findings.unlocks(groups, [run])
    group = next(g.id for g in groups if g.where == baked["where"])
    assert found[group].paths == {"aoti": sorted(
        n for n, row in run["models"].items() if row["cells"]["build"]["verdict"] == "pass")}


def cell_of(row: dict, column: str) -> dict:
    return dict(row["cells"][column])


def test_the_index_carries_no_path_of_the_machine_that_ran_the_scripts():
    text = ('# File "/work/main/.venv/lib/python3.11/site-packages/transformers/x.py", line 3; '
            "Load model from /tmp/tmpita7g0hl/vision/model.onnx failed")
    assert repro.portable(text) == '# File "transformers/x.py", line 3; Load model from <tmp>/vision/model.onnx failed'


def test_where_a_site_is():
    def group(kind, where):
        return findings.Group("x", kind, where, False)

    assert findings.site_in(group("exception", "transformers.cache_utils:Cache.update")) == "transformers"
    assert findings.site_in(group("backend", "<inductor generated code>:call")) == "torch (inductor)"
    assert findings.site_in(group("exception", "torch._dynamo.variables:X.call")) == "torch (dynamo)"
    assert findings.site_in(group("export_error", "torch._export.serde.serialize:S.f")) == "torch (export)"
    assert findings.site_in(group("exception", "torch._ops:OpOverload.__call__")) == "torch (other)"
    assert findings.site_in(group("exception", "onnxruntime.capi.x:Session.run")) == "another backend (onnxruntime)"
    assert findings.site_in(group("recompile", "kwargs['cache'] == # @ cache_utils:update")) == "transformers"
    assert findings.site_in(group("contract", "logits differ by # > #")) == "no code site"
    assert findings.site_in(group("contract", "step #: ONNX Runtime logits differ by # > #")) == "no code site"
    assert findings.site_in(group("contract", "transformers.exporters.utils:decompose_for_generation")) == \
        "transformers"


def test_the_document_opens_with_the_ranked_top_ten_and_json_carries_the_unlocks(tmp_path, capsys, monkeypatch):
    run = make_run()
    groups = findings.group_failures([run], ["run.json"])
    text = findings.render_findings(groups, [run], ["run.json"])
    assert text.index("## Fix first: the top 2 root causes") < text.index("## Every group")
    lock = findings.group_id(LOCK["kind"], LOCK["where"], False)
    assert f"| 1 | [`{lock}`](#{lock}) | unsupported | `{LOCK['where']}` | transformers | 3 | compile ×2 | 3 |" in text
    assert "- **Fixing it unlocks**: 3 cell(s); whole path: compile ×2" in text
    run_json = tmp_path / "run.json"
    run_json.write_text(json.dumps(run))
    monkeypatch.setattr(cli, "_expectation_links", lambda envelopes: ({}, ""))
    assert cli.main(["findings", str(run_json), "--json"]) == 0
    data = {g["id"]: g for g in json.loads(capsys.readouterr().out)}
    assert data[lock]["rank"] == 1 and data[lock]["site_in"] == "transformers"
    assert data[lock]["unlocks"]["paths"] == {"compile": ["BForConditionalGeneration", "CForConditionalGeneration"]}
    assert "rank" not in data[findings.group_id(HARNESS["kind"], HARNESS["error"], False)]


# --------------------------------------------------------------------------- the scripts' pieces


def test_inputs_are_written_exactly_where_they_can_be_and_as_a_seeded_recipe_else():
    writer = Inputs()
    ids = torch.tensor([[0, 0, 0, 0, 7, 8, 9], [3, 4, 5, 6, 7, 8, 9]])
    mask = torch.zeros(2, 5, dtype=torch.bool)
    mask[:, 2] = True
    sizes = torch.tensor([[32.0, 64.0]])
    pixels = torch.randn(2, 3, 16, 16) * 2 + 5
    g = torch.Generator().manual_seed(0)
    for value in (ids, mask, sizes, torch.ones(4, 4), torch.zeros(0, 3, dtype=torch.long)):
        made = eval(writer.source(value, "x"))
        assert torch.equal(made, value) and made.dtype == value.dtype
    recipe = writer.source(pixels, "pixel_values")
    made = eval(recipe)
    assert made.shape == pixels.shape and "generator=g" in recipe and writer.recipes == ["pixel_values"]
    assert abs(float(made.mean()) - 5) < 0.3 and abs(float(made.std()) - 2) < 0.3
    patches = torch.randn(1, 20, 12)
    patches[..., 0], patches[..., 1] = torch.arange(20).float(), 3.0  # row and column ids, then pixels
    made = eval(writer.source(patches, "flattened_patches"))
    assert made.shape == patches.shape and torch.equal(made[..., :2], patches[..., :2])
    assert eval(literal({"a": [1.5, math.inf], "b": None, "c": (1,)}))["a"][1] == math.inf
    with pytest.raises(ValueError, match="b.c is a object"):
        literal({"b": {"c": object()}})


def test_the_reporting_part_states_the_suites_fingerprints():
    try:
        with repro_report.failing_as("export_error"):
            raise RuntimeError("boom")
    except RuntimeError as exc:
        assert repro_report.fingerprint(exc)["kind"] == "export_error"
    try:
        with repro_report.failing_as("exception", unsupported="graph_break"):
            raise type("Unsupported", (Exception,), {})("nope")
    except Exception as exc:
        assert repro_report.fingerprint(exc)["kind"] == "graph_break"
    data_dependent = repro_report.fingerprint(ValueError("Could not guard on data-dependent expression u0 > 1"))
    assert data_dependent["kind"] == "data_dependent_guard" and data_dependent["error"] == "ValueError"
    finding = repro_report.Finding("contract", "scores differ at new token 3 by 0.5 > 1e-05")
    assert repro_report.fingerprint(finding) == {"kind": "contract", "what": "scores differ at new token # by # > #"}
    guard = "0/0: kwargs['cache'].layers[0].n == 18  # x = 1  # cache_utils.py:566 in update"
    assert repro_report.fingerprint(repro_report.Finding("recompile", "r", guard=guard))["guard"] == \
        "kwargs['cache'].layers[#].n == # @ " + reasons.site("cache_utils.py", 566, "update")  # the installed file's


def _script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def test_verification_never_counts_a_silent_pass_nor_a_script_that_uses_the_suite(tmp_path):
    group = findings.Group("exception-00000000", "exception", "transformers.x:f", False,
                           [findings.FailingCell("M", "build", "fail", "fail", "", 0.1,
                                                 {"kind": "exception", "error": "ValueError"}, "", 0)])
    silent = repro_verify.run_script(_script(tmp_path, "silent.py", f"print('{repro_report.RESULT} ' "
                                                                    "+ '{\"raised\": false}')\n"), 60)
    reproduces, why = repro_verify.judge(group, silent)
    assert not reproduces and "ran to the end without failing" in why
    suite = repro_verify.run_script(_script(tmp_path, "suite.py", "import conformance\n"), 60)
    assert suite.result is None and "ModuleNotFoundError" in suite.stderr and "not importable here" in suite.stderr
    assert not repro_verify.judge(group, suite)[0]
    other = repro_verify.Run(1, 0.1, {"raised": True, "kind": "exception", "where": "transformers.y:g",
                                      "error": "ValueError"}, "")
    assert repro_verify.judge(group, other) == (False, "it fails otherwise: exception at transformers.y:g "
                                                       "(ValueError); differs in site transformers.y:g (the group: "
                                                       "transformers.x:f)")


def test_cli_repro_writes_an_index_of_every_upstream_group(tmp_path, capsys):
    run_json = tmp_path / "run.json"
    run_json.write_text(json.dumps(make_run()))
    assert cli.main(["findings", str(run_json), "--verify"]) == cli.USAGE_ERROR
    assert "--verify runs the scripts of --repro DIR" in capsys.readouterr().err
    assert cli.main(["findings", str(run_json), "--repro", str(tmp_path / "out")]) == 0
    index = json.loads((tmp_path / "out" / repro.INDEX).read_text())
    assert [g["kind"] for g in index["groups"]] == ["unsupported", "data_dependent_guard"]  # upstream only
    assert all(not g["script"] and "not a class of the installed transformers" in g["why"] for g in index["groups"])
    readme = (tmp_path / "out" / repro.README).read_text()
    assert "**0 of 2 upstream groups reproduce standalone**" in readme and "| no script |" in readme


# --------------------------------------------------------------------------- three published groups, verified


def _published_groups():
    if not PUBLISHED.exists():
        pytest.skip("no published matrix (reports/matrix.json) in this checkout")
    envelope = report.load_envelope(str(PUBLISHED))
    import transformers

    if envelope["environment"]["transformers"] != transformers.__version__:
        pytest.skip(f"the published matrix is of transformers {envelope['environment']['transformers']}, "
                    f"{transformers.__version__} is installed: its classes and failures are another version's")
    groups = findings.group_failures([envelope], [str(PUBLISHED)])
    chosen = []
    for family in FAMILIES:  # one group per check family, the fastest cell of that family
        candidates = [g for g in groups if g.upstream and g not in chosen and g.kind not in ("contract",)
                      and (lambda c: c is not None and c.check == family)(repro.repro_cell(g))]
        if candidates and len(chosen) < 3:
            chosen.append(min(candidates, key=lambda g: repro.repro_cell(g).seconds))
    assert len(chosen) == 3, f"the published matrix has fewer than three families of {FAMILIES}"
    return envelope, groups, chosen


def test_three_published_groups_reproduce_standalone(tmp_path):
    envelope, groups, chosen = _published_groups()
    entries = [repro.write_one(g, [envelope], tmp_path) for g in chosen]
    assert len({e.check for e in entries}) == 3
    for e in entries:
        assert e.script or e.why, e  # a group without a script says why
        if e.script:
            source = (tmp_path / e.script).read_text()
            assert not re.search(r"^\s*(import|from)\s+conformance", source, re.M) and "REPRO-RESULT" in source
    repro_verify.verify(entries, groups, tmp_path, timeout=120)
    reproduced = [e for e in entries if e.verified]
    for e in entries:
        assert e.verified or e.why, e  # listed as not reproducing, with the reason
    assert len(reproduced) >= 2, [(e.group, e.why) for e in entries]
    for e in reproduced:
        group = by_id(groups)[e.group]
        assert e.observed["kind"] == group.kind and findings.cause_key(e.observed, "")[1] == group.where


PUBLISHED_FINDINGS = PUBLISHED.parent / "findings"


def test_three_published_scripts_reproduce_as_their_index_says():
    """reports/findings/ is a claim: three of its scripts that the index marks verified (three checks, the fastest
    of each), run as published in a fresh interpreter that cannot import the suite, fail with their group's kind,
    exception and site in today's published matrix."""
    index_path = PUBLISHED_FINDINGS / repro.INDEX
    if not index_path.exists() or not PUBLISHED.exists():
        pytest.skip("no published matrix and reproducers (reports/matrix.json, reports/findings/) in this checkout")
    envelope, groups, _ = _published_groups()
    index = json.loads(index_path.read_text())
    assert index["environments"][0]["transformers"] == envelope["environment"]["transformers"], \
        "reports/findings/ is of another transformers than reports/matrix.json: regenerate it"
    known = by_id(groups)
    verified = sorted((g for g in index["groups"] if g["verified"] and g["check"] in FAMILIES),
                      key=lambda g: g["seconds"])
    chosen, checks = [], set()
    for entry in verified:
        if entry["check"] not in checks:
            chosen.append(entry)
            checks.add(entry["check"])
    assert len(chosen) >= 3, f"fewer than three verified published scripts of {FAMILIES}"
    for entry in chosen[:3]:
        assert entry["group"] in known, f"{entry['group']} is not a group of the published matrix: regenerate"
        run = repro_verify.run_script(PUBLISHED_FINDINGS / entry["script"], timeout=180)
        reproduces, why = repro_verify.judge(known[entry["group"]], run)
        assert reproduces, (entry["script"], why)


def test_the_exporters_largest_published_group_reproduces_standalone(tmp_path):
    """transformers.exporters' columns have templates too: the published group of the dynamo exporter's generation
    that leaves the image encoder out of the decomposition (a contract the check sites at the function that chose
    the components) is written as a script that calls export_for_generation and the runners, and it reproduces."""
    pytest.importorskip("transformers.exporters")
    envelope = report.load_envelope(str(PUBLISHED)) if PUBLISHED.exists() else pytest.skip("no published matrix")
    groups = findings.group_failures([envelope], [str(PUBLISHED)])
    site = "transformers.exporters.utils:decompose_for_generation"
    group = next((g for g in groups if g.where == site and "exporter_dynamo_generate" in g.checks), None)
    if group is None:
        pytest.skip("the published matrix has no decomposition group of exporter_dynamo_generate")
    entry = repro.write_one(group, [envelope], tmp_path)
    assert entry.script, entry.why
    source = (tmp_path / entry.script).read_text()
    assert "export_for_generation" in source and not re.search(r"^\s*(import|from)\s+conformance", source, re.M)
    repro_verify.verify([entry], groups, tmp_path, timeout=180)
    assert entry.verified, entry.why
    assert entry.observed["kind"] == "contract" and entry.observed["where"] == site
