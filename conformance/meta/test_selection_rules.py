"""Meta tests of the selection rules: a gate that checks nothing cannot pass silently (issue 31).

Every --changed-files path must name a file of the transformers being gated
(the installed package, or its checkout); anything else is a usage error of
one line naming the path and the accepted forms. Real files that affect no
class are a legitimate empty selection: it says so in one line, the envelope
records it, and the run and `conformance plan` exit with NOTHING_TO_CHECK.
Each rule is tried through the option resolution (`options.resolve_selection`),
through `conformance plan`, and for the run itself through the plugin
(pytester, fake classes). The installed transformers is the one gated; a
transformers checkout is a tiny git repository in a tmp dir.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conformance.select import impact
from conformance.meta.fake_cases import fake_project
from conformance.meta.test_plugin import assert_usage_error
from conformance.run import isolation, options
from conformance.run.options import NOTHING_TO_CHECK, UsageError, resolve_selection
from conformance.tools import cli

pytestmark = pytest.mark.meta

LLAVA = "models/llava/modeling_llava.py"
LLAVA_FILE = f"src/transformers/{LLAVA}"
# A utility of the package that no model imports: a real file, and a change to it affects no class.
UNUSED = "transformers/utils/hp_naming.py"
DOCS = "docs/source/en/index.md"
WRONG_PREFIXES = [f"lib/transformers/{LLAVA}", f"transformers/src/transformers/{LLAVA}",
                  f"site-packages/transformers/{LLAVA}"]
NO_SUCH_FILES = ["models/llava/modeling_lava.py", "src/transformers/models/zzz/modeling_zzz.py",
                 "modeling_llava.py"]


@pytest.fixture(autouse=True, scope="module")
def private_parse_cache(tmp_path_factory):
    """The code graph of these tests keeps its parsed files in a tmp dir, not the user's cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CONFORMANCE_CACHE_DIR", str(tmp_path_factory.mktemp("parse-cache")))
        yield


class Given:
    """The selection options of a run, read as the plugin reads pytest's (`getoption`)."""

    def __init__(self, **values):
        self.values = {"models": "", "changed_files": [], "since": "", "transformers_repo": "", **values}

    def getoption(self, name: str):
        return self.values[name]


@pytest.fixture(scope="module")
def source():
    from conformance.cases.case import TransformersCases

    return TransformersCases()


