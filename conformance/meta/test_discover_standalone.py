"""The not-standalone rule (conformance.discover.not_standalone) on synthetic classes, and on the installed
transformers."""

import importlib.util
import sys
import textwrap

import pytest

from conformance import discover

SOURCE = textwrap.dedent('''
    import torch


    class FakePreTrainedModelForConditionalGeneration(torch.nn.Module):
        """A shared base: no forward of its own."""


    class FakeTalkerForConditionalGeneration(FakePreTrainedModelForConditionalGeneration):
        def forward(self, input_ids=None):
            return input_ids


    class FakeCodePredictorForConditionalGeneration(torch.nn.Module):
        def forward(self, inputs_embeds=None):
            return inputs_embeds


    class FakeTalkerWithPredictor(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.code_predictor = FakeCodePredictorForConditionalGeneration._from_config(None)


    class FakeForConditionalGeneration(torch.nn.Module):
        """A composite that only generates: no forward, builds its parts."""

        def __init__(self):
            super().__init__()
            self.talker = FakeTalkerForConditionalGeneration()

        def generate(self, **kwargs):
            return self.talker(**kwargs)


    class FakeLoneForConditionalGeneration(torch.nn.Module):
        def forward(self, input_ids=None):
            return input_ids
''')


@pytest.fixture
def fake_module(tmp_path, monkeypatch):
    path = tmp_path / "modeling_fake_standalone.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("modeling_fake_standalone", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    discover._class_sources.cache_clear()
    # Exported and auto-mapped names of this fake "installation".
    monkeypatch.setattr(discover, "_exported", lambda name: name.endswith("ForConditionalGeneration"))
    monkeypatch.setattr(discover, "auto_mapped_names",
                        lambda: frozenset({"FakeForConditionalGeneration", "FakeLoneForConditionalGeneration"}))
    yield module
    discover._class_sources.cache_clear()


def test_a_base_with_no_forward_in_no_auto_mapping_is_not_standalone(fake_module):
    reason = discover.not_standalone(fake_module.FakePreTrainedModelForConditionalGeneration)
    assert reason.startswith("not a standalone model: a base class with no forward of its own")
    assert "its subclasses FakeTalkerForConditionalGeneration are the models" in reason


def test_a_composite_with_no_forward_says_it_runs_through_generate_over_its_parts(fake_module):
    reason = discover.not_standalone(fake_module.FakeForConditionalGeneration)
    assert reason.startswith("no forward of its own")
    assert "runs only through its own generate() over the sub-models it builds" in reason
    assert "(FakeTalkerForConditionalGeneration: rows of their own)" in reason


def test_an_unmapped_class_another_class_builds_is_an_internal_sub_module(fake_module):
    talker = discover.not_standalone(fake_module.FakeTalkerForConditionalGeneration)
    assert talker == ("not a standalone model: an internal sub-module, built only inside "
                      "FakeForConditionalGeneration (in no auto mapping)")
    predictor = discover.not_standalone(fake_module.FakeCodePredictorForConditionalGeneration)
    assert "built only inside FakeTalkerWithPredictor" in predictor  # `Name._from_config(` counts as building


def test_a_mapped_class_or_an_unbuilt_one_with_a_forward_is_standalone(fake_module):
    assert discover.not_standalone(fake_module.FakeLoneForConditionalGeneration) == ""
    # an alias in an auto mapping makes the class loadable, whatever its own name
    assert discover.not_standalone(fake_module.FakeTalkerForConditionalGeneration,
                                     ("FakeTalkerForConditionalGeneration", "FakeLoneForConditionalGeneration")) == ""


def test_class_sources_cover_each_top_level_class_and_nothing_after_it(fake_module):
    sources = discover._class_sources(fake_module.__name__)
    assert "self.talker = FakeTalkerForConditionalGeneration()" in sources["FakeForConditionalGeneration"]
    assert "FakeLone" not in sources["FakeForConditionalGeneration"]


def test_installed_transformers_rows_that_are_not_standalone_say_why():
    """On the installed transformers: every class the rule marks has a reason of one of the three kinds,
    and ordinary auto-mapped models are standalone."""
    marked = {i.name: i.not_standalone for i in discover.discover() if i.not_standalone}
    for reason in marked.values():
        assert reason.startswith(("not a standalone model: a base class", "not a standalone model: an internal",
                                  "no forward of its own"))
    for name in ("LlavaForConditionalGeneration", "WhisperForConditionalGeneration", "MoshiForConditionalGeneration"):
        if name in discover.by_name():
            assert discover.by_name()[name].not_standalone == ""
