"""A property of the `static_cache` contract over prompt shapes, on representative models."""

import os

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.tolerances import tolerance

# Models the property runs on: small, text-only prompts accepted, cheap generate. Each test runs for those of them
# the run selects (--models), and is not collected when it selects none (`conformance_models`).
PROPERTY_MODELS = ("LlavaForConditionalGeneration", "PaliGemmaForConditionalGeneration")
pytestmark = pytest.mark.conformance_models(*PROPERTY_MODELS)


def _prompts(case, lengths: list[int], seed: int) -> dict:
    """A left-padded batch of text-only prompts of the given lengths."""
    from conformance.cases.samples import left_pad, pad_id, text_tokens

    gen = torch.Generator().manual_seed(seed)
    rows = [text_tokens(case.tiny.config, n, gen) for n in lengths]
    ids, mask = left_pad(rows, pad_id(case.tiny.config))
    return {"input_ids": ids.to(case.device), "attention_mask": mask.to(case.device)}


@pytest.mark.conformance_check("static_cache")
@settings(max_examples=4, deadline=None, derandomize=bool(os.environ.get("CI")),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(lengths=st.lists(st.integers(1, 12), min_size=1, max_size=3), new_tokens=st.integers(1, 12),
       seed=st.integers(0, 2**16))
def test_static_cache_property(property_model, request, lengths, new_tokens, seed):
    """Static and dynamic caches agree for any batch size, prompt lengths and token count."""
    from conformance.run.session import session_of

    session = session_of(request.config)
    _unmeasured_on_4x(property_model)
    case = session.case_for(property_model)
    compare_on(case, _prompts(case, lengths, seed), new_tokens)


def compare_on(case, inputs: dict, new_tokens: int) -> dict:
    """`static_cache`'s comparison of `case` on `inputs`, the scores and the cache contents each judged at the
    run's dtype (`tolerances`: the case's backend, and the ``cache_contents`` kind)."""
    from conformance.checks.static_cache import compare_static_dynamic

    dtype = str(case.dtype)
    return compare_static_dynamic(case.fresh_model, inputs, new_tokens, tolerance(dtype, case.backend),
                                  tolerance(dtype, "cache_contents"))


# A transformers bug, not a harness gap (issue 15; research/truth): the mask shortcut assumes causal modules.
STATIC_PREFILL_BUGS = {
    "PaliGemmaForConditionalGeneration": (
        "transformers: PaliGemmaConfig sets text_config.use_bidirectional_attention=True (GemmaAttention.is_causal "
        "False), masking_utils._ignore_causal_mask_sdpa drops the mask of an unpadded prompt without token types "
        "and sdpa_attention_forward then attends every static slot, the unwritten zeros included"),
}
TOKEN_TYPES = ("token_type_ids", "mm_token_type_ids")


def _unmeasured_on_4x(property_model: str) -> None:
    """On transformers 4.x the bug above also breaks static vs dynamic decoding of text-only prompts (0.0045 on
    4.57.6) and its strict expectation is not measured there: skip, naming the version, rather than guess."""
    import transformers

    if property_model in STATIC_PREFILL_BUGS and transformers.__version__.startswith("4."):
        pytest.skip(f"transformers {transformers.__version__}: {property_model}'s static cache is broken by the "
                    "bidirectional-mask bug listed in STATIC_PREFILL_BUGS; its 4.x expectation is not measured yet")


@pytest.mark.conformance_check("static_cache")
@pytest.mark.parametrize("spare_slots", [2, 26])
def test_static_prefill_equals_a_forward_without_cache(property_model, spare_slots, request):
    """A prefill into an empty StaticCache with spare slots (the export pattern: the sample's second prompt
    alone, unpadded, without token types) gives the logits of a forward without cache."""
    from conformance.checks.common.cache import cache_kwarg, static_cache
    from conformance.checks.common.compare import closeness, logits_of
    from conformance.checks.common.generation import single_prompt
    from conformance.run.session import session_of

    session = session_of(request.config)
    _unmeasured_on_4x(property_model)
    if property_model in STATIC_PREFILL_BUGS:
        request.applymarker(pytest.mark.xfail(strict=True, reason=STATIC_PREFILL_BUGS[property_model]))
    case = session.case_for(property_model)
    inputs = {k: v for k, v in single_prompt(case.inputs()).items() if k not in TOKEN_TYPES}
    model = case.fresh_model()
    cache = static_cache(model, inputs["input_ids"].shape[1] + spare_slots, batch_size=1)
    with torch.no_grad():
        cached = logits_of(model(**inputs, **{cache_kwarg(model): cache}, use_cache=True))
        plain = logits_of(case.fresh_model()(**inputs, use_cache=False))
    found = closeness(cached, plain, tolerance(str(case.dtype), "eager"))
    assert found.within, f"static prefill differs from a forward without cache by {found.beyond()}"
