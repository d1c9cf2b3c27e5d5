"""Meta tests of the gate: the expectations file format, its conditions and overrides, the update command, the
real plugin.

The `pytester` tests run the real plugin on real tiny models (a few seconds
each): one injects a regression and checks that exactly that cell turns red;
another records the run's failures as expectations (with their
fingerprints) and checks xfail and xpass on the next run. The ratchet's
fingerprint comparisons on synthetic models are in test_fingerprints.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.fingerprints import Fingerprint
from conformance.gate import expectations as gate
from conformance.gate.update import update_expectations

pytestmark = pytest.mark.meta
pytest_plugins = ["pytester"]

CLASSES = {"LlavaForConditionalGeneration": "LlavaForConditionalGeneration",
           "OldLlavaAlias": "LlavaForConditionalGeneration",
           "T5ForConditionalGeneration": "T5ForConditionalGeneration"}
GOOD = '''
[[cell]]
model = "LlavaForConditionalGeneration"
check = "compile_prefill"
verdict = "fail"
reason = "graph break"
link = "https://example.org/1"
'''


def parse(text: str) -> dict:
    return gate.parse(text, Path("5.24.toml"), CLASSES).cells


def test_valid_file_parses_and_alias_maps_to_class():
    text = GOOD + GOOD.replace("LlavaForConditionalGeneration", "OldLlavaAlias").replace("compile_prefill", "build")
    found = parse(text)
    assert set(found) == {("LlavaForConditionalGeneration", "compile_prefill"), ("LlavaForConditionalGeneration", "build")}
    assert found[("LlavaForConditionalGeneration", "compile_prefill")].link == "https://example.org/1"


@pytest.mark.parametrize("text, message", [
    ("[[cell]\nmodel = 1", "not valid TOML"),
    (GOOD.replace('reason = "graph break"\n', ""), "cell #1 lacks 'reason'"),
    (GOOD.replace('verdict = "fail"\n', ""), "cell #1 lacks 'verdict'"),
    (GOOD + GOOD, "cell #2: cell LlavaForConditionalGeneration / compile_prefill is listed twice"),
    (GOOD + GOOD.replace("LlavaForConditionalGeneration", "OldLlavaAlias"), "listed twice"),
    (GOOD.replace("LlavaFor", "LlamaFor"), "'LlamaForConditionalGeneration', which is not discovered"),
    (GOOD.replace("compile_prefill", "compile_prefil"), "unknown check 'compile_prefil'"),
    (GOOD.replace('"fail"', '"xfail"'), "verdict 'xfail'; use one of fail, error, timeout"),
    (GOOD.replace("link =", "lnk ="), "unknown field 'lnk'"),
    (GOOD.replace('"graph break"', "3"), "'reason' must be a string"),
    ("cells = []\n", "unknown top-level key 'cells'"),
    ('[conditions]\ndevice = "tpu"\ngpu = "x"\n', "unknown condition 'gpu'"),
    ('[conditions]\ndevice = 1\n', "condition 'device' must be a string or a list of strings"),
    (GOOD + '[cell.fingerprint]\nwhere = "m:f"\n', "fingerprint: a fingerprint needs a `kind`"),
    (GOOD + '[cell.fingerprint]\nkind = "oops"\n', "fingerprint: kind 'oops' is not one of"),
    (GOOD + '[cell.fingerprint]\nkind = "graph_break"\nbreaks = "many"\n', "`breaks` is a whole number"),
])
def test_bad_file_is_one_clear_line(text, message):
    with pytest.raises(gate.ExpectationsError) as info:
        parse(text)
    assert message in str(info.value)
    assert "\n" not in str(info.value) and "5.24.toml" in str(info.value)


BOTH = GOOD + 'conditions = { backend = ["eager", "inductor"] }\n'
INDUCTOR = 'backend = "inductor"\n'


@pytest.mark.parametrize("text, message", [
    # two entries for the same cell and condition, or for the same cell under other conditions: one entry a cell
    (GOOD + 'conditions = { backend = "inductor" }\n' + GOOD + 'conditions = { backend = "inductor" }\n',
     "cell #2: cell LlavaForConditionalGeneration / compile_prefill is listed twice; keep one entry a cell"),
    (GOOD + GOOD + 'conditions = { backend = "inductor" }\n', "listed twice; keep one entry a cell, with what "
     "differs under other conditions in its [[cell.when]] tables"),
    # a condition on an unknown key
    (GOOD + 'conditions = { gpu = "h100" }\n', "cell #1: unknown condition 'gpu'; known: device, dtype, backend, torch"),
    (GOOD + 'conditions = [{}, { device = "cuda", gpu = "h100" }]\n', "cell #1 conditions #2: unknown condition 'gpu'"),
    (GOOD + 'conditions = [{ backend = "inductor" }, { backend = ["eager", "inductor"] }]\n',
     "cell #1: conditions #1 and #2 both hold under device cpu, dtype float32, backend inductor; keep each run in one"),
    (GOOD + 'conditions = []\n', "cell #1: conditions is an empty list"),
    (BOTH + '[[cell.when]]\ngpu = "h100"\nreason = "r"\n', "[[cell.when]] #1 has unknown key 'gpu'; a condition is "
     "one of device, dtype, backend, torch, an override one of verdict, reason, link, fingerprint"),
    (BOTH + '[[cell.when]]\nbackend = 3\nreason = "r"\n', "condition 'backend' must be a string or a list"),
    # contradictory overrides
    (GOOD + '[[cell.when]]\n' + INDUCTOR + 'reason = "r"\n',
     "(LlavaForConditionalGeneration / compile_prefill) [[cell.when]] #1 holds under backend inductor, where the "
     "entry does not (device cpu, dtype float32, backend eager); contradictory"),
    (GOOD + 'conditions = [{}, { device = "cuda" }]\n[[cell.when]]\ndevice = "cuda"\n' + INDUCTOR + 'reason = "r"\n',
     "[[cell.when]] #1 holds under device cuda, backend inductor, where the entry does not (device cpu, dtype "
     "float32, backend eager; or device cuda, dtype float32, backend eager); contradictory"),
    (BOTH + '[[cell.when]]\nbackend = ["eager", "inductor"]\nreason = "r"\n', "[[cell.when]] #1 covers every run "
     "the entry holds for (device cpu, dtype float32, backend eager or inductor); contradictory"),
    (BOTH + '[[cell.when]]\n' + INDUCTOR + 'reason = "r"\n[[cell.when]]\n' + INDUCTOR + 'link = ""\n',
     "[[cell.when]] #2 and #1 both hold under backend inductor; contradictory: make their conditions disjoint"),
    (BOTH + '[[cell.when]]\n' + INDUCTOR, "[[cell.when]] #1 overrides nothing"),
    (BOTH + '[[cell.when]]\nreason = "r"\n', "[[cell.when]] #1 names no condition"),
    (BOTH + '[[cell.when]]\n' + INDUCTOR + 'verdict = "xfail"\n', "[[cell.when]] #1 has verdict 'xfail'"),
    (BOTH + '[[cell.when]]\n' + INDUCTOR + '[cell.when.fingerprint]\nkind = "oops"\n', "#1: fingerprint: kind"),
    (BOTH + '[[cell.when]]\n' + INDUCTOR + '[cell.when.fingerprint]\nkind = "harness_error"\n',
     "[[cell.when]] #1: lists kind 'harness_error' with verdict 'fail'"),
    (BOTH + '[cell.when]\n' + INDUCTOR + 'reason = "r"\n', "`when` must be an array of tables; write each "
     "override as [[cell.when]]"),
])
def test_bad_entry_conditions_or_override_is_one_clear_line(text, message):
    with pytest.raises(gate.ExpectationsError) as info:
        parse(text)
    assert message in str(info.value)
    assert "\n" not in str(info.value) and str(info.value).startswith("5.24.toml: cell #")


def test_an_override_replaces_only_what_it_names_and_only_where_it_holds(tmp_path):
    path = tmp_path / "5.24.toml"
    path.write_text(BOTH + '[cell.fingerprint]\nkind = "exception"\nerror = "ValueError"\n'
                    '[[cell.when]]\n' + INDUCTOR + 'verdict = "error"\nreason = "inductor words"\n'
                    '[cell.when.fingerprint]\nkind = "backend"\nerror = "LoweringException"\n')
    key = ("LlavaForConditionalGeneration", "compile_prefill")
    eager = gate.load_for_run(gate.run_conditions("cpu", "float32", "eager", "2.13.0"), path)
    assert (eager.cells[key].verdict, eager.cells[key].reason, eager.cells[key].link,
            eager.cells[key].fingerprint) == ("fail", "graph break", "https://example.org/1",
                                              Fingerprint("exception", error="ValueError"))
    inductor = gate.load_for_run(gate.run_conditions("cpu", "float32", "inductor", "2.13.0"), path)
    assert (inductor.cells[key].verdict, inductor.cells[key].reason, inductor.cells[key].link,
            inductor.cells[key].fingerprint) == ("error", "inductor words", "https://example.org/1",
                                                 Fingerprint("backend", error="LoweringException"))
    assert gate.load_for_run(gate.run_conditions("cpu", "float32", "aot_eager", "2.13.0"), path).cells == {}


def test_an_entry_of_several_tables_holds_under_any_of_them(tmp_path):
    path = tmp_path / "5.24.toml"
    path.write_text(GOOD + 'conditions = [{}, { device = "cuda", dtype = "bfloat16" }]\n'
                    '[[cell.when]]\ndevice = "cuda"\nreason = "on cuda"\n')
    reasons = {}
    for device, dtype in (("cpu", "float32"), ("cuda", "bfloat16"), ("cuda", "float32"), ("cpu", "bfloat16")):
        cells = gate.load_for_run(gate.run_conditions(device, dtype, "eager", "2.13.0"), path).cells
        reasons[device, dtype] = [e.reason for e in cells.values()]
    assert reasons == {("cpu", "float32"): ["graph break"], ("cuda", "bfloat16"): ["on cuda"],
                       ("cuda", "float32"): [], ("cpu", "bfloat16"): []}


def test_a_run_applies_the_file_under_its_own_conditions(tmp_path):
    """The run's header and envelope name the file and the conditions it was applied under: the file's, with the
    run's value where the run differs (an inductor run of a file measured on eager)."""
    path = tmp_path / "5.24.toml"
    path.write_text(GOOD + GOOD.replace("compile_prefill", "compile_decode") + 'conditions = { backend = "inductor" }\n')
    applied = gate.load_for_run(gate.run_conditions("cpu", "float32", "inductor", "2.13.0"), path)
    assert [(s.conditions, s.cells) for s in applied.sources] == [
        ({"device": "cpu", "dtype": "float32", "backend": "inductor"}, 1)]
    assert gate.load_for_run(gate.run_conditions("cuda", "float32", "inductor", "2.13.0"), path).sources == ()


