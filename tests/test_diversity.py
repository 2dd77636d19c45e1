"""Tests for mhacore.diversity: principal angles, cross-Gram, HDI (claim C3)."""

import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st
from scipy.linalg import hadamard, subspace_angles

from mhacore import cross_gram, head_diversity_index, max_feasible_hdi, principal_angles


def test_principal_angles_match_scipy():
    # Provenance: scipy.linalg.subspace_angles (descending; ours ascending).
    rng = np.random.default_rng(0)
    for k1, k2 in [(3, 5), (5, 3), (4, 4), (1, 2)]:
        a, b = rng.normal(size=(9, k1)), rng.normal(size=(9, k2))
        np.testing.assert_allclose(principal_angles(a, b), np.sort(subspace_angles(a, b)), rtol=1e-12, atol=1e-14)


def test_hadamard_columns_are_orthogonal_and_identical_spaces_give_zero():
    h = hadamard(8).astype(float)
    np.testing.assert_allclose(principal_angles(h[:, :3], h[:, 3:6]), np.full(3, np.pi / 2), rtol=1e-14)
    a = np.random.default_rng(1).normal(size=(8, 3))
    np.testing.assert_allclose(principal_angles(a, a @ np.array([[2.0, 1, 0], [0, 1, 0], [1, 0, 3]])), 0, atol=1e-14)


def test_nearly_aligned_subspaces_keep_relative_accuracy():
    # arccos of the cosine returns 0 for 1e-10 rad; the sine branch recovers it
    eps = 1e-10
    a = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    b = np.array([[1.0, 0.0], [0.0, np.cos(eps)], [0.0, np.sin(eps)]])
    angles = principal_angles(a, b)
    np.testing.assert_allclose(angles, [0.0, eps], rtol=1e-6, atol=1e-20)
    np.testing.assert_allclose(angles[1], subspace_angles(a, b)[0], rtol=1e-6)


def test_torch_input_gives_torch_output():
    angles = principal_angles(torch.eye(3)[:, :1], torch.eye(3)[:, 1:])
    assert isinstance(angles, torch.Tensor)
    torch.testing.assert_close(angles, torch.tensor([np.pi / 2], dtype=torch.float64))


@given(st.integers(0, 2**32 - 1), st.integers(1, 3), st.integers(1, 3))
def test_angles_are_symmetric_and_in_range(seed, k1, k2):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(5, k1)), rng.normal(size=(5, k2))
    angles = principal_angles(a, b)
    assert angles.shape == (min(k1, k2),)
    assert (np.diff(angles) >= 0).all() and (angles >= 0).all() and (angles <= np.pi / 2 + 1e-15).all()
    np.testing.assert_allclose(angles, principal_angles(b, a), atol=1e-13)


def test_cross_gram_blocks():
    rng = np.random.default_rng(2)
    w_key = rng.normal(size=(3, 7, 2))
    gram = cross_gram(w_key)
    assert gram.shape == (3, 3, 2, 2)
    for h in range(3):
        np.testing.assert_allclose(gram[h, h], np.eye(2), atol=1e-14)
        for g in range(3):
            np.testing.assert_allclose(gram[h, g], gram[g, h].T, atol=1e-14)
            cosines = np.linalg.svd(gram[h, g], compute_uv=False)
            np.testing.assert_allclose(np.sort(np.arccos(np.clip(cosines, -1, 1))), np.sort(subspace_angles(w_key[h], w_key[g])), atol=1e-7)


def test_hdi_extremes():
    w = np.random.default_rng(3).normal(size=(6, 2))
    assert head_diversity_index(np.stack([w, w, w])) == pytest.approx(0.0, abs=1e-14)
    assert head_diversity_index(hadamard(8).astype(float).T.reshape(4, 2, 8).transpose(0, 2, 1)) == pytest.approx(1.0, abs=1e-14)


def test_hdi_is_mean_squared_cosine_and_basis_invariant():
    rng = np.random.default_rng(4)
    w_key = rng.normal(size=(4, 9, 3))
    # Provenance: HDI = 1 - mean over ordered pairs h != h' of Σ cos²θ / d_head, angles from SciPy
    total = sum(
        (np.cos(subspace_angles(w_key[h], w_key[g])) ** 2).sum() for h in range(4) for g in range(4) if h != g
    )
    hdi = head_diversity_index(w_key)
    assert hdi == pytest.approx(1 - total / (4 * 3 * 3), abs=1e-12)
    changed = np.einsum("hpk,hkj->hpj", w_key, rng.normal(size=(4, 3, 3)))  # new basis per head
    assert head_diversity_index(changed) == pytest.approx(hdi, abs=1e-12)
    assert 0 <= hdi <= max_feasible_hdi(4, 3, 9)


def test_frame_potential_bound_is_attained_by_a_tight_frame():
    # three lines in R^2 at 60 degrees: every cos² = 1/4, HDI = 1 - 6/4/6 = 0.75 = the bound
    angles = np.array([0, np.pi / 3, 2 * np.pi / 3])
    w_key = np.stack([np.cos(angles), np.sin(angles)], axis=1)[:, :, None]  # (3, 2, 1)
    assert head_diversity_index(w_key) == pytest.approx(0.75, abs=1e-14)
    assert max_feasible_hdi(3, 1, 2) == 0.75
    assert max_feasible_hdi(12, 32, 384) == 1.0
    assert max_feasible_hdi(2, 3, 3) == 0.0


@given(st.integers(0, 2**32 - 1), st.integers(2, 5), st.integers(1, 3), st.integers(3, 8))
def test_random_heads_respect_the_bound(seed, n_heads, d_head, p):
    d_head = min(d_head, p)
    w_key = np.random.default_rng(seed).normal(size=(n_heads, p, d_head))
    assert 0 <= head_diversity_index(w_key) <= max_feasible_hdi(n_heads, d_head, p) + 1e-12
