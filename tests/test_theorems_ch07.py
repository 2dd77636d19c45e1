"""Chapter 7 checks: structured weights (C6). Helpers against independent oracles."""

import numpy as np
import pytest
import sympy as sp

from mhacore import theorems
from mhacore.decomposition import design_decomposition
from mhacore.theorems import ch07_weights


def test_closed_forms_against_sympy():
    r = sp.Rational(3, 10)
    for n_heads in range(1, 12):
        direct = sum(r ** (2 * k) for k in range(n_heads)) / sum(r**k for k in range(n_heads)) ** 2
        assert ch07_weights.geometric_closed_form(n_heads, 0.3) == pytest.approx(float(direct), rel=1e-13)
        fib = [sp.fibonacci(h) for h in range(1, n_heads + 1)]
        exact = sum(f**2 for f in fib) / sp.Integer(sum(fib)) ** 2
        assert ch07_weights.fibonacci_closed_form(n_heads) == pytest.approx(float(exact), rel=1e-13)
    assert ch07_weights.geometric_closed_form(7, 1) == pytest.approx(1 / 7)
    assert ch07_weights.fibonacci_closed_form(60) == pytest.approx(np.sqrt(5) - 2, rel=1e-12)


def test_equicorrelated_errors_have_the_stated_covariance():
    errors = ch07_weights.equicorrelated_errors(4, 0.4, 2.0, 200_000, rng=1)  # (R, H)
    cov = np.cov(errors.T)
    off = ~np.eye(4, dtype=bool)
    # Gaussian SEs: Var(e_h^2) = 2V^2 and Var(e_h e_g) = V^2 + c^2 with V = 2, c = rho V = 0.8
    se_var = np.sqrt(2 * 2.0**2 / 200_000)
    se_cov = np.sqrt((2.0**2 + 0.8**2) / 200_000)
    assert np.abs(np.diag(cov) - 2.0).max() < 4 * se_var
    assert np.abs(cov[off] - 0.8).max() < 4 * se_cov


def test_paired_difference_on_a_known_case():
    predictions = np.array([[[1.0], [3.0]], [[-1.0], [1.0]]])  # (R=2, H=2, m=1), target 0
    diff = ch07_weights.paired_mse_difference(predictions, np.zeros(1), np.array([1.0, 0.0]), np.array([0.5, 0.5]))
    np.testing.assert_allclose(diff, [1.0 - 4.0, 1.0 - 0.0])


def test_exchangeability_deviations_against_a_loop():
    rng = np.random.default_rng(11)
    errors = rng.standard_normal((7, 3, 5))  # (R, H, m)
    out = ch07_weights.exchangeability_deviations(errors)
    n_rep = errors.shape[0]
    t = np.array([[[np.mean(errors[r, h] * errors[r, g]) for g in range(3)] for h in range(3)]
                  for r in range(n_rep)])  # (R, H, H), by loops
    np.testing.assert_allclose(out["second_moment"], t.mean(axis=0), rtol=1e-13)
    for h in range(3):
        diff = [t[r, h, h] - np.mean([t[r, g, g] for g in range(3)]) for r in range(n_rep)]
        assert out["diag_dev"][h] == pytest.approx(np.mean(diff), abs=1e-13)
        assert out["diag_se"][h] == pytest.approx(np.std(diff, ddof=1) / np.sqrt(n_rep), rel=1e-12)
    pairs = [(0, 1), (0, 2), (1, 2)]
    np.testing.assert_array_equal(out["pairs"], pairs)
    for k, (h, g) in enumerate(pairs):
        diff = [t[r, h, g] - np.mean([t[r, a, b] for a, b in pairs]) for r in range(n_rep)]
        assert out["off_dev"][k] == pytest.approx(np.mean(diff), abs=1e-13)
        assert out["off_se"][k] == pytest.approx(np.std(diff, ddof=1) / np.sqrt(n_rep), rel=1e-12)
    with pytest.raises(ValueError, match=r"errors must have shape \(R, H, m\) with R >= 2"):
        ch07_weights.exchangeability_deviations(errors[:1])


