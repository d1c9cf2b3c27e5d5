"""The generation columns judge a token divergence as static_cache does: a near tie split by rounding (the logits
agree within the dtype's tolerance up to that step) is not a wrong program; a divergence beyond it is."""

from __future__ import annotations

import pytest
import torch

from conformance.checks.common.served import _agree, first_differing_token, is_tie
from conformance.tolerances import tolerance

pytestmark = pytest.mark.meta

BF16 = tolerance("bfloat16", "eager")


def steps(*rows):
    return [torch.tensor([row]) for row in rows]


def test_the_first_differing_token_is_over_the_batch():
    wanted = torch.tensor([[1, 2, 3], [4, 5, 6]])
    assert first_differing_token(wanted, wanted.clone()) is None
    assert first_differing_token(wanted, torch.tensor([[1, 2, 3], [4, 9, 6]])) == 1


def test_a_tie_within_the_dtypes_tolerance_agrees_and_a_real_divergence_does_not():
    expected = torch.tensor([[7, 3, 3]])
    reference = steps([0.0, 1.0], [2.0, 2.0], [0.5, 0.5])
    tied = steps([0.0, 1.0], [2.0, 2.001], [0.5, 0.5])  # step 1: within bf16's tolerance, argmax flipped
    assert is_tie(1, tied, reference, BF16) and _agree(torch.tensor([[7, 4, 3]]), tied, expected, reference, BF16)
    apart = steps([0.0, 1.0], [2.0, 3.0], [0.5, 0.5])  # step 1: a full logit apart
    assert not is_tie(1, apart, reference, BF16)
    assert not _agree(torch.tensor([[7, 4, 3]]), apart, expected, reference, BF16)
    earlier = steps([0.0, 2.0], [2.0, 2.001], [0.5, 0.5])  # a step before the divergence already differs
    assert not is_tie(1, earlier, reference, BF16)
    assert _agree(expected, reference, expected, reference, BF16)
