"""Batched head diversity (mhacore.diversity.head_diversity_indices, random_subspace_hdis)."""

import numpy as np
import pytest

from mhacore.diversity import head_diversity_index, head_diversity_indices, random_subspace_hdis
from mhacore.optimize import random_subspaces


@pytest.mark.parametrize("n_heads, p, d_head", [(3, 10, 2), (5, 6, 3), (4, 8, 2)])
def test_batched_hdi_matches_the_loop(n_heads, p, d_head):
    """Both Gram forms (p < H d_head, p > H d_head, p = H d_head) against cross_gram."""
    w = np.random.default_rng(1).standard_normal((7, n_heads, p, d_head))
    loop = [head_diversity_index(x) for x in w]
    np.testing.assert_allclose(head_diversity_indices(w, chunk_size=3), loop, rtol=0,
                               atol=1e-12)


def test_random_subspace_hdis_draw_what_random_subspaces_draws():
    gen = np.random.default_rng(4)
    loop = [head_diversity_index(random_subspaces(4, 3, 20, rng=gen)) for _ in range(9)]
    np.testing.assert_allclose(random_subspace_hdis(9, 4, 3, 20, rng=4), loop, rtol=0,
                               atol=1e-12)


@pytest.mark.parametrize("w, message", [
    (np.zeros((2, 3, 4)), r"w_keys must have at least 4 dimensions; got shape \(2, 3, 4\)"),
    (np.ones((1, 1, 4, 2)), r"n_heads >= 2 heads"),
    (np.ones((1, 2, 2, 3)), r"d_head <= p; got d_head=3, p=2"),
    (np.stack([np.eye(4)[:, :2], np.ones((4, 2))])[None],
     r"w_keys\[0, 1\] must have full column rank 2"),
])
def test_validation(w, message):
    with pytest.raises(ValueError, match=message):
        head_diversity_indices(w)
