"""Meta tests of the hints the error paths print (issue 56): each plants a damaged file under tmp_path, runs the
command, reads the fix out of the one-line message and follows it: the command it names runs and the first
command then succeeds, and every path it names exists.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess

import pytest

import conformance.discover
from conformance import locations
from conformance.meta.test_report import ENV, make_envelope
from conformance.report import envelope as report
from conformance.report import io
from conformance.tools import cli

pytestmark = pytest.mark.meta

GIT = ["git", "-c", "user.name=meta", "-c", "user.email=meta@example.invalid", "-c", "init.defaultBranch=main"]
EXPECTATIONS = '[conditions]\ndevice = "cpu"\ndtype = "float32"\nbackend = "eager"\n'


def error_of(capsys, *argv) -> str:
    """The one line `conformance ARGV` ends with (its exit status the usage error's)."""
    code = cli.main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == cli.USAGE_ERROR and err.startswith("conformance: error: ") and err.count("\n") == 1, err
    return err.strip()


def hinted_command(message: str) -> str | None:
    """The command a message names as its fix (the last `...` span), None where it names none."""
    spans = re.findall(r"`([^`]+)`", message)
    return spans[-1] if spans else None


def follow(command: str, capsys) -> None:
    """Run a hinted command as a person would: `conformance ...` through the entry point, git as git."""
    argv = shlex.split(command)
    if argv[0] == "conformance":
        assert cli.main(argv[1:]) == 0, capsys.readouterr().err
        capsys.readouterr()
    else:
        assert argv[0] == "git", command
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr


def committed(repo, *paths) -> None:
    """`repo` a git checkout with `paths` (relative to it) committed."""
    subprocess.run([*GIT, "init", "-q", str(repo)], check=True)
    subprocess.run([*GIT, "-C", str(repo), "add", *paths], check=True)
    subprocess.run([*GIT, "-C", str(repo), "commit", "-q", "-m", "planted"], check=True)


# --------------------------------------------------------------------------- a damaged expectations file


@pytest.fixture
def checkout(tmp_path):
    """A checkout laid out as the suite's: fixtures/expectations/5.24.toml committed, data -> fixtures."""
    repo = tmp_path / "repo"
    (repo / "fixtures" / "expectations").mkdir(parents=True)
    (repo / "fixtures" / "expectations" / "5.24.toml").write_text(EXPECTATIONS)
    (repo / "data").symlink_to("fixtures")
    committed(repo, "fixtures")
    (tmp_path / "run.json").write_text(json.dumps(make_envelope()))
    return repo


@pytest.mark.parametrize("inside", [True, False], ids=["from-the-checkout", "from-elsewhere"])
def test_a_corrupt_expectations_file_names_the_file_you_edit_and_a_restore_that_works(checkout, inside, capsys,
                                                                                      monkeypatch):
    monkeypatch.chdir(checkout if inside else checkout.parent)
    edited = checkout / "fixtures" / "expectations" / "5.24.toml"
    edited.write_text(EXPECTATIONS + "[[cell]\n")
    through_link = checkout / "data" / "expectations" / "5.24.toml"  # as the package reads it
    message = error_of(capsys, "expectations", "--update", checkout.parent / "run.json", "--file", through_link)
    assert message.startswith(f"conformance: error: {locations.shown(edited)}: not valid TOML "), message
    assert "/data/" not in message and "(at line 5, column 7)" in message  # the edited file, where it broke
    assert "--update" not in message  # it reads the file it rewrites: it cannot be the fix
    command = hinted_command(message)
    assert command and command.startswith("git ") and "checkout --" in command, message
    follow(command, capsys)
    assert edited.read_text() == EXPECTATIONS
    assert cli.main(["expectations", "--update", str(checkout.parent / "run.json"), "--file", str(through_link)]) == 0


def test_a_corrupt_expectations_file_outside_a_checkout_is_fixed_by_hand(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps(make_envelope()))
    (tmp_path / "mine.toml").write_text(EXPECTATIONS + 'backend = "inductor"\n')
    message = error_of(capsys, "expectations", "--update", "run.json", "--file", "mine.toml")
    assert message.endswith("(at line 5, column 21)); fix it by hand"), message  # no command that would not work
    (tmp_path / "mine.toml").write_text(EXPECTATIONS)
    assert cli.main(["expectations", "--update", "run.json", "--file", "mine.toml"]) == 0


# --------------------------------------------------------------------------- a damaged run file


COMMANDS = [("render", "{bad}"), ("findings", "{bad}"), ("diff", "{bad}", "{good}"), ("diff", "{good}", "{bad}")]


def planted_run(folder):
    """folder/matrix.json truncated (a run killed while writing it), folder/good.json whole."""
    text = json.dumps(make_envelope(), indent=1)
    (folder / "good.json").write_text(text)
    (folder / "matrix.json").write_text(text[: len(text) // 2])
    return folder / "matrix.json", folder / "good.json"


def argv_of(command: tuple, bad, good) -> list[str]:
    return [part.format(bad=bad, good=good) for part in command]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
def test_a_corrupt_run_file_without_parts_names_no_missing_folder(command, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bad, good = planted_run(tmp_path)
    message = error_of(capsys, *argv_of(command, "matrix.json", "good.json"))
    assert "matrix.json: is not valid JSON at line " in message and "at at" not in message
    assert ".parts" not in message and hinted_command(message) is None, message
    assert message.endswith("write it again with the run that made it (no part files beside it to rebuild it from)")


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
def test_a_corrupt_run_file_with_its_parts_is_rebuilt_by_the_hinted_merge(command, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(conformance.discover, "row_metadata", lambda names: {})  # discovery is slow, not under test
    monkeypatch.chdir(tmp_path)
    bad, good = planted_run(tmp_path)
    parts = tmp_path / "matrix.json.parts"
    io.append_record(parts / "gw0.jsonl", {"model": "AlphaForConditionalGeneration", "check": "build",
                                           "verdict": "pass"})
    (parts / report.PARTS_ENVIRONMENT).write_text(json.dumps(ENV))
    argv = argv_of(command, "matrix.json", "good.json")
    message = error_of(capsys, *argv)
    hint = hinted_command(message)
    assert hint == "conformance merge --parts matrix.json.parts -o matrix.json", message
    follow(hint, capsys)
    assert cli.main(argv) == 0


def test_a_corrupt_committed_run_file_is_restored_by_the_hinted_git_command(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bad, good = planted_run(tmp_path)
    bad.write_text(good.read_text())
    committed(tmp_path, "matrix.json")
    bad.write_text(good.read_text()[:100])
    message = error_of(capsys, "render", "matrix.json")
    hint = hinted_command(message)
    assert hint == "git checkout -- matrix.json", message
    follow(hint, capsys)
    assert cli.main(["render", "matrix.json"]) == 0


# --------------------------------------------------------------------------- other hints that name a fix


def test_a_missing_job_list_names_the_command_that_writes_it(tmp_path, capsys, monkeypatch):
    from conformance.tools import jobs

    monkeypatch.chdir(tmp_path)
    with pytest.raises(jobs.JobsError) as raised:
        jobs.load(tmp_path / "jobs.json")
    hint = hinted_command(str(raised.value))
    assert hint == f"conformance jobs list -o {tmp_path / 'jobs.json'}"
    follow(hint, capsys)
    assert jobs.load(tmp_path / "jobs.json")["jobs"]


def test_each_install_hint_names_an_extra_or_env_the_project_declares():
    """`pip install 'vlm-conformance[X]'` (an optional column not run here) names an extra of pyproject.toml that
    installs the packages the column requires; `tox -e G` (an opt-in column) a tox env; the browser test's
    `pip install -e '.[dev]'` an extra that installs selenium."""
    import tomllib

    from conformance.checks.common.registry import load_all, opt_in_reason

    extras = tomllib.loads((locations.REPOSITORY / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    installed_by = {name: {re.split(r"[<>=\[ ]", package)[0] for package in packages}
                    for name, packages in extras.items()}
    optional = [spec for spec in load_all().values() if spec.requires]
    assert optional
    for spec in optional:
        named = re.fullmatch(r"pip install 'vlm-conformance\[(\w+)\]'", spec.install_hint)
        assert named and set(spec.requires) <= installed_by.get(named.group(1), set()), spec.install_hint
    tox_envs = set(re.findall(r"^\[testenv:(\w+)\]", (locations.REPOSITORY / "tox.ini").read_text(), re.M))
    opt_in = [spec for spec in load_all().values() if spec.opt_in]
    assert opt_in
    for spec in opt_in:
        env = re.search(r"\(tox -e (\w+)\)$", opt_in_reason(spec.id)).group(1)
        assert env in tox_envs, opt_in_reason(spec.id)
    assert "selenium" in installed_by["dev"]
