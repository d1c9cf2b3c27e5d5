"""`legacy_cache` on small synthetic cached decoders whose answer is known (no tiny VLM)."""

from __future__ import annotations

import pytest
import torch

import conformance.checks.legacy_cache  # noqa: F401  (registers the check)
from conformance.checks.common.outcome import run_check
from conformance.meta.test_checks_export import case_of


class CachedDecoder(torch.nn.Module):
    """Two layers of single-head attention over a transformers Cache; `on_tuple` says what a raw tuple does."""

    on_tuple = "reject_clear"

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(16, 8)
        self.kv = torch.nn.ModuleList(torch.nn.Linear(8, 16) for _ in range(2))
        self.head = torch.nn.Linear(8, 16)

    def forward(self, input_ids, attention_mask=None, cache=None, use_cache=False):
        from transformers.cache_utils import DynamicCache

        if isinstance(cache, tuple):
            if self.on_tuple == "reject_clear":
                raise ValueError("`cache` must be a Cache instance, got a tuple: use DynamicCache(tuples)")
            if self.on_tuple == "reject_unclear":
                cache.get_seq_length()  # AttributeError, as models without a check do
            cache = DynamicCache(cache) if self.on_tuple == "convert" else None  # "ignore": silently drop it
        if use_cache and cache is None:
            cache = DynamicCache()
        hidden = self.embed(input_ids)
        for i, layer in enumerate(self.kv):
            key, value = layer(hidden).unsqueeze(1).chunk(2, dim=-1)
            if cache is not None:
                key, value = cache.update(key, value, i)
            scores = hidden.unsqueeze(1) @ key.transpose(-1, -2)
            hidden = hidden + (scores.softmax(-1) @ value).squeeze(1)
        return {"logits": self.head(hidden), "cache": cache}


def decoder_that(on_tuple: str):
    return type(f"Decoder_{on_tuple}", (CachedDecoder,), {"on_tuple": on_tuple})


@pytest.mark.parametrize("on_tuple,raw", [("reject_clear", "rejected_clear"), ("reject_unclear", "rejected_unclear"),
                                          ("convert", "accepted_equal")])
def test_cache_with_a_sound_legacy_path_passes(on_tuple, raw):
    outcome = run_check("legacy_cache", case_of(decoder_that(on_tuple)))
    assert outcome.verdict == "pass", outcome.reason
    assert outcome.metrics["raw_tuple"] == raw
    assert outcome.metrics["max_abs_diff"] == 0.0
    assert outcome.metrics["layers"] == 2


def test_raw_tuple_silently_accepted_with_wrong_results_fails():
    outcome = run_check("legacy_cache", case_of(decoder_that("ignore")))
    assert outcome.verdict == "fail"
    assert outcome.metrics["raw_tuple"] == "accepted_wrong"
    assert "accepted silently" in outcome.reason


class LosesTheConvertedCache(CachedDecoder):
    """Continues correctly from its own cache but drops a cache rebuilt from tuples."""

    def forward(self, input_ids, attention_mask=None, cache=None, use_cache=False):
        if cache is not None and not isinstance(cache, tuple) and not getattr(cache, "own", False):
            cache = None
        output = super().forward(input_ids, attention_mask, cache, use_cache)
        if output["cache"] is not None:
            output["cache"].own = True
        return output


def test_cache_that_continues_wrong_from_converted_tuples_fails():
    outcome = run_check("legacy_cache", case_of(LosesTheConvertedCache))
    assert outcome.verdict == "fail"
    assert outcome.reason.startswith("decode step 1 from DynamicCache")


class NoCache(torch.nn.Module):
    def forward(self, input_ids, attention_mask=None):
        return {"logits": input_ids.float()}


def test_model_without_a_cache_is_skipped():
    outcome = run_check("legacy_cache", case_of(NoCache))
    assert outcome.verdict == "skip"
    assert "takes no cache" in outcome.reason