def test_each_release_keeps_its_expectations_in_one_file():
    """One entry a cell in the version's file: no file of other conditions beside it, and every packaged file
    parses (each entry's overrides consistent with it)."""
    files = sorted(gate.EXPECTATIONS_DIR.glob("*.toml"))
    assert files and all("-" not in path.stem for path in files), [p.name for p in files]
    for path in files:
        gate.read(path)


def test_missing_file_means_no_expectations(tmp_path):
    assert gate.load(tmp_path / "absent.toml") == {}


def test_a_file_without_conditions_was_measured_on_the_default_run(tmp_path):
    path = tmp_path / "5.24.toml"
    path.write_text(GOOD)
    assert gate.read(path).conditions == {"device": "cpu", "dtype": "float32", "backend": "eager"}


def test_cell_conditions_narrow_the_file_and_lists_mean_any(tmp_path):
    path = tmp_path / "5.24.toml"
    path.write_text('[conditions]\ndevice = ["cpu", "cuda"]\ndtype = "float32"\n' + GOOD
                    + GOOD.replace("compile_prefill", "build") + 'conditions = { backend = "inductor" }\n')
    eager = gate.load_for_run(gate.run_conditions("cuda:1", "float32", "eager", "2.13.0"), path)
    assert set(eager.cells) == {("LlavaForConditionalGeneration", "compile_prefill")}
    inductor = gate.load_for_run(gate.run_conditions("cpu", "float32", "inductor", "2.13.0"), path)
    assert len(inductor.cells) == 2 and inductor.sources[0].cells == 2
    assert gate.load_for_run(gate.run_conditions("cpu", "bfloat16", "eager", "2.13.0"), path).cells == {}


