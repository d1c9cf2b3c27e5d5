"""The generation columns on planted models whose deployment answer is known: one set of artifacts, two requests.

A tiny decoder that serves any prompt length passes with the sample's prompt and a longer one. One whose decode
step keeps a Python int of the prompt it saw (the prompt length, as a model keeps state between prefill and
decode) fails with a `specialisation` fingerprint naming the prompt's dimension in part step. A tiny vision model
whose encoder branches on the image width serves other prompt lengths but not wider images, and says so per
request. Each column runs where its packages are installed (ONNX Runtime, ExecuTorch).
"""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest
import torch

from conformance.cases.samples import Sample
from conformance.cases.variants import Variant, Variants, longer
from conformance.checks.common import onnx as _onnx
from conformance.checks.common.outcome import run_check
from conformance.checks.common.registry import load_all
from conformance.meta.planted import FactoryCase

pytestmark = pytest.mark.meta

load_all()
VOCAB, PLACEHOLDER, PATCH = 64, 63, 4


def _installed(*names: str) -> bool:
    return all(importlib.util.find_spec(n) is not None for n in names)


COLUMNS = [
    pytest.param("export_generate"),
    pytest.param("onnx_generate", marks=pytest.mark.skipif(not _installed(*_onnx.PACKAGES),
                                                            reason="the [onnx] extra is not installed")),
    pytest.param("executorch", marks=pytest.mark.skipif(not _installed("executorch", "torchao"),
                                                         reason="the [executorch] extra is not installed")),
]


def _config(**extra):
    from transformers import LlamaConfig

    return LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=64, **extra)


def _lm(cls=None):
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    return (cls or LlamaForCausalLM)(_config()).eval()


def _baking_class():
    from transformers import LlamaForCausalLM

    class KeepsPromptLength(LlamaForCausalLM):
        """Decodes at positions offset by a Python int of the prompt it saw (eager is right for every prompt)."""

        def forward(self, input_ids=None, inputs_embeds=None, position_ids=None, **kwargs):
            length = (input_ids if input_ids is not None else inputs_embeds).shape[1]
            cache = kwargs.get("cache", kwargs.get("past_key_values"))  # transformers 5 / 4
            if length > 1 and type(length) is int:  # an eager prefill: keep the prompt's length
                self.prompt_length = length
            elif length == 1:
                position_ids = (torch.as_tensor(cache.get_seq_length()) + self.prompt_length % 3).view(1, 1)  # baked
            return super().forward(input_ids=input_ids, inputs_embeds=inputs_embeds, position_ids=position_ids,
                                   **kwargs)

    return KeepsPromptLength


def _vision_class():
    from transformers import LlamaForCausalLM

    class WidthBranch(LlamaForCausalLM):
        """Image patches -> placeholder features; the encoder branches on the traced image width."""

        def __init__(self, config):
            super().__init__(config)
            self.patches = torch.nn.Linear(3 * PATCH * PATCH, config.hidden_size)

        def get_image_features(self, pixel_values):
            batch, channels, height, width = pixel_values.shape
            patches = pixel_values.unfold(2, PATCH, PATCH).unfold(3, PATCH, PATCH)
            patches = patches.permute(0, 2, 3, 1, 4, 5).reshape(batch, -1, channels * PATCH * PATCH)
            features = self.patches(patches)
            if width == 8:  # specialises the image width
                features = features * 2
            return features.reshape(-1, features.shape[-1])

        def forward(self, input_ids=None, pixel_values=None, inputs_embeds=None, **kwargs):
            if inputs_embeds is None:
                holders = input_ids == PLACEHOLDER
                inputs_embeds = self.get_input_embeddings()(input_ids.masked_fill(holders, 0))
                if pixel_values is not None and bool(holders.any()):
                    features = self.get_image_features(pixel_values).to(inputs_embeds.dtype)
                    inputs_embeds = inputs_embeds.masked_scatter(holders.unsqueeze(-1), features)
            return super().forward(inputs_embeds=inputs_embeds, **kwargs)

    return WidthBranch


def _text_case(factory) -> FactoryCase:
    config = _config()
    sample = Sample(inputs={"input_ids": torch.tensor([[0, 0, 3, 14, 15, 9], [9, 26, 5, 35, 8, 11]]),
                            "attention_mask": torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])},
                    strategy="planted")
    variants = Variants(available={"longer": Variant("longer", longer(sample, config, {}), "5 text tokens more")})
    return FactoryCase(info=None, tiny=SimpleNamespace(config=config), sample=sample, factory=factory,
                       _variants=variants)


