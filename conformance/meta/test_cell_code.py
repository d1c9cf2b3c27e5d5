"""The cell code: which code decided a run's cells, the same name on disk and in git, blind to what decides none.

A publication is one commit's output only if every merged run was made by the same cell code; the jobs runner
reruns a job another cell code made, and the merge refuses one (conformance/meta/test_jobs.py plays both).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conformance.report import cell_code, render

pytestmark = pytest.mark.meta


@pytest.mark.parametrize("rel, decides", [
    ("reasons.py", True), ("fingerprints.py", True), ("checks/common/dynamo.py", True),  # the fingerprint rules
    ("checks/common/shapes.py", True), ("test_matrix.py", True), ("checks/export_forward.py", True),
    ("cases/strategies/audio.py", True), ("run/cell_life.py", True), ("data/models/llava.toml", True),
    ("data/versions.toml", True), ("meta/test_jobs.py", False), ("tools/cli.py", False),
    ("report/render.py", False), ("gate/ratchet.py", False), ("data/expectations/5.24.toml", False),
    ("data/bench/shapes.json", False), ("checks/__pycache__/build.cpython-311.pyc", False), ("page.css", False),
])
def test_the_files_that_decide_a_cell(rel, decides):
    assert cell_code.decides_cells(rel) is decides


def _repository(root: Path) -> Path:
    """A suite-shaped repository: conformance/ with its data linked to fixtures/, one commit."""
    for rel, text in {"conformance/__init__.py": "", "conformance/reasons.py": "A = 1\n",
                      "conformance/checks/build.py": "def run(case): ...\n", "conformance/meta/test_x.py": "",
                      "conformance/tools/cli.py": "", "fixtures/models/llava.toml": "[llava]\n",
                      "fixtures/expectations/5.24.toml": "", "fixtures/versions.toml": "[[version]]\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    os.symlink("../fixtures", root / "conformance" / "data")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], cwd=root, check=True)
    return root


def test_the_cell_code_on_disk_is_the_commit_s_and_moves_only_with_a_file_that_decides_cells(tmp_path):
    root = _repository(tmp_path)
    package = root / "conformance"
    first = cell_code.of_package(package)
    assert len(first) == 12 and first == cell_code.at_commit("HEAD", root)
    for rel in ("meta/test_x.py", "tools/cli.py", "data/expectations/5.24.toml"):
        (package / rel).write_text("changed\n")
    assert cell_code.of_package(package) == first  # a test, a tool, today's expectations: no cell changes
    (package / "data" / "models" / "llava.toml").write_text("[llava]\nsample = 'other'\n")  # through the link
    assert cell_code.of_package(package) != first
    (package / "data" / "models" / "llava.toml").write_text("[llava]\n")
    (package / "checks" / "build.py").write_text("def run(case): return 1\n")
    assert cell_code.of_package(package) != first


def test_the_classes_ci_gates_are_no_part_of_the_cell_code(tmp_path):
    """versions.toml's [ci] table chooses which classes CI runs, no cell's outcome: editing it (and the file's
    comments) leaves the cell code; its other tables (a version, a renamed config key) move it."""
    root = _repository(tmp_path)
    package = root / "conformance"
    versions = package / "data" / "versions.toml"
    versions.write_text('[[version]]\ntransformers = "5.24.0"\n\n[ci]\nmodels = ["A"]\ngate = ["A"]\n')
    first = cell_code.of_package(package)
    versions.write_text('# CI gates one more class\n[[version]]\ntransformers = "5.24.0"\n\n[ci]\n'
                        'models = ["A"]\ngate = ["A", "B"]\n')
    assert cell_code.of_package(package) == first
    versions.write_text('[[version]]\ntransformers = "5.23.0"\n\n[ci]\nmodels = ["A"]\ngate = ["A"]\n')
    assert cell_code.of_package(package) != first


def test_a_run_s_cell_code_is_recorded_or_that_of_its_clean_commit(tmp_path):
    root = _repository(tmp_path)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                            text=True).stdout.strip()
    assert cell_code.of_envelope({"suite": {"cell_code": "abc123def456"}}, root) == "abc123def456"
    assert cell_code.of_envelope({"suite": {"commit": commit}}, root) == cell_code.of_package(root / "conformance")
    assert cell_code.of_envelope({"suite": {"commit": commit + "-dirty"}}, root) == ""  # unknown, never guessed
    assert cell_code.of_envelope({"suite": {"commit": "0000000"}}, root) == ""
    assert cell_code.of_envelope({}, root) == ""


def test_the_matrix_says_whether_one_commit_s_checks_made_every_cell():
    def runs(*codes):
        return {"environment": {"runs": [{"suite": f"c{i}", "cell_code": c} for i, c in enumerate(codes)]}}

    assert render.cell_code_line(runs("aaa", "aaa")) == \
        "Every cell was made by cell code aaa, one commit's checks (runs at commits c0, c1)."
    assert "more than one commit's checks, or by unknown ones (aaa: 1 run(s), bbb: 1 run(s))" in \
        render.cell_code_line(runs("aaa", "bbb"))
    assert "unknown: 1 run(s)" in render.cell_code_line(runs("aaa", ""))


def test_publishing_writes_in_the_cell_codes_a_reader_can_know(tmp_path):
    root = _repository(tmp_path)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                            text=True).stdout.strip()
    code = cell_code.of_package(root / "conformance")
    envelope = {"suite": {"commit": commit}, "environment": {"runs": [{"suite": commit}, {"suite": commit + "-dirty"},
                                                                      {"suite": "x", "cell_code": "recorded"}]}}
    filled = cell_code.filled(envelope, root)
    assert filled["suite"]["cell_code"] == code
    assert [run.get("cell_code") for run in filled["environment"]["runs"]] == [code, None, "recorded"]
    assert "cell_code" not in envelope["suite"]  # the input is not changed
