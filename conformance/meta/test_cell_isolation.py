"""One built Case serves every cell of its class: a cell cannot see what another cell did to it.

What a cell gets from the Case is its own: `inputs()` copies of the sample's
tensors, `fresh_model()` a new instance with its own copy of the config (and
the same weights). These tests play two cells on one Case: the first writes
into everything it was given, the second must find the Case as built.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from conformance.cases.case import Case
from conformance.cases.samples import Sample

pytestmark = pytest.mark.meta


class Config:
    def __init__(self):
        self.hidden = 4
        self.use_cache = True


class Linear(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.proj = torch.nn.Linear(config.hidden, config.hidden)

    def forward(self, pixel_values, input_ids):
        return self.proj(pixel_values) + input_ids.float()[..., None]


def _case() -> Case:
    tiny = SimpleNamespace(info=SimpleNamespace(name="LinearForConditionalGeneration", model_class=Linear),
                           config=Config(), source="synthetic", parameters=0)
    sample = Sample(inputs={"pixel_values": torch.randn(2, 3, 4), "input_ids": torch.arange(6).view(2, 3),
                            "pixel_values_list": [torch.ones(2)]},
                    strategy="synthetic", media_keys=("pixel_values",))
    return Case(info=tiny.info, tiny=tiny, sample=sample)


def _first_cell(case: Case) -> None:
    """Writes into everything a cell gets: its inputs in place, its model's weights and config."""
    inputs = case.inputs()
    inputs["pixel_values"].zero_()
    inputs["input_ids"].fill_(-1)
    inputs["pixel_values_list"][0].mul_(7)
    model = case.fresh_model()
    model.config.use_cache = False
    model.config.planted = "by the first cell"
    with torch.no_grad():
        model.proj.weight.add_(1.0)


def test_a_cell_that_writes_into_its_inputs_leaves_the_next_cells_inputs_as_built():
    case = _case()
    built = {k: (v.clone() if isinstance(v, torch.Tensor) else [t.clone() for t in v])
             for k, v in case.sample.inputs.items()}
    _first_cell(case)
    second = case.inputs()
    assert torch.equal(second["pixel_values"], built["pixel_values"])
    assert torch.equal(second["input_ids"], built["input_ids"])
    assert torch.equal(second["pixel_values_list"][0], built["pixel_values_list"][0])
    assert all(second[k] is not case.sample.inputs[k] for k in ("pixel_values", "input_ids"))


def test_a_cell_that_changes_its_models_config_or_weights_leaves_the_next_fresh_model_as_built():
    case = _case()
    reference = case.fresh_model()
    _first_cell(case)
    second = case.fresh_model()
    assert second.config.use_cache is True and not hasattr(second.config, "planted")
    assert not hasattr(case.tiny.config, "planted") and case.tiny.config.use_cache is True
    assert second.config is not reference.config
    assert torch.equal(second.proj.weight, reference.proj.weight)  # the same deterministic weights


def test_generate_inputs_are_copies_too():
    case = _case()
    case.generate_inputs()["input_ids"].fill_(-1)
    assert int(case.generate_inputs()["input_ids"].min()) == 0
