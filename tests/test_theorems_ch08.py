"""Chapter 8 checks: one principle, three ensembles (claim C7)."""

import numpy as np
import pytest
import sympy as sp

from exercise_answers import BY_LABEL
from mhacore.exercises import check
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


def _members(rng, r, sds, shared=1.0):
    """(R, B, 1) members: a shared N(0, shared^2) component plus private N(0, sd_b^2) noise."""
    rng = np.random.default_rng(rng)
    sds = np.asarray(sds, dtype=float)
    return (shared * rng.standard_normal((r, 1, 1)) + sds[None, :, None] * rng.standard_normal((r, len(sds), 1)))


def test_subset_comparison_passes_for_exchangeable_members():
    sds = np.ones(8)
    est, pred, se = ch08.subset_comparison(_members(1, 20_000, sds), 4)
    assert abs(est - pred) <= 4 * se
    assert pred == pytest.approx(1.0 + 1.0 / 4, abs=4 * se)  # closed form: shared 1 + private 1/k


def test_subset_comparison_detects_non_exchangeable_members():
    # first half quiet, second half noisy: the pooled moments describe no subset of the first k
    sds = np.r_[np.full(4, 0.5), np.full(4, 2.0)]
    members = _members(3, 20_000, sds)
    est, pred, se = ch08.subset_comparison(members, 4)
    assert abs(est - pred) > 4 * se
    # ... while the full average (k = B) agrees for any members: pooled moments give 1'S1/B^2
    est_b, pred_b, se_b = ch08.subset_comparison(members, 8)
    assert abs(est_b - pred_b) <= 4 * se_b


def test_subset_comparison_rejects_bad_k():
    x = np.zeros((3, 4, 1))
    with pytest.raises(ValueError, match=r"k must be an integer in \[1, B=4\]; got 5"):
        ch08.subset_comparison(x, 5)


def test_forest_check_detects_halves_that_differ_at_book_scale():
    # the violation the chapter names: half the trees bagged, half with max_features=0.2,
    # all on the same training sets; the book-scale check must fail (z = 8.4 measured)
    from mhacore.theorems import DEFAULT_SEED
    from mhacore.theorems.ch08_ensembles import _check_forest

    m = _check_forest("book", "cpu", DEFAULT_SEED, max_features=(1.0, 0.2))
    assert abs(m.estimate - m.prediction) > 4 * m.standard_error


def test_forest_groups_must_divide_the_trees():
    model = ch08.forest_model()
    with pytest.raises(ValueError, match="length divides n_trees = 5"):
        ch08.forest_tree_predictions(model, 20, np.zeros((1, 5)), 1, rng=0, n_trees=5,
                                     max_features=(1.0, 0.2))


def test_ratio_se_matches_the_spread_of_repeated_estimates():
    # independent oracle: the standard deviation of rho over 400 independent data sets
    sds = np.ones(4)
    rhos, ses = [], []
    for seed in range(400):
        v, c = ch08.breiman_terms(_members(seed, 200, sds))
        rhos.append(c.mean() / v.mean())
        ses.append(ch08.ratio_se(c, v))
    spread, mean_se = np.std(rhos, ddof=1), np.mean(ses)
    # the sample SD of 400 values has relative SE about 1/sqrt(2 * 399)
    assert abs(mean_se / spread - 1) <= 4 / np.sqrt(2 * 399)


def test_forest_check_details(book_result):
    result = book_result("forest-breiman-variance")
    d = result.details
    assert d["k"] == d["n_trees"] // 2
    assert d["predict_is_tree_mean"] <= 1e-12  # forest.predict is the mean of estimators_
    # k = B on the same replicates: the pooled form is 1'S1/B^2 exactly, up to rounding
    assert abs(d["full_estimate"] - d["full_prediction"]) <= 1e-12


@pytest.mark.parametrize("theorem_id", ["forest-breiman-variance", "colony-breiman-variance"])
def test_checks_hold_at_book_scale(theorem_id, book_result):
    result = book_result(theorem_id)
    assert result.passed, result.summary()
    assert result.tolerance == pytest.approx(4 * result.standard_error)


