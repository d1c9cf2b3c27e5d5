"""`conformance findings` ranking, `--repro` and `--issue`: unlock counts on synthetic envelopes, the reproducers'
pieces (a config as its diff, a pruned source, verification reading a printed traceback by the suite's rules), and
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
from conformance.report import findings, repro, repro_source, repro_verify
from conformance.report.repro_values import Inputs, literal
from conformance.tools import cli, upstream

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



def test_the_quantized_pairs_are_one_path_a_class_counts_once():
    """A group alone blocking two quantizer x backend pairs of one class unlocks the `quantized` path once for it
    (a model's own bug is not counted once per pair); a pair the group shares with another cause unlocks nothing."""
    run = make_run()
    first_columns, second_columns, third_columns = list(findings.QUANTIZED_PAIRS.values())[:3]
    nncf = {"kind": "export_error", "where": "transformers.exporters.quantizers.quantizer_nncf:Q.quantize",
            "error": "RuntimeError"}
    other = {"kind": "export_error", "where": "transformers.models.x.modeling_x:XModel.forward", "error": "TypeError"}
    for row in run["models"].values():
        for column in (*first_columns, *second_columns):
            row["cells"][column] = failing("fail", "quantize: nncf failed", nncf)
        row["cells"][third_columns[0]] = failing("fail", "quantize: nncf failed", nncf)
        row["cells"][third_columns[1]] = failing("fail", "export: x failed", other)
    groups = findings.group_failures([run])
    found = findings.unlocks(groups, [run])
    group = next(g.id for g in groups if g.where == nncf["where"])
    assert found[group].paths == {findings.QUANTIZED: sorted(run["models"])}

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
    monkeypatch.setattr(upstream, "expectation_links", lambda envelopes: ({}, ""))
    assert cli.main(["findings", str(run_json), "--json"]) == 0
    data = {g["id"]: g for g in json.loads(capsys.readouterr().out)}
    assert data[lock]["rank"] == 1 and data[lock]["site_in"] == "transformers"
    assert data[lock]["unlocks"]["paths"] == {"compile": ["BForConditionalGeneration", "CForConditionalGeneration"]}
    assert "rank" not in data[findings.group_id(HARNESS["kind"], HARNESS["error"], False)]


# --------------------------------------------------------------------------- the scripts' pieces


def test_inputs_are_written_exactly_where_they_can_be_and_as_a_seeded_recipe_else():
    writer = Inputs()
    ids = torch.tensor([[0, 0, 0, 0, 7, 8, 9], [3, 4, 5, 6, 7, 8, 9]])
    positions = torch.tensor([[0] * 4 + list(range(1, 9))])
    assert "[0] * 4 + list(range(1, 9))" in writer.source(positions, "position_ids")
    mask = torch.zeros(2, 5, dtype=torch.bool)
    mask[:, 2] = True
    sizes = torch.tensor([[32.0, 64.0]])
    pixels = torch.randn(2, 3, 16, 16) * 2 + 5
    g = torch.Generator().manual_seed(0)
    for value in (ids, positions, mask, sizes, torch.ones(4, 4), torch.zeros(0, 3, dtype=torch.long)):
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


def _printed(frames, error, message, cause=None):
    """A traceback as Python prints it (`cause` printed before, as its direct cause)."""
    text = "" if cause is None else cause + "\nThe above exception was the direct cause of the following exception:\n\n"
    text += "Traceback (most recent call last):\n"
    for path, line, name in frames:
        text += f'  File "{path}", line {line}, in {name}\n    code()\n'
    return text + f"{error}: {message}\n"


def _model_file(tmp_path: Path) -> Path:
    """A stand-in transformers module on disk: `transformers/y.py` with `f` (lines 1-2) and `g` (lines 4-5)."""
    package = tmp_path / "transformers"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "y.py").write_text("def f():\n    raise ValueError\n\ndef g():\n    raise ValueError\n")
    return package / "y.py"


def _group(kind, where, errors=("ValueError",), check="build"):
    return findings.Group(f"{kind}-00000000", kind, where, False,
                          [findings.FailingCell("M", check, "fail", "fail", "", 0.1,
                                                {"kind": kind, **({"error": errors[0]} if errors else {})}, "", 0)])