def test_torch_condition_holds_for_any_patch_release():
    run = gate.run_conditions("cpu", "float32", "eager", "2.13.0+cpu")
    assert run["torch"] == "2.13" and gate.matches({"torch": "2.13"}, run) and not gate.matches({"torch": "2.14"}, run)


def test_dumps_parses_back_to_the_same_file(tmp_path):
    from conformance.fingerprints import Fingerprint

    fingerprint = Fingerprint("graph_break", where="m:A.f", error="Unsupported",
                              sites={"Unsupported context manager @ m:A.f": 2, "x @ m:B.g": 1}, breaks=3,
                              cold="fail", warm="fail")
    override = gate.Override({"backend": "aot_eager"}, {"verdict": "timeout", "link": "",
                                                        "fingerprint": Fingerprint("timeout", where="m:A.f")})
    file = gate.ExpectationsFile(tmp_path / "5.24.toml", {"device": "cpu", "backend": ["eager", "aot_eager"]}, {
        ("A", "build"): gate.Expectation("A", "build", "fail", 'a "quoted" reason', "https://x/1", fingerprint,
                                         {"dtype": "float32"}, (override,))})
    text = gate.dumps(file)
    assert "[cell.fingerprint.sites]" in text and "[[cell.when]]" in text and "[cell.when.fingerprint]" in text
    assert gate.parse(text, file.path, None) == file


def cell(verdict: str, reason: str = "", **extra) -> dict:
    return {"verdict": verdict, "reason": reason, "seconds": 0.1, "metrics": {}, "nodeid": "", **extra}


def write_run(path: Path, cells: dict[str, dict[str, dict]], version: str = "5.24.0", env: dict | None = None) -> Path:
    from conformance.meta.test_report import ENV
    from conformance.report.envelope import build_envelope

    records = [{"model": model, "check": check, **cell} for model, row in cells.items() for check, cell in row.items()]
    environment = {**ENV, "transformers": version, **(env or {})}
    envelope = build_envelope(records, environment, sorted({r["check"] for r in records}), {})
    path.write_text(json.dumps(envelope))
    return path


FP = {"kind": "exception", "error": "ValueError", "where": "m:f"}


