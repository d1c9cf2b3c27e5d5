"""Meta tests of the pytest plugin's front door: bad input ends the run cleanly, selection, grouping.

Each runs the real plugin in process (pytester) on fake classes from a case
source (conformance/meta/fake_cases.py): no transformers discovery, no model.
"""

import pytest

from conformance.meta.fake_cases import FAKE_CLASSES, conftest, fake_project

OK = "OkForConditionalGeneration"


@pytest.fixture
def fake_run(pytester):
    """Run pytest in process on the fake classes; returns (result, matrix path)."""
    empty = fake_project(pytester)

    def run(*args: str, expectations: str | None = None):
        out = pytester.path / "out" / "matrix.json"
        exp = empty
        if expectations is not None:
            exp = pytester.path / "expectations.toml"
            exp.write_text(expectations)
        base = ["-p", "no:cacheprovider", "--matrix-out", str(out), "--expectations", str(exp)]
        return pytester.runpytest_inprocess(*base, *args), out

    return run


def assert_usage_error(result, out, *fragments: str):
    """Exit code 4, one `ERROR:` line naming the problem, nothing run, nothing written."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.stderr.str()
    for fragment in fragments:
        assert fragment in errors[0]
    assert not out.exists() and not out.with_name(out.name + ".parts").exists()


@pytest.mark.parametrize("args, fragments", [
    (["--models", "Nope*"], ["--models", "'Nope*'", "conformance list"]),
    (["--checks", "build,nope"], ["--checks", "'nope'", "known: build"]),
    (["--shard", "3/2"], ["--shard", "1 <= i <= N"]),
    (["--shard", "one"], ["--shard", "i/N"]),
    (["--cell-timeout", "0"], ["--cell-timeout", "positive"]),
    (["--device", "tpu9"], ["--device", "'tpu9'"]),
    (["--backend", "nope"], ["--backend", "'nope'"]),
])
def test_bad_option_is_one_line_and_nothing_runs(fake_run, args, fragments):
    result, out = fake_run(*args)
    assert_usage_error(result, out, *fragments)


@pytest.mark.parametrize("toml, fragment", [
    ('[[cell]]\nmodel = "NoSuchForConditionalGeneration"\ncheck = "build"\nverdict = "fail"\nreason = "r"\n',
     "'NoSuchForConditionalGeneration', which is not discovered"),
    (f'[[cell]]\nmodel = "{OK}"\ncheck = "no_such_check"\nverdict = "fail"\nreason = "r"\n',
     "unknown check 'no_such_check'"),
    (f'[[cell]]\nmodel = "{OK}"\ncheck = "build"\nverdict = "fail"\nreason = "r"\n' * 2, "listed twice"),
    (f'[[cell]]\nmodel = "{OK}"\ncheck = "build"\nverdict = "fai', "not valid TOML"),  # truncated file
])
def test_bad_expectations_file_is_a_usage_error(fake_run, toml, fragment):
    result, out = fake_run(expectations=toml)
    assert_usage_error(result, out, "expectations.toml", fragment)


def test_missing_expectations_file_given_explicitly_is_a_usage_error(fake_run, pytester):
    out = pytester.path / "m.json"
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--matrix-out", str(out),
                                          "--expectations", str(pytester.path / "typo.toml"))
    assert_usage_error(result, out, "typo.toml", "does not exist")


def test_unwritable_matrix_out_fails_at_start(fake_run, pytester):
    blocker = pytester.path / "a_file"
    blocker.write_text("not a directory")
    result, _ = fake_run("--matrix-out", str(blocker / "matrix.json"))
    assert_usage_error(result, blocker / "matrix.json", "--matrix-out", "choose a writable path")


def test_matrix_out_that_is_a_directory_fails_at_start(fake_run, pytester):
    folder = pytester.path / "folder"
    folder.mkdir()
    result, _ = fake_run("--matrix-out", str(folder))
    assert_usage_error(result, folder / "x", "is a directory")


def test_cells_are_parametrized_per_selected_class_and_grouped_by_class(fake_run):
    result, _ = fake_run("--collect-only", "-q", "--models", "Ok*,Raises*", "--checks", "compile_prefill")
    assert result.ret == pytest.ExitCode.OK
    ids = [line for line in result.stdout.lines if "::" in line]
    assert ids == [f"test_fake.py::test_compile_prefill[{OK}]",
                   "test_fake.py::test_compile_prefill[RaisesForConditionalGeneration]"]


def test_without_models_option_every_class_is_selected(fake_run):
    result, _ = fake_run("--collect-only", "-q", "--checks", "build")
    ids = [line for line in result.stdout.lines if "::" in line]
    assert len(ids) == len(FAKE_CLASSES)


def test_build_error_and_fixture_error_each_get_one_error_record(fake_run):
    """The cells of a class that cannot be built, and a cell whose fixture raises, are `error` with a reason."""
    result, out = fake_run("--models", "BuildFails*,FixtureErrors*")
    import json

    cells = {(m, c): cell for m, row in json.loads(out.read_text())["models"].items()
             for c, cell in row["cells"].items()}
    assert {k: v["verdict"] for k, v in cells.items()} == {
        ("BuildFailsForConditionalGeneration", "build"): "error",
        ("BuildFailsForConditionalGeneration", "compile_prefill"): "error",
        ("FixtureErrorsForConditionalGeneration", "build"): "pass",
        ("FixtureErrorsForConditionalGeneration", "compile_prefill"): "error",
    }
    assert "no tiny config for this fake" in cells[("BuildFailsForConditionalGeneration", "build")]["reason"]
    reason = cells[("FixtureErrorsForConditionalGeneration", "compile_prefill")]["reason"]
    assert reason.startswith("harness error in setup: RuntimeError: fixture exploded")
    result.assert_outcomes(passed=1, errors=3)


def test_a_row_the_build_stage_decides_gets_its_verdicts_and_reasons(fake_run):
    """A model failure is `fail` in every cell; a class that is not standalone is `skip` in every cell
    but `build`, which says whether the class can be built (never `error`: these are not harness gaps)."""
    import json

    result, out = fake_run("--models", "ModelBug*,NotStandalone*")
    cells = {(m, c): cell for m, row in json.loads(out.read_text())["models"].items()
             for c, cell in row["cells"].items()}
    assert {k: v["verdict"] for k, v in cells.items()} == {
        ("ModelBugForConditionalGeneration", "build"): "fail",
        ("ModelBugForConditionalGeneration", "compile_prefill"): "fail",
        ("NotStandaloneForConditionalGeneration", "build"): "fail",
        ("NotStandaloneForConditionalGeneration", "compile_prefill"): "skip",
    }
    assert cells[("ModelBugForConditionalGeneration", "build")]["reason"].endswith("(transformers bug): fake")
    assert cells[("NotStandaloneForConditionalGeneration", "build")]["reason"] == "fake default config bug"
    assert cells[("NotStandaloneForConditionalGeneration", "compile_prefill")]["reason"] == (
        "not a standalone model: a fake part")
    result.assert_outcomes(errors=3, skipped=1)  # decided in the fixture, like a build error


def test_an_xfail_cell_records_its_observed_verdict_and_update_lists_that_verdict(fake_run, tmp_path):
    """The envelope keeps both the listed (`expected`) and the raw (`observed`) verdict of an xfail cell, so
    that `expectations --update` lists what the run saw, with its fingerprint, not what the file said before."""
    import json

    from conformance.gate import expectations as gate
    from conformance.gate.update import update_expectations

    fails, raises = "BuildFailsForConditionalGeneration", "RaisesForConditionalGeneration"
    _, first = fake_run("--models", "BuildFails*,Raises*")
    listed = update_expectations(first, tmp_path / "listed.toml")
    file = gate.read(listed)
    assert {k: e.verdict for k, e in file.cells.items()} == {
        (fails, "build"): "error", (fails, "compile_prefill"): "error", (raises, "compile_prefill"): "fail"}
    assert all(e.fingerprint is not None for e in file.cells.values())
    _, out = fake_run("--models", "BuildFails*,Raises*", expectations=listed.read_text())
    cells = {(m, c): cell for m, row in json.loads(out.read_text())["models"].items()
             for c, cell in row["cells"].items()}
    assert {k: (v["verdict"], v.get("expected"), v.get("observed")) for k, v in cells.items()} == {
        (fails, "build"): ("xfail", "error", "error"),
        (fails, "compile_prefill"): ("xfail", "error", "error"),
        (raises, "build"): ("pass", None, "pass"),
        (raises, "compile_prefill"): ("xfail", "fail", "fail"),
    }
    again = gate.read(update_expectations(out, tmp_path / "again.toml")).cells
    assert {k: (e.verdict, e.fingerprint) for k, e in again.items()} == {
        k: (e.verdict, e.fingerprint) for k, e in file.cells.items()}


def test_global_random_generators_are_seeded_per_cell(fake_run):
    """Python's and numpy's generators start from the same state in every cell, whatever ran before."""
    import json
    import random

    random.random()  # the outer process's state must not matter
    result, out = fake_run("--models", "Ok*,Raises*,Sleeps*", "--checks", "build")
    metrics = [row["cells"]["build"]["metrics"] for row in json.loads(out.read_text())["models"].values()]
    assert len(metrics) == 3
    assert len({(m["python_draw"], m["numpy_draw"]) for m in metrics}) == 1


def test_classes_run_longest_first_by_the_published_seconds(fake_run, monkeypatch):
    from conformance.run.session import Session

    monkeypatch.setattr(Session, "estimates", lambda self: {"RaisesForConditionalGeneration": 9.0, OK: 1.0})
    result, _ = fake_run("--models", "Ok*,Raises*,Sleeps*", "--checks", "build", "--collect-only", "-q")
    order = [line.split("[")[1].rstrip("]") for line in result.stdout.lines if "::test_build[" in line]
    assert order == ["RaisesForConditionalGeneration", "SleepsForConditionalGeneration", OK]  # Sleeps: the median


def test_the_header_says_what_the_selection_and_the_shard_chose(fake_run, monkeypatch):
    from conformance.run.session import Session

    monkeypatch.setattr(Session, "estimates", lambda self: {"RaisesForConditionalGeneration": 9.0, OK: 1.0})
    result, _ = fake_run("--models", "Ok*,Raises*,Sleeps*", "--checks", "build", "--shard", "2/2", "--collect-only")
    # Dealt longest first: Raises (9 s) to share 1, Sleeps (the median, 5 s) to share 2, Ok (1 s) to share 2.
    assert "conformance: 3 classes selected; shard 2/2: 2 of them, about 6 s of cells in one process as published " \
        "(start-up and model builds come on top)" in result.stdout.str()
    collected = {line.split("[")[1].split("]")[0] for line in result.stdout.lines if "test_build[" in line}
    assert collected == {"SleepsForConditionalGeneration", OK}
    result, _ = fake_run("--checks", "build", "--collect-only")
    assert "classes selected" not in result.stdout.str()  # nothing selected: no line
    result, _ = fake_run("--models", "Ok*,Raises*", "-k", "build", "--collect-only")
    assert "conformance: 2 classes selected\n" in result.stdout.str()  # -k picks the columns: no estimate of all


def test_a_corrupt_published_matrix_is_one_line_naming_it(fake_run, monkeypatch, tmp_path):
    from conformance.run import shards as shard

    published = tmp_path / "matrix.json"
    published.write_text("{not json")
    monkeypatch.setattr(shard, "PUBLISHED", published)
    result, out = fake_run("--models", "Ok*")
    assert_usage_error(result, out, str(published), "shards and the run order come from it")
    assert "git checkout" not in result.stderr.str()  # not committed anywhere: no restore that would not work


def test_ci_hypothesis_profile_is_derandomized_without_deadline():
    from hypothesis import settings

    profile = settings.get_profile("ci")
    assert profile.derandomize is True and profile.deadline is None


def test_a_check_module_that_fails_to_import_does_not_stop_the_other_cells(fake_run, pytester):
    import json

    pytester.makepyfile(test_broken="raise ImportError('this check module is broken')")
    result, out = fake_run("--models", "Ok*", "--checks", "build")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, errors=1)
    assert json.loads(out.read_text())["models"][OK]["cells"]["build"]["verdict"] == "pass"


def test_a_worker_takes_the_selection_the_controller_handed_over(fake_run, pytester):
    # As under xdist: the controller computed the selection (possibly an expensive impact graph) and put it in
    # workerinput; the worker must use it, not select again (no selection option is given here).
    pytester.path.joinpath("conftest.py").write_text(
        pytester.path.joinpath("conftest.py").read_text()
        + "\n\nimport pytest as _pytest\n\n@_pytest.hookimpl(tryfirst=True)\ndef pytest_configure(config):\n"
        + f"    config.workerinput = {{'workerid': 'gw0', 'conformance_selected': [{OK!r}]}}\n")
    result, _ = fake_run("--collect-only", "-q", "--checks", "build")
    ids = [line for line in result.stdout.lines if "::" in line]
    assert ids == [f"test_fake.py::test_build[{OK}]"]
