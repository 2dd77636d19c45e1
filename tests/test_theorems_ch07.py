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
    se = 2.0 * np.sqrt(2 / 200_000)  # rough SE of a variance estimate; covariances have a smaller one
    assert np.abs(np.diag(cov) - 2.0).max() < 4 * se
    assert np.abs(cov[off] - 0.8).max() < 4 * se


def test_paired_difference_on_a_known_case():
    predictions = np.array([[[1.0], [3.0]], [[-1.0], [1.0]]])  # (R=2, H=2, m=1), target 0
    diff = ch07_weights.paired_mse_difference(predictions, np.zeros(1), np.array([1.0, 0.0]), np.array([0.5, 0.5]))
    np.testing.assert_allclose(diff, [1.0 - 4.0, 1.0 - 0.0])


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


def test_heterogeneous_gain_is_significant():
    result = theorems.run("structured-weights-heterogeneous", scale="book")
    assert result.estimate > 4 * result.standard_error
    assert result.details["fibonacci_gain"] > 4 * result.details["fibonacci_gain_se"]


def test_chapter_7_exercise_references():
    from mhacore.exercises import EXERCISES, check
    from mhacore.weighting import fibonacci_weights, sum_of_squares

    r = sp.Symbol("r", positive=True)
    closed = (1 - r) * (1 + r**3) / ((1 + r) * (1 - r**3))
    assert sp.simplify(sp.sympify(EXERCISES["ex-7-1"].reference, locals={"r": r}) - closed) == 0
    assert check("ex-7-1", (1 - r + r**2) / (1 + r + r**2)).correct
    assert check("ex-7-1", 1 / (1 + r + r**2)).correct is False
    ratio = (0.2 + 0.8 * sum_of_squares(fibonacci_weights(16))) / (0.2 + 0.8 / 16)
    assert EXERCISES["ex-7-2"].reference == pytest.approx(ratio, rel=1e-12)
    assert check("ex-7-2", ratio).correct