def test_update_keeps_reasons_adds_new_removes_passing(tmp_path):
    file = tmp_path / "5.24.toml"
    file.write_text(gate.dumps(gate.ExpectationsFile(file, dict(gate.DEFAULT_CONDITIONS), {
        ("A", "build"): gate.Expectation("A", "build", "fail", "hand-written reason", "https://x/1"),
        ("A", "compile_prefill"): gate.Expectation("A", "compile_prefill", "fail", "fixed upstream"),
        ("Z", "export_forward"): gate.Expectation("Z", "export_forward", "timeout", "not in this run"),
    })))
    run = write_run(tmp_path / "run.json", {
        "B": {"build": cell("fail", "logits are\nnot finite", fingerprint=FP), "compile_decode": cell("pass")},
        "A": {"build": cell("fail", "observed text", fingerprint=FP, observed="fail"),
              "compile_prefill": cell("pass"),
              "static_cache": cell("timeout", "ran past 300 s", fingerprint={"kind": "timeout"})},
    })
    assert update_expectations(run, file) == file
    found = gate.read(file).cells
    fp = Fingerprint.from_data(FP)
    assert found == {
        ("A", "build"): gate.Expectation("A", "build", "fail", "hand-written reason", "https://x/1", fp),
        ("A", "static_cache"): gate.Expectation("A", "static_cache", "timeout", "ran past 300 s",
                                                fingerprint=Fingerprint("timeout")),
        ("B", "build"): gate.Expectation("B", "build", "fail", "logits are not finite", fingerprint=fp),
        ("Z", "export_forward"): gate.Expectation("Z", "export_forward", "timeout", "not in this run"),
    }
    text = file.read_text()
    order = [text.index(f'check = "{c}"') for c in ("build", "static_cache")]
    assert order == sorted(order) and text.index('"A"') < text.index('"B"') < text.index('"Z"')
    assert sorted(p.name for p in tmp_path.iterdir()) == ["5.24.toml", "run.json"]  # no temporary left


def test_update_takes_the_runs_reason_where_the_failure_changed(tmp_path):
    """A listed reason describes the listed failure: where the run's fingerprint differs, the run's reason replaces
    it (the link is kept); where it is the same, the person's reason stays."""
    file = tmp_path / "5.24.toml"
    other = {"kind": "data_dependent_guard", "error": "UserError", "where": "m:experts"}
    file.write_text(gate.dumps(gate.ExpectationsFile(file, dict(gate.DEFAULT_CONDITIONS), {
        ("A", "build"): gate.Expectation("A", "build", "fail", "old failure", "https://x/1", Fingerprint.from_data(FP)),
        ("A", "static_cache"): gate.Expectation("A", "static_cache", "fail", "edited by hand", "",
                                                Fingerprint.from_data(FP))})))
    run = write_run(tmp_path / "run.json", {"A": {
        "build": cell("fail", "the new failure", fingerprint=other, observed="fail"),
        "static_cache": cell("xfail", "the run's words", fingerprint=FP, observed="fail")}})
    found = gate.read(update_expectations(run, file)).cells
    assert {k: (e.reason, e.link, e.fingerprint) for k, e in found.items()} == {
        ("A", "build"): ("the new failure", "https://x/1", Fingerprint.from_data(other)),
        ("A", "static_cache"): ("edited by hand", "", Fingerprint.from_data(FP))}


def test_update_records_the_raw_verdict_behind_the_gate(tmp_path):
    run = write_run(tmp_path / "run.json", {"A": {
        "build": cell("xfail", "r", fingerprint={"kind": "timeout"}, observed="timeout"),
        "compile_prefill": cell("xpass", "improved", fingerprint=FP, observed="fail"),
        "compile_decode": cell("xpass", "passes", observed="pass")}})
    found = gate.read(update_expectations(run, tmp_path / "e.toml")).cells
    assert {k: e.verdict for k, e in found.items()} == {("A", "build"): "timeout", ("A", "compile_prefill"): "fail"}


def test_update_of_an_older_run_file_reads_the_observation_its_reading_upgraded(tmp_path):
    """A run file without `observed`: an xfail cell's is its recorded `expected` (what was listed when it ran),
    else fail (`report.envelope.observation`, on read: the file listing it today is not asked); the reason and
    link already written are kept."""
    file = tmp_path / "5.24.toml"
    file.write_text(gate.dumps(gate.ExpectationsFile(file, dict(gate.DEFAULT_CONDITIONS), {
        ("A", "build"): gate.Expectation("A", "build", "timeout", "kept reason", "https://x/1")})))
    run = write_run(tmp_path / "run.json", {
        "A": {"build": cell("xfail", "r")},
        "B": {"static_cache": {**cell("xfail", "old run"), "expected": "error"},
              "legacy_cache": cell("xfail", "older run")}})
    found = gate.read(update_expectations(run, file)).cells
    assert {k: (e.verdict, e.reason) for k, e in found.items()} == {
        ("A", "build"): ("fail", "kept reason"),
        ("B", "legacy_cache"): ("fail", "older run"),
        ("B", "static_cache"): ("error", "old run")}


def test_update_is_idempotent(tmp_path):
    run = write_run(tmp_path / "run.json", {"A": {"build": cell("error", "no get_image_features", fingerprint=FP)}})
    file = update_expectations(run, tmp_path / "e.toml")
    first = file.read_text()
    update_expectations(run, file)
    assert file.read_text() == first


