"""An envelope records where it came from in names anyone can resolve, never a path of the machine that made it.

The suite's commit (`git describe --always --dirty`), the run's command (`pytest ARGS`, its paths relative to the
run's folder or the repository, else `.../NAME`), the transformers release or checkout; a merged envelope lists its
runs, and a run under another backend names its command, not the file it was merged from.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import pytest

from conformance import locations
from conformance.meta.fake_cases import fake_project
from conformance.report import envelope as report
from conformance.report import provenance

pytestmark = pytest.mark.meta

OK, RAISES = "OkForConditionalGeneration", "RaisesForConditionalGeneration"


def machine_paths(*more: Path) -> list[str]:
    """This machine's folders that no envelope may name: home, the temporary folder, the checkout, and `more`."""
    found = {str(Path.home()), tempfile.gettempdir(), str(Path(tempfile.gettempdir()).resolve()),
             str(locations.REPOSITORY), str(locations.REPOSITORY.resolve())}
    found |= {str(p) for p in more} | {str(Path(p).resolve()) for p in more}
    return sorted(p for p in found if p not in ("", "/"))


def strings_of(value, where="$"):
    """Every string of a JSON value (keys too), with where it is."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield f"{where}.{key} (key)", str(key)
            yield from strings_of(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from strings_of(item, f"{where}[{i}]")


def assert_no_machine_path(envelope: dict, *more: Path) -> None:
    paths = machine_paths(*more)
    found = [(where, text) for where, text in strings_of(envelope) for path in paths if path in text]
    assert not found, f"machine paths {paths} in the envelope: {found[:5]}"


# --------------------------------------------------------------------------- the helpers


def test_a_path_is_named_relative_to_the_run_folder_or_the_repository_else_by_its_name(tmp_path):
    assert provenance.portable(str(tmp_path / "out" / "m.json"), tmp_path) == "out/m.json"
    assert provenance.portable(str(locations.REPOSITORY / "fixtures" / "x.toml"), tmp_path) == "fixtures/x.toml"
    assert provenance.portable("/elsewhere/on/this/machine/run.json", tmp_path) == ".../run.json"
    assert provenance.portable("relative/run.json", tmp_path) == "relative/run.json"
    assert provenance.portable("-n", tmp_path) == "-n"


def test_the_command_is_pytest_and_its_arguments_with_portable_paths(tmp_path):
    args = ["conformance/test_matrix.py", "--matrix-out", str(tmp_path / "a.json"), f"--expectations={tmp_path}/e.toml",
            f"@{tmp_path}/resume.args", "--models", "Llava*,Qwen2VL*", "/home/someone/x.json"]
    assert provenance.run_command(args, tmp_path) == (
        "pytest conformance/test_matrix.py --matrix-out a.json --expectations=e.toml @resume.args "
        "--models 'Llava*,Qwen2VL*' .../x.json")


def test_the_suite_commit_is_git_describe_of_the_checkout():
    if not (locations.REPOSITORY / ".git").exists():
        pytest.skip("an installed package: no checkout to describe")
    described = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=locations.REPOSITORY,
                               capture_output=True, text=True, check=True).stdout.strip()
    assert report.suite_version()["commit"] == described != ""


class _Distribution:
    def __init__(self, direct_url):
        self.direct_url = direct_url

    def read_text(self, name):
        return None if self.direct_url is None else json.dumps(self.direct_url)


@pytest.mark.parametrize("direct_url, expected", [
    (None, "release"),
    ({"url": "https://github.com/huggingface/transformers",
      "vcs_info": {"vcs": "git", "commit_id": "0123456789abcdef"}},
     "git https://github.com/huggingface/transformers@0123456789ab"),
    ({"url": "file:///somewhere/on/this/machine/transformers-5.24.0-py3-none-any.whl", "archive_info": {}},
     "archive transformers-5.24.0-py3-none-any.whl"),
])
def test_the_transformers_source_is_a_release_a_commit_or_an_archive_by_name(monkeypatch, direct_url, expected):
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: _Distribution(direct_url))
    assert provenance.transformers_source() == expected


def test_an_editable_transformers_is_named_by_git_describe_of_its_checkout(monkeypatch, tmp_path):
    import importlib.metadata

    import transformers

    repo = tmp_path / "transformers"
    (repo / "src" / "transformers").mkdir(parents=True)
    (repo / "src" / "transformers" / "__init__.py").write_text("")
    for args in (["init", "-q"], ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty",
                                  "-m", "base"], ["tag", "v5.25.0.dev0"]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    monkeypatch.setattr(importlib.metadata, "distribution",
                        lambda name: _Distribution({"url": repo.as_uri(), "dir_info": {"editable": True}}))
    monkeypatch.setattr(transformers, "__file__", str(repo / "src" / "transformers" / "__init__.py"))
    assert provenance.transformers_source() == "git v5.25.0.dev0"


# --------------------------------------------------------------------------- produced envelopes


@pytest.fixture
def fake_run(pytester):
    """Run the plugin in process on fake classes, every path absolute (under the temporary folder)."""
    empty = fake_project(pytester)

    def run(out: Path, *args: str) -> dict:
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--matrix-out", str(out), "--expectations",
                                              str(empty), "--models", f"{OK},{RAISES}", *args)
        assert result.ret in (0, 1), result.stdout.str()
        return json.loads(out.read_text())

    return run


def test_a_run_records_its_command_and_sources_and_no_machine_path(fake_run, pytester):
    envelope = fake_run(pytester.path / "out" / "matrix.json")
    env = envelope["environment"]
    assert env["command"] == (f"pytest -p no:cacheprovider --matrix-out out/matrix.json --expectations none.toml "
                              f"--models {OK},{RAISES}")
    assert env["transformers_source"] and env["expectations"][0]["file"] == "none.toml"
    assert envelope["suite"]["commit"] == report.suite_version()["commit"]
    assert_no_machine_path(envelope, pytester.path)


def test_merged_and_backend_runs_name_their_commands_not_their_files(fake_run, pytester):
    eager = fake_run(pytester.path / "eager.json", "-k", "compile_prefill")
    inductor = fake_run(pytester.path / "inductor.json", "-k", "compile_prefill", "--backend", "inductor")
    sources = [str(pytester.path / "eager.json"), str(pytester.path / "inductor.json")]  # absolute, as a CLI gets
    merged = report.merge_envelopes([report.validate_envelope(e, s) for e, s in zip([eager, inductor], sources)],
                                    sources)
    env = merged["environment"]
    assert env["backends"]["inductor"]["source"] == inductor["environment"]["command"]
    assert "--backend inductor" in env["backends"]["inductor"]["source"]
    assert [run["command"] for run in env["runs"]] == [eager["environment"]["command"],
                                                       inductor["environment"]["command"]]
    assert "command" not in env  # a merged envelope is not one run
    again = report.merge_envelopes([merged], ["merged.json"])  # merging a merged envelope keeps its runs
    assert again["environment"]["runs"] == env["runs"]
    assert_no_machine_path(merged, pytester.path)


def test_a_run_file_without_a_command_is_named_by_its_file_name():
    envelope = {"environment": {"backend": "eager"}, "created": "2026-12-01T00:00:00Z", "suite": {"commit": "abc"}}
    assert report.runs_of(envelope, "/somewhere/on/this/machine/inductor.json") == [
        {"command": "inductor.json", "created": "2026-12-01T00:00:00Z", "suite": "abc", "cell_code": ""}]


def test_published_files_name_no_folder_of_the_machine_even_in_a_quoted_traceback(tmp_path):
    """An exception's message can quote a traceback's file (torch's "Original traceback: File ..."): what
    `conformance publish` writes names it from the package on."""
    import shutil

    from conformance.meta.test_report import make_envelope
    from conformance.tools import publishing

    envelope = make_envelope()
    model = sorted(envelope["models"])[0]
    cell = envelope["models"][model]["cells"]["compile_prefill"]
    cell["reason"] = (f'RuntimeError: x. Original traceback: File "{tmp_path}/checkout/conformance/checks/c.py", '
                      f'line 3, and "{tmp_path}/venv/lib/python3.11/site-packages/torch/_ops.py" (at _ops.py:1)')
    shutil.copy(locations.REPOSITORY / "README.md", tmp_path / "README.md")
    files = publishing.published_files(envelope, tmp_path)
    assert [path for path, text in files.items() if str(tmp_path) in text] == []
    published = json.loads(files[tmp_path / publishing.PUBLISHED_ENVELOPE])["models"][model]["cells"]["compile_prefill"]
    assert 'File "conformance/checks/c.py", line 3, and "torch/_ops.py"' in published["reason"]
    assert provenance.portable_texts({"a": ["https://pytorch.org/x", "conformance/a.py", 3]}) == \
        {"a": ["https://pytorch.org/x", "conformance/a.py", 3]}
