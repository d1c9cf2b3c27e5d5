"""A property of the `static_cache` contract over prompt shapes, on representative models."""

import os

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# Models the property runs on: small, text-only prompts accepted, cheap generate.
PROPERTY_MODELS = ("LlavaForConditionalGeneration", "PaliGemmaForConditionalGeneration")


def _prompts(case, lengths: list[int], seed: int) -> dict:
    """A left-padded batch of text-only prompts of the given lengths."""
    from conformance.build.samples import left_pad, pad_id, text_tokens

    gen = torch.Generator().manual_seed(seed)
    rows = [text_tokens(case.tiny.config, n, gen) for n in lengths]
    ids, mask = left_pad(rows, pad_id(case.tiny.config))
    return {"input_ids": ids.to(case.device), "attention_mask": mask.to(case.device)}


@pytest.mark.conformance_check("static_cache")
@pytest.mark.parametrize("property_model", PROPERTY_MODELS)
@settings(max_examples=4, deadline=None, derandomize=bool(os.environ.get("CI")),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(lengths=st.lists(st.integers(1, 12), min_size=1, max_size=3), new_tokens=st.integers(1, 12),
       seed=st.integers(0, 2**16))
def test_static_cache_property(property_model, request, lengths, new_tokens, seed):
    """Static and dynamic caches agree for any batch size, prompt lengths and token count."""
    from conformance.checks.static_cache import compare_static_dynamic
    from conformance.run.session import session_of

    session = session_of(request.config)
    if property_model not in session.selected_models():
        pytest.skip(f"{property_model} not selected by --models")
    case = session.case_for(property_model)
    compare_static_dynamic(case.fresh_model, _prompts(case, lengths, seed), new_tokens, case.tol())
