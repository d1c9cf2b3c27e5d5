"""Model bug or harness gap (conformance.cases.model_failure) on synthetic code.

The "model code" below is compiled under a file name inside a fake
``transformers/models/`` tree and its classes live in a ``transformers.``
module, so the rules see it exactly as they see transformers' own modeling
code; everything else (the callers here, torch) is outside.
"""

import textwrap
from types import SimpleNamespace

import pytest
import torch

from conformance.cases import model_failure
from conformance.cases.model_failure import ModelFailure, NotStandalone, RowVerdict

MODEL_FILE = "/site-packages/transformers/models/fake/modeling_fake.py"
HELPER_FILE = "/site-packages/transformers/utils/fake_generic.py"
MODEL_CODE = textwrap.dedent('''
    import torch


    class FakeOutput:
        """A transformers output class without `image_outputs`."""

        logits = None


    class FakeModel(torch.nn.Module):
        def forward(self, what, pixel_values=None):
            if what == "output field":
                return FakeOutput().image_outputs  # the Llama4 bug's shape
            if what == "missing input":
                return pixel_values.shape  # None: the harness did not pass pixels
            if what == "input object":
                return pixel_values.not_there
            if what == "shape":
                return torch.zeros(2, 3).view(4, 4)  # a shape error: inputs can cause it
            if what == "name":
                return undefined_name  # noqa: F821
            if what == "in torch":
                return self.not_a_submodule  # raised by torch's Module.__getattr__
            if what == "via helper":
                return helper(FakeOutput())
            return None
''')
HELPER_CODE = textwrap.dedent('''
    def helper(obj):
        return obj.missing_field
''')


def _load(code: str, filename: str, module: str) -> dict:
    namespace = {"__name__": module}
    exec(compile(code, filename, "exec"), namespace)
    return namespace


@pytest.fixture(scope="module")
def fake_model():
    helpers = _load(HELPER_CODE, HELPER_FILE, "transformers.utils.fake_generic")
    namespace = _load(MODEL_CODE, MODEL_FILE, "transformers.models.fake.modeling_fake")
    namespace["helper"] = helpers["helper"]
    return namespace["FakeModel"]()


def _raised(model, what: str, **inputs) -> BaseException:
    with pytest.raises(Exception) as info:
        model(what, **inputs)
    return info.value


def test_a_missing_field_of_the_models_own_object_is_a_model_failure(fake_model):
    exc = _raised(fake_model, "output field")
    reason = model_failure.forward_failure(exc, {})
    assert reason.startswith("the model's own forward fails on valid inputs (transformers bug): AttributeError:")
    assert "'FakeOutput' object has no attribute 'image_outputs'" in reason
    assert "(at transformers/models/fake/modeling_fake.py:" in reason and "in FakeModel.forward)" in reason


def test_a_name_error_in_model_code_is_a_model_failure(fake_model):
    assert model_failure.forward_failure(_raised(fake_model, "name"), {}).startswith("the model's own forward")


def test_an_attribute_error_on_a_missing_or_given_input_is_a_harness_gap(fake_model):
    assert model_failure.forward_failure(_raised(fake_model, "missing input"), {}) == ""  # on None
    given = SimpleNamespace()  # not a transformers object
    assert model_failure.forward_failure(_raised(fake_model, "input object", pixel_values=given),
                                         {"pixel_values": given}) == ""


def test_an_attribute_error_on_a_transformers_object_the_harness_passed_is_a_harness_gap(fake_model):
    output_class = type(fake_model).__dict__["forward"].__globals__["FakeOutput"]
    given = output_class()
    exc = _raised(fake_model, "input object", pixel_values=given)
    assert model_failure.forward_failure(exc, {"pixel_values": given}) == ""


def test_shape_errors_and_errors_raised_outside_transformers_stay_harness_gaps(fake_model):
    assert model_failure.forward_failure(_raised(fake_model, "shape"), {}) == ""  # RuntimeError: inputs can cause it
    # raise point in torch: conservative, even for the model's own module (left to a person to judge)
    assert model_failure.forward_failure(_raised(fake_model, "in torch"), {}) == ""


def test_an_error_reached_from_model_code_through_transformers_helpers_is_the_models(fake_model):
    exc = _raised(fake_model, "via helper")
    assert model_failure.forward_failure(exc, {}).startswith("the model's own forward fails")
    assert "modeling_fake.py" in model_failure.model_frame(exc)  # the location names the model's own frame


def test_an_error_raised_in_harness_code_is_never_the_models():
    try:
        SimpleNamespace().missing
    except AttributeError as exc:
        assert model_failure.forward_failure(exc, {}) == ""


class _Config:
    pass


def _info(model_class):
    return SimpleNamespace(model_class=model_class, config_class=_Config, name=model_class.__name__)


def test_construction_fails_as_the_model_only_when_the_default_config_fails_the_same_way():
    class Broken(torch.nn.Module):
        def __init__(self, config):
            super().__init__()
            raise AttributeError("'TalkerConfig' object has no attribute 'shared_expert_intermediate_size'")

    tiny_error = AttributeError("'TalkerConfig' object has no attribute 'shared_expert_intermediate_size'")
    reason = model_failure.construction_failure(_info(Broken), tiny_error)
    assert reason.startswith("the class cannot be built from its own default config (transformers bug): "
                             "AttributeError: 'TalkerConfig' object has no attribute")
    other = ValueError("heads do not divide the tiny width")  # the shrinking's fault: the default differs
    assert model_failure.construction_failure(_info(Broken), other) == ""


def test_construction_that_works_from_the_default_config_is_a_harness_gap():
    class Fine(torch.nn.Module):
        def __init__(self, config):
            super().__init__()

    assert model_failure.construction_failure(_info(Fine), ValueError("tiny config is off")) == ""


def test_a_missing_dependency_is_never_the_models():
    class NeedsTimm(torch.nn.Module):
        def __init__(self, config):
            super().__init__()
            raise ImportError("requires the timm library")

    assert model_failure.construction_failure(_info(NeedsTimm), ImportError("requires the timm library")) == ""


def test_default_construction_runs_on_the_meta_device():
    seen = {}

    class Probe(torch.nn.Module):
        def __init__(self, config):
            super().__init__()
            seen["device"] = torch.empty(1).device

    assert model_failure.default_construction_error(_info(Probe)) is None
    assert seen["device"].type == "meta"


def test_row_verdicts_give_every_cell_its_verdict_and_the_build_cell_its_own():
    failure = ModelFailure("bug")
    assert failure.cell("build") == ("fail", "bug") and failure.cell("compile_prefill") == ("fail", "bug")
    part = NotStandalone("a part", build=("fail", "default config bug"))
    assert part.cell("build") == ("fail", "default config bug")
    assert part.cell("static_cache") == ("skip", "a part")
    assert NotStandalone("a part").cell("build") == ("skip", "a part")
    assert isinstance(part, RowVerdict)