def test_exchangeability_deviations_pass_exchangeable_and_flag_unequal_heads():
    base = ch07_weights.equicorrelated_errors(4, 0.3, 1.0, 40_000, rng=2)  # (R, H), exchangeable
    errors = np.stack([base, -base], axis=2)  # (R, H, m=2)
    out = ch07_weights.exchangeability_deviations(errors)
    assert np.all(np.abs(out["diag_dev"]) <= 4 * out["diag_se"])
    assert np.all(np.abs(out["off_dev"]) <= 4 * out["off_se"])
    scaled = errors * np.array([1.3, 1.0, 1.0, 1.0])[None, :, None]  # head 0 noisier: not exchangeable
    bad = ch07_weights.exchangeability_deviations(scaled)
    assert bad["diag_dev"][0] > 4 * bad["diag_se"][0]
    assert np.any(np.abs(bad["off_dev"]) > 4 * bad["off_se"])


def test_quality_ordered_heads_are_ordered_by_mse():
    model = ch07_weights.heterogeneous_model(5)
    mha = ch07_weights.quality_ordered_heads(5)
    rng = np.random.default_rng(3)
    design = model.sample_design(rng, (300,))
    queries = 0.5 * rng.standard_normal((40, model.p))
    weights = mha.weights(queries, design)  # (H, m, n)
    head_mse = [design_decomposition(weights[h:h + 1], model.f(design), model.f(queries), model.sigma).mse
                for h in range(5)]
    assert np.all(np.diff(head_mse) > 0)
    np.testing.assert_allclose(np.linalg.norm(mha.w_key.numpy()[:, :, 0], axis=1), 1.5)


@pytest.mark.parametrize("theorem_id", ["structured-weights-closed-forms", "equicorrelated-weighted-variance",
                                        "structured-weights-heterogeneous"])
def test_checks_hold_and_are_reproducible(theorem_id):
    first = theorems.run(theorem_id, scale="book", seed=5)
    second = theorems.run(theorem_id, scale="book", seed=5)
    assert first.passed, first.summary()
    assert first.estimate == second.estimate


def test_heterogeneous_gain_is_significant(book_result):
    result = book_result("structured-weights-heterogeneous")
    assert result.estimate > 4 * result.standard_error
    assert result.details["fibonacci_gain"] > 4 * result.details["fibonacci_gain_se"]


def test_chapter_7_exercise_references():
    from exercise_answers import BY_LABEL
    from mhacore.exercises import check
    from mhacore.weighting import fibonacci_weights, sum_of_squares

    r = sp.Symbol("r", positive=True)
    closed = (1 - r) * (1 + r**3) / ((1 + r) * (1 - r**3))
    assert sp.simplify(sp.sympify(BY_LABEL["ex-7-1"].reference, locals={"r": r}) - closed) == 0
    assert check("ex-7-1", (1 - r + r**2) / (1 + r + r**2)).correct
    assert check("ex-7-1", 1 / (1 + r + r**2)).correct is False
    ratio = (0.2 + 0.8 * sum_of_squares(fibonacci_weights(16))) / (0.2 + 0.8 / 16)
    assert BY_LABEL["ex-7-2"].reference == pytest.approx(ratio, rel=1e-12)
    assert check("ex-7-2", ratio).correct


@pytest.mark.parametrize("perturbation", [dict(noise_scale=1.1), dict(shared_noise=0.1)])
def test_heterogeneous_check_sees_a_wrong_noise_model(perturbation):
    """The referee's perturbations: the paired difference alone passes them (it is dominated
    by the deterministic bias difference); each weighting's own MSE does not."""
    from mhacore.theorems.ch07_weights import _check_heterogeneous

    m = _check_heterogeneous("book", "cpu", theorems.DEFAULT_SEED, **perturbation)
    assert abs(m.estimate - m.prediction) <= 4 * m.standard_error  # the difference cannot see it
    assert not all(m.conditions.values())
    plain = _check_heterogeneous("book", "cpu", theorems.DEFAULT_SEED)
    assert all(plain.conditions.values())
