"""Chapter 5's registered checks at book scale."""

import numpy as np

import mhacore
from mhacore import optimize, theorems


def test_optimum_starts_far_from_it(book_result):
    details = book_result("decorrelation-optimum").details
    assert details["initial_hdi"] < 0.05
    assert details["final_mse"] < details["initial_mse"]


def test_optimum_tolerance_is_the_optimisation_accuracy(book_result):
    res = book_result("decorrelation-optimum")
    gradient = res.details["final_gradient_norm"]
    assert "atol" in res.tolerance_rule and gradient <= 1e-8
    assert res.tolerance == max(1e4 * gradient**2, 1e-13) <= 1e-12
    assert res.details["conditions"] == {"gradient norm <= 1e-8 within the step cap": True}
    assert res.details["n_steps"] < res.details["step_cap"]


def test_optimum_fails_where_no_tight_frame_exists_or_the_descent_stops_early(monkeypatch):
    from mhacore.theorems import ch05_decorrelation as ch05

    original = ch05.identical_subspaces
    # two planes in R^3: the descent converges to HDI 1/2, the bound is 2/3
    monkeypatch.setattr(ch05, "identical_subspaces", lambda *shape, **kw: original(2, 2, 3, **kw))
    monkeypatch.setattr(ch05, "max_feasible_hdi", lambda *shape: mhacore.max_feasible_hdi(2, 2, 3))
    res = theorems.run("decorrelation-optimum", scale="book")
    assert not res.passed and abs(res.estimate - 0.5) < 1e-6 and res.prediction > 0.66
    monkeypatch.undo()
    monkeypatch.setattr(ch05, "GRADIENT_TOLERANCE", 1e-30)  # never reached: the cap stops it
    monkeypatch.setattr(ch05, "optimize_subspaces", lambda start, loss, **kw: optimize.optimize_subspaces(
        start, loss, **{**kw, "n_steps": 50}))
    res = theorems.run("decorrelation-optimum", scale="book")
    assert not res.passed and not any(res.details["conditions"].values())


def test_optimizer_stops_at_the_gradient_tolerance():
    start = optimize.identical_subspaces(4, 2, 8, jitter=0.05, rng=0)
    run = optimize.optimize_subspaces(start, optimize.overlap_model_loss(), n_steps=2000,
                                      learning_rate=0.5, record_every=1000, gradient_tolerance=1e-6)
    g = run.history["gradient_norm"]
    assert g[-1] <= 1e-6 < g[-2] and run.history["step"][-1] < 2000


def test_frame_bound_is_not_attained_for_two_planes_in_r3():
    # two planes in R^3 share a line: HDI <= 1/2 < 2/3 = the frame-potential bound
    assert abs(mhacore.max_feasible_hdi(2, 2, 3) - 2 / 3) < 1e-12
    gen = np.random.default_rng(0)
    best = max(mhacore.head_diversity_index(gen.standard_normal((2, 3, 2))) for _ in range(200))
    assert 0.45 < best <= 0.5 + 1e-12
    run = optimize.optimize_subspaces(optimize.identical_subspaces(2, 2, 3, jitter=0.05, rng=1),
                                      optimize.overlap_model_loss(rho0=0.2), n_steps=300, learning_rate=2.0)
    assert 0.49 < run.history["hdi"][-1] <= 0.5 + 1e-12
