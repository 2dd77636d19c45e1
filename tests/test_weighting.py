"""mhacore.weighting: structured weights against closed forms (SymPy), the simplex QP against
scipy.optimize (SLSQP) and a grid search, and argument validation."""

import numpy as np
import pytest
import scipy.optimize
import sympy as sp

from mhacore import weighting as W


@pytest.mark.parametrize("n_heads", [1, 2, 5, 12, 30])
def test_weights_lie_on_the_simplex(n_heads):
    for alpha in (W.uniform_weights(n_heads), W.geometric_weights(n_heads, 0.7),
                  W.geometric_weights(n_heads, 1.3), W.fibonacci_weights(n_heads)):
        assert alpha.shape == (n_heads,)
        assert (alpha >= 0).all() and alpha.sum() == pytest.approx(1.0, abs=1e-14)


def test_fibonacci_weights_against_sympy():
    for n_heads in range(1, 25):
        exact = [sp.Rational(sp.fibonacci(h), sp.fibonacci(n_heads + 2) - 1) for h in range(1, n_heads + 1)]
        np.testing.assert_allclose(W.fibonacci_weights(n_heads), [float(e) for e in exact], rtol=1e-15)
        sum_sq = sp.Rational(sp.fibonacci(n_heads) * sp.fibonacci(n_heads + 1), (sp.fibonacci(n_heads + 2) - 1) ** 2)
        assert W.sum_of_squares(W.fibonacci_weights(n_heads)) == pytest.approx(float(sum_sq), rel=1e-13)


@pytest.mark.parametrize("ratio", [0.2, 0.5, 0.9, 1.0, 2.0])
@pytest.mark.parametrize("n_heads", [1, 3, 8])
def test_geometric_sum_of_squares_closed_form(ratio, n_heads):
    r = sp.nsimplify(ratio)
    if ratio == 1.0:
        expected = sp.Rational(1, n_heads)
    else:
        expected = (1 - r) / (1 + r) * (1 + r**n_heads) / (1 - r**n_heads)
    alpha = W.geometric_weights(n_heads, ratio)
    assert W.sum_of_squares(alpha) == pytest.approx(float(expected), rel=1e-13)
    assert W.effective_heads(alpha) == pytest.approx(float(1 / expected), rel=1e-13)


def test_geometric_weights_do_not_overflow():
    alpha = W.geometric_weights(2000, 10.0)
    assert np.isfinite(alpha).all() and alpha[-1] == pytest.approx(0.9, rel=1e-12)


def test_second_moment_and_mse_against_decomposition_terms():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 3, 5))
    cov = np.einsum("hkm,gkm->hgm", a, a)  # (H, H, m), PSD per query
    bias = rng.standard_normal((3, 5))
    alpha = rng.dirichlet(np.ones(3))
    second = W.error_second_moment(cov, bias)
    direct = np.mean([(alpha @ bias[:, j]) ** 2 + alpha @ cov[:, :, j] @ alpha for j in range(5)])
    assert W.ensemble_mse(alpha, second) == pytest.approx(direct, rel=1e-12)


def _slsqp(second):
    n_heads = len(second)
    res = scipy.optimize.minimize(lambda a: a @ second @ a, np.full(n_heads, 1 / n_heads), jac=lambda a: 2 * second @ a,
                                  bounds=[(0, 1)] * n_heads, method="SLSQP",
                                  constraints=[{"type": "eq", "fun": lambda a: a.sum() - 1}],
                                  options=dict(ftol=1e-15, maxiter=1000))
    return res.x


@pytest.mark.parametrize("seed", range(6))
def test_optimal_weights_match_slsqp(seed):
    rng = np.random.default_rng(seed)
    n_heads = 2 + seed
    a = rng.standard_normal((n_heads, n_heads + 2))
    bias = rng.standard_normal(n_heads)
    second = a @ a.T / n_heads + np.outer(bias, bias) + np.diag(rng.uniform(0.1, 2.0, n_heads))
    alpha = W.optimal_weights(second)
    reference = _slsqp(second)
    assert (alpha >= 0).all() and alpha.sum() == pytest.approx(1.0)
    assert W.ensemble_mse(alpha, second) <= W.ensemble_mse(reference, second) + 1e-10
    # pin on SLSQP's accuracy, not ours: its iterates stop about 1e-7 from the optimum in the weights
    np.testing.assert_allclose(alpha, reference, atol=1e-5)


