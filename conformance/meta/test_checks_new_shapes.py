"""What the checks learned for the new input shapes, on synthetic calls and modules (no real model).

* compile_decode follows the decoder from the prefill that made its cache (a model whose prefill creates
  the cache inside the forward, and whose generate ran one prefill it then dropped), rebuilds the
  no-cache forward over (batch, steps, codebooks) ids along the steps, and joins per-position media
  every call carries;
* `logits_of` reads a scoring model's `logits_per_*`;
* a check that cannot set itself up raises `HarnessGap`: an `error`, never a finding;
* legacy_cache's decoder passes generate's own kwargs to a prepare_inputs_for_generation that forwards
  **kwargs to the installed GenerationMixin's, as generate does;
* a sample's `generate_inputs` reach generate-based checks through `Case.generate_inputs()`.
"""

import dataclasses
import inspect
from types import SimpleNamespace

import torch
from transformers.cache_utils import DynamicCache

from conformance.cases.case import Case
from conformance.cases.samples import Sample
from conformance.checks.common import registry
from conformance.checks.common.compare import logits_of
from conformance.checks.common.outcome import HarnessGap, run_check
from conformance.checks.compile_decode import ForwardRecorder, no_cache_inputs
from conformance.checks.legacy_cache import takes_generate_kwarg


def _recorder(calls: list[dict]) -> ForwardRecorder:
    recorder = ForwardRecorder.__new__(ForwardRecorder)
    module = torch.nn.Linear(1, 1)
    recorder.modules, recorder.calls = [module], {id(module): calls}
    return recorder


def test_the_decoder_starts_at_the_prefill_that_made_its_cache():
    cache = DynamicCache()
    dropped, prefill = {"decoder_input_ids": torch.zeros(8, 3)}, {"decoder_input_ids": torch.ones(8, 3)}
    steps = [{"decoder_input_ids": torch.zeros(8, 1), "cache": cache} for _ in range(2)]
    _, calls = _recorder([dropped, prefill, *steps]).decoder()
    assert calls[0] is prefill and len(calls) == 3
    _, calls = _recorder([{"input_ids": torch.zeros(2, 3), "cache": cache}, *steps]).decoder()
    assert len(calls) == 3  # the usual case: the prefill got the cache
    assert _recorder([prefill, prefill]).decoder() is None  # no cache anywhere: nothing to decode


def test_no_cache_inputs_join_codebook_ids_along_the_steps():
    prefill = {"decoder_input_ids": torch.zeros(2, 3, 9, dtype=torch.long), "attention_mask": torch.ones(2, 5)}
    steps = [{"decoder_input_ids": torch.full((2, 1, 9), i, dtype=torch.long), "attention_mask": torch.ones(2, 5)}
             for i in (1, 2)]
    full = no_cache_inputs(torch.nn.Linear(1, 1), [prefill, *steps])
    assert tuple(full["decoder_input_ids"].shape) == (2, 5, 9)
    assert full["decoder_input_ids"][:, 3:, 0].tolist() == [[1, 2], [1, 2]]
    assert full["use_cache"] is False


def test_no_cache_inputs_join_per_position_media_every_call_carries():
    calls = [{"input_ids": torch.zeros(2, 3, dtype=torch.long), "encoder_inputs_embeds": torch.zeros(2, 12, 4)}]
    calls += [{"input_ids": torch.ones(2, 1, dtype=torch.long), "encoder_inputs_embeds": torch.ones(2, 4, 4)}] * 2
    full = no_cache_inputs(torch.nn.Linear(1, 1), calls)
    assert tuple(full["encoder_inputs_embeds"].shape) == (2, 20, 4)  # 4 rows per token, 5 tokens
    only_prefill = [calls[0], {"input_ids": torch.ones(2, 1, dtype=torch.long)}]
    pixels = no_cache_inputs(torch.nn.Linear(1, 1), [{**calls[0], "pixel_values": torch.zeros(2, 3, 8)},
                                                     *only_prefill[1:]])
    assert tuple(pixels["pixel_values"].shape) == (2, 3, 8)  # media only the prefill had stay the prefill's