def test_update_without_path_uses_the_run_version_and_conditions(tmp_path, monkeypatch):
    monkeypatch.setattr(gate, "EXPECTATIONS_DIR", tmp_path / "expectations")
    run = write_run(tmp_path / "run.json", {"A": {"build": cell("fail", "x", fingerprint=FP)}}, version="4.57.6")
    assert update_expectations(run) == tmp_path / "expectations" / "4.57.toml"
    cuda = write_run(tmp_path / "cuda.json", {"A": {"build": cell("fail", "x", fingerprint=FP)}},
                     env={"device": "cuda", "dtype": "bfloat16", "backend": "inductor"})
    written = update_expectations(cuda)
    assert written.name == "5.24.toml"  # the version's one file, whatever the run's conditions
    assert gate.read(written).conditions == {"device": "cuda", "dtype": "bfloat16", "backend": "inductor"}


def _entries(path: Path) -> dict:
    """(model, check) -> (its conditions, its overrides' (conditions, changes), verdict, reason) as read."""
    return {k: (e.conditions, [(o.conditions, o.changes) for o in e.overrides], e.verdict, e.reason)
            for k, e in gate.read(path).cells.items()}


def under(backend: str) -> dict:
    return {"device": "cpu", "dtype": "float32", "backend": backend}


OTHER_FP = {"kind": "backend", "error": "LoweringException", "where": "torch._inductor.lowering:f"}


def test_an_inductor_run_updates_the_inductor_conditions_of_the_same_entries(tmp_path):
    """eager run, then inductor: one entry a cell; what fails the same on both holds for both; what differs is a
    [[cell.when]]; what fails only under inductor holds there only; the eager expectations stay as they were."""
    file = tmp_path / "5.24.toml"
    eager = write_run(tmp_path / "eager.json", {"A": {
        "compile_prefill": cell("fail", "graph break", fingerprint=FP), "compile_decode": cell("fail", "recompiled",
                                                                                           fingerprint=FP),
        "build": cell("fail", "eager only", fingerprint=FP)}})
    update_expectations(eager, file)
    before = gate.load_for_run(gate.run_conditions("cpu", "float32", "eager", "2.13.0"), file).cells
    inductor = write_run(tmp_path / "inductor.json", {"A": {
        "compile_prefill": cell("fail", "graph break", fingerprint=FP),
        "compile_decode": cell("fail", "lowering failed", fingerprint=OTHER_FP),
        "static_cache": cell("fail", "inductor only", fingerprint=OTHER_FP)}}, env={"backend": "inductor"})
    assert update_expectations(inductor, file) == file
    both = {"backend": ["eager", "inductor"]}
    assert _entries(file) == {
        ("A", "build"): ({}, [], "fail", "eager only"),
        ("A", "compile_prefill"): (both, [], "fail", "graph break"),
        ("A", "compile_decode"): (both, [({"backend": "inductor"}, {
            "reason": "lowering failed", "fingerprint": Fingerprint.from_data(OTHER_FP)})], "fail", "recompiled"),
        ("A", "static_cache"): ({"backend": "inductor"}, [], "fail", "inductor only")}
    assert gate.load_for_run(gate.run_conditions("cpu", "float32", "eager", "2.13.0"), file).cells == before
    first = file.read_text()
    update_expectations(inductor, file)
    update_expectations(eager, file)
    assert file.read_text() == first  # idempotent, in either order
    assert sorted(p.name for p in tmp_path.iterdir()) == ["5.24.toml", "eager.json", "inductor.json"]


def test_a_cell_failing_the_same_way_under_another_backend_keeps_its_written_reason_and_link(tmp_path):
    """The same failure (fingerprint) under inductor widens the entry and keeps what a person wrote; another
    failure gets the run's reason and no link (the link describes the entry's failure) in a [[cell.when]]."""
    file = tmp_path / "5.24.toml"
    file.write_text(gate.dumps(gate.ExpectationsFile(file, dict(gate.DEFAULT_CONDITIONS), {
        ("A", k): gate.Expectation("A", k, "fail", "written by hand", "https://x/1", Fingerprint.from_data(FP))
        for k in ("compile_prefill", "compile_decode")})))
    inductor = write_run(tmp_path / "inductor.json", {"A": {
        "compile_prefill": cell("fail", "the run's words", fingerprint=FP),
        "compile_decode": cell("fail", "lowering failed", fingerprint=OTHER_FP)}}, env={"backend": "inductor"})
    update_expectations(inductor, file)
    found = gate.read(file).cells
    assert (found[("A", "compile_prefill")].conditions, found[("A", "compile_prefill")].overrides) == (
        {"backend": ["eager", "inductor"]}, ())
    assert found[("A", "compile_decode")].overrides == (gate.Override({"backend": "inductor"}, {
        "reason": "lowering failed", "link": "", "fingerprint": Fingerprint.from_data(OTHER_FP)}),)


