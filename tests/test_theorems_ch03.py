"""Chapter 3 checks: MHA as a convex ensemble (C1) and the bias-variance-covariance decomposition (C2)."""

import numpy as np
import pytest

from mhacore.theorems import ch03_bvc


def test_design_moments_on_a_known_case():
    # two replicates, two heads, one query: centred values +-1 for head 0, +-2 (same sign) for head 1
    predictions = np.array([[[1.0], [2.0]], [[-1.0], [-2.0]]])  # (R=2, H=2, m=1)
    var_terms, cov_terms = ch03_bvc.design_moments(predictions)
    # ddof=1 variances are 2 and 8 (mean 5); covariance 4
    assert var_terms.mean() == pytest.approx(5.0)
    assert cov_terms.mean() == pytest.approx(4.0)


def test_random_heads_identical_and_distinct():
    same = ch03_bvc.random_heads(3, 4, 2, rng=0, identical=True)
    assert np.allclose(same.w_key.numpy()[0], same.w_key.numpy()[2])
    distinct = ch03_bvc.random_heads(3, 4, 2, rng=0)
    assert not np.allclose(distinct.w_key.numpy()[0], distinct.w_key.numpy()[1])
