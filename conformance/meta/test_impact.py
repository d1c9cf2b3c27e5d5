"""Meta tests of conformance.impact: the import graph, selection rules, `git diff` input.

Most tests run on a synthetic transformers tree in a tmp dir; a few run on
the installed transformers (one discovery and one graph build per process).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conformance import impact

pytestmark = pytest.mark.meta

# A tiny transformers tree: `a` is a model, `b` is generated from a modular
# file that reuses `a`, `c` reuses `b` the same way, `d` copies a class of `a`
# by a `# Copied from` comment, `e` is unrelated; `integrations/kernels.py`
# is imported by every model and itself imports model `e` (a registry edge).
TREE = {
    "__init__.py": "from .models.a import *\nfrom .models.e import *\n",
    "models/__init__.py": "from . import a, b, c, d, e\n",
    "models/auto/__init__.py": "from .modeling_auto import *\n",
    "models/auto/modeling_auto.py": "from ..e.modeling_e import E\n",
    "integrations/__init__.py": "from .kernels import hub_kernel\n",
    "integrations/kernels.py": "def hub_kernel():\n    from ..models.e.modeling_e import E\n",
    "utils/__init__.py": "from .generic import check\n",
    "utils/generic.py": "",
    "trainer.py": "import transformers.models.a.modeling_a\n",
    "models/a/__init__.py": "",
    "models/a/configuration_a.py": "",
    "models/a/modeling_a.py": (
        "from ...utils import check\nfrom ...integrations import hub_kernel\n"
        "from .configuration_a import AConfig\nfrom ..auto import AutoModel\n"
    ),
    "models/b/__init__.py": "",
    "models/b/configuration_b.py": "from ..a.configuration_a import AConfig\n",
    "models/b/modeling_b.py": "from .configuration_b import BConfig\n",
    "models/b/modular_b.py": (
        "from ..a.modeling_a import (\n    AModel,\n    AForConditionalGeneration,\n)\n"
        "from ..a.configuration_a import AConfig\n"
    ),
    "models/c/__init__.py": "",
    "models/c/configuration_c.py": "",
    "models/c/modeling_c.py": "from .configuration_c import CConfig\n",
    "models/c/modular_c.py": "from ..b.modeling_b import BModel\n",
    "models/d/__init__.py": "",
    "models/d/modeling_d.py": (
        "import torch\n\n\n"
        "# Copied from transformers.models.a.modeling_a.AProjector with A->D\nclass DProjector:\n    pass\n"
    ),
    "models/e/__init__.py": "",
    "models/e/modeling_e.py": "from ...utils.generic import check\n",
}
MODULES = {name.upper() + "ForConditionalGeneration": f"transformers.models.{name}.modeling_{name}" for name in "abcde"}


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("site") / "transformers"
    for rel, text in TREE.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture(scope="module")
def closures(tree):
    return impact.class_closures(tree, MODULES)


def selected(closures, *paths: str) -> set[str]:
    return {name.removesuffix("ForConditionalGeneration") for name in impact.select(list(paths), closures)}


@pytest.mark.parametrize("path, rel", [
    ("src/transformers/models/llava/modeling_llava.py", "models/llava/modeling_llava.py"),
    ("transformers/models/llava/modeling_llava.py", "models/llava/modeling_llava.py"),
    ("./src/transformers/cache_utils.py", "cache_utils.py"),
    ("docs/source/en/model_doc/llava.md", None),
    ("tests/models/llava/test_modeling_llava.py", None),
    ("utils/check_copies.py", None),
    ("setup.py", None),
])
def test_normalize(path, rel):
    assert impact.normalize(path) == rel


def test_a_model_change_selects_itself_and_its_modular_and_copied_reusers(closures):
    assert selected(closures, "src/transformers/models/a/modeling_a.py") == {"A", "B", "C", "D"}


def test_modular_reuse_is_transitive_but_not_backwards(closures):
    assert selected(closures, "transformers/models/b/modeling_b.py") == {"B", "C"}
    assert selected(closures, "transformers/models/c/modeling_c.py") == {"C"}


def test_generated_configuration_takes_only_configuration_code(tree):
    # configuration_b is generated from modular_b, which imports modeling_a: only its config imports flow.
    deps = impact.ImportGraph(tree).deps("models/b/configuration_b.py")
    assert "models/a/configuration_a.py" in deps and "models/a/modeling_a.py" not in deps


def test_registries_do_not_link_models(closures):
    # auto and integrations reach model e only through registry imports: an e change selects e alone.
    assert selected(closures, "transformers/models/e/modeling_e.py") == {"E"}


def test_shared_files_select_every_class(closures):
    for path in ("src/transformers/cache_utils.py", "transformers/generation/utils.py",
                 "transformers/integrations/kernels.py", "transformers/models/auto/modeling_auto.py",
                 "transformers/utils/generic.py"):
        assert selected(closures, path) == set("ABCDE"), path


def test_outside_transformers_and_tooling_select_nothing(closures):
    assert selected(closures, "docs/source/en/index.md", "tests/models/a/test_modeling_a.py",
                    "src/transformers/trainer.py", "src/transformers/pipelines/base.py") == set()


def test_unknown_file_selects_nothing(closures):
    assert selected(closures, "src/transformers/models/zzz/modeling_zzz.py") == set()


def test_import_statements_parse_multiline_and_backslash():
    source = "x = 1\nfrom .a import (\n    b,\n    c,\n)\nimport os, \\\n    sys\n    from ..d import e\n"
    nodes = impact._import_statements(source)
    assert [type(n).__name__ for n in nodes] == ["ImportFrom", "Import", "ImportFrom"]
    assert [a.name for a in nodes[0].names] == ["b", "c"] and [a.name for a in nodes[1].names] == ["os", "sys"]


# --- the installed transformers --------------------------------------------------------------

def test_llava_change_selects_llava_and_reusers_not_qwen2_vl():
    chosen = impact.impacted_classes(["transformers/models/llava/modeling_llava.py"])
    assert {"LlavaForConditionalGeneration", "LlavaNextForConditionalGeneration",
            "VipLlavaForConditionalGeneration"} <= chosen
    assert "Qwen2VLForConditionalGeneration" not in chosen


def test_installed_shared_and_outside_files():
    from conformance.discover import discover

    everything = {info.name for info in discover()}
    assert impact.impacted_classes(["src/transformers/cache_utils.py"]) == everything
    assert impact.impacted_classes(["docs/source/en/index.md", "tests/utils/test_cache_utils.py"]) == set()


# --- git diff input --------------------------------------------------------------------------

def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   check=True, capture_output=True)


def test_changed_since_lists_git_diff(tmp_path):
    repo = tmp_path / "transformers"
    (repo / "src/transformers/models/llava").mkdir(parents=True)
    target = repo / "src/transformers/models/llava/modeling_llava.py"
    target.write_text("a = 1\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    target.write_text("a = 2\n")
    assert impact.changed_since("HEAD", repo) == ["src/transformers/models/llava/modeling_llava.py"]


@pytest.mark.parametrize("make_repo, ref, message", [
    (lambda p: p / "absent", "HEAD", "no such directory"),
    (lambda p: p, "HEAD", "not a git checkout"),
    (None, "no-such-branch", "--since no-such-branch: git cannot diff against it"),
])
def test_changed_since_errors_are_one_line(tmp_path, make_repo, ref, message):
    if make_repo is None:
        repo = tmp_path / "repo"
        repo.mkdir()
        git(repo, "init", "-q")
        git(repo, "commit", "-q", "--allow-empty", "-m", "base")
    else:
        repo = make_repo(tmp_path)
    with pytest.raises(impact.ImpactError) as info:
        impact.changed_since(ref, repo)
    assert message in str(info.value) and "\n" not in str(info.value)
