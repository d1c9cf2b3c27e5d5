"""Meta tests of the `conformance` command: every subcommand and every bad input, fast (no model is built).

`explain` reads the real expectations files, as a run does; one cell is also run by the real plugin (pytester,
no model built either) to show that explain's verdict is the matrix cell's.
"""

from __future__ import annotations

import copy
import json
import sys
import types

import pytest

import conformance.discover
from conformance.meta.test_report import ENV, cell, make_envelope
from conformance.report import envelope as report
from conformance.report import io, page, render
from conformance.tools import cli, explain

pytestmark = pytest.mark.meta
pytest_plugins = ["pytester"]

ALPHA, BETA, GAMMA = (f"{n}ForConditionalGeneration" for n in ("Alpha", "Beta", "Gamma"))
README = f"# project\n\ntext before\n\n{render.START_MARKER}\n{render.END_MARKER}\n\ntext after\n"


def save(path, data) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def run(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == cli.USAGE_ERROR
    assert err.startswith("conformance: error: ") and err.count("\n") == 1, err
    for needle in needles:
        assert needle in err


# --------------------------------------------------------------------------- render / publish


def test_render_to_stdout_and_file(tmp_path, capsys):
    run_json = save(tmp_path / "run.json", make_envelope())
    code, out, _ = run(capsys, "render", run_json)
    assert code == 0 and out == render.render_markdown(make_envelope())
    code, out, _ = run(capsys, "render", run_json, "-o", tmp_path / "out" / "m.md")
    assert code == 0 and (tmp_path / "out" / "m.md").read_text() == render.render_markdown(make_envelope())


def test_render_unwritable_output(tmp_path, capsys):
    run_json = save(tmp_path / "run.json", make_envelope())
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, out, err = run(capsys, "render", run_json, "-o", blocker / "m.md")
    assert_one_line_error(code, err, "cannot write", "writable")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "run.json"]


@pytest.fixture
def pictures(monkeypatch) -> list:
    """`screenshot.png_beside` recorded, not run (no browser in these tests): the pages publish asked it to take."""
    from conformance.report import screenshot

    taken = []

    def fake_png_beside(page, envelope=None):
        taken.append((page, envelope))
        return f"wrote {page.with_suffix('.png')}"

    monkeypatch.setattr(screenshot, "png_beside", fake_png_beside)
    return taken


def test_publish_writes_the_four_files_and_retakes_the_picture(tmp_path, capsys, pictures):
    envelope = make_envelope()
    (tmp_path / "README.md").write_text(README)
    run_json = save(tmp_path / "run.json", envelope)
    code, out, _ = run(capsys, "publish", run_json, "--root", tmp_path)
    assert code == 0 and out.count("wrote ") == 5
    assert f"wrote {tmp_path / 'reports' / 'matrix.png'}" in out.splitlines()
    assert pictures == [(tmp_path / "reports" / "matrix.html", envelope)]
    assert report.load_envelope(tmp_path / "reports" / "matrix.json") == envelope
    assert (tmp_path / "reports" / "MATRIX.md").read_text() == render.render_markdown(envelope)
    assert (tmp_path / "reports" / "matrix.html").read_text() == page.render_html([envelope], ["matrix.json"])
    readme = (tmp_path / "README.md").read_text()
    assert readme.startswith("# project\n\ntext before\n\n") and readme.endswith(f"{render.END_MARKER}\n\ntext after\n")
    assert render.extract_section(readme) == render.readme_section(envelope)
    # Publishing the published copy again changes nothing; --no-screenshot leaves the picture alone.
    code, out, _ = run(capsys, "publish", tmp_path / "reports" / "matrix.json", "--root", tmp_path, "--no-screenshot")
    assert code == 0 and out.count("wrote ") == 4 and len(pictures) == 1
    assert (tmp_path / "README.md").read_text() == readme