def test_a_cell_passing_under_one_backend_is_no_longer_listed_there_only(tmp_path):
    file = tmp_path / "5.24.toml"
    file.write_text(gate.dumps(gate.ExpectationsFile(file, dict(gate.DEFAULT_CONDITIONS), {
        ("A", "compile_prefill"): gate.Expectation("A", "compile_prefill", "fail", "both", "https://x/1",
                                                   Fingerprint.from_data(FP), {"backend": ["eager", "inductor"]}),
        ("A", "compile_decode"): gate.Expectation(
            "A", "compile_decode", "fail", "eager words", "", Fingerprint.from_data(FP),
            {"backend": ["eager", "inductor"]}, (gate.Override({"backend": "inductor"}, {"reason": "inductor words"}),)),
        ("A", "build"): gate.Expectation("A", "build", "fail", "inductor only", "", Fingerprint.from_data(FP),
                                         {"backend": "inductor"})})))
    eager_passes = write_run(tmp_path / "eager.json", {"A": {"compile_prefill": cell("pass"),
                                                             "compile_decode": cell("pass"), "build": cell("pass")}})
    update_expectations(eager_passes, file)
    found = gate.read(file).cells
    assert {k: (e.conditions, e.overrides, e.reason, e.link) for k, e in found.items()} == {
        ("A", "compile_prefill"): ({"backend": "inductor"}, (), "both", "https://x/1"),
        ("A", "compile_decode"): ({"backend": "inductor"}, (), "inductor words", ""),  # the override is the entry now
        ("A", "build"): ({"backend": "inductor"}, (), "inductor only", "")}
    inductor_passes = write_run(tmp_path / "inductor.json", {"A": {"compile_prefill": cell("pass")}},
                                env={"backend": "inductor"})
    update_expectations(inductor_passes, file)
    assert set(gate.read(file).cells) == {("A", "compile_decode"), ("A", "build")}


def test_a_run_of_other_device_and_dtype_conditions_the_entries_of_the_same_file(tmp_path):
    """A cuda/bfloat16 run writes into the version's file too: a cell it fails alone holds there only, a cell
    that fails on both holds for either table of its conditions (two keys differ: no one table says both)."""
    file = tmp_path / "5.24.toml"
    file.write_text(GOOD + '[cell.fingerprint]\nkind = "exception"\nerror = "ValueError"\nwhere = "m:f"\n')
    cuda = write_run(tmp_path / "cuda.json", {"LlavaForConditionalGeneration": {
        "compile_prefill": cell("fail", "graph break", fingerprint=FP), "build": cell("fail", "x", fingerprint=FP)}},
        env={"device": "cuda", "dtype": "bfloat16", "backend": "eager"})
    update_expectations(cuda, file)
    found = _entries(file)
    assert found[("LlavaForConditionalGeneration", "build")][0] == {"device": "cuda", "dtype": "bfloat16"}
    assert found[("LlavaForConditionalGeneration", "compile_prefill")][:2] == (
        [{}, {"device": "cuda", "dtype": "bfloat16"}], [])
    assert 'conditions = [{}, { device = "cuda", dtype = "bfloat16" }]' in file.read_text()
    for device, dtype in (("cpu", "float32"), ("cuda", "bfloat16")):
        applied = gate.load_for_run(gate.run_conditions(device, dtype, "eager", "2.13.0"), file).cells
        assert applied[("LlavaForConditionalGeneration", "compile_prefill")].link == "https://example.org/1"
    cpu_passes = write_run(tmp_path / "cpu.json", {"LlavaForConditionalGeneration": {"compile_prefill": cell("pass")}})
    update_expectations(cpu_passes, file)
    assert _entries(file)[("LlavaForConditionalGeneration", "compile_prefill")][0] == {
        "device": "cuda", "dtype": "bfloat16"}


def test_half_precision_runs_widen_the_float32_entries_of_the_same_failure(tmp_path):
    """float32 run, then bfloat16, then float16 (issue 52): one entry a cell; the same failure (fingerprint) in a
    half-precision run widens the entry's dtype and keeps its words; a failure the dtype changes is a
    [[cell.when]] of that dtype; a half-precision-only failure holds for that dtype only; a cell that passes in
    half precision stays float32's; the float32 expectations stay as they were."""
    file = tmp_path / "5.24.toml"
    float32 = write_run(tmp_path / "float32.json", {"A": {
        "static_cache": cell("fail", "cache differs", fingerprint=FP),
        "compile_decode": cell("fail", "recompiled", fingerprint=FP),
        "build": cell("fail", "float32 only", fingerprint=FP)}})
    update_expectations(float32, file)
    before = gate.load_for_run(gate.run_conditions("cpu", "float32", "eager", "2.13.0"), file).cells
    bf16 = write_run(tmp_path / "bf16.json", {"A": {
        "static_cache": cell("fail", "the run's words", fingerprint=FP),
        "compile_decode": cell("fail", "bf16 matmul raised", fingerprint=OTHER_FP),
        "export_forward": cell("fail", "bf16 only", fingerprint=OTHER_FP),
        "build": cell("pass")}}, env={"dtype": "bfloat16"})
    update_expectations(bf16, file)
    fp16 = write_run(tmp_path / "fp16.json", {"A": {
        "static_cache": cell("fail", "cache differs", fingerprint=FP),
        "compile_decode": cell("fail", "recompiled", fingerprint=FP), "build": cell("pass")}},
        env={"dtype": "float16"})
    update_expectations(fp16, file)
    all_three = {"dtype": ["bfloat16", "float16", "float32"]}
    assert _entries(file) == {
        ("A", "build"): ({}, [], "fail", "float32 only"),
        ("A", "static_cache"): (all_three, [], "fail", "cache differs"),
        ("A", "compile_decode"): (all_three, [({"dtype": "bfloat16"}, {
            "reason": "bf16 matmul raised", "fingerprint": Fingerprint.from_data(OTHER_FP)})],
            "fail", "recompiled"),
        ("A", "export_forward"): ({"dtype": "bfloat16"}, [], "fail", "bf16 only")}
    assert gate.load_for_run(gate.run_conditions("cpu", "float32", "eager", "2.13.0"), file).cells == before
    half = gate.load_for_run(gate.run_conditions("cpu", "bfloat16", "eager", "2.13.0"), file).cells
    assert set(half) == {("A", "static_cache"), ("A", "compile_decode"), ("A", "export_forward")}
    first = file.read_text()
    for run in (fp16, float32, bf16):
        update_expectations(run, file)
    assert file.read_text() == first  # idempotent, in any order


