"""mhacore.ensemble_rho: predicting ensemble correlations out of sample (claim C7 a).

Monte Carlo rule (DESIGN.md house rule 9): a claimed equality holds within 4 SE, a claimed
difference exceeds 4 SE, at the one fixed seed written in the test; seeds are not searched.
Expected values come from closed forms (the split-share probability, weighted least
squares), an independent implementation (enumerating subsets; numpy's ``lstsq``), or the
chapter's own estimators (:mod:`mhacore.theorems.ch08_ensembles`).
"""

import itertools
import math

import numpy as np
import pytest

from mhacore import ensemble_rho as er
from mhacore._rng import replicate_rng
from mhacore.house_hunting import HouseHuntingParams, simulate_emigrations
from mhacore.theorems import ch08_ensembles as ch08
from mhacore.theorems.ch04_diversity import rotation_family

SEED = 20260521


# --- closed forms and independent implementations -------------------------------------------

def test_split_share_probability_matches_enumeration():
    # oracle: enumerate every m-subset of p ranked covariates and count which rank is best
    for p in (1, 2, 5, 6):
        for m in range(1, p + 1):
            subsets = list(itertools.combinations(range(p), m))
            best = np.bincount([min(s) for s in subsets], minlength=p) / len(subsets)  # P_k
            assert er.split_share_probability(m, p) == pytest.approx(float((best**2).sum()), rel=1e-12)
        assert er.split_share_probability(1, p) == pytest.approx(1 / p, rel=1e-12)
        assert er.split_share_probability(p, p) == 1.0


def test_fit_linear_is_weighted_least_squares():
    # oracle: numpy lstsq on rows scaled by 1/se; covariance (X'WX)^-1 by hand
    rng = np.random.default_rng(0)
    x = np.column_stack([np.ones(6), rng.random(6)])  # (F, 2)
    se = 0.1 + rng.random(6)
    y = 1.0 + 2.0 * x[:, 1] + se * rng.standard_normal(6)
    coef, cov = er.fit_linear(x, y, se)
    expected = np.linalg.lstsq(x / se[:, None], y / se, rcond=None)[0]
    np.testing.assert_allclose(coef, expected, rtol=1e-12)
    np.testing.assert_allclose(cov, np.linalg.inv((x / se[:, None]).T @ (x / se[:, None])), rtol=1e-12)
    coef_off, _ = er.fit_linear(x, y + 3.0, se, offset=np.full(6, 3.0))
    np.testing.assert_allclose(coef_off, coef, rtol=1e-12)


def test_holdout_fits_on_the_fit_rows_only():
    design = np.column_stack([np.ones(5), np.linspace(0, 1, 5)])  # (S, 2)
    measured = np.array([1.0, 1.5, 2.0, 2.5, 3.0])
    se = np.full(5, 0.1)
    clean = er.holdout(design, measured, se, [0, 4])
    assert clean["fit_index"] == [0, 4] and clean["held_out_index"] == [1, 2, 3]
    assert not set(clean["fit_index"]) & set(clean["held_out_index"])
    # anything in the held-out rows, NaN included, leaves the fit unchanged
    poisoned = er.holdout(design, [1.0, np.nan, 99.0, -5.0, 3.0], [0.1, np.nan, 1e-9, 7.0, 0.1], [0, 4])
    np.testing.assert_array_equal(poisoned["coef"], clean["coef"])
    np.testing.assert_array_equal(poisoned["cov"], clean["cov"])
    assert np.isnan(clean["z"][[0, 4]]).all()
    # exact line: every held-out z is 0; the SE of a prediction is sqrt(g' Cov g)
    np.testing.assert_allclose(clean["z"][[1, 2, 3]], 0.0, atol=1e-9)
    g = design[2]
    assert clean["predicted_se"][2] == pytest.approx(math.sqrt(g @ clean["cov"] @ g), rel=1e-12)


def test_diabetes_queries_are_held_out_of_the_pool():
    data = er.forest_data("diabetes", rng=4)
    pool = data.model.keys  # (432, 10)
    assert len(pool) + len(data.queries) == 442
    for q in data.queries:
        assert not np.any(np.all(pool == q, axis=1))
    keys, _ = data.model.sample(np.random.default_rng(0), 150)
    assert len(np.unique(keys, axis=0)) == 150  # without replacement


