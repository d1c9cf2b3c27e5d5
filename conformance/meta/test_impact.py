"""Meta tests of conformance.select.impact: the import graph, selection rules, `git diff` input.

Most tests run on a synthetic transformers tree in a tmp dir; a few run on
the installed transformers (one discovery and one graph build per process).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conformance.select import code_graph, impact

pytestmark = pytest.mark.meta

# A tiny transformers tree. `a` is a model; `b` is generated from a modular
# file that reuses a's model classes (and copies AProjector renamed, as the
# converter does); `c` reuses b's model; `f` reuses only b's own output
# class, which owes nothing to `a`; `d` copies a class of `a` by a
# `# Copied from` comment; `e` is unrelated; `g` runs `e` through the auto
# registry (its config's default sub-model). `integrations/kernels.py` is
# imported by every model and itself imports model `e` (a registry edge).
TREE = {
    "__init__.py": "from .models.a import *\nfrom .models.e import *\n",
    "models/__init__.py": "from . import a, b, c, d, e, f, g\n",
    "models/auto/__init__.py": "from .modeling_auto import *\n",
    "models/auto/modeling_auto.py": "from ..e.modeling_e import E\nclass AutoModel:\n    pass\n",
    "integrations/__init__.py": "from .kernels import hub_kernel\n",
    "integrations/kernels.py": "def hub_kernel():\n    from ..models.e.modeling_e import E\n",
    "utils/__init__.py": "from .generic import check\n",
    "utils/generic.py": "def check():\n    pass\n",
    "trainer.py": "import transformers.models.a.modeling_a\n",
    "models/a/__init__.py": "",
    "models/a/configuration_a.py": "class AConfig:\n    pass\n",
    "models/a/modeling_a.py": (
        "from ...utils import check\nfrom ...integrations import hub_kernel\n"
        "from .configuration_a import AConfig\nfrom ..auto import AutoModel\n"
        "logger = check()\n"
        "class AProjector:\n    pass\n"
        "class AModel:\n    projector = AProjector\n    config_class = AConfig\n"
        "class AForConditionalGeneration:\n    model = AModel\n    hub_kernel()\n"
    ),
    "models/b/__init__.py": "",
    "models/b/configuration_b.py": "class BConfig:\n    pass\n",
    "models/b/modeling_b.py": (
        "from .configuration_b import BConfig\n"
        "logger = None\n"
        "class BProjector:\n    pass\n"
        "class BModel:\n    projector = BProjector\n"
        "class BOutput:\n    pass\n"
        "class BForConditionalGeneration:\n    model = BModel\n    output = BOutput\n"
    ),
    "models/b/modular_b.py": (
        "from ..a.modeling_a import (\n    AModel,\n    AForConditionalGeneration,\n)\n"
        "from ..a.configuration_a import AConfig\n"
        "class BModel(AModel):\n    pass\n"
        "class BOutput:\n    pass\n"
        "class BForConditionalGeneration(AForConditionalGeneration):\n    pass\n"
    ),
    "models/c/__init__.py": "",
    "models/c/modeling_c.py": "class CModel:\n    pass\nclass CForConditionalGeneration:\n    model = CModel\n",
    "models/c/modular_c.py": "from ..b.modeling_b import BModel\nclass CModel(BModel):\n    pass\n",
    "models/f/__init__.py": "",
    "models/f/modeling_f.py": "class FOutput:\n    pass\nclass FForConditionalGeneration:\n    output = FOutput\n",
    "models/f/modular_f.py": "from ..b.modeling_b import BOutput\nclass FOutput(BOutput):\n    pass\n"
                             "class FForConditionalGeneration:\n    output = FOutput\n",
    "models/d/__init__.py": "",
    "models/d/modeling_d.py": (
        "import torch\n\n\n"
        "# Copied from transformers.models.a.modeling_a.AProjector with A->D\nclass DProjector:\n    pass\n"
        "class DForConditionalGeneration:\n    projector = DProjector\n"
    ),
    "models/e/__init__.py": "",
    "models/e/modeling_e.py": "from ...utils.generic import check\nclass E:\n    check()\n"
                              "class EForConditionalGeneration(E):\n    pass\n",
    "models/g/__init__.py": "",
    "models/g/modeling_g.py": "from ..auto import AutoModel\nclass GForConditionalGeneration:\n    model = AutoModel\n",
}
NAMES = "abcdefg"
ROOTS = {f"{n.upper()}ForConditionalGeneration": [f"transformers.models.{n}.modeling_{n}.{n.upper()}ForConditionalGeneration"]
         for n in NAMES}
ROOTS["GForConditionalGeneration"].append("transformers.models.e.modeling_e.E")  # g's default sub-model


@pytest.fixture(autouse=True, scope="module")
def private_parse_cache(tmp_path_factory):
    """Graph builds of these tests keep their parsed files in a tmp dir, not the user's cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CONFORMANCE_CACHE_DIR", str(tmp_path_factory.mktemp("parse-cache")))
        yield


def write_tree(root: Path) -> Path:
    for rel, text in TREE.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    return write_tree(tmp_path_factory.mktemp("site") / "transformers")


