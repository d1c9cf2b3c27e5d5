"""static_cache on a one-layer LlamaForCausalLM and subclasses whose answer is known."""

from __future__ import annotations

import torch
from transformers import LlamaForCausalLM
from transformers.cache_utils import StaticCache

from conformance.checks.common.outcome import run_check
from conformance.checks.static_cache import score_diff
from conformance.meta.test_checks_compile import llama_factory, prompt_inputs, synthetic_case

FAVOURED = 7  # the token a misbehaving static cache pushes


def _static_decode_step(kwargs: dict) -> bool:
    cache = kwargs.get("cache", kwargs.get("past_key_values"))
    ids = kwargs.get("input_ids")
    return isinstance(cache, StaticCache) and ids is not None and ids.shape[1] == 1


class DivergingStaticLlama(LlamaForCausalLM):
    """Under a StaticCache, decode steps strongly favour one token: a cache that changes results."""

    def forward(self, *args, **kwargs):
        out = super().forward(*args, **kwargs)
        if _static_decode_step(kwargs):
            out.logits[..., FAVOURED] += 100.0
        return out


class TiedLlama(LlamaForCausalLM):
    """All logits equal; under a StaticCache one token gets 1e-7 more: greedy diverges on a tie."""

    def forward(self, *args, **kwargs):
        out = super().forward(*args, **kwargs)
        out.logits = torch.zeros_like(out.logits)
        if _static_decode_step(kwargs):
            out.logits[..., FAVOURED] += 1e-7
        return out


def test_static_cache_passes_on_llama():
    outcome = run_check("static_cache", synthetic_case(llama_factory(), prompt_inputs()))
    assert outcome.verdict == "pass", outcome.reason
    assert outcome.metrics["new_tokens"] >= 10
    assert "tie_at_step" not in outcome.metrics


def test_static_cache_fails_when_the_cache_changes_tokens():
    outcome = run_check("static_cache", synthetic_case(llama_factory(DivergingStaticLlama), prompt_inputs()))
    assert outcome.verdict == "fail"
    assert "diverges from the dynamic cache at new token 1" in outcome.reason
    assert f"static [{FAVOURED}, {FAVOURED}]" in outcome.reason


def test_static_cache_records_a_tie_instead_of_failing():
    outcome = run_check("static_cache", synthetic_case(llama_factory(TiedLlama), prompt_inputs()))
    assert outcome.verdict == "pass", outcome.reason
    assert outcome.metrics["tie_at_step"] == 1
    assert 0 < outcome.metrics["max_abs_diff"] <= 1e-5


def test_static_cache_is_not_applicable_without_a_cache():
    class NoCache(torch.nn.Module):
        def forward(self, input_ids):
            return input_ids.float()

        def generate(self, **kwargs):
            raise AssertionError("never called")

    outcome = run_check("static_cache", synthetic_case(NoCache, prompt_inputs()))
    assert outcome.verdict == "skip"
    assert "no KV cache" in outcome.reason


def test_score_diff_treats_equal_infinities_as_equal():
    a = torch.tensor([[float("-inf"), 1.0, 2.0]])
    b = torch.tensor([[float("-inf"), 1.0, 2.5]])
    assert score_diff(a, b) == 0.5


def test_divergence_of_sequences_with_codebooks_is_the_first_differing_step():
    """A model that emits several codebooks a step (Csm: sequences of (batch, tokens, codebooks)) diverges at
    the first step whose tokens differ in any row or codebook (was: a harness error in half precision, where
    such a run first diverged)."""
    from types import SimpleNamespace

    from conformance.checks.static_cache import _differing_rows, _first_divergence

    prompt = torch.zeros(2, 3, 4, dtype=torch.long)
    new = torch.arange(2 * 5 * 4).reshape(2, 5, 4)
    other = new.clone()
    other[1, 2, 3] += 1
    run = lambda tokens: SimpleNamespace(sequences=torch.cat([prompt, tokens], dim=1), scores=[None] * 5)  # noqa: E731
    assert _first_divergence(run(new), run(other)) == 2
    assert _first_divergence(run(new), run(new.clone())) == 5
    assert _differing_rows(new[:, 2], other[:, 2]).nonzero().flatten().tolist() == [1]
    flat = SimpleNamespace(sequences=torch.tensor([[1, 2, 3], [1, 2, 4]]), scores=[None] * 2)
    assert _first_divergence(flat, SimpleNamespace(sequences=torch.tensor([[1, 2, 3], [1, 5, 4]]),
                                                   scores=[None] * 2)) == 0