def test_tandem_share_discoveries_match_commitments_when_every_discovery_commits():
    # oracle: no tandem runs, no re-search, every scout accepts what she finds: each
    # discovery is a commitment for good, so the expected discoveries D equal the scouts
    # committed at the horizon (4 SE over colonies)
    params = HouseHuntingParams(tandem_rate=0.0, research_rate=0.0, low_threshold=-10.0, high_threshold=-10.0,
                                max_minutes=30)
    sim = simulate_emigrations(400, (1.0, 0.5), params, rng=7, snapshot_minutes=range(1, 30))
    share = er.tandem_share(sim)
    assert share["f"] == 0.0 and share["tandem_runs"] == 0.0
    committed = (sim.commitment_at_end >= 0).sum(axis=1)  # (R,)
    diff = share["d_terms"] - committed
    assert abs(diff.mean()) <= 4 * diff.std(ddof=1) / math.sqrt(len(diff))
    assert committed.mean() > 10  # not a vacuous comparison


# --- reproducibility ------------------------------------------------------------------------

def test_forest_prediction_is_reproducible_and_streams_belong_to_settings():
    kw = dict(n_replicates=5, n_trees=4, sizes=(2,), seed=SEED)
    a = er.forest_prediction("synthetic", (1, 3, 5), **kw)
    b = er.forest_prediction("synthetic", (1, 3, 5), **kw)
    assert [r["rho"] for r in a["rows"]] == [r["rho"] for r in b["rows"]]
    # a grid value's forests depend on the seed and that value alone, not on the grid
    c = er.forest_prediction("synthetic", (5, 2, 1), **kw)
    rho_a = {r["max_features"]: r["rho"] for r in a["rows"]}
    rho_c = {r["max_features"]: r["rho"] for r in c["rows"]}
    assert rho_a[1] == rho_c[1] and rho_a[5] == rho_c[5]
    assert a["fitted"]["a"] == c["fitted"]["a"] and a["fitted"]["b"] == c["fitted"]["b"]
    d = er.forest_prediction("synthetic", (1, 3, 5), **{**kw, "seed": SEED + 1})
    assert [r["rho"] for r in d["rows"]] != [r["rho"] for r in a["rows"]]


def test_colony_and_head_measurements_are_reproducible():
    one = er.measure_colony(0.2, 0.013, 40, rng=3, minute=20, groups=4)
    two = er.measure_colony(0.2, 0.013, 40, rng=3, minute=20, groups=4)
    assert one["rho"] == two["rho"] and np.array_equal(one["loo_rho"], two["loo_rho"])
    w = 1.5 * rotation_family(np.pi / 3, 3, 2, 8, rng=1)
    model, queries = er.head_model("noise", 8), np.random.default_rng(0).standard_normal((5, 8))
    h1 = er.measure_heads(w, model, queries, 20, rng=2, n=40, n_designs=5)
    h2 = er.measure_heads(w, model, queries, 20, rng=2, n=40, n_designs=5)
    assert h1 == h2


# --- the fit never sees the held-out settings --------------------------------------------------

def test_forest_fit_indices_are_the_fit_values_and_disjoint_from_held_out():
    out = er.forest_prediction("synthetic", (1, 2, 3, 5), (1, 5), n_replicates=4, n_trees=3, sizes=(1,))
    assert out["fit_index"] == [0, 3] and out["held_out_index"] == [1, 2]
    assert sorted(out["fit_index"] + out["held_out_index"]) == list(range(4))
    assert [r["role"] for r in out["rows"]] == ["fit", "held-out", "held-out", "fit"]
    assert all(np.isnan(out["rows"][i]["z"]) for i in out["fit_index"])
    assert all(np.isfinite(out["rows"][i]["z"]) for i in out["held_out_index"])


def test_colony_kappa_does_not_depend_on_the_held_out_settings():
    kw = dict(fit_index=[0], n_colonies=40, minute=20, groups=4, seed=SEED)
    a = er.colony_prediction([(0.2, 0.013), (0.1, 0.013)], **kw)
    b = er.colony_prediction([(0.2, 0.013), (0.3, 0.026), (0.0, 0.013)], **kw)
    assert a["fit_index"] == b["fit_index"] == [0]
    assert a["held_out_index"] == [1] and b["held_out_index"] == [1, 2]
    assert a["fitted"] == b["fitted"]