@pytest.mark.parametrize("listed, run_cell, message", [
    # holds for every torch; a torch 2.13 run passes: "every torch but 2.13" is no table
    (BOTH.replace('"eager", "inductor"', '"eager"') + '[[cell.when]]\ntorch = "2.12"\nreason = "older torch"\n',
     cell("pass"), "cannot write the entry's conditions on torch as a table (it would hold for every torch but "
     "2.13); list the torch values it holds for by hand, then update again"),
    # listed with a fingerprint on eager; an inductor run without one: no [[cell.when]] can take a fingerprint away
    (GOOD + '[cell.fingerprint]\nkind = "exception"\nerror = "ValueError"\n', cell("fail", "no fingerprint"),
     "the run recorded no fingerprint, which a [[cell.when]] cannot say"),
])
def test_an_entry_the_update_cannot_write_is_one_clear_line(tmp_path, listed, run_cell, message):
    file = tmp_path / "5.24.toml"
    file.write_text(listed)
    env = {"torch": "2.13.0"} if run_cell["verdict"] == "pass" else {"backend": "inductor"}
    run = write_run(tmp_path / "run.json", {"LlavaForConditionalGeneration": {"compile_prefill": run_cell}}, env=env)
    with pytest.raises(gate.ExpectationsError) as info:
        update_expectations(run, file)
    assert str(info.value).startswith(f"{file}: cell LlavaForConditionalGeneration / compile_prefill: ")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_update_refuses_a_matrix_merged_with_another_backends_columns(tmp_path):
    merged = write_run(tmp_path / "matrix.json", {"A": {"build": cell("fail", "x", fingerprint=FP)}},
                       env={"backends": {"inductor": {"source": "inductor.json"}}})
    with pytest.raises(gate.ExpectationsError, match="update from each backend's own run file"):
        update_expectations(merged, tmp_path / "5.24.toml")


@pytest.mark.parametrize("content, message", [(None, "no such file"), ("{", "not valid JSON"),
                                              ('{"a": 1}', "expected 'vlm-conformance/1'")])
def test_update_from_bad_run_is_one_clear_line(tmp_path, content, message):
    run = tmp_path / "run.json"
    if content is not None:
        run.write_text(content)
    with pytest.raises(gate.ExpectationsError, match=message):
        update_expectations(run, tmp_path / "e.toml")


# --- the real plugin on real tiny models ------------------------------------------------------

REGRESSED = "LlavaForConditionalGeneration"
HEALTHY = "T5ForConditionalGeneration"

CONFTEST = '''
import functools

import pytest
import torch
from transformers import LlavaForConditionalGeneration

pytest_plugins = ["conformance.run.plugin"]


def pytest_conformance_case_source(config):
    return None  # the installed transformers' classes; implementing the hook says this run is the suite


@pytest.fixture(autouse=True)
def nan_logits_regression(monkeypatch):
    """The injected regression: Llava's forward returns NaN logits."""
    original = LlavaForConditionalGeneration.forward

    @functools.wraps(original)  # the forward keeps its signature: samples are built from it
    def forward(self, *args, **kwargs):
        output = original(self, *args, **kwargs)
        output.logits = torch.full_like(output.logits, float("nan"))
        return output

    monkeypatch.setattr(LlavaForConditionalGeneration, "forward", forward)
'''
TEST_BUILD = '''
import pytest
from conformance.run.cells import run_cell


@pytest.mark.conformance_check("build")
def test_build(model_case, request):
    run_cell("build", model_case, request)
'''


@pytest.fixture(scope="session")
def preloaded():
    """Import and cache before any pytester snapshot: pytester drops the modules
    a run imports, and torch's operator registries cannot be imported twice."""
    import torch._dynamo  # noqa: F401

    from conformance.checks.common.registry import load_all
    from conformance.discover import discover

    discover()
    load_all()


