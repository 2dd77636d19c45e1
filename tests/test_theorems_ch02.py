"""Chapter 2 checks: one head is NW; Gaussian NW under equal key norms."""

import math

import numpy as np
import pytest

from mhacore.nw import nw_estimate
from mhacore.theorems import ch02_one_head


def test_head_data_equal_norms():
    _, keys, values = ch02_one_head.head_data(30, 5, 3, equal_norms=True, rng=0, radius=1.5)
    np.testing.assert_allclose(np.linalg.norm(keys, axis=1), 1.5, rtol=1e-14)
    assert values.shape == (30,)


def test_reference_implementations_agree_with_a_hand_computed_case():
    # two keys, one query, <q,k> = (0, log 3) with temperature 1 -> weights (1/4, 3/4)
    queries, keys, values = np.array([[1.0]]), np.array([[0.0], [math.log(3)]]), np.array([4.0, 8.0])
    expected = 0.25 * 4 + 0.75 * 8
    assert ch02_one_head.explicit_softmax_nw(queries, keys, values, 1.0)[0] == pytest.approx(expected, abs=1e-14)
    assert ch02_one_head.sdpa_head(queries, keys, values, 1.0)[0] == pytest.approx(expected, abs=1e-14)
    # torch's own temperature is sqrt(embed_dim) = 1 for d = 1
    assert ch02_one_head.torch_mha_head(queries, keys, values)[0] == pytest.approx(expected, abs=1e-14)


def test_kernelreg_matches_gaussian_nw():
    queries, keys, values = ch02_one_head.head_data(40, 6, 2, equal_norms=False, rng=1)
    ours = nw_estimate(queries, keys, values, kernel="gaussian", bandwidth=0.7)
    np.testing.assert_allclose(ch02_one_head.kernelreg_head(queries, keys, values, 0.7), ours, atol=1e-12)