def test_publish_of_another_supported_version_writes_its_own_folder(tmp_path, capsys, pictures):
    from conformance import versions

    other = next(v for v in versions.supported() if not v.is_gate and not v.torch)
    envelope = make_envelope()
    envelope["environment"]["transformers"] = other.transformers
    (tmp_path / "README.md").write_text(README)
    run_json = save(tmp_path / "run.json", envelope)
    code, out, _ = run(capsys, "publish", run_json, "--root", tmp_path)
    folder = tmp_path / "reports" / other.env
    assert code == 0 and out.count("wrote ") == 3
    assert report.load_envelope(folder / "matrix.json") == envelope
    assert (folder / "MATRIX.md").read_text() == render.render_markdown(envelope)
    assert (tmp_path / "README.md").read_text() == README  # the README shows the gate's version
    assert not (tmp_path / "reports" / "matrix.json").exists()
    assert pictures == [] and "matrix.png left as it was (the README shows the gate's version)" in out


@pytest.mark.parametrize("readme, message", [(None, "no such file"), ("# no markers\n", "matrix markers")])
def test_publish_writes_nothing_on_a_bad_readme(tmp_path, capsys, pictures, readme, message):
    if readme is not None:
        (tmp_path / "README.md").write_text(readme)
    run_json = save(tmp_path / "run.json", make_envelope())
    code, _, err = run(capsys, "publish", run_json, "--root", tmp_path)
    assert_one_line_error(code, err, message)
    assert not (tmp_path / "reports").exists()
    if readme is not None:
        assert (tmp_path / "README.md").read_text() == readme


# --------------------------------------------------------------------------- bad run files


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ('{"schema": "vlm-conformance/1", "models": {', "not valid JSON"),
    ('{"schema": "vlm-conformance/0"}', "schema 'vlm-conformance/0'"),
    ('{"schema": "vlm-conformance/1"}', "missing field"),
])
@pytest.mark.parametrize("command", ["render", "publish", "diff", "merge", "expectations"])
def test_bad_run_files_give_one_line_and_write_nothing(tmp_path, capsys, content, message, command):
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    good = save(tmp_path / "good.json", make_envelope())
    (tmp_path / "README.md").write_text(README)
    argv = {
        "render": ["render", bad, "-o", tmp_path / "out.md"],
        "publish": ["publish", bad, "--root", tmp_path],
        "diff": ["diff", good, bad],
        "merge": ["merge", good, bad, "-o", tmp_path / "out.json"],
        "expectations": ["expectations", "--update", bad, "--file", tmp_path / "out.toml"],
    }[command]
    before = sorted(p.name for p in tmp_path.iterdir())
    code, _, err = run(capsys, *argv)
    assert_one_line_error(code, err, message, str(bad))
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert (tmp_path / "README.md").read_text() == README