def test_verification_reads_a_printed_traceback_by_the_suites_rules(tmp_path):
    """No script carries fingerprint code: the verifier reads the traceback it printed and applies the suite's own
    rules (`fingerprints.kind_from` / `where_from`, dynamo's guard_site, the exporters' root of a chain)."""
    model = _model_file(tmp_path)
    script = (str(tmp_path / "repro.py"), 9, "<module>")
    run = repro_verify.Run(1, 0.1, _printed([script, (str(model), 5, "g")], "torch._dynamo.exc.UserError",
                                            "Could not guard on data-dependent expression u0 > 1"))
    found = repro_verify.observed(run, "export_forward_strict", "data_dependent_guard")
    assert found["kind"] == "data_dependent_guard" and found["where"] == "transformers.y:g"
    assert found["error"] == "UserError"
    assert repro_verify.judge(_group("data_dependent_guard", "transformers.y:g", ("UserError",)), run) == (True, "")
    # dynamo's user stack ("from user code:") names the site, not the torch frames the traceback ends in
    unsupported = repro_verify.Run(1, 0.1, _printed([script, ("/x/torch/_dynamo/a.py", 3, "h")],
                                                    "torch._dynamo.exc.Unsupported",
                                                    f'bad\n\nfrom user code:\n   File "{model}", line 2, in f\n'))
    assert repro_verify.observed(unsupported, "compile_prefill", "graph_break") == {
        "kind": "graph_break", "where": "transformers.y:f", "error": "Unsupported",
        "message": f'bad from user code: File "{model}", line 2, in f'}
    # an exporter's failure is the root of the chain its wrappers re-raise
    root = _printed([(str(model), 2, "f")], "ValueError", "the root")
    chained = repro_verify.Run(1, 0.1, _printed([script], "RuntimeError", "the wrapper", cause=root))
    assert repro_verify.observed(chained, "exporter_onnx_forward", "export_error")["where"] == "transformers.y:f"
    assert repro_verify.observed(chained, "export_onnx", "exception")["error"] == "RuntimeError"
    # ... but one the exporter column did not catch (kind exception) is fingerprinted as raised, as every check's
    assert repro_verify.observed(chained, "exporter_dynamo_pt2e_forward", "exception")["error"] == "RuntimeError"
    # a failure the check states in words: the group's masked words in the assertion's
    worded = repro_verify.Run(1, 0.1, _printed([script], "AssertionError",
                                               "ONNX Runtime logits: logits differ from eager by 0.5 > 0.001"))
    group = _group("numerical_mismatch", "ONNX Runtime logits", ())
    assert repro_verify.judge(group, worded, "export_onnx") == (True, "")
    assert not repro_verify.judge(_group("numerical_mismatch", "prefill", ()), worded, "export_onnx")[0]
    guard = f"0/0: kwargs['cache'].layers[0].n == 18  # x = 1  # {model}:4 in g"
    recompiled = repro_verify.Run(1, 0.1, _printed([script], "AssertionError",
                                                   "decode step recompiled after the first step; failed guard: " + guard))
    assert repro_verify.observed(recompiled, "compile_decode", "recompile")["guard"] == \
        "kwargs['cache'].layers[#].n == # @ transformers.y:g"


def _script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def test_verification_never_counts_a_silent_pass_nor_a_script_that_uses_the_suite(tmp_path):
    model = _model_file(tmp_path)
    group = _group("exception", "transformers.y:f")
    silent = repro_verify.run_script(_script(tmp_path, "silent.py", "print('nothing fails here')\n"), 60)
    reproduces, why = repro_verify.judge(group, silent)
    assert not reproduces and "ran to the end without failing" in why
    suite = repro_verify.run_script(_script(tmp_path, "suite.py", "import conformance\n"), 60)
    assert "ModuleNotFoundError" in suite.stderr and "not importable here" in suite.stderr
    assert not repro_verify.judge(group, suite)[0]
    other = repro_verify.Run(1, 0.1, _printed([(str(model), 5, "g")], "ValueError", "boom"))
    assert repro_verify.judge(group, other) == (False, "it fails otherwise: exception at transformers.y:g "
                                                       "(ValueError); differs in site transformers.y:g (the group: "
                                                       "transformers.y:f)")
    crashed = repro_verify.Run(139, 0.1, "Segmentation fault\n")
    assert repro_verify.judge(group, crashed) == (False, "the script printed no traceback (exit status 139): "
                                                         "Segmentation fault")


