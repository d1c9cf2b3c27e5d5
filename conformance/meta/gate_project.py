"""A folder a gate runs in over planted models (`planted.py`), for the gate's own tests.

`make_root(path, models=...)` writes a conftest whose case source builds each
class of a models module (`planted.case_for`: the real checks run on it; in
a half-precision run `planted_dtype.half_case`, its models cast to the
dtype), the matrix module and an empty expectations file. With `models` the module is
written beside the conftest; without, the conftest imports ``gate_models``
from the path (a fake checkout's ``src/``, as a transformers checkout's
package is imported at its base and at its head).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from conformance.report import render

CONFTEST = '''
import dataclasses

pytest_plugins = ["conformance.run.plugin"]

import torch

import gate_models
from conformance.meta import planted, planted_dtype


class PlantedCases:
    def index(self):
        return {n: n for n in gate_models.NAMES}

    def names(self):
        return sorted(gate_models.NAMES)

    def build(self, name, device, dtype, backend):
        model = getattr(gate_models, name)
        case = planted.case_for(model)
        if dtype != torch.float32:
            case = dataclasses.replace(planted_dtype.half_case(model, dtype), info=case.info)
        return dataclasses.replace(case, backend=backend)

    def rows(self, names):
        return {n: {"model_type": "planted", "modalities": ["text"]} for n in names}


def pytest_conformance_case_source(config):
    return PlantedCases()
'''
MATRIX = "from conformance.run.cells import matrix_tests\n\nglobals().update(matrix_tests())\n"
# Run options of every job of these gates: no cache provider, no expectations (the base, or nothing, judges).
PYTEST_ARGS = ("-p", "no:cacheprovider", "--expectations", "none.toml")


def make_root(path: Path, models: str = "") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "conftest.py").write_text(CONFTEST)
    (path / "test_matrix.py").write_text(MATRIX)
    (path / "none.toml").write_text("")
    (path / "README.md").write_text(f"# planted\n\n{render.START_MARKER}\n{render.END_MARKER}\n")
    if models:
        (path / "gate_models.py").write_text(models)
    return path


def git(repo: Path, *args: str) -> str:
    """`git -C repo args...` with a committer set, its output stripped (raises on a failing command)."""
    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=gate@example.com", "-c", "user.name=gate",
                           *args], check=True, capture_output=True, text=True).stdout.strip()


def fake_checkout(repo: Path, base: str, head: str, message: str) -> str:
    """A git repository at `repo` whose ``src/gate_models.py`` is `base`, then `head` committed on top as `message`
    (a pull request); the base commit's hash."""
    (repo / "src").mkdir()
    git(repo, "init", "-q")
    (repo / "src" / "gate_models.py").write_text(base)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    base_commit = git(repo, "rev-parse", "HEAD")
    (repo / "src" / "gate_models.py").write_text(head)
    git(repo, "commit", "-qam", message)
    return base_commit


def cells(envelope: dict) -> dict[tuple[str, str], str]:
    return {(m, c): cell["verdict"] for m, row in envelope["models"].items() for c, cell in row["cells"].items()}
