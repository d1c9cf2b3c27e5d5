"""The pooled_patches strategy: token blocks index every patch of every crop exactly once."""

import torch

from conformance.cases.strategies.pooled_patches import POOL, pooling_indices


def test_pooling_indices_cover_each_patch_once():
    side, crops = 4, 2
    index = pooling_indices(side, crops)
    assert index.shape == (crops * (side // POOL) ** 2, POOL * POOL)
    assert sorted(index.flatten().tolist()) == list(range(crops * side * side))


def test_a_token_pools_a_square_block():
    block = pooling_indices(4, 1)[0].tolist()
    assert block == [0, 1, 4, 5]
    assert torch.equal(pooling_indices(4, 2)[4], pooling_indices(4, 1)[0] + 16)