def _image_sample(width: int) -> Sample:
    count = (8 // PATCH) * (width // PATCH)
    ids = torch.tensor([[5, 6] + [PLACEHOLDER] * count + [7, 8, 9, 10]] * 2)
    gen = torch.Generator().manual_seed(width)
    return Sample(inputs={"input_ids": ids, "attention_mask": torch.ones_like(ids),
                          "pixel_values": torch.randn(2, 3, 8, width, generator=gen)},
                  strategy="planted", media_keys=("pixel_values",))


def _image_case() -> FactoryCase:
    config = _config(image_token_id=PLACEHOLDER)
    cls = _vision_class()
    sample = _image_sample(8)
    variants = Variants(available={
        "longer": Variant("longer", longer(sample, config, {}), "5 text tokens more"),
        "image_size": Variant("image_size", _image_sample(16), "images twice as wide")})

    def factory():
        torch.manual_seed(0)
        return cls(_config(image_token_id=PLACEHOLDER)).eval()

    return FactoryCase(info=None, tiny=SimpleNamespace(config=config), sample=sample, factory=factory,
                       _variants=variants)


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    torch.set_num_threads(1)
    monkeypatch.setenv(_onnx.EXPORTER_ENV, "torch")


@pytest.mark.parametrize("column", COLUMNS)
def test_a_model_that_serves_any_prompt_length_passes_with_two_requests(column):
    outcome = run_check(column, _text_case(_lm))
    assert outcome.verdict == "pass", outcome.reason
    assert outcome.metrics["requests"] == {"traced": "pass", "longer": "pass"}
    assert outcome.metrics["served"] == ["traced", "longer"]
    if column == "executorch":  # what XNNPACK took of each lowered part, and what it left to the portable kernels
        for part in outcome.metrics["delegation"].values():
            assert part["xnnpack_nodes"] >= 0 and all(n > 0 for n in part["portable"].values())
        assert any(part["xnnpack_nodes"] for part in outcome.metrics["delegation"].values())
    assert outcome.metrics["max_len"] == 11 + outcome.metrics["new_tokens"]  # one cache for both requests


@pytest.mark.parametrize("column", COLUMNS)
def test_a_decode_step_that_bakes_the_prompt_length_fails_with_a_specialisation_naming_it(column):
    cls = _baking_class()
    outcome = run_check(column, _text_case(lambda: _lm(cls)))
    assert outcome.verdict == "fail", outcome.reason
    assert outcome.metrics["requests"]["traced"] == "pass"
    assert outcome.metrics["static_export"] == "pass"  # the single-prompt success stays visible
    assert outcome.reason.startswith("served traced, not longer (5 text tokens more): part step bakes")
    fingerprint = outcome.fingerprint
    assert fingerprint.kind == "specialisation"
    assert fingerprint.what == "input_ids dim 1 in part step"
    assert fingerprint.where.endswith("test_generation_requests:_baking_class.<locals>.KeepsPromptLength.forward")
    assert "test_generation_requests.py:" in outcome.reason  # the line that bakes it


@pytest.mark.parametrize("column", COLUMNS)
def test_a_model_that_serves_only_the_traced_image_size_says_so_per_request(column):
    outcome = run_check(column, _image_case())
    assert outcome.verdict == "fail", outcome.reason
    requests = outcome.metrics["requests"]
    assert requests["traced"] == requests["longer"] == "pass"
    assert requests["image_size"].startswith("part vision: pixel_values dim 3 specialised to 8 by Eq(")
    assert outcome.metrics["served"] == ["traced", "longer"]
    assert outcome.reason.startswith("served traced, longer, not image_size (images twice as wide)")
    assert outcome.fingerprint.kind == "specialisation"
    assert outcome.fingerprint.what == "pixel_values dim 3"
    assert "WidthBranch.get_image_features" in outcome.fingerprint.where


def test_parts_that_already_differ_from_generate_when_run_eagerly_are_the_suites_gap_not_a_finding(monkeypatch):
    """When the artifacts' logits differ from eager generate, the same parts run eagerly, against eager generate
    over a static cache (what the parts hold), decide whose it is: they differ -> the suite's decomposition misses
    something of the model's generate (HarnessGap); they agree -> the exporter's, the runtime's or the model's
    static cache's (the cell's failure stands: the planted WrongSlotLM and StaleCacheLM still fail)."""
    from types import SimpleNamespace

    from conformance import tolerances
    from conformance.checks.common import served
    from conformance.checks.common.outcome import HarnessGap

    expected, logits = torch.tensor([[3, 4]]), [torch.zeros(1, 8), torch.zeros(1, 8)]
    seen = {}

    def static_generate(model, inputs, new_tokens, **options):
        seen.update(options)
        return SimpleNamespace(sequences=expected, logits=logits)

    monkeypatch.setattr(served, "greedy_generate", static_generate)
    request = SimpleNamespace(name="traced", inputs={})
    tol = tolerances.tolerance("torch.float32", "export")
    unfaithful = SimpleNamespace(run_eager=None, new_tokens=2,
                                 generate=lambda run, prompt: (expected, [logits[0] + 0.01, logits[1]]))
    with pytest.raises(HarnessGap, match=r"run eagerly already differ from eager generate with a static cache "
                                         r"\(traced request, prefill: logits differ by"):
        served._require_faithful_parts(unfaithful, None, request, lambda: None, tol)
    assert seen["cache_implementation"] == "static"
    faithful = SimpleNamespace(run_eager=None, new_tokens=2, generate=lambda run, prompt: (expected, logits))
    assert served._require_faithful_parts(faithful, None, request, lambda: None, tol) is None


def test_the_vision_part_carries_its_models_config_as_transformers_exporters_read_it():
    """transformers' exporters read `model.config` of the module they export (the NaViT input preparer, for one:
    MiniCPM's `target_sizes`); their own components are PreTrainedModels. The suite's vision part and the
    reproducers' copy carry their model's config, so an exporter's failure is the model's, not the wrapper's."""
    from conformance.checks.common.generation import VisionPart
    from conformance.report import repro_parts

    config = SimpleNamespace(name="tiny")
    for part in (VisionPart, repro_parts.VisionPart):
        owner = torch.nn.Linear(1, 1)
        owner.config = config
        assert part(owner).config is config
