"""Chapter 8 checks: one principle, three ensembles (claim C7)."""

import numpy as np
import pytest
import sympy as sp

from mhacore.exercises import EXERCISES, check
from mhacore.theorems import ch08_ensembles as ch08, run


def test_forest_prediction_is_the_mean_of_its_trees():
    # independent oracle: scikit-learn's own forest.predict against the average of estimators_
    model = ch08.forest_model(3)
    queries = model.sample_design(np.random.default_rng(0), (4,))
    trees, forest = ch08.forest_tree_predictions(model, 30, queries, 3, rng=1, n_trees=5)
    assert trees.shape == (3, 5, 4) and forest.shape == (3, 4)
    np.testing.assert_allclose(trees.mean(axis=1), forest, rtol=1e-12, atol=1e-12)
    again, _ = ch08.forest_tree_predictions(model, 30, queries, 3, rng=1, n_trees=5)
    assert np.array_equal(trees, again)  # seeded


def test_breiman_terms_on_a_known_case():
    # two replicates, two members, one query: centred +-1 and +-2 (same sign)
    members = np.array([[[1.0], [2.0]], [[-1.0], [-2.0]]])  # (R=2, B=2, m=1)
    v, c = ch08.breiman_terms(members)
    assert v.mean() == pytest.approx(5.0) and c.mean() == pytest.approx(4.0)


def test_variance_terms_is_the_unbiased_variance():
    x = np.random.default_rng(3).standard_normal((50, 2))
    assert ch08.variance_terms(x).mean() == pytest.approx(x.var(axis=0, ddof=1).mean(), rel=1e-12)


def test_breiman_identity_on_sample_moments():
    # for exchangeable moments pooled over members, Var(mean) = c + (v - c)/B exactly (ddof=1 both)
    members = np.random.default_rng(4).standard_normal((40, 6, 3)) + np.random.default_rng(5).standard_normal((40, 1, 3))
    v, c = ch08.breiman_terms(members)
    measured = ch08.variance_terms(members.mean(axis=1)).mean()
    assert measured == pytest.approx(c.mean() + (v.mean() - c.mean()) / 6, rel=1e-12)


@pytest.mark.parametrize("theorem_id", ["forest-breiman-variance", "colony-breiman-variance"])
def test_checks_hold_at_book_scale(theorem_id):
    result = run(theorem_id, scale="book")
    assert result.passed, result.summary()
    assert result.tolerance == pytest.approx(4 * result.standard_error)


def test_colony_check_detects_a_wrong_correlation():
    # the same Monte Carlo against the formula with rho from independent scouts must fail
    result = run("colony-breiman-variance", scale="book")
    wrong = 1.25 / 10  # sigma^2 / N, ignoring recruitment
    assert abs(result.estimate - wrong) > 4 * result.standard_error


def test_ex_8_1_by_monte_carlo():
    # K leaders, recruited scouts follow one uniformly at random; no re-assessment noise
    rng = np.random.default_rng(8)
    p, k, r = 0.8, 3, 400_000
    leaders = rng.standard_normal((r, k))
    follow = rng.integers(k, size=(r, 2))
    recruited = rng.random((r, 2)) < p
    own = rng.standard_normal((r, 2))
    a = np.where(recruited, np.take_along_axis(leaders, follow, axis=1), own)  # (R, 2)
    prod = a[:, 0] * a[:, 1]
    assert abs(prod.mean() - p**2 / k) <= 4 * prod.std(ddof=1) / np.sqrt(r)
    assert check("ex-8-1", sp.Symbol("p") ** 2 / sp.Symbol("K")).correct
    assert check("ex-8-1", "p/K").correct is False


def test_ex_8_2_by_the_closed_form_inequality():
    pi, s, s_d = 0.6, 1.0, 0.5
    rho = pi**2 * s**2 / (s**2 + s_d**2)
    n = int(np.ceil((1 - rho) / (0.1 * rho)))
    assert n == EXERCISES["ex-8-2"].reference
    assert check("ex-8-2", n).correct and check("ex-8-2", n - 1).correct is False