def test_logits_of_reads_a_scoring_models_logits_per_modality():
    out = {"loss": None, "logits_per_speech": torch.ones(2, 2), "logits_per_text": torch.zeros(2, 2)}
    assert torch.equal(logits_of(out), torch.ones(2, 2))
    assert torch.equal(logits_of({"logits": torch.zeros(1), "logits_per_text": torch.ones(1)}), torch.zeros(1))


def test_a_harness_gap_is_an_error_not_a_failure(monkeypatch):
    def gap(case):
        raise HarnessGap("the decoder cannot reproduce this model's generate state")

    monkeypatch.setitem(registry.CHECKS, "legacy_cache", dataclasses.replace(registry.get("legacy_cache"), run=gap))
    outcome = run_check("legacy_cache", SimpleNamespace(seed=0))
    assert outcome.verdict == "error"
    assert outcome.reason == ("the check could not be set up for this model: the decoder cannot reproduce this "
                              "model's generate state")


def test_generate_kwargs_reach_a_prepare_that_forwards_kwargs_as_generate_passes_them():
    def named(input_ids, next_sequence_length=None): ...

    def forwards(input_ids, **kwargs): ...

    def closed(input_ids, cache=None): ...

    from transformers import GenerationMixin

    base_params = inspect.signature(GenerationMixin.prepare_inputs_for_generation).parameters
    for fn, expected in ((named, True), (forwards, "next_sequence_length" in base_params), (closed, False)):
        assert takes_generate_kwarg(inspect.signature(fn).parameters, "next_sequence_length") is expected


def test_generate_based_checks_get_the_samples_generate_inputs():
    ids = torch.zeros(2, 3, dtype=torch.long)
    plain = Sample(inputs={"input_ids": ids, "audio": torch.zeros(2, 3)}, strategy="s")
    longer = Sample(inputs=dict(plain.inputs), strategy="s", media_keys=("audio",),
                    generate_inputs={"input_ids": ids, "audio": torch.zeros(2, 9)})
    case = Case(info=None, tiny=None, sample=plain)
    assert tuple(case.generate_inputs()["audio"].shape) == (2, 3)  # none set: the forward's inputs
    case = Case(info=None, tiny=None, sample=longer)
    assert tuple(case.generate_inputs()["audio"].shape) == (2, 9)
    assert tuple(case.inputs()["audio"].shape) == (2, 3)
    assert longer.perturbed().generate_inputs is longer.generate_inputs


class _FakeGenerator(torch.nn.Module):
    """generate() hands its forward a DynamicCache, or a StaticCache where asked and `honours_static`."""

    def __init__(self, honours_static: bool):
        super().__init__()
        self.honours_static = honours_static

    def forward(self, cache=None):
        return None

    def generate(self, cache_implementation=None, **kwargs):
        from transformers.cache_utils import StaticCache

        static = cache_implementation == "static" and self.honours_static
        self(cache=StaticCache.__new__(StaticCache) if static else DynamicCache())
        return SimpleNamespace(sequences=torch.zeros(1, 3, dtype=torch.long), scores=(torch.zeros(1, 4),))


def test_static_cache_records_a_generate_that_ignores_the_static_cache():
    from conformance.checks.static_cache import compare_static_dynamic
    from conformance.tolerances import tolerance

    EAGER, CONTENTS = tolerance("float32", "eager"), tolerance("float32", "cache_contents")

    ignored = compare_static_dynamic(lambda: _FakeGenerator(False), {}, 1, EAGER, CONTENTS)
    assert ignored["static_cache_ignored"] == "DynamicCache"
    assert "static_cache_ignored" not in compare_static_dynamic(lambda: _FakeGenerator(True), {}, 1, EAGER, CONTENTS)