@pytest.fixture(scope="module")
def closures(tree):
    return impact.class_closures(tree, ROOTS)


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


def test_reusing_a_symbol_that_owes_nothing_to_the_change_is_not_selected(closures):
    # f reuses b's own BOutput: a change to a does not reach it, a change to b does.
    assert "F" not in selected(closures, "src/transformers/models/a/modeling_a.py")
    assert "F" in selected(closures, "src/transformers/models/b/modeling_b.py")


def test_modular_reuse_is_transitive_but_not_backwards(closures):
    assert selected(closures, "transformers/models/b/modeling_b.py") == {"B", "C", "F"}
    assert selected(closures, "transformers/models/b/modular_b.py") == {"B", "C", "F"}
    assert selected(closures, "transformers/models/c/modeling_c.py") == {"C"}


def test_converter_copies_are_traced_to_their_renamed_original(tree):
    graph = code_graph.SymbolGraph(tree)
    # BProjector is not in modular_b: the converter copied it from AProjector.
    assert graph.deps(("models/b/modeling_b.py", "BProjector")) >= {("models/a/modeling_a.py", "AProjector")}
    # A generated configuration takes only configuration code.
    deps = graph.deps(("models/b/configuration_b.py", "BConfig"))
    assert ("models/a/configuration_a.py", "AConfig") in deps
    assert not any(rel == "models/a/modeling_a.py" for rel, _ in deps)
    # A logger is not copied code.
    assert not any(rel.startswith("models/a/") for rel, _ in graph.deps(("models/b/modeling_b.py", "logger")))


def test_registries_do_not_link_models_but_default_sub_models_do(closures):
    # auto and integrations reach model e only through registry imports; g's config builds E by default.
    assert selected(closures, "transformers/models/e/modeling_e.py") == {"E", "G"}


def test_shared_files_select_every_class(closures):
    for path in ("src/transformers/cache_utils.py", "transformers/generation/utils.py",
                 "transformers/integrations/kernels.py", "transformers/models/auto/modeling_auto.py",
                 "transformers/utils/generic.py"):
        assert selected(closures, path) == {n.upper() for n in NAMES}, path


def test_outside_transformers_and_tooling_select_nothing(closures):
    assert selected(closures, "docs/source/en/index.md", "tests/models/a/test_modeling_a.py",
                    "src/transformers/trainer.py", "src/transformers/pipelines/base.py") == set()


def test_unknown_file_selects_nothing(closures):
    assert selected(closures, "src/transformers/models/zzz/modeling_zzz.py") == set()


def test_parsed_files_are_kept_between_runs_and_never_change_a_result(tmp_path, monkeypatch):
    monkeypatch.setenv("CONFORMANCE_CACHE_DIR", str(tmp_path / "cache"))
    root = write_tree(tmp_path / "transformers")
    cold = impact.class_closures(root, ROOTS)
    parsed: list[str] = []
    original = code_graph.ParsedFile.__init__

    def counting(self, graph, rel, source):
        parsed.append(rel)
        original(self, graph, rel, source)

    monkeypatch.setattr(code_graph.ParsedFile, "__init__", counting)
    assert impact.class_closures(root, ROOTS) == cold and parsed == []  # warm: nothing parsed again

    # A changed file is parsed again, and only it: e now reuses a's projector, so a change to a selects e.
    changed = root / "models/e/modeling_e.py"
    changed.write_text("from ..a.modeling_a import AProjector\nclass E:\n    projector = AProjector\n"
                       "class EForConditionalGeneration(E):\n    pass\n")
    warm = impact.class_closures(root, ROOTS)
    assert parsed == ["models/e/modeling_e.py"]
    assert "EForConditionalGeneration" in impact.select(["transformers/models/a/modeling_a.py"], warm)
    assert warm == impact.class_closures(root, ROOTS) and len(parsed) == 1

    # A new file can change how imports resolve: everything is parsed again. So is a corrupt cache.
    (root / "models/e/extra.py").write_text("")
    assert impact.class_closures(root, ROOTS) == warm and len(parsed) > 5
    for cache_file in (tmp_path / "cache").iterdir():
        cache_file.write_text("{not json")
    assert impact.class_closures(root, ROOTS) == warm


def test_parse_cache_off(tmp_path, monkeypatch):
    monkeypatch.setenv("CONFORMANCE_CACHE_DIR", "")
    root = write_tree(tmp_path / "transformers")
    impact.class_closures(root, ROOTS)
    assert not any(tmp_path.rglob("code-graph-*"))


@pytest.mark.parametrize("copy, original, related", [
    ("AriaMultiModalProjector", "LlavaMultiModalProjector", True),
    ("Step3p7CausalLMOutputWithPast", "DeepseekOcr2CausalLMOutputWithPast", True),
    ("rotate_half", "rotate_half", True),
    ("rotate_half", "apply_rotary_pos_emb", False),
    ("AriaModel", "LlavaProjector", False),
])
def test_renamed_score(copy, original, related):
    assert bool(code_graph._renamed_score(copy, original)) == related


