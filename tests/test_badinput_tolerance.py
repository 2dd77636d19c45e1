"""Bad-input battery, class 1: tolerances follow the input's dtype (issue 12).

Weights that sum to 1 within the rounding of their own dtype are accepted everywhere a
simplex is checked; weights that miss by more are rejected with a message that prints
enough digits to show the miss.
"""

import numpy as np
import pytest
import torch

from mhacore import (MultiHeadNW, bias_variance_covariance, design_decomposition,
                     effective_heads, ensemble_mse, optimal_weights, sum_of_squares)


def _float32_simplices():
    """float32 weights whose float32 sum is not exactly 1 (checked below)."""
    rng = np.random.default_rng(12)
    raw = [np.full(10, 0.1), np.full(3, 1 / 3), np.array([0.7, 0.2, 0.1]),
           np.full(7, 1 / 7), rng.dirichlet(np.ones(6))]
    out = []
    for a in raw:
        a32 = (a / a.sum()).astype(np.float32)
        out.append(a32)
    return out


F32 = _float32_simplices()
F32_OFF = [a for a in F32 if float(np.sum(a, dtype=np.float64)) != 1.0]


def test_the_float32_weights_really_miss_one_in_float64():
    assert len(F32_OFF) >= 3


def _predictions(n_heads):
    rng = np.random.default_rng(1)
    return rng.normal(size=(4, n_heads, 3))  # (R, H, m)


CALLS = {
    "MultiHeadNW": lambda a: MultiHeadNW(np.ones((len(a), 2, 1)), np.ones((len(a), 2, 1)),
                                         alpha=a)(np.zeros((2, 2)), np.ones((3, 2)), np.arange(3.0)),
    "bias_variance_covariance": lambda a: bias_variance_covariance(_predictions(a.size),
                                                                   np.zeros(3), a).mse,
    "design_decomposition": lambda a: design_decomposition(np.full((a.size, 1, 2), 0.5),
                                                           np.ones(2), np.ones(1), 1.0, a).mse,
    "ensemble_mse": lambda a: ensemble_mse(a, np.eye(len(a))),
    "sum_of_squares": lambda a: sum_of_squares(a),
    "effective_heads": lambda a: effective_heads(a),
}


@pytest.mark.parametrize("index", range(5))
@pytest.mark.parametrize("name", sorted(CALLS))
def test_float32_simplex_accepted(name, index):
    alpha = F32[index]
    result = np.asarray(CALLS[name](alpha))
    assert np.isfinite(result).all()


@pytest.mark.parametrize("index", range(5))
@pytest.mark.parametrize("name", ["MultiHeadNW", "ensemble_mse", "sum_of_squares"])
def test_float32_torch_simplex_accepted(name, index):
    alpha = torch.from_numpy(F32[index])
    result = CALLS[name](alpha) if name != "MultiHeadNW" else MultiHeadNW(
        np.ones((alpha.numel(), 2, 1)), np.ones((alpha.numel(), 2, 1)), alpha=alpha)(
        np.zeros((2, 2)), np.ones((3, 2)), np.arange(3.0))
    assert np.isfinite(np.asarray(result)).all()


def test_float32_results_match_float64_reference():
    alpha = F32[0]
    exact = alpha.astype(np.float64) / alpha.astype(np.float64).sum()
    assert sum_of_squares(alpha) == pytest.approx(float(exact @ exact), rel=1e-6)


@pytest.mark.parametrize("alpha, pattern", [
    (np.array([0.5, 0.5 + 1.2e-7]), r"got sum 1\.00000012"),
    (np.array([0.5, 0.5 + 1e-6]), r"got sum 1\.000001"),
    (np.array([0.5, 0.5 - 1e-6]), r"got sum 0\.999999"),
    (np.array([0.5, 0.5 + 1e-6], dtype=np.float32), r"got sum 1\.000001"),
    (np.array([0.5, 0.51], dtype=np.float32), r"got sum 1\.01"),
    (torch.tensor([0.5, 0.5 + 1e-5], dtype=torch.float32), r"got sum 1\.00001"),
    (np.array([0.25] * 4 + [1e-6]), r"got sum 1\.000001"),
])
@pytest.mark.parametrize("call", ["ensemble_mse", "sum_of_squares", "MultiHeadNW"])
def test_sums_that_miss_are_rejected_with_enough_digits(alpha, pattern, call):
    with pytest.raises(ValueError, match=r"alpha must lie in the simplex.*" + pattern):
        CALLS[call](alpha)


@pytest.mark.parametrize("alpha", [
    np.array([1.0 + 1e-12, 0.0]),  # float64 rounding
    np.array([1 / 3] * 3),
    np.full(10, 0.1),
])
def test_float64_rounding_accepted(alpha):
    assert sum_of_squares(alpha) > 0


def test_tolerance_shown_in_message():
    with pytest.raises(ValueError, match=r"tolerance [0-9.e+-]+ for float32"):
        sum_of_squares(np.array([0.5, 0.51], dtype=np.float32))


def _float32_symmetric(n):
    rng = np.random.default_rng(3)
    a = rng.normal(size=(n, 2 * n)).astype(np.float32)
    m = a @ a.T + np.eye(n, dtype=np.float32)
    m[0, 1] = np.nextafter(m[0, 1], np.float32(np.inf))  # one ulp of float32 asymmetry
    return m


@pytest.mark.parametrize("n", [2, 3, 5])
def test_float32_matrix_symmetric_to_its_rounding_is_accepted(n):
    m = _float32_symmetric(n)
    assert np.isfinite(ensemble_mse(np.full(n, 1 / n), m))
    w = optimal_weights(m)
    assert w.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("n", [2, 3])
def test_float64_matrix_asymmetric_beyond_rounding_is_rejected(n):
    m = np.eye(n)
    m[0, 1] = 1e-6
    with pytest.raises(ValueError, match=r"second_moment must be symmetric; got largest asymmetry 1e-06"):
        ensemble_mse(np.full(n, 1 / n), m)
