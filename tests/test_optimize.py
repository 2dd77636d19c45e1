"""Tests of mhacore.optimize: Stiefel geometry, the losses and the Riemannian optimiser."""

import numpy as np
import pytest
import torch

import mhacore
from mhacore import optimize as mo


def test_retract_gives_orthonormal_gram_schmidt_basis():
    rng = np.random.default_rng(0)
    a = torch.from_numpy(rng.normal(size=(3, 7, 2)))
    q = mo.retract(a)  # (3, 7, 2)
    eye = torch.eye(2, dtype=q.dtype).expand(3, 2, 2)
    torch.testing.assert_close(q.transpose(1, 2) @ q, eye, rtol=0, atol=1e-12)
    # same column space, positive R diagonal (the unique Gram-Schmidt basis)
    r = q.transpose(1, 2) @ a
    assert bool((torch.diagonal(r, dim1=1, dim2=2) > 0).all())
    torch.testing.assert_close(q @ r, a, rtol=0, atol=1e-12)


def test_tangent_projection_is_tangent_and_idempotent():
    rng = np.random.default_rng(1)
    u = mo.retract(torch.from_numpy(rng.normal(size=(2, 6, 3))))
    g = torch.from_numpy(rng.normal(size=(2, 6, 3)))
    xi = mo.tangent_projection(u, g)
    skew = u.transpose(1, 2) @ xi  # tangent vectors at U have skew-symmetric UᵀΞ
    torch.testing.assert_close(skew, -skew.transpose(1, 2), rtol=0, atol=1e-12)
    torch.testing.assert_close(mo.tangent_projection(u, xi), xi, rtol=0, atol=1e-12)


def test_subspace_initialisers():
    u = mo.random_subspaces(5, 2, 6, rng=3)
    assert u.shape == (5, 6, 2)
    np.testing.assert_allclose(np.einsum("hpi,hpj->hij", u, u), np.broadcast_to(np.eye(2), (5, 2, 2)), atol=1e-12)
    assert mhacore.head_diversity_index(mo.identical_subspaces(3, 2, 6, rng=3)) == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_array_equal(mo.random_subspaces(2, 1, 3, rng=9), mo.random_subspaces(2, 1, 3, rng=9))
    with pytest.raises(ValueError, match="d_head must be <= p = 3; got 4"):
        mo.random_subspaces(2, 4, 3)
    with pytest.raises(ValueError, match="jitter must be a finite number >= 0; got -1"):
        mo.identical_subspaces(2, 1, 3, jitter=-1)


def test_design_loss_matches_design_decomposition():
    """The torch loss equals mhacore.design_decomposition of MultiHeadNW weights (claim C2)."""
    model = mhacore.DataModel(f=lambda x: np.sin(x).sum(-1), p=4, sigma=0.7, design="normal")
    loss = mo.design_mse_loss(model, n=30, m=5, n_designs=2, scale=1.3, rng=4)
    bases = mo.random_subspaces(3, 2, 4, rng=5)
    value, terms = loss(torch.from_numpy(bases))
    # rebuild the same designs from the same seed, independently
    rng = np.random.default_rng(4)
    keys, queries = model.sample_design(rng, (2, 30)), model.sample_design(rng, (2, 5))
    mha = mhacore.MultiHeadNW(1.3 * bases, 1.3 * bases)
    parts = [mhacore.design_decomposition(mha.weights(queries[b], keys[b]), model.f(keys[b]),
                                          model.f(queries[b]), sigma=0.7) for b in range(2)]
    for name in ("mse", "bias_sq", "variance", "covariance"):
        assert terms[name] == pytest.approx(np.mean([getattr(d, name) for d in parts]), rel=1e-12, abs=1e-15)
    assert float(value) == pytest.approx(terms["mse"], rel=1e-15)


def test_monte_carlo_loss_is_unbiased_for_flat_heads():
    """Zero projections give the sample mean: MSE = σ²/n when f = 0 (exact expectation)."""
    model = mhacore.DataModel(f=lambda x: np.zeros(x.shape[:-1]), p=2, sigma=1.0)
    loss = mo.monte_carlo_mse_loss(model, n=5, m=1, n_replicates=4000, scale=1e-9, rng=6)
    value, _ = loss(torch.from_numpy(mo.random_subspaces(2, 1, 2, rng=0)))
    se = np.sqrt(2 / 4000) / 5  # squared mean of N(0, 1/5): variance 2/25 per replicate
    assert abs(float(value) - 0.2) <= 4 * se


@pytest.mark.parametrize("shape", [(4, 2, 8), (3, 2, 4), (5, 3, 7)])
def test_overlap_model_optimum_reaches_frame_bound(shape):
    """Claim C4 in the C3 model: the minimiser attains the feasible maximum HDI."""
    start = mo.identical_subspaces(*shape, jitter=0.05, rng=0)
    result = mo.optimize_subspaces(start, mo.overlap_model_loss(variance=1.0, rho0=0.1),
                                   n_steps=400, learning_rate=1.0, record_every=100)
    bound = mhacore.max_feasible_hdi(*shape)
    assert result.history["hdi"][0] < 0.05
    assert result.history["hdi"][-1] == pytest.approx(bound, abs=1e-4)
    assert np.all(np.diff(result.history["loss"]) <= 1e-12)  # descent


def test_design_loss_optimisation_decorrelates_noise_heads():
    model = mhacore.DataModel(f=lambda x: np.zeros(x.shape[:-1]), p=6, sigma=1.0, design="normal")
    loss = mo.design_mse_loss(model, n=80, m=16, n_designs=4, rng=7)
    result = mo.optimize_subspaces(mo.identical_subspaces(3, 2, 6, jitter=0.05, rng=8), loss,
                                   n_steps=60, learning_rate=5.0, record_every=20)
    h = result.history
    assert h["hdi"][-1] > h["hdi"][0] + 0.3
    assert h["mse"][-1] < h["mse"][0]
    assert h["mean_correlation"][-1] < h["mean_correlation"][0]
    assert set(h) >= {"step", "hdi", "loss", "gradient_norm", "bias_sq", "variance", "covariance"}


def test_optimizer_validation():
    loss = mo.overlap_model_loss()
    with pytest.raises(ValueError, match="initial_bases must have shape"):
        mo.optimize_subspaces(np.zeros((1, 3, 1)), loss)
    with pytest.raises(ValueError, match="learning_rate must be a finite number > 0; got 0.0"):
        mo.optimize_subspaces(mo.random_subspaces(2, 1, 3, rng=0), loss, learning_rate=0.0)
    with pytest.raises(TypeError, match="loss must be callable"):
        mo.optimize_subspaces(mo.random_subspaces(2, 1, 3, rng=0), 3)
    with pytest.raises(ValueError, match="rho0 must be a number in"):
        mo.overlap_model_loss(rho0=1.5)
    with pytest.raises(TypeError, match="model must be a mhacore.DataModel"):
        mo.design_mse_loss(object(), 3, 2)