def select(source, *paths: str, **values) -> options.Selection:
    return resolve_selection(Given(changed_files=list(paths), **values), source)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A transformers checkout (a git repo with src/transformers, docs and repo scripts), one commit."""
    repo = tmp_path / "transformers"
    for rel, text in {"src/transformers/__init__.py": "", DOCS: "# Transformers\n", "utils/check_copies.py": "",
                      "setup.py": ""}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    return repo


def plan(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(["plan", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line(message: str, *needles: str) -> None:
    assert "\n" not in message.rstrip("\n"), message
    for needle in needles:
        assert needle in message, message


# --------------------------------------------------------------------------- the accepted forms


def accepted_forms() -> list[str]:
    root = impact.transformers_root()
    return [LLAVA_FILE, f"transformers/{LLAVA}", LLAVA, f"./src/transformers/{LLAVA}", str(root / LLAVA)]


def test_accepted_forms_name_the_same_file():
    root = impact.transformers_root()
    resolved = impact.resolve_changed(accepted_forms(), root, None)
    assert resolved == [impact.ChangedFile(LLAVA_FILE, LLAVA)] * len(accepted_forms())


def test_accepted_forms_select_the_same_classes_through_the_options_and_plan(source, capsys):
    selections = [select(source, form) for form in accepted_forms()]
    classes = selections[0].classes
    # The llava file's own class and a class reusing its code: a real selection, not an empty one.
    assert {"LlavaForConditionalGeneration", "VipLlavaForConditionalGeneration"} <= set(classes)
    assert [s.classes for s in selections] == [classes] * len(selections)
    assert all(s.changed_files == [LLAVA_FILE] and s.nothing_to_check == "" for s in selections)
    for form in accepted_forms():
        code, out, _ = plan(capsys, "--changed-files", form, "--json")
        planned = json.loads(out)
        assert code == 0 and planned["classes"] == classes and planned["changed_files"] == [LLAVA_FILE], form
        assert planned["nothing_to_check"] == ""


def test_a_file_of_the_package_wins_over_a_checkout_file_of_the_same_name(tmp_path):
    # `utils/generic.py` names the package's (shared: every class) as well as a repo script: the package wins,
    # so a doubt costs time, never a class.
    repo = tmp_path / "transformers"
    (repo / "src/transformers").mkdir(parents=True)
    (repo / "utils").mkdir()
    (repo / "utils/generic.py").write_text("")
    (repo / "utils/check_copies.py").write_text("")
    resolved = impact.resolve_changed(["utils/generic.py", "utils/check_copies.py"], impact.transformers_root(), repo)
    assert resolved == [impact.ChangedFile("src/transformers/utils/generic.py", "utils/generic.py"),
                        impact.ChangedFile("utils/check_copies.py", None)]


# --------------------------------------------------------------------------- paths that name no file


@pytest.mark.parametrize("path", WRONG_PREFIXES)
def test_a_wrong_prefix_is_a_usage_error_naming_the_file_meant(source, capsys, path):
    with pytest.raises(UsageError) as info:
        select(source, path)
    message = str(info.value)
    assert_one_line(message, f"--changed-files {path}: no such file", impact.ACCEPTED_FORMS,
                    f"did you mean transformers/{LLAVA}?")
    code, out, err = plan(capsys, "--changed-files", path)
    assert code == cli.USAGE_ERROR and out == "" and err == f"conformance: error: {message}\n"


@pytest.mark.parametrize("path", NO_SUCH_FILES)
def test_a_path_that_exists_nowhere_in_transformers_is_a_usage_error(source, capsys, path):
    with pytest.raises(UsageError) as info:
        select(source, LLAVA, path)  # one bad path among good ones is enough
    message = str(info.value)
    assert_one_line(message, f"--changed-files {path}: no such file in transformers", impact.ACCEPTED_FORMS)
    code, out, err = plan(capsys, "--changed-files", LLAVA, path)
    assert code == cli.USAGE_ERROR and out == "" and err == f"conformance: error: {message}\n"


def test_a_file_outside_the_package_needs_the_checkout_it_belongs_to(source, capsys):
    # Without a checkout nothing can say that docs/... is a file of transformers: an error naming the fix.
    with pytest.raises(UsageError) as info:
        select(source, DOCS)
    assert_one_line(str(info.value), f"--changed-files {DOCS}: no such file", "needs --transformers-repo CHECKOUT")
    code, _, err = plan(capsys, "--changed-files", DOCS)
    assert code == cli.USAGE_ERROR and "needs --transformers-repo CHECKOUT" in err


def test_a_directory_is_a_usage_error(source, capsys):
    with pytest.raises(UsageError) as info:
        select(source, "transformers/models/llava")
    assert_one_line(str(info.value), "transformers/models/llava: is a directory", "name the changed files in it")
    code, _, err = plan(capsys, "--changed-files", "transformers/models/llava")
    assert code == cli.USAGE_ERROR and "is a directory" in err


def test_a_checkout_that_is_not_transformers_is_a_usage_error(source, capsys, tmp_path):
    # The suite's own repository has a docs/ folder too: its files are not transformers'.
    other = tmp_path / "other"
    (other / "docs").mkdir(parents=True)
    (other / "docs/gate.md").write_text("")
    for values in ({"changed_files": ["docs/gate.md"]}, {"since": "HEAD"}):
        with pytest.raises(UsageError) as info:
            resolve_selection(Given(transformers_repo=str(other), **values), source)
        assert_one_line(str(info.value), f"--transformers-repo {other}: not a transformers checkout")
    code, _, err = plan(capsys, "--changed-files", "docs/gate.md", "--transformers-repo", other)
    assert code == cli.USAGE_ERROR and "not a transformers checkout" in err


# --------------------------------------------------------------------------- real files that affect no class


def test_a_utility_no_model_imports_is_nothing_to_check(source, capsys):
    selection = select(source, UNUSED)
    line = "nothing to check: src/transformers/utils/hp_naming.py affects no discovered class"
    assert selection.classes == [] and selection.nothing_to_check == line
    assert selection.record() == {"changed_files": ["src/transformers/utils/hp_naming.py"], "since": "",
                                  "models": [], "classes": [], "nothing_to_check": line}
    code, out, err = plan(capsys, "--changed-files", UNUSED)
    assert (code, out, err) == (NOTHING_TO_CHECK, line + "\n", "")
    code, out, _ = plan(capsys, "--changed-files", UNUSED, "--json")
    planned = json.loads(out)
    assert code == NOTHING_TO_CHECK and planned["classes"] == [] and planned["nothing_to_check"] == line
    assert planned["changed_files"] == ["src/transformers/utils/hp_naming.py"]


def test_docs_and_repo_scripts_of_the_checkout_are_nothing_to_check(source, capsys, checkout):
    selection = select(source, DOCS, "utils/check_copies.py", "setup.py", transformers_repo=str(checkout))
    line = f"nothing to check: {DOCS}, utils/check_copies.py, setup.py affect no discovered class"
    assert selection.classes == [] and selection.nothing_to_check == line
    code, out, _ = plan(capsys, "--changed-files", DOCS, "utils/check_copies.py", "setup.py",
                        "--transformers-repo", checkout)
    assert (code, out) == (NOTHING_TO_CHECK, line + "\n")


def test_a_docs_only_diff_is_nothing_to_check_and_names_its_files(source, capsys, checkout):
    for n in range(4):
        (checkout / f"docs/source/en/page{n}.md").write_text("new page\n")
    (checkout / DOCS).write_text("# Transformers, edited\n")
    git(checkout, "add", ".")
    selection = resolve_selection(Given(since="HEAD", transformers_repo=str(checkout)), source)
    assert selection.classes == [] and selection.changed_files == sorted([DOCS] + [
        f"docs/source/en/page{n}.md" for n in range(4)])
    assert selection.nothing_to_check == (f"nothing to check: {', '.join(selection.changed_files[:3])} and 2 more "
                                          "affect no discovered class")
    code, out, _ = plan(capsys, "--since", "HEAD", "--transformers-repo", checkout)
    assert (code, out) == (NOTHING_TO_CHECK, selection.nothing_to_check + "\n")


def test_an_empty_diff_is_nothing_to_check(source, capsys, checkout):
    selection = resolve_selection(Given(since="HEAD", transformers_repo=str(checkout)), source)
    assert selection.classes == [] and selection.files == []
    assert selection.nothing_to_check == "nothing to check: git diff HEAD changes no file"
    code, out, _ = plan(capsys, "--since", "HEAD", "--transformers-repo", checkout)
    assert (code, out) == (NOTHING_TO_CHECK, "nothing to check: git diff HEAD changes no file\n")


def test_a_diff_that_removes_a_package_file_resolves_it(checkout):
    # git reports a removed file: it exists nowhere now, and is still a file of the change.
    target = checkout / "src/transformers/models/old/modeling_old.py"
    target.parent.mkdir(parents=True)
    target.write_text("class Old:\n    pass\n")
    git(checkout, "add", ".")
    git(checkout, "commit", "-q", "-m", "old model")
    target.unlink()
    diffed = impact.changed_since("HEAD", checkout)
    assert impact.resolve_diffed(diffed, checkout) == [
        impact.ChangedFile("src/transformers/models/old/modeling_old.py", "models/old/modeling_old.py")]


def test_nothing_to_check_has_its_own_exit_status_and_the_docs_name_it():
    taken = {int(code) for code in pytest.ExitCode} | {cli.USAGE_ERROR, isolation.HARD_TIMEOUT_EXIT, 130}
    assert NOTHING_TO_CHECK not in taken
    gate_doc = (Path(__file__).resolve().parents[2] / "docs" / "gate.md").read_text()
    assert f"exits {NOTHING_TO_CHECK}" in gate_doc and f"-eq {NOTHING_TO_CHECK}" in gate_doc


# --------------------------------------------------------------------------- the run (plugin, fake classes)


@pytest.fixture
def fake_run(pytester):
    """Run pytest in process on the fake classes; returns (result, matrix path)."""
    empty = fake_project(pytester)

    def run(*args: str):
        out = pytester.path / "out" / "matrix.json"
        base = ["-p", "no:cacheprovider", "--matrix-out", str(out), "--expectations", str(empty)]
        return pytester.runpytest_inprocess(*base, *map(str, args)), out

    return run


def test_a_run_with_nothing_to_check_says_so_records_it_and_exits_with_its_status(fake_run, checkout):
    from conformance.report import envelope as report

    result, out = fake_run("--changed-files", DOCS, "--transformers-repo", checkout)
    line = f"nothing to check: {DOCS} affects no discovered class"
    assert result.ret == NOTHING_TO_CHECK, result.stdout.str()
    assert f"conformance: {line}" in result.stdout.lines  # the header, before anything runs
    assert f"{line} (exit status {NOTHING_TO_CHECK}: no class was checked)" in result.stdout.lines  # the end
    envelope = report.load_envelope(out)
    assert envelope["models"] == {} and "build" in envelope["checks"]
    assert envelope["environment"]["selection"] == {"changed_files": [DOCS], "since": "", "models": [],
                                                    "classes": [], "nothing_to_check": line}


def test_a_run_with_a_wrong_path_stops_before_anything_runs_or_is_written(fake_run):
    result, out = fake_run("--changed-files", f"lib/transformers/{LLAVA}")
    assert_usage_error(result, out, f"--changed-files lib/transformers/{LLAVA}: no such file",
                       impact.ACCEPTED_FORMS)


def test_a_failure_elsewhere_in_a_run_with_nothing_to_check_keeps_its_status(fake_run, pytester, checkout):
    pytester.makepyfile(test_other="def test_other():\n    assert 1 == 2\n")
    result, _ = fake_run("--changed-files", DOCS, "--transformers-repo", checkout)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_run_that_selects_classes_records_its_selection(fake_run, monkeypatch):
    from conformance.report import envelope as report

    ok = "OkForConditionalGeneration"
    # The fake classes are no transformers classes: the impact graph is replaced by its answer for this file.
    monkeypatch.setattr(impact, "impacted_classes",
                        lambda files, definitions=None: {ok} if files == [LLAVA_FILE] else set())
    result, out = fake_run("--changed-files", LLAVA, "--checks", "build")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    envelope = report.load_envelope(out)
    assert list(envelope["models"]) == [ok]
    assert envelope["environment"]["selection"] == {"changed_files": [LLAVA_FILE], "since": "", "models": [],
                                                    "classes": [ok], "nothing_to_check": ""}