@pytest.fixture
def gate_run(preloaded, pytester):
    """Run the real plugin's build check on the two classes with a given expectations file."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_build=TEST_BUILD)

    out = pytester.path / "matrix.json"

    def run(expectations: str):
        exp = pytester.path / "expectations.toml"
        exp.write_text(expectations)
        result = pytester.runpytest_inprocess(
            "-p", "no:cacheprovider", "-p", "no:randomly", "--models", f"{REGRESSED},{HEALTHY}",
            "--checks", "build", "--expectations", str(exp), "--matrix-out", str(out))
        verdicts = {m: row["cells"]["build"]["verdict"] for m, row in json.loads(out.read_text())["models"].items()}
        return result, verdicts

    run.out = out
    return run


def test_injected_regression_turns_exactly_that_cell_red(gate_run):
    result, verdicts = gate_run("")
    assert verdicts == {REGRESSED: "fail", HEALTHY: "pass"}
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"*FAIL {REGRESSED} / build: eager prefill logits are not finite*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_recorded_failure_is_xfail_and_listed_pass_is_xpass_that_fails_the_run(gate_run, tmp_path):
    """Record the first run's failure with `expectations --update`, list the healthy cell by hand: xfail, xpass."""
    gate_run("")
    recorded = update_expectations(gate_run.out, tmp_path / "recorded.toml")
    listed = recorded.read_text() + f'\n[[cell]]\nmodel = "{HEALTHY}"\ncheck = "build"\nverdict = "fail"\nreason = "x"\n'
    assert 'kind = "contract"' in listed and 'what = "eager prefill logits are not finite"' in listed
    result, verdicts = gate_run(listed)
    assert verdicts == {REGRESSED: "xfail", HEALTHY: "xpass"}
    result.assert_outcomes(xfailed=1, failed=1)
    result.stdout.fnmatch_lines([f"*XPASS {HEALTHY} / build*remove the expectation*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_listed_failure_without_a_fingerprint_accepts_nothing(gate_run):
    result, verdicts = gate_run(f'[[cell]]\nmodel = "{REGRESSED}"\ncheck = "build"\nverdict = "fail"\nreason = "x"\n')
    assert verdicts[REGRESSED] == "fail"
    result.stdout.fnmatch_lines([f"*FAIL {REGRESSED} / build: listed without a fingerprint*"])


@pytest.mark.parametrize("version, expected", [
    ("5.24.0", "5.24.toml"), ("5.24.1", "5.24.toml"), ("5.25.0.dev0", "5.24.toml"), ("5.30.0", "5.24.toml"),
    ("5.22.0", "5.9.toml"), ("5.8.0", "5.8.toml"), ("4.57.6", "4.57.toml"), ("4.58.0.dev0", "4.57.toml"), ("6.0.0", "6.0.toml"),
])
def test_default_path_falls_back_to_the_newest_older_release(tmp_path, monkeypatch, version, expected):
    monkeypatch.setattr(gate, "EXPECTATIONS_DIR", tmp_path)
    for name in ("4.57.toml", "5.9.toml", "5.23.toml", "5.24.toml", "5.24-cuda-bfloat16-inductor.toml"):
        (tmp_path / name).write_text("")
    assert gate.default_path(version).name == expected


def test_every_file_of_a_release_is_considered(tmp_path, monkeypatch):
    """A release keeps one file (`test_each_release_keeps_its_expectations_in_one_file`), but a file of its own
    beside it, given by hand, is read too."""
    monkeypatch.setattr(gate, "EXPECTATIONS_DIR", tmp_path)
    for name in ("5.23.toml", "5.24.toml", "5.24-cuda-bfloat16-inductor.toml"):
        (tmp_path / name).write_text("")
    assert [p.name for p in gate.files_for("5.25.0.dev0")] == ["5.24-cuda-bfloat16-inductor.toml", "5.24.toml"]


def test_judging_a_run_again_applies_todays_expectations_to_its_recorded_cells(tmp_path):
    """`conformance expectations --judge RUN.json -o OUT.json`: after `--update` listed a run's new failures, the
    run's cells are judged as a run would judge them now (fail -> xfail where listed with the same fingerprint,
    xfail -> fail where the entry is gone, pass -> xpass where listed); reasons and fingerprints stay."""
    from conformance.gate.judging import judge_envelope
    from conformance.report.envelope import load_envelope

    run = write_run(tmp_path / "run.json", {
        "A": {"build": cell("fail", "boom", fingerprint=FP), "compile_prefill": cell("pass"),
              "compile_decode": cell("xfail", "was listed", fingerprint=FP, expected="fail"),
              "static_cache": cell("skip", "no cache")},
    })
    file = tmp_path / "5.24.toml"
    fp = Fingerprint.from_data(FP)
    file.write_text(gate.dumps(gate.ExpectationsFile(file, dict(gate.DEFAULT_CONDITIONS), {
        ("A", "build"): gate.Expectation("A", "build", "fail", "boom", fingerprint=fp),
        ("A", "compile_prefill"): gate.Expectation("A", "compile_prefill", "fail", "listed", fingerprint=fp),
    })))
    judged, changed = judge_envelope(load_envelope(run), file)
    cells = judged["models"]["A"]["cells"]
    assert {c: cells[c]["verdict"] for c in cells} == {"build": "xfail", "compile_prefill": "xpass",
                                                       "compile_decode": "fail", "static_cache": "skip"}
    assert changed == 3
    assert cells["build"]["reason"] == "boom" and cells["build"]["fingerprint"] == FP
    assert cells["build"]["expected"] == "fail" and cells["build"]["observed"] == "fail"
    assert "expected" not in cells["compile_decode"]
    assert judged["summary"]["build"]["xfail"] == 1
    assert judged["environment"]["expectations"][0]["cells"] == 2
