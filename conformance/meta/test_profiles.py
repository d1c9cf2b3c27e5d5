"""Checkpoint profiles (`conformance.profiles`): data in fixtures/models, rows of the matrix after their class's row.

The fixtures' own profiles are read and built for real (tiny configs, no checks); the row's name is then followed
through a real run (the plugin, in a subprocess) over planted models: a pytest id, a ``--models`` name, an envelope
``models`` key, an expectations ``[[cell]]`` model, the rendered matrix and the findings' profile section.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import locations, profiles
from conformance.cases.model_data import FixtureError, load_model_fixture
from conformance.discover import NoMatch, class_index, discover, model_types, row_metadata, select_classes

pytestmark = pytest.mark.meta

# The families issue 52 names (and BakLLaVA), and what makes each differ from its class's default config.
EXPECTED = {
    "LlavaForConditionalGeneration:llava-interleave": {"text_config": "qwen2", "vision_config": "siglip_vision_model"},
    "Blip2ForConditionalGeneration:blip2-flan-t5": {"text_config": "t5"},
    "InstructBlipForConditionalGeneration:instructblip-flan-t5": {"text_config": "t5"},
    "PaliGemmaForConditionalGeneration:paligemma2": {"text_config": "gemma2"},
    "LlavaNextForConditionalGeneration:llava-next-mistral": {"text_config": "mistral"},
    "LlavaNextForConditionalGeneration:llava-next-llama3": {"text_config": "llama"},
    "LlavaForConditionalGeneration:bakllava": {"text_config": "mistral"},  # one more: Mistral's sliding window
}


def rows() -> dict:
    return {info.name: info for info in discover()}


def test_every_family_of_the_issue_is_a_row_right_after_its_class_s_default_row():
    names = [info.name for info in discover()]
    assert set(EXPECTED) <= set(names)
    for name in EXPECTED:
        class_name, profile = profiles.split_row(name)
        assert profiles.row_name(class_name, profile) == name
        first = names.index(class_name)
        own = [n for n in names if profiles.split_row(n)[0] == class_name]
        assert names[first:first + len(own)] == own and own[0] == class_name  # the default row, then its profiles
        info = rows()[name]
        assert info.class_name == class_name and info.model_class is rows()[class_name].model_class
        assert info.profile.sub_configs == EXPECTED[name] and info.profile.checkpoint and info.profile.about


def test_profile_names_and_checkpoints_are_unique_and_make_valid_ids():
    found = [info.profile for info in discover() if info.profile is not None]
    assert len({p.name for p in found}) == len(found) and len({p.checkpoint for p in found}) == len(found)
    for info in (i for i in discover() if i.profile is not None):
        # No character pytest (-k, node ids), xdist groups (@), the columns (@ ~), fnmatch ([) or a list (,) reads.
        assert not set(info.name) & set("[]@~,/ \"'"), info.name


def test_a_profile_row_is_selected_by_its_name_its_profile_its_checkpoint_and_its_model_type():
    index, names, types = class_index(), [i.name for i in discover()], model_types()
    row = "LlavaForConditionalGeneration:llava-interleave"
    for pattern in (row, "llava-interleave", "llava-hf/llava-interleave-qwen-0.5b-hf", "LLAVA-INTERLEAVE"):
        assert select_classes([pattern], index, names, types) == [row]
    # The class's name is its default row; its model type (or a glob) is every row of it.
    assert select_classes(["LlavaForConditionalGeneration"], index, names, types) == ["LlavaForConditionalGeneration"]
    assert select_classes(["llava"], index, names, types) == ["LlavaForConditionalGeneration",
                                                              "LlavaForConditionalGeneration:bakllava", row]
    assert "LlavaNextForConditionalGeneration:llava-next-llama3" in select_classes(["llava-hf/*"], index, names, types)
    with pytest.raises(NoMatch):
        select_classes(["llava-interleaved-qwen"], index, names, types)


def test_the_row_metadata_carries_the_checkpoint_the_page_searches():
    meta = row_metadata(["PaliGemmaForConditionalGeneration:paligemma2", "PaliGemmaForConditionalGeneration"])
    profile = meta["PaliGemmaForConditionalGeneration:paligemma2"]
    assert profile["checkpoint"] == "google/paligemma2-3b-pt-224" and profile["profile"] == "paligemma2"
    assert profile["class"] == "PaliGemmaForConditionalGeneration" and profile["sub_configs"] == {"text_config": "gemma2"}
    assert "checkpoint" not in meta["PaliGemmaForConditionalGeneration"]


@pytest.fixture(scope="module")
def tiny():
    from conformance.cases.tiny import tiny_config
    from conformance.discover import quiet_transformers

    with quiet_transformers():
        return {name: tiny_config(rows()[name]) for name in [*EXPECTED, *{profiles.split_row(n)[0] for n in EXPECTED}]}


def test_a_profile_s_tiny_config_takes_its_sub_configs_and_the_checkpoint_s_fields(tiny):
    for name, subs in EXPECTED.items():
        config, default = tiny[name].config, tiny[profiles.split_row(name)[0]].config
        for key, model_type in subs.items():
            assert getattr(config, key).model_type == model_type, (name, key)
    interleave = tiny["LlavaForConditionalGeneration:llava-interleave"].config
    assert (interleave.vision_feature_select_strategy, interleave.vision_feature_layer) == ("full", -1)
    gemma2 = tiny["PaliGemmaForConditionalGeneration:paligemma2"].config.text_config
    assert "sliding_attention" in gemma2.layer_types and gemma2.attn_logit_softcapping == 50.0
    assert gemma2.final_logit_softcapping == 30.0 and gemma2.query_pre_attn_scalar == 256
    mistral = tiny["LlavaNextForConditionalGeneration:llava-next-mistral"].config.text_config
    assert mistral.sliding_window is None  # the checkpoint's null, where MistralConfig's default is 4096
    llama3 = tiny["LlavaNextForConditionalGeneration:llava-next-llama3"].config.text_config
    assert llama3.num_key_value_heads < llama3.num_attention_heads  # grouped-query attention, where the default is not
    assert tiny["Blip2ForConditionalGeneration:blip2-flan-t5"].config.text_config.is_encoder_decoder
    assert rows()["Blip2ForConditionalGeneration:blip2-flan-t5"].kind == "multimodal-encoder-decoder"
    # ... and then the shrinker applied as to every row.
    assert interleave.text_config.hidden_size == tiny["LlavaForConditionalGeneration"].config.text_config.hidden_size


def test_a_profile_row_samples_with_its_own_recipe_merged_over_the_class_s():
    from conformance.cases.samples import recipe_for
    from conformance.cases.tiny import TinyModel

    recipe = recipe_for(TinyModel(info=rows()["LlavaForConditionalGeneration:llava-interleave"], config=None,
                                  source="auto"))
    assert recipe["strategy"] == "processor"  # the class's
    assert recipe["processor"]["kwargs"] == {"num_additional_image_tokens": 0, "vision_feature_select_strategy": "full"}


def test_a_change_to_a_profile_s_text_model_impacts_that_row_and_not_the_default_row():
    from conformance.select import impact

    interleave = rows()["LlavaForConditionalGeneration:llava-interleave"]
    roots = impact.registry_submodels(interleave.config_class, interleave.profile.sub_configs)
    assert any(r.endswith(".Qwen2Model") for r in roots) and any(r.endswith(".SiglipVisionModel") for r in roots)
    default = impact.registry_submodels(interleave.config_class)
    assert not any("qwen2" in r for r in default) and any(r.endswith(".CLIPVisionModel") for r in default)


@pytest.mark.parametrize("table, needle", [
    ('[[profile]]\nname = "x"\nabout = "a"\n', "missing 'checkpoint'"),
    ('[[profile]]\nname = "Big Name"\ncheckpoint = "o/c"\nabout = "a"\n', "must be lower case"),
    ('[[profile]]\nname = "x"\ncheckpoint = "o/c"\nabout = "a"\nsubconfigs = {}\n', "unknown key 'subconfigs'"),
    ('[[profile]]\nname = "x"\ncheckpoint = "o/c"\nabout = "a"\nsub_configs = { text_config = "qwen9" }\n',
     "'qwen9' is no model type"),
    ('[[profile]]\nname = "x"\ncheckpoint = "o/c"\nabout = "a"\n[[profile]]\nname = "x"\ncheckpoint = "o/d"\n'
     'about = "b"\n', "a second profile of that name"),
    ('[[profile]]\nname = "x"\ncheckpoint = "o/c"\nabout = "a"\n[profile.samples]\nstrategi = "x"\n',
     "unknown key 'samples.strategi'"),
])
def test_a_bad_profile_table_is_one_line_naming_it(tmp_path, table, needle):
    path = tmp_path / "llava.toml"
    path.write_text('about = "a fixture"\n\n' + table)
    with pytest.raises(FixtureError) as raised:
        load_model_fixture(path)
    assert needle in str(raised.value) and "\n" not in str(raised.value)


def test_the_fixtures_profiles_are_valid():
    for path in sorted(locations.MODELS.glob("*.toml")):
        load_model_fixture(path)


# ------------------------------------------------------------------ the row's name through a real run

CONFTEST = '''
import dataclasses

pytest_plugins = ["conformance.run.plugin"]

from conformance.meta import planted
from conformance.profiles import split_row

ROWS = {"TinyLM": planted.TinyLM, "TinyLM:data-dependent": planted.DataDependentLM}


class ProfileCases:
    def index(self):
        return {**{n: n for n in ROWS}, "data-dependent": "TinyLM:data-dependent", "org/tiny-dd": "TinyLM:data-dependent"}

    def names(self):
        return sorted(ROWS)

    def build(self, name, device, dtype, backend):
        case = planted.case_for(ROWS[name])
        return dataclasses.replace(case, info=dataclasses.replace(case.info, name=name), backend=backend)

    def rows(self, names):
        meta = {"TinyLM:data-dependent": {"class": "TinyLM", "profile": "data-dependent", "checkpoint": "org/tiny-dd"}}
        return {n: {"model_type": "planted", "modalities": ["text"], **meta.get(n, {})} for n in names}


def pytest_conformance_case_source(config):
    return ProfileCases()
'''
MATRIX = "from conformance.run.cells import matrix_tests\n\nglobals().update(matrix_tests())\n"


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("profiles")
    (root / "conftest.py").write_text(CONFTEST)
    (root / "test_matrix.py").write_text(MATRIX)
    (root / "none.toml").write_text("")
    return root


def run(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{locations.REPOSITORY}"}
    return subprocess.run([sys.executable, "-m", "pytest", "test_matrix.py", "-p", "no:cacheprovider", "-p",
                           "no:randomly", "--checks", "export_forward", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_profile_row_is_a_pytest_id_a_models_name_an_envelope_key_and_an_expectation(project):
    from conformance.gate.update import update_expectations
    from conformance.report import findings, render

    first = run(project, "--models", "TinyLM,org/tiny-dd", "--expectations", "none.toml", "--matrix-out", "a.json")
    assert first.returncode == 1, first.stdout[-2000:]
    assert "test_export_forward[TinyLM:data-dependent]" in first.stdout
    envelope = json.loads((project / "a.json").read_text())
    assert {m: r["cells"]["export_forward"]["verdict"] for m, r in envelope["models"].items()} == {
        "TinyLM": "pass", "TinyLM:data-dependent": "fail"}
    assert envelope["models"]["TinyLM:data-dependent"]["checkpoint"] == "org/tiny-dd"
    assert "TinyLM:data-dependent" in render.render_markdown(envelope)

    listed = update_expectations(project / "a.json", project / "listed.toml")
    assert 'model = "TinyLM:data-dependent"' in listed.read_text()
    again = run(project, "--models", "data-dependent", "--expectations", "listed.toml", "--matrix-out", "b.json",
                "-rA")
    assert again.returncode == 0, again.stdout[-2000:]
    cell = json.loads((project / "b.json").read_text())["models"]["TinyLM:data-dependent"]["cells"]["export_forward"]
    assert cell["verdict"] == "xfail"

    text = findings.render_findings(findings.group_failures([envelope], ["a.json"]), [envelope], ["a.json"])
    section = text[text.index("## Checkpoint profiles that differ from their default row"):]
    assert "- `TinyLM:data-dependent` (org/tiny-dd) vs `TinyLM`:" in section
    assert "  - export_forward: fail (default row pass)" in section