def test_head_anchor_does_not_depend_on_the_held_out_settings():
    kw = dict(n_replicates=20, n_designs=5, n=40, seed=SEED)
    fit = [(0, np.pi / 2, "noise")]
    a = er.head_prediction(fit, [(0, np.pi / 4, "noise")], **kw)
    b = er.head_prediction(fit, [(1, np.pi / 3, "radial"), (0, np.pi / 6, "noise")], **kw)
    assert a["fitted"] == b["fitted"]
    assert a["fit_index"] == b["fit_index"] == [0] and b["held_out_index"] == [1, 2]
    with pytest.raises(ValueError, match="held_out_settings must not repeat a fit setting"):
        er.head_prediction(fit, fit, **kw)


# --- the law for a real-data forest, and an estimator that must fail ---------------------------

@pytest.fixture(scope="module")
def diabetes_trees():
    data = er.forest_data("diabetes", rng=replicate_rng(SEED, 0, 0))
    return er.measure_forest(data, 10, 150, rng=replicate_rng(SEED, 0, 0, 10), n_trees=10)


def test_law_holds_for_a_real_data_forest(diabetes_trees):
    rows = er.law_check(diabetes_trees["trees"], sizes=(2, 5))
    for row in rows:
        assert abs(row["estimate"] - row["prediction"]) <= 4 * row["standard_error"], row
    # the paired comparison is the chapter's own
    assert rows[1]["prediction"] == pytest.approx(ch08.subset_comparison(diabetes_trees["trees"], 5)[1], rel=1e-12)
    assert diabetes_trees["rho"] > 4 * diabetes_trees["rho_se"]  # trees are correlated: a floor exists


def test_law_fails_with_a_broken_correlation_estimator(diabetes_trees):
    # the deliberate bug: moments taken across the trees of one forest (given its training
    # set), where the trees are i.i.d., so the correlation is 0 and the floor rho sigma^2
    # vanishes; the measured variance of the mean of k trees keeps it
    trees = diabetes_trees["trees"]  # (R, B, m)
    within = trees.var(axis=1, ddof=1).mean(axis=1)  # (R,)
    rows = er.law_check(trees, sizes=(5,), terms=(within, np.zeros(len(trees))))
    assert rows[0]["z"] > 4 and not rows[0]["passed"]
    # the same code path with the right terms passes: the failure is the estimator's
    good = er.law_check(trees, sizes=(5,), terms=ch08.breiman_terms(trees))[0]
    assert good["passed"]


def test_weight_overlap_equals_the_pure_noise_correlation():
    # chapter 3's identity C = sigma^2 <w, w'> averaged over designs: two independent
    # estimates of the same number (simulated responses vs weights alone), within 4 SE
    w = 1.5 * rotation_family(np.pi / 6, 3, 2, 8, rng=1)
    queries = np.random.default_rng(1).standard_normal((20, 8))
    out = er.measure_heads(w, er.head_model("noise", 8), queries, 400, rng=5, n=100, n_designs=200)
    assert abs(out["rho"] - out["weight_rho"]) <= 4 * math.hypot(out["rho_se"], out["weight_rho_se"])
    assert out["rho"] > 0.2  # a correlation far from 0, so the comparison has something to say


# --- bad input names the parameter --------------------------------------------------------