def test_optimal_weights_beat_a_simplex_grid():
    second = np.array([[1.0, 0.9, 0.2], [0.9, 1.2, 0.1], [0.2, 0.1, 3.0]])
    alpha = W.optimal_weights(second)
    best = W.ensemble_mse(alpha, second)
    grid = np.linspace(0, 1, 201)
    points = np.array([[u, v, 1 - u - v] for u in grid for v in grid if u + v <= 1])  # (N, 3)
    values = np.einsum("nh,hg,ng->n", points, second, points)
    assert best <= min(values) + 1e-12
    # the optimum is interior (M alpha ∝ 1), so at a simplex point alpha + delta the excess MSE is
    # exactly delta' M delta; the grid point nearest alpha bounds how close the grid can get
    assert (alpha > 0).all() and np.ptp(second @ alpha) < 1e-12
    step = grid[1] - grid[0]
    nearest = np.round(alpha[:2] / step) * step
    delta = np.append(nearest, 1 - nearest.sum()) - alpha  # (3,)
    assert min(values) - best <= delta @ second @ delta + 1e-12


def test_unconstrained_weights_are_inverse_covariance_weights():
    cov = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.3], [0.0, 0.3, 4.0]])
    inv = sp.Matrix([[sp.nsimplify(x) for x in row] for row in cov.tolist()]).inv() * sp.ones(3, 1)
    expected = np.array([float(x) for x in inv / sum(inv)])
    np.testing.assert_allclose(W.optimal_weights(cov, nonnegative=False), expected, rtol=1e-12)


def test_equicorrelated_optimum_is_uniform():
    cov = 0.7 * np.eye(5) + 0.3 * np.ones((5, 5))
    np.testing.assert_allclose(W.optimal_weights(cov), np.full(5, 0.2), atol=1e-12)


def test_uniform_is_optimal_iff_row_sums_are_equal():
    # not equicorrelated (variances 2, 1.5, 1.5; covariances 0.5, 0.5, 1), yet every row sums to 3
    second = np.array([[2.0, 0.5, 0.5], [0.5, 1.5, 1.0], [0.5, 1.0, 1.5]])
    np.testing.assert_allclose(W.optimal_weights(second), np.full(3, 1 / 3), atol=1e-12)
    np.testing.assert_allclose(W.optimal_weights(second, nonnegative=False), np.full(3, 1 / 3), atol=1e-12)
    unequal = second + np.diag([0.0, 0.0, 0.3])  # row sums 3, 3, 3.3
    assert np.abs(W.optimal_weights(unequal) - 1 / 3).max() > 1e-3
    assert W.ensemble_mse(W.optimal_weights(unequal), unequal) < W.ensemble_mse(W.uniform_weights(3), unequal)


def test_active_constraint_gives_zero_weight():
    # head 2 is as noisy as head 1 and perfectly redundant with it plus extra noise: zero weight
    second = np.array([[1.0, 1.0], [1.0, 2.0]])
    np.testing.assert_allclose(W.optimal_weights(second), [1.0, 0.0], atol=1e-12)
    unconstrained = W.optimal_weights(second, nonnegative=False)
    np.testing.assert_allclose(unconstrained, [1.0, 0.0], atol=1e-12)


@pytest.mark.parametrize("call, error, match", [
    (lambda: W.uniform_weights(0), ValueError, "n_heads must be an integer >= 1; got 0"),
    (lambda: W.uniform_weights(2.0), TypeError, "n_heads must be an integer"),
    (lambda: W.geometric_weights(3, 0.0), ValueError, "ratio must be a finite number > 0; got 0.0"),
    (lambda: W.geometric_weights(3, float("inf")), ValueError, "ratio must be a finite number > 0"),
    (lambda: W.geometric_weights(3, "1"), TypeError, "ratio must be a finite number > 0; got str"),
    (lambda: W.fibonacci_weights(-1), ValueError, "n_heads must be an integer >= 1"),
    (lambda: W.sum_of_squares([0.5, 0.6]), ValueError, "alpha must lie in the simplex"),
    (lambda: W.sum_of_squares([[0.5, 0.5]]), ValueError, r"alpha must have shape \(H,\)"),
    (lambda: W.ensemble_mse([0.5, 0.5], np.eye(3)), ValueError, r"second_moment must have shape \(2, 2\)"),
    (lambda: W.ensemble_mse([0.5, 0.5], [[1.0, 0.2], [0.0, 1.0]]), ValueError, "second_moment must be symmetric"),
    (lambda: W.optimal_weights([[1.0, 2.0], [2.0, 1.0]]), ValueError, "second_moment must be positive definite"),
    (lambda: W.optimal_weights(np.ones(3)), ValueError, r"second_moment must have shape \(H, H\)"),
    (lambda: W.error_second_moment(np.eye(2), bias=[1.0, 2.0, 3.0]), ValueError, "bias must have shape"),
    (lambda: W.error_second_moment(np.ones(3)), ValueError, "covariance must have shape"),
    (lambda: W.error_second_moment([[np.nan, 0], [0, 1]]), ValueError, "must contain only finite values"),
])
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()
