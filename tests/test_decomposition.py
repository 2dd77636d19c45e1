"""Tests for mhacore.decomposition: bias–variance–covariance (claim C2)."""

import numpy as np
import pytest

from mhacore import (
    DataModel,
    MultiHeadNW,
    bias_variance_covariance,
    design_covariance,
    design_decomposition,
    simulate_heads,
)


def test_identity_holds_to_rounding():
    rng = np.random.default_rng(0)
    predictions = rng.normal(size=(50, 4, 7)) + rng.normal(size=(1, 4, 7))
    target = rng.normal(size=7)
    alpha = rng.dirichlet(np.ones(4))
    d = bias_variance_covariance(predictions, target, alpha)
    np.testing.assert_allclose(d.mse_per_query, d.bias_sq_per_query + d.variance_per_query + d.covariance_per_query, rtol=1e-12, atol=0)
    assert d.mse == pytest.approx(d.bias_sq + d.variance + d.covariance, rel=1e-12)
    # the ensemble's own ddof=0 variance is variance + covariance
    ensemble = np.einsum("h,rhm->rm", alpha, predictions)
    np.testing.assert_allclose(ensemble.var(axis=0), d.variance_per_query + d.covariance_per_query, rtol=1e-12)
    np.testing.assert_allclose(d.covariance_matrix[:, :, 0], np.cov(predictions[:, :, 0].T, ddof=0), rtol=1e-12)
    assert d.covariance_matrix.shape == (4, 4, 7) and d.head_bias.shape == (4, 7) and d.n_replicates == 50


def test_mean_correlation_and_breiman_form():
    # equicorrelated heads: V[ρ + (1-ρ)/H] for uniform weights (C2, Breiman's form)
    rng = np.random.default_rng(1)
    rho, n_heads, R = 0.4, 5, 200_000
    shared, own = rng.normal(size=(R, 1, 1)), rng.normal(size=(R, n_heads, 1))
    predictions = np.sqrt(rho) * shared + np.sqrt(1 - rho) * own
    d = bias_variance_covariance(predictions, np.zeros(1))
    assert d.mean_correlation == pytest.approx(rho, abs=4 * (1 - rho**2) / np.sqrt(R))
    ensemble = predictions.mean(axis=1)[:, 0]
    se = np.std(ensemble**2) / np.sqrt(R)
    assert abs(d.mse - (rho + (1 - rho) / n_heads)) <= 4 * se


def test_sample_mean_case_known_bias_and_variance():
    # Flat projections make every head the sample mean ȳ (C2 with w_i = 1/n). With
    # x ~ U[-1, 1], f(x) = x, σ = 0.5 at query 0.5: bias = E f(x) - f(0.5) = -0.5,
    # Var ȳ = (Var f(x) + σ²)/n = (1/3 + 1/4)/n, heads perfectly correlated.
    n, R, sigma = 10, 20_000, 0.5
    model = DataModel(f=lambda x: x[..., 0], p=1, sigma=sigma)
    mha = MultiHeadNW(np.zeros((3, 1, 1)), np.zeros((3, 1, 1)))
    predictions = simulate_heads(model, mha, n, np.array([[0.5]]), R, rng=12345)
    d = bias_variance_covariance(predictions, np.array([0.5]))
    ensemble = predictions.mean(axis=1)[:, 0]  # (R,)
    variance = (1 / 3 + sigma**2) / n
    assert abs(d.bias_per_query[0] - (-0.5)) <= 4 * np.sqrt(variance / R)
    assert abs((d.variance + d.covariance) - variance) <= 4 * np.std((ensemble - ensemble.mean()) ** 2) / np.sqrt(R)
    assert d.mean_correlation == pytest.approx(1.0)
    assert d.variance == pytest.approx((d.variance + d.covariance) / 3, rel=1e-9)


def test_design_decomposition_matches_fixed_design_monte_carlo():
    rng = np.random.default_rng(2)
    model = DataModel(f=lambda x: np.sin(2 * x[..., 0]) + x[..., 1], p=2, sigma=0.3)
    mha = MultiHeadNW(rng.normal(size=(3, 2, 1)), rng.normal(size=(3, 2, 1)), alpha=[0.5, 0.3, 0.2])
    keys = model.sample_design(rng, (40,))
    query = np.array([[0.2, -0.1]])
    R = 20_000
    predictions = simulate_heads(model, mha, 40, query, R, rng=3, fixed_design=keys)
    mc = bias_variance_covariance(predictions, model.f(query), mha.alpha)
    weights = mha.weights(query, keys)  # (H, 1, n)
    theory = design_decomposition(weights, model.f(keys), model.f(query), model.sigma, mha.alpha)
    ensemble = np.einsum("h,rh->r", mha.alpha, predictions[:, :, 0])
    var = theory.variance + theory.covariance
    assert abs(mc.bias_per_query[0] - theory.bias_per_query[0]) <= 4 * np.sqrt(var / R)
    assert abs(ensemble.var() - var) <= 4 * np.std((ensemble - ensemble.mean()) ** 2) / np.sqrt(R)
    # C2: softmax heads sharing responses are always positively correlated
    cov = design_covariance(weights, model.sigma)[:, :, 0]
    assert (cov > 0).all()
    np.testing.assert_allclose(np.diag(cov), model.sigma**2 * (weights[:, 0] ** 2).sum(-1), rtol=1e-12)
    w_bar = np.einsum("h,hn->n", mha.alpha, weights[:, 0])
    assert var == pytest.approx(model.sigma**2 * (w_bar**2).sum(), rel=1e-12)  # pooled smoother
    assert var >= model.sigma**2 / 40


def test_result_is_frozen():
    d = bias_variance_covariance(np.ones((2, 1, 1)), np.ones(1))
    with pytest.raises(AttributeError):
        d.mse = 1.0
    assert np.isnan(d.mean_correlation)  # zero variance, H = 1