@pytest.mark.parametrize("call, exc, pattern", [
    (lambda: er.forest_data("iris"), ValueError, "name must be one of"),
    (lambda: er.forest_prediction("boston"), ValueError, "dataset must be one of"),
    (lambda: er.forest_prediction("synthetic", (1, 6)), ValueError, "max_features entry must be an integer in"),
    (lambda: er.forest_prediction("synthetic", (1, 1)), ValueError, "max_features must be a non-empty sequence"),
    (lambda: er.forest_prediction("synthetic", (1, 3), (1, 5)), ValueError, "fit_max_features must be values"),
    (lambda: er.forest_prediction("synthetic", (1, 3, 5), (1, 3, 5)), ValueError, "fit_index must leave"),
    (lambda: er.forest_prediction("synthetic", n_trees=4, sizes=(4,)), ValueError, "sizes entry must be"),
    (lambda: er.forest_prediction("synthetic", n_replicates=2), ValueError, "n_replicates must be"),
    (lambda: er.forest_prediction("synthetic", seed=-1), ValueError, "seed must be"),
    (lambda: er.split_share_probability(4, 3), ValueError, "max_features must be an integer in"),
    (lambda: er.split_share_probability(1.5, 3), TypeError, "max_features must be an integer"),
    (lambda: er.measure_forest("diabetes", 1, 5, 0), TypeError, "data must be a ForestData"),
    (lambda: er.law_check(np.zeros((3, 4)), (1,)), ValueError, "trees must have shape"),
    (lambda: er.law_check(np.zeros((3, 4, 1)), 2), TypeError, "sizes must be"),
    (lambda: er.fit_linear(np.ones((2, 1)), [1.0, 2.0], [0.1, 0.0]), ValueError, "target_se must be"),
    (lambda: er.fit_linear(np.ones((1, 2)), [1.0], [0.1]), ValueError, "targets must have at least 2"),
    (lambda: er.holdout(np.ones((2, 1)), [1, 2], [1, 1], [0, 0]), ValueError, "fit_index must hold distinct"),
    (lambda: er.holdout(np.ones((2, 1)), [1, 2], [1, 1], "0"), TypeError, "fit_index must be a sequence"),
    (lambda: er.head_model("sine", 3), ValueError, "signal must be one of"),
    (lambda: er.head_prediction([(0, 0.0, "noise")]), ValueError, "fit_settings theta must be"),
    (lambda: er.head_prediction([(5, 1.0, "noise")]), ValueError, "fit_settings shape must be an index"),
    (lambda: er.head_prediction([(0, 1.0)]), TypeError, "fit_settings entries must be"),
    (lambda: er.head_prediction([(0, 1.0, "noise")], []), ValueError, "held_out_settings must each hold"),
    (lambda: er.colony_prediction([(0.0, 0.013), (0.1, 0.013)], [0]), ValueError, "tandem_rate > 0"),
    (lambda: er.colony_prediction([(-0.1, 0.013)], [0]), ValueError, "tandem_rate must be"),
    (lambda: er.colony_prediction([(0.1,)], [0]), TypeError, "settings entries must be"),
    (lambda: er.colony_prediction(fit_index=[9]), ValueError, "fit_index must hold distinct"),
    (lambda: er.measure_colony(0.1, 0.013, 10, 0, groups=20), ValueError, "n_colonies must be an integer >= 40"),
    (lambda: er.measure_colony(0.1, 0.013, 40, 0, minute=1), ValueError, "minute must be"),
    (lambda: er.run("huge"), ValueError, "scale must be one of"),
])
def test_bad_input_names_the_parameter(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


def test_pool_and_tandem_share_refuse_what_they_cannot_use():
    pool = er.ResampledPool(np.zeros((5, 2)), np.zeros(5))
    with pytest.raises(ValueError, match=r"n must be an integer in \[1, 5\]"):
        pool.sample(np.random.default_rng(0), 6)
    sim = simulate_emigrations(5, rng=0, params=HouseHuntingParams(max_minutes=10))
    with pytest.raises(ValueError, match="snapshot_minutes = range"):
        er.tandem_share(sim)


@pytest.mark.parametrize("module", ["ensemble_rho", "minilm_heads"])
def test_the_command_line_refuses_an_out_that_is_not_its_report(module, tmp_path):
    """``--out`` naming a folder or a file that is not a measurement report: exit 2,
    saying why, and nothing is written or run (mhacore._report.measurement_main)."""
    import importlib

    main = importlib.import_module(f"mhacore.{module}")._main
    notes = tmp_path / "notes.md"
    notes.write_text("mine", encoding="utf-8")
    for out, why in ((notes, "is not a measurement report"), (tmp_path, "is a directory")):
        with pytest.raises(SystemExit) as exit_:
            main(["--out", str(out)])
        assert exit_.value.code == 2, why
    assert notes.read_text(encoding="utf-8") == "mine"
