"""Chapter 5's registered checks at book scale."""

import numpy as np

import mhacore
from mhacore import optimize, theorems


def test_optimum_starts_far_from_it():
    details = theorems.run("decorrelation-optimum", scale="book").details
    assert details["initial_hdi"] < 0.05
    assert details["final_mse"] < details["initial_mse"]


def test_optimum_tolerance_is_the_optimisation_accuracy():
    res = theorems.run("decorrelation-optimum", scale="book")
    assert "atol" in res.tolerance_rule and res.tolerance == 1e-10
    assert abs(res.estimate - res.prediction) <= 1e-10
    assert res.details["final_gradient_norm"] < 1e-6


def test_frame_bound_is_not_attained_for_two_planes_in_r3():
    # two planes in R^3 share a line: HDI <= 1/2 < 2/3 = the frame-potential bound
    assert abs(mhacore.max_feasible_hdi(2, 2, 3) - 2 / 3) < 1e-12
    gen = np.random.default_rng(0)
    best = max(mhacore.head_diversity_index(gen.standard_normal((2, 3, 2))) for _ in range(200))
    assert 0.45 < best <= 0.5 + 1e-12
    run = optimize.optimize_subspaces(optimize.identical_subspaces(2, 2, 3, jitter=0.05, rng=1),
                                      optimize.overlap_model_loss(rho0=0.2), n_steps=300, learning_rate=2.0)
    assert 0.49 < run.history["hdi"][-1] <= 0.5 + 1e-12