def test_a_script_that_dies_in_native_code_says_so_and_is_never_counted(tmp_path):
    """A fatal_error group (a SIGFPE in a backend's runtime) prints no traceback: the interpreter runs with
    faulthandler on, so the verdict quotes the fatal error, and the script does not count as reproducing (its dump's
    frames are not judged: the suite's dump parser is in run/, a later stage than the verifier)."""
    model = _model_file(tmp_path)
    (model.parent / "native.py").write_text("import os\nimport signal\n\n\ndef execute():\n"
                                            "    os.kill(os.getpid(), signal.SIGFPE)\n")
    script = _script(tmp_path, "crash.py", f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from transformers.native import execute
        execute()
        """)
    run = repro_verify.run_script(script, 60)
    assert run.status not in (0, None) and 'line 6 in execute' in run.stderr  # faulthandler's dump
    reproduces, why = repro_verify.judge(_group("fatal_error", "transformers.native:execute", ()), run)
    assert not reproduces
    assert why.startswith(f"the script died in native code (exit status {run.status}): Fatal Python error: Floating")


def test_named_dict_entries_are_written_in_one_order_whatever_the_process():
    """Dots3Note's rope parameters per layer type came out in a set's order: two runs wrote two scripts."""
    from conformance.report.repro_config import named_in_order

    table = {"sliding_attention": {"rope_theta": 1.0}, "full_attention": {"rope_theta": 2.0}}
    assert list(named_in_order(table)) == ["full_attention", "sliding_attention"]
    plain = {"rope_type": "default", "rope_theta": 1.0}  # one entry's own fields keep the config's order
    assert list(named_in_order(plain)) == ["rope_type", "rope_theta"]


def test_a_config_is_written_as_the_fields_that_differ_from_its_class_defaults():
    transformers = pytest.importorskip("transformers")
    from conformance.report.repro_config import config_source

    config = transformers.LlavaConfig(text_config=transformers.LlamaConfig(hidden_size=64, num_attention_heads=4,
                                                                               num_hidden_layers=1),
                                      vision_config=transformers.CLIPVisionConfig(hidden_size=48), image_token_id=3)
    source, classes, fallback = config_source(config)
    assert not fallback and source.startswith("LlavaConfig(") and "from_dict" not in source
    assert "hidden_size=64" in source and "num_hidden_layers=1" in source and "image_token_index=3" in source
    assert "id2label" not in source and "return_dict" not in source  # PretrainedConfig's defaults stay out
    rebuilt = eval(source, {c.__name__: c for c in classes})
    assert rebuilt.to_dict() == config.to_dict()

    class Stubborn(transformers.LlamaConfig):  # cannot build its own default instance: no diff to take
        def __init__(self, **kwargs):
            if not kwargs:
                raise ValueError("needs arguments")
            super().__init__(**kwargs)

    source, _, fallback = config_source(Stubborn(hidden_size=64, num_attention_heads=4))
    assert source.startswith("Stubborn.from_dict({") and "Stubborn() cannot be built" in fallback


def test_a_scripts_source_is_pruned_and_wrapped():
    source = "import os\nimport sys\nA = 1\nB = A\nprint(sys.argv)\nz = (" + ", ".join(["12345"] * 60) + ")\n"
    tidy = repro_source.wrap(repro_source.prune(source))
    assert tidy.startswith("import sys\nprint(sys.argv)\n") and repro_source.long_lines(tidy) == 0
    assert eval(compile(tidy, "x", "exec"), {}) is None and repro_source.prune(tidy) == tidy


def test_pruning_drops_what_steps_cut_short_no_longer_read_but_never_a_call_that_may_fail():
    """An unread assignment of an inert value (a comprehension, a part that only stores its arguments) goes, and so
    do the definitions only it used, a recursive one too; a call that may raise (a class whose __init__ acts, any
    function) stays even when its result is unread."""
    source = textwrap.dedent("""\
        import os
        def walk(n):
            return walk(n - 1) if n else os.sep
        class Part:
            def __init__(self, owner):
                super().__init__()
                self.owner = owner
            def forward(self):
                return walk(3)
        class Session:
            def __init__(self, path):
                self.handle = open(path)
        decoder = Part(1)
        media = {k: k for k in []}
        session = Session("missing")
        result = len([])
        """)
    assert repro_source.prune(source) == textwrap.dedent("""\
        class Session:
            def __init__(self, path):
                self.handle = open(path)
        session = Session("missing")
        result = len([])
        """)


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


def test_cli_issue_prints_a_text_ready_to_paste(tmp_path, capsys, monkeypatch):
    run_json = tmp_path / "run.json"
    run_json.write_text(json.dumps(make_run()))
    lock = findings.group_id(LOCK["kind"], LOCK["where"], False)
    assert cli.main(["findings", str(run_json), "--issue", lock]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"# [torch.compile] unsupported construct: {LOCK['where']} (3 model class(es))")
    for section in ("## Environment", "## Reproduction", "## Observed", "## Expected", "## Affected"):
        assert section in text
    assert "pytest conformance/test_matrix.py::test_compile_prefill" in text  # no script: the suite's command
    assert cli.main(["findings", str(run_json), "--issue", "nope-0"]) == cli.USAGE_ERROR
    assert cli.main(["findings", str(run_json), "--issue", "top"]) == cli.USAGE_ERROR
    assert cli.main(["findings", str(run_json), "--issue", "top", "--repro", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "issues" / f"{lock}.md").read_text().startswith("# [torch.compile]")
    (tmp_path / "r" / "issues" / "contract-00000000.md").write_text("a group fixed since")  # gone from the runs
    (tmp_path / "r" / "issues" / f"{lock}.md").write_text("stale")
    monkeypatch.setattr(findings, "TOP", 0)  # the lock's text was written before and is no longer in the top
    assert cli.main(["findings", str(run_json), "--issue", "top", "--repro", str(tmp_path / "r")]) == 0
    assert not (tmp_path / "r" / "issues" / "contract-00000000.md").exists()
    assert (tmp_path / "r" / "issues" / f"{lock}.md").read_text().startswith("# [torch.compile]")
    monkeypatch.undo()
    assert cli.main(["findings", str(run_json), "--repro", str(tmp_path / "r")]) == 0  # the README links it
    assert f"[issue text](issues/{lock}.md)" in (tmp_path / "r" / repro.README).read_text()


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
            _assert_minimal((tmp_path / e.script).read_text(), e)
    repro_verify.verify(entries, groups, tmp_path, timeout=120)
    reproduced = [e for e in entries if e.verified]
    for e in entries:
        assert e.verified or e.why, e  # listed as not reproducing, with the reason
    assert len(reproduced) >= 2, [(e.group, e.why) for e in entries]
    for e in reproduced:
        group = by_id(groups)[e.group]
        key = e.observed.get("guard") or e.observed.get("where")  # a site, else the words of a stated failure
        assert e.observed["kind"] == group.kind and (key == group.where if key else group.where in e.observed["what"])


FINGERPRINT_CODE = ("REPRO-RESULT", "Finding(", "failing_as", "fingerprint", "def main(", "def mask(", "guard_site")


def _assert_minimal(source: str, entry) -> None:
    """A published-style script: no suite import, no fingerprint code, no unused import or constant, its config the
    diff (unless its notes say why not), a short docstring, at most one line over 120 characters."""
    assert not re.search(r"^\s*(import|from)\s+conformance", source, re.M)
    assert not [marker for marker in FINGERPRINT_CODE if marker in source], entry.script
    assert repro_source.prune(source) == source and repro_source.long_lines(source) <= 1
    diff = re.search(r"^CONFIG = \w+Config\(", source, re.M) and "from_dict" not in source
    assert diff or any("config written in full" in n for n in entry.notes)
    docstring = source.split('"""', 2)[1]
    assert 5 <= len(docstring.splitlines()) <= 10, docstring


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
        reproduces, why = repro_verify.judge(known[entry["group"]], run, entry["check"])
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
    assert "export_for_generation" in source
    _assert_minimal(source, entry)
    repro_verify.verify([entry], groups, tmp_path, timeout=180)
    assert entry.verified, entry.why
    assert entry.observed["kind"] == "contract" and site in entry.observed["message"]


def _published_index() -> dict:
    index_path = PUBLISHED_FINDINGS / repro.INDEX
    if not index_path.exists() or not PUBLISHED.exists():
        pytest.skip("no published matrix and reproducers (reports/matrix.json, reports/findings/) in this checkout")
    return json.loads(index_path.read_text())


# Published scripts over 150 lines, each with why: a ratchet. A script not listed here may not pass 150 lines, and one
# listed that got shorter must leave the list. Empty since the generation checks' part-alone and left-by-export
# templates (`report/repro_templates/export_checks.py`) shortened the last two.
LONG_SCRIPTS: dict[str, str] = {}


def test_the_published_scripts_are_short_and_carry_no_fingerprint_code():
    """Text only (no script runs): every published script is at most 150 lines (but the `LONG_SCRIPTS`) with at
    most one line over 120 characters, their median at most 60 lines; none imports the suite or carries fingerprint
    code."""
    index = _published_index()
    lengths = {}
    for entry in (g for g in index["groups"] if g["script"]):
        source = (PUBLISHED_FINDINGS / entry["script"]).read_text()
        assert not re.search(r"^\s*(import|from)\s+conformance", source, re.M), entry["script"]
        assert not [marker for marker in FINGERPRINT_CODE if marker in source], entry["script"]
        assert repro_source.long_lines(source) <= 1, entry["script"]
        lengths[entry["script"]] = len(source.splitlines())
    assert lengths, "reports/findings/ lists no script"
    long = {script.removesuffix(".py"): n for script, n in lengths.items() if n > 150}
    assert set(long) <= set(LONG_SCRIPTS), {k: v for k, v in long.items() if k not in LONG_SCRIPTS}
    assert not set(LONG_SCRIPTS) - set(long), f"no longer over 150 lines: {set(LONG_SCRIPTS) - set(long)}"
    assert sorted(lengths.values())[(len(lengths) - 1) // 2] <= 60


def test_every_published_group_with_a_script_has_an_issue_text():
    """`findings --issue ID --repro reports/findings` works for every group with a published script (text only:
    the script is read, not run; the command's own text function, the run file read once), and each of the top
    ten ranked groups has its text in reports/findings/issues/, linked from the README."""
    index = _published_index()
    envelope = report.load_envelope(str(PUBLISHED))
    groups = by_id(findings.group_failures([envelope], [str(PUBLISHED)]))
    scripted = [g for g in index["groups"] if g["script"] and g["group"] in groups]
    assert scripted, "no published group with a script is a group of the published matrix: regenerate"
    for entry in scripted:
        text = upstream.issue_text(groups[entry["group"]], [envelope], PUBLISHED_FINDINGS, [str(PUBLISHED)])
        assert text.startswith("# [") and "## Reproduction" in text and "## Observed" in text, entry["group"]
        code = (PUBLISHED_FINDINGS / entry["script"]).read_text().split('"""', 2)[2].strip()  # past its docstring
        assert code in text, entry["group"]  # inline, the docstring naming it repro.py
    readme = (PUBLISHED_FINDINGS / repro.README).read_text()
    ranked = [g for g, _ in findings.rank(list(groups.values()), [envelope])][:findings.TOP]
    for group in ranked:
        assert (PUBLISHED_FINDINGS / repro.ISSUES / f"{group.id}.md").exists(), group.id
        assert f"(issues/{group.id}.md)" in readme, group.id


def test_the_media_contract_has_no_script_in_any_dtype():
    """build's media check perturbs the sample with the suite's own generator, which a script cannot restate: no
    template, in float32's words or a half-precision run's ("the bfloat16 logits"), never a script that passes."""
    from types import SimpleNamespace

    from conformance.report.repro_templates.compile_checks import build
    from conformance.report.repro_templates.steps import NoTemplate

    for words in ("does not change the logits: the media path is not used",
                  "does not change the bfloat16 logits: the media do not reach the output in this dtype"):
        cell = SimpleNamespace(reason=f"changing pixel_values {words}", fingerprint={"kind": "contract"})
        with pytest.raises(NoTemplate, match="perturbs the sample's media"):
            build(SimpleNamespace(sample={"input_ids": None}, cell=cell, kind="contract"))