@pytest.mark.parametrize("argv, message", [
    ([], "required: COMMAND"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["diff", "only-one.json"], "required: NEW.json"),
    (["merge", "a.json"], "required: -o"),
])
def test_bad_usage_gives_one_line(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert_one_line_error(code, err, message)


# --------------------------------------------------------------------------- diff


def test_diff_exit_status_and_order(tmp_path, capsys):
    old = make_envelope()
    improved = copy.deepcopy(old)
    improved["models"][ALPHA]["cells"]["compile_prefill"] = cell("pass")
    regressed = copy.deepcopy(improved)
    regressed["models"][BETA]["cells"]["compile_prefill"] = cell("fail", "graph break: print")
    regressed["environment"]["transformers"] = "5.25.0.dev0"
    paths = [save(tmp_path / f"{n}.json", e) for n, e in (("old", old), ("imp", improved), ("reg", regressed))]

    assert run(capsys, "diff", paths[0], paths[0])[:2] == (0, "no verdict changed\n")
    code, out, _ = run(capsys, "diff", paths[0], paths[1])
    assert code == 0 and f"{ALPHA} / compile_prefill: fail -> pass" in out
    code, out, _ = run(capsys, "diff", paths[0], paths[2])
    assert code == 1
    assert "environment: transformers 5.24.0 -> 5.25.0.dev0" in out
    assert out.index("regressions (1):") < out.index("improvements (1):")
    assert f"{BETA} / compile_prefill: pass -> fail  graph break: print" in out


# --------------------------------------------------------------------------- merge


def _split(envelope):
    a, b = copy.deepcopy(envelope), copy.deepcopy(envelope)
    a["models"] = {ALPHA: a["models"][ALPHA]}
    b["models"] = {n: r for n, r in b["models"].items() if n != ALPHA}
    for shard in (a, b):
        shard["summary"] = report.summarize(shard["models"], shard["checks"])
    return a, b


def test_merge_shards(tmp_path, capsys):
    whole = make_envelope()
    a, b = _split(whole)
    out_json = tmp_path / "merged.json"
    code, out, _ = run(capsys, "merge", save(tmp_path / "a.json", a), save(tmp_path / "b.json", b), "-o", out_json)
    assert code == 0 and "3 classes, 12 cells" in out
    merged = report.load_envelope(out_json)
    assert merged["models"] == whole["models"] and merged["summary"] == whole["summary"]


def test_merge_refuses_another_environment(tmp_path, capsys):
    a, b = _split(make_envelope())
    b["environment"]["device"] = "cuda"
    code, _, err = run(capsys, "merge", save(tmp_path / "a.json", a), save(tmp_path / "b.json", b),
                       "-o", tmp_path / "m.json")
    assert_one_line_error(code, err, "environment differs", "'device'")
    assert not (tmp_path / "m.json").exists()


def test_merge_takes_another_dtype_as_its_own_columns(tmp_path, capsys):
    """A run in another dtype is not another environment: its cells become `<check>~bf16` columns."""
    a, b = _split(make_envelope())
    b["environment"]["dtype"] = "bfloat16"
    code, out, err = run(capsys, "merge", save(tmp_path / "a.json", a), save(tmp_path / "b.json", b),
                         "-o", tmp_path / "m.json")
    assert code == 0 and err == "", err
    merged = report.load_envelope(tmp_path / "m.json")
    assert merged["environment"]["dtype"] == "float32"
    assert any(check.endswith("~bf16") for check in merged["checks"])


def test_merge_parts_after_a_killed_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(conformance.discover, "row_metadata", lambda names: {})  # discovery is slow and not under test
    parts = tmp_path / "matrix.json.parts"
    for worker, model in (("gw0", ALPHA), ("gw1", BETA)):
        io.append_record(parts / f"{worker}.jsonl", {"model": model, "check": "build", "verdict": "pass"})
    with open(parts / "gw1.jsonl", "a") as handle:
        handle.write('{"model": "' + BETA + '", "check": "compile_prefill", "verd')  # torn by kill -9
    (parts / report.PARTS_ENVIRONMENT).write_text(json.dumps(ENV))
    code, out, err = run(capsys, "merge", "--parts", parts, "-o", tmp_path / "matrix.json")
    assert code == 0 and "2 classes, 2 cells" in out and err == ""
    envelope = report.load_envelope(tmp_path / "matrix.json")
    assert envelope["environment"] == ENV and envelope["summary"]["build"]["pass"] == 2


def test_merge_parts_without_environment_file_describes_this_machine(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(conformance.discover, "row_metadata", lambda names: {})
    parts = tmp_path / "p"
    io.append_record(parts / "main.jsonl", {"model": ALPHA, "check": "build", "verdict": "fail", "reason": "r"})
    code, _, err = run(capsys, "merge", "--parts", parts, "--dtype", "bfloat16", "-o", tmp_path / "m.json")
    assert code == 0 and "no environment.json" in err
    env = report.load_envelope(tmp_path / "m.json")["environment"]
    assert (env["device"], env["dtype"], env["backend"]) == ("cpu", "bfloat16", "eager")


@pytest.mark.parametrize("argv, message", [
    (["merge", "--parts", "{tmp}/missing", "-o", "{tmp}/m.json"], "no such directory"),
    (["merge", "{tmp}/a.json", "--parts", "{tmp}", "-o", "{tmp}/m.json"], "not both or neither"),
    (["merge", "-o", "{tmp}/m.json"], "not both or neither"),
])
def test_merge_bad_arguments(tmp_path, capsys, argv, message):
    code, _, err = run(capsys, *[a.format(tmp=tmp_path) for a in argv])
    assert_one_line_error(code, err, message)
    assert not (tmp_path / "m.json").exists()


# --------------------------------------------------------------------------- explain


def test_explain_unknown_check_id(capsys):
    code, _, err = run(capsys, "explain", ALPHA, "compile_everything")
    assert_one_line_error(code, err, "unknown check id 'compile_everything'", "build")


def test_explain_unknown_class(capsys, monkeypatch):
    import conformance.discover

    monkeypatch.setattr(conformance.discover, "by_name", lambda: {ALPHA: object()})
    code, _, err = run(capsys, "explain", "AlphaForConditionalGeneraton", "build")
    assert_one_line_error(code, err, "unknown class 'AlphaForConditionalGeneraton'", f"did you mean {ALPHA}")


@pytest.mark.parametrize("device, message", [("tpu:x", "is not a device"), ("cuda:0", "no CUDA device")])
def test_explain_bad_device(capsys, monkeypatch, device, message):
    import torch

    import conformance.discover

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(conformance.discover, "by_name", lambda: {ALPHA: types.SimpleNamespace(name=ALPHA)})
    code, _, err = run(capsys, "explain", ALPHA, "build", "--device", device)
    assert_one_line_error(code, err, "--device", device, message)


def test_explain_bad_dtype(capsys):
    code, _, err = run(capsys, "explain", ALPHA, "build", "--dtype", "int8")
    assert_one_line_error(code, err, "invalid choice: 'int8'")


def test_explain_prints_traceback_metrics_and_reproducer(capsys, monkeypatch):
    """A fake check on a fake case: explain shows everything and exits 1."""
    import dataclasses

    import conformance.cases.case
    import conformance.discover
    from conformance.checks.common import registry

    def failing_check(case):
        raise RuntimeError("Unsupported: data-dependent branch")

    info = types.SimpleNamespace(name=ALPHA)
    monkeypatch.setattr(conformance.discover, "by_name", lambda: {ALPHA: info})
    monkeypatch.setitem(registry.CHECKS, "compile_prefill",
                        dataclasses.replace(registry.get("compile_prefill"), run=failing_check))
    monkeypatch.setattr(conformance.cases.case, "build_case", lambda *args: types.SimpleNamespace(seed=0))
    code, out, _ = run(capsys, "explain", ALPHA, "compile_prefill", "--device", "cpu")
    assert code == 1
    assert f"== {ALPHA} / compile_prefill on cpu, float32, backend eager" in out
    assert "verdict: fail" in out and "reason: RuntimeError: Unsupported: data-dependent branch" in out
    assert "traceback:\nTraceback (most recent call last):" in out and "in failing_check" in out
    target = "conformance/test_matrix.py::test_compile_prefill"
    assert f"reproduce: pytest {target} --models {ALPHA} --checks compile_prefill --device cpu -p no:randomly" in out


def test_explain_build_error_is_reported_not_raised(capsys, monkeypatch):
    import conformance.cases.case
    import conformance.discover

    def no_config(*args):
        raise KeyError("vision_config")

    monkeypatch.setattr(conformance.discover, "by_name", lambda: {ALPHA: types.SimpleNamespace(name=ALPHA)})
    monkeypatch.setattr(conformance.cases.case, "build_case", no_config)
    code, out, _ = run(capsys, "explain", ALPHA, "build", "--device", "cpu")
    assert code == 1 and "verdict: error" in out and "KeyError: 'vision_config'" in out and "in no_config" in out


@pytest.mark.parametrize("check_id, verdict", [("build", "fail"), ("static_cache", "skip")])
def test_explain_reports_a_row_the_build_stage_decided_like_the_plugin(capsys, monkeypatch, check_id, verdict):
    import conformance.cases.case
    import conformance.discover
    from conformance.cases.model_failure import NotStandalone

    def part(*args):
        raise NotStandalone("not a standalone model: a part", build=("fail", "default config bug"))

    monkeypatch.setattr(conformance.discover, "by_name", lambda: {ALPHA: types.SimpleNamespace(name=ALPHA)})
    monkeypatch.setattr(conformance.cases.case, "build_case", part)
    code, out, _ = run(capsys, "explain", ALPHA, check_id, "--device", "cpu")
    assert f"verdict: {verdict}" in out and code == (1 if verdict == "fail" else 0)
    reason = "default config bug" if check_id == "build" else "not a standalone model: a part"
    assert f"reason: {reason}" in out


FAST_VLM = "FastVlmForConditionalGeneration"
MATRIX = "from conformance.run.cells import matrix_tests\n\nglobals().update(matrix_tests())\n"
PLUGIN_CONFTEST = ('pytest_plugins = ["conformance.run.plugin"]\n\n\ndef pytest_conformance_case_source(config):\n'
                   '    return None  # the installed transformers\' classes\n')


@pytest.fixture
def timm_missing(monkeypatch):
    """Building any class fails as FastVlm's build did when its cells were listed (fixtures/expectations): with
    transformers' own missing-timm ImportError, raised where the cases stage does not tell it (`build_case` is
    replaced, `missing_dependency` never sees it), timm installed or not."""
    import conformance.cases.case
    from transformers.utils import import_utils

    class TimmWrapperModel:
        pass

    def build_case(*args):
        import_utils.requires_backends(TimmWrapperModel, ["timm"])

    monkeypatch.setitem(import_utils.BACKENDS_MAPPING, "timm", (lambda: False, import_utils.TIMM_IMPORT_ERROR))
    monkeypatch.setattr(conformance.cases.case, "build_case", build_case)


def test_explain_of_a_listed_build_error_agrees_with_the_matrix(capsys, pytester, timm_missing):
    """A build error listed with its fingerprint (FastVlm's, under the inductor conditions): explain gives the
    matrix cell's verdict and fingerprint (xfail where this transformers lists it), not an unlisted error."""
    import torch._dynamo

    from conformance.fingerprints import Fingerprint
    from conformance.gate import expectations as gate

    torch._dynamo.list_backends(exclude_tags=())  # imported before the snapshot: pytester drops what a run imports
    conditions = gate.run_conditions("cpu", "float32", "inductor", torch.__version__)
    listed = gate.load(run=conditions).get((FAST_VLM, "compile_prefill"))
    code, out, _ = run(capsys, "explain", FAST_VLM, "compile_prefill", "--device", "cpu", "--backend", "inductor")

    pytester.makeconftest(PLUGIN_CONFTEST)
    pytester.makepyfile(test_matrix=MATRIX)
    matrix_out = pytester.path / "matrix.json"
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--models", FAST_VLM,
                                 "--checks", "compile_prefill", "--device", "cpu", "--backend", "inductor",
                                 "--matrix-out", str(matrix_out))
    cell = json.loads(matrix_out.read_text())["models"][FAST_VLM]["cells"]["compile_prefill"]

    assert cell["verdict"] == ("xfail" if listed is not None else "error")
    raw = f" (raw: {cell['observed']})" if cell["observed"] != cell["verdict"] else ""
    assert f"verdict: {cell['verdict']}{raw}\n" in out and code == 1
    assert f"fingerprint: {Fingerprint.from_data(cell['fingerprint']).summary()}\n" in out
    assert f"reason: {cell['reason']}\n" in out
    if listed is not None:
        assert listed.fingerprint.summary() in out and f"expectation: error: {listed.reason}" in out


def test_reproducer_points_at_the_test_of_the_check():
    assert explain.reproducer(ALPHA, "build", "auto", "float32", "eager") == (
        f"pytest conformance/test_matrix.py::test_build --models {ALPHA} --checks build -p no:randomly")
    assert explain.reproducer(ALPHA, "build", "cuda", "bfloat16", "inductor").endswith(
        "--checks build --device cuda --dtype bfloat16 --backend inductor -p no:randomly")


# --------------------------------------------------------------------------- list, delegated commands


def test_list(capsys, monkeypatch):
    import conformance.discover

    infos = (types.SimpleNamespace(name=ALPHA, model_type="alpha", kind="multimodal-decoder-only",
                                   modalities=("image", "text")),
             types.SimpleNamespace(name="B", model_type="b", kind="text-decoder-only", modalities=("text",)))
    monkeypatch.setattr(conformance.discover, "discover", lambda: infos)
    code, out, err = run(capsys, "list")
    assert code == 0 and out.splitlines() == [
        f"{ALPHA}  alpha  multimodal-decoder-only  image,text",
        f"{'B':<{len(ALPHA)}}  b      text-decoder-only        text",
    ]
    assert err == "2 classes\n"


def test_expectations_update_is_delegated(tmp_path, capsys, monkeypatch):
    from conformance.gate import update as gate_update

    run_json = save(tmp_path / "run.json", make_envelope())
    seen = []

    def update(run_path, file_path):
        seen.append((run_path, file_path))
        return tmp_path / "x.toml"

    monkeypatch.setattr(gate_update, "update_expectations", update)
    code, out, _ = run(capsys, "expectations", "--update", run_json, "--file", tmp_path / "x.toml")
    assert code == 0 and out == f"wrote {tmp_path / 'x.toml'}\n"
    assert [(str(a), str(b)) for a, b in seen] == [(run_json, str(tmp_path / "x.toml"))]


def test_bench_is_delegated(capsys, monkeypatch):
    fake = types.ModuleType("conformance.tools.bench")
    fake.main = lambda argv: 3 if argv == ["--models", "X", "--help"] else 0
    monkeypatch.setitem(sys.modules, "conformance.tools.bench", fake)
    import conformance

    monkeypatch.setattr(conformance, "bench", fake, raising=False)
    assert cli.main(["bench", "--models", "X", "--help"]) == 3


def test_bench_missing_module_is_one_line(capsys, monkeypatch):
    import conformance

    monkeypatch.delattr(conformance, "bench", raising=False)
    monkeypatch.setitem(sys.modules, "conformance.tools.bench", None)
    code, _, err = run(capsys, "bench")
    assert_one_line_error(code, err, "conformance.tools.bench is not available")


# --------------------------------------------------------------------------- plan


class _Cases:
    def names(self):
        return sorted([ALPHA, BETA, GAMMA])

    def index(self):
        return {n: n for n in self.names()}


@pytest.fixture
def planned(tmp_path, monkeypatch):
    """`plan` over the three classes of make_envelope(), timed by that envelope as the published matrix."""
    from conformance.cases import case as case_source
    from conformance.run import shards as shard

    monkeypatch.setattr(case_source, "TransformersCases", _Cases)
    monkeypatch.setattr(shard, "PUBLISHED", tmp_path / "matrix.json")
    save(shard.PUBLISHED, make_envelope())


def test_plan_prints_the_selection_and_the_shards_that_fit(capsys, planned):
    code, out, _ = run(capsys, "plan", "--models", "Alpha*,Beta*", "--json")
    assert code == 0
    plan = json.loads(out)
    assert plan["classes"] == [ALPHA, BETA] and plan["shards"] == 1 and plan["specs"] == ["1/1"]
    code, out, _ = run(capsys, "plan", "--budget", "1", "--workers", "1")  # nothing fits: one shard a class
    assert code == 0 and "3 shard(s) of 1 workers" in out and "--shard 3/3" in out
    assert f"classes: {ALPHA}, {BETA}, {GAMMA}" in out.splitlines()  # named without --json too


@pytest.mark.parametrize("argv, message", [
    (["--budget", "0"], "--budget"),
    (["--models", "Nope*"], "'Nope*'"),
])
def test_plan_bad_input_gives_one_line(capsys, planned, argv, message):
    code, _, err = run(capsys, "plan", *argv)
    assert_one_line_error(code, err, message)


def _commands(parser) -> dict:
    """name -> the subparser of each subcommand `parser` has."""
    import argparse

    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def _help(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as done:
        cli.main([*argv, "--help"])
    assert done.value.code == 0, argv
    return capsys.readouterr().out


def test_the_help_lists_each_command_once_and_every_command_has_its_help(capsys):
    commands = _commands(cli.build_parser())
    listed = [line.split()[0] for line in _help(capsys).splitlines() if line.startswith("    ")
              and not line.startswith("     ")]  # the command column of the COMMAND list
    assert sorted(listed) == sorted(commands) and len(set(listed)) == len(listed)
    for name in commands:
        assert f"usage: conformance {name}" in _help(capsys, name)
    jobs = _commands(commands["jobs"])
    assert set(jobs) == {"list", "status", "run", "amend", "publish", "gate"}
    for name in jobs:
        assert f"usage: conformance jobs {name}" in _help(capsys, "jobs", name)
    assert "usage: conformance bench --suite" in _help(capsys, "bench", "--suite")