def test_import_statements_parse_multiline_and_backslash():
    source = "x = 1\nfrom .a import (\n    b,\n    c,\n)\nimport os, \\\n    sys\n    from ..d import e\n"
    nodes = code_graph.import_statements(source)
    assert [type(n).__name__ for n in nodes] == ["ImportFrom", "Import", "ImportFrom"]
    assert [a.name for a in nodes[0].names] == ["b", "c"] and [a.name for a in nodes[1].names] == ["os", "sys"]


# --- the installed transformers --------------------------------------------------------------

def test_llava_change_selects_llava_and_reusers_not_qwen2_vl():
    chosen = impact.impacted_classes(["transformers/models/llava/modeling_llava.py"])
    assert {"LlavaForConditionalGeneration", "LlavaNextForConditionalGeneration", "LlavaOnevisionForConditionalGeneration",
            "VideoLlavaForConditionalGeneration", "VipLlavaForConditionalGeneration",
            "Mistral3ForConditionalGeneration", "InternVLForConditionalGeneration",
            "AriaForConditionalGeneration"} <= chosen
    # Qwen2-VL shares no Llava code; Qwen3-VL-MoE reuses only Aria's output classes, which owe nothing to Llava.
    assert not chosen & {"Qwen2VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration"}


def test_a_config_default_sub_model_counts():
    # PaliGemma's default vision tower is SigLIP, built through the auto registry.
    assert "PaliGemmaForConditionalGeneration" in impact.impacted_classes(["transformers/models/siglip/modeling_siglip.py"])


def test_a_checkpoint_profile_s_sub_models_count_for_its_row_only():
    # LLaVA-Interleave's text model is Qwen2 (fixtures/models/llava.toml [[profile]]); Llava's default is Llama.
    chosen = impact.impacted_classes(["transformers/models/qwen2/modeling_qwen2.py"])
    assert "LlavaForConditionalGeneration:llava-interleave" in chosen
    assert "LlavaForConditionalGeneration" not in chosen
    # A change to the class's own file is a change to every row of it.
    assert {"LlavaForConditionalGeneration", "LlavaForConditionalGeneration:llava-interleave"} <= impact.impacted_classes(
        ["transformers/models/llava/modeling_llava.py"])


def test_installed_shared_and_outside_files(monkeypatch):
    from conformance.discover import discover

    def no_graph():
        raise AssertionError("the code graph is not needed to answer this")

    monkeypatch.setattr(impact, "_installed_closures", no_graph)
    everything = {info.name for info in discover()}
    assert impact.impacted_classes(["src/transformers/cache_utils.py"]) == everything
    assert impact.impacted_classes(["transformers/models/llava/modeling_llava.py", "transformers/modeling_utils.py"]
                                   ) == everything
    assert impact.impacted_classes(["docs/source/en/index.md", "tests/utils/test_cache_utils.py"]) == set()
    assert impact.impacted_classes(["src/transformers/trainer.py"]) == set()


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


# --- a diff narrows a file to the definitions it touches ---------------------------------------

SOURCE = "\n".join([
    "@dec",            # 1
    "def f():",        # 2
    "    return 1",    # 3
    "",                # 4
    "# note",          # 5
    "class C:",        # 6
    "    pass",        # 7
    "import os",       # 8
    "X = 2",           # 9
]) + "\n"


@pytest.mark.parametrize("lines, touched", [
    ({3}, {"f"}),             # inside f
    ({1}, {"f"}),             # f's decorator
    ({4, 5}, set()),          # a blank line and a comment between definitions
    ({7, 9}, {"C", "X"}),     # a class and a module constant
    ({8}, None),              # an import: the whole file
])
def test_touched_definitions(lines, touched):
    assert code_graph.touched_definitions(SOURCE, lines) == touched


def test_since_narrows_a_file_to_the_definitions_the_diff_touches(tmp_path, closures):
    repo = tmp_path / "transformers"
    for rel, text in TREE.items():
        path = repo / "src" / "transformers" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    target = repo / "src/transformers/models/a/modeling_a.py"
    original = target.read_text()

    def chosen(text: str) -> set[str]:
        target.write_text(text)
        files = impact.changed_since("HEAD", repo)
        definitions = impact.changed_definitions("HEAD", repo, files)
        return {n.removesuffix("ForConditionalGeneration") for n in impact.select(files, closures, definitions)}

    # Only AForConditionalGeneration changes: d, which copies AProjector alone, is not selected.
    assert chosen(original.replace("    hub_kernel()\n", "    hub_kernel()\n    extra = 1\n")) == {"A", "B", "C"}
    # AProjector changes: its copy in d and everything built on AModel are.
    assert chosen(original.replace("class AProjector:\n    pass\n",
                                   "class AProjector:\n    scale = 2\n")) == {"A", "B", "C", "D"}
    # An import changes: the whole file.
    assert chosen("import math\n" + original) == {"A", "B", "C", "D"}
    assert impact.changed_definitions("HEAD", repo, ["src/transformers/models/a/modeling_a.py"]) == {
        "models/a/modeling_a.py": None}