def test_colony_check_detects_a_wrong_correlation(book_result):
    # the same Monte Carlo against the formula with rho from independent scouts must fail
    result = book_result("colony-breiman-variance")
    wrong = 1.25 / 10  # sigma^2 / N, ignoring recruitment
    assert abs(result.estimate - wrong) > 4 * result.standard_error


def test_ex_8_1_by_monte_carlo():  # p is the recruitment probability pi here
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
    assert n == BY_LABEL["ex-8-2"].reference
    assert check("ex-8-2", n).correct and check("ex-8-2", n - 1).correct is False


# --- cross-system predictions of rho (claim C7 a) ---------------------------------------------

NEW_CHECKS = {"forest-rho-max-features": "fails", "heads-rho-weight-overlap": "holds",
              "heads-rho-hdi-overlap": "fails", "colony-rho-discovery": "fails"}


def _groups(rng, r, rhos, b=4):
    """(R, 3b, 1) members in three groups with correlations ``rhos`` (unit variance), all
    groups on the same replicates (a shared component common to every group)."""
    rng = np.random.default_rng(rng)
    shared = rng.standard_normal((r, 1, 1))  # (R, 1, 1)
    parts = [np.sqrt(rho) * shared + np.sqrt(1 - rho) * rng.standard_normal((r, b, 1)) for rho in rhos]
    return np.concatenate(parts, axis=1)


def test_rho_line_contrast_passes_on_the_line_and_fails_off_it():
    shares = [0.1, 0.4, 1.0]
    on_line = [0.1 + 0.5 * s for s in shares]  # rho = 0.1 + 0.5 s: exactly linear
    est, pred, se, rhos = ch08.rho_line_contrast(_groups(0, 20_000, on_line), shares)
    assert abs(est - pred) <= 4 * se and pred == pytest.approx(0.3, abs=4 * se)
    off = [on_line[0], on_line[1] + 0.1, on_line[2]]  # the held-out group 0.1 above the line
    est, pred, se, _ = ch08.rho_line_contrast(_groups(1, 20_000, off), shares)
    assert est - pred > 4 * se


def test_rho_line_contrast_rejects_bad_input():
    with pytest.raises(ValueError, match="shares of the two fit groups must differ"):
        ch08.rho_line_contrast(np.zeros((5, 6, 1)), [0.5, 0.1, 0.5])
    with pytest.raises(ValueError, match=r"shape \(R, 3·B, m\)"):
        ch08.rho_line_contrast(np.zeros((5, 7, 1)), [0.1, 0.2, 0.3])


@pytest.mark.parametrize("theorem_id", list(NEW_CHECKS))
def test_cross_system_checks_come_out_as_the_chapter_reports(theorem_id, book_result):
    from mhacore import theorems

    theorem = theorems.REGISTRY[theorem_id]
    assert (theorem.kind, theorem.claim_id, theorem.finding) == ("empirical", "C7", NEW_CHECKS[theorem_id])
    result = book_result(theorem_id)
    assert result.as_reported, result.summary()
    assert result.passed == (NEW_CHECKS[theorem_id] == "holds")
    assert result.wall_time_s <= 30  # about 1-7 s alone; generous on a shared machine
    assert theorem.power


def test_colony_check_rejects_a_colony_without_recruitment_structure(book_result):
    # the same measurement against rho = 0 (independent scouts, kappa = 0) must fail
    result = book_result("colony-rho-discovery")
    assert result.estimate > 4 * result.standard_error


def test_weight_overlap_check_rejects_the_overlap_models_prediction(book_result):
    # on the same heads, the HDI overlap model's value is a wrong mechanism: far outside 4 SE
    result = book_result("heads-rho-weight-overlap")
    assert abs(result.estimate - result.details["overlap_prediction"]) > 4 * result.standard_error


def test_cross_system_checks_are_seeded():
    first = run("heads-rho-hdi-overlap", scale="book", seed=3)
    second = run("heads-rho-hdi-overlap", scale="book", seed=3)
    assert (first.estimate, first.standard_error) == (second.estimate, second.standard_error)
