"""Chapter 1 checks: the NW bandwidth rate, and the helpers behind it."""

import numpy as np
import pytest

from mhacore.theorems import DEFAULT_SEED, ch01_nw
from mhacore.theorems._registry import interior_argmin


def test_argmin_recovers_the_vertex_of_a_parabola():
    u = np.linspace(-2, 2, 21)
    assert abs(ch01_nw.argmin_log_bandwidth(u, np.exp((u - 0.33) ** 2)) - 0.33) < 1e-10
    # minimum at the edge of the grid: not located, only bounded, so the search refuses it
    with pytest.raises(ValueError, match="must be interior; it sits on the lower edge"):
        ch01_nw.argmin_log_bandwidth(u, np.exp((u + 5) ** 2))
    with pytest.raises(ValueError, match="upper edge"):
        ch01_nw.argmin_log_bandwidth(u, np.exp((u - 5) ** 2))


def test_rate_check_refuses_boundary_queries_on_its_grid():
    # boundary queries want h* below the check's grid (0.018 to 0.1): before the interior
    # assertion the check clipped h* to 0.018 and passed; now the search fails loudly
    with pytest.raises(ValueError, match="lower edge 0.018 of"):
        ch01_nw.rate_experiment("book", seed=DEFAULT_SEED, queries=[0.0, 1.0])


def test_interior_argmin_validates():
    assert interior_argmin([1, 2, 3, 4], [3.0, 1.0, 0.5, 2.0]) == 2
    with pytest.raises(ValueError, match="at least 3 points"):
        interior_argmin([1, 2], [0.0, 1.0])


def test_fit_rate_recovers_an_exact_line():
    log_n = np.log([100, 200, 400, 800])
    slope, se = ch01_nw.fit_rate(log_n, 1.0 - 0.2 * log_n)
    assert abs(slope + 0.2) < 1e-12 and se < 1e-12


def test_mse_curves_shape_and_common_random_numbers():
    bandwidths = [0.03, 0.06]
    a = ch01_nw.mse_curves(50, bandwidths, replicates=4, n_queries=5, rng=3)
    b = ch01_nw.mse_curves(50, bandwidths, replicates=4, n_queries=5, rng=3)
    assert a.shape == (4, 2) and np.all(a >= 0)
    np.testing.assert_array_equal(a, b)


def test_mse_curves_in_two_dimensions():
    a = ch01_nw.mse_curves(60, [0.05, 0.1], replicates=3, n_queries=9, rng=2, dim=2)
    assert a.shape == (3, 2) and np.all(a >= 0)
    # a constant design axis reproduces the one-dimensional sum: f(x) = sin(2 pi x1) + sin(2 pi x2)
    pts = np.array([[0.25, 0.0], [0.5, 0.25]])
    np.testing.assert_allclose(ch01_nw._signal(pts, 2), [1.0, 1.0], atol=1e-12)
    with pytest.raises(ValueError, match="dim must be 1 or 2; got 3"):
        ch01_nw.rate_experiment("book", dim=3)


def test_rate_check_rejects_the_exponent_its_chapter_contrasts(book_result):
    res = book_result("nw-bandwidth-rate")
    assert res.passed and (res.estimate + 0.25) / res.standard_error > 4  # -1/4 rejected
    assert res.standard_error < res.details["bootstrap_se"]  # the bootstrap is conservative


def test_log_h_star_variance_matches_the_spread_of_repeated_minimisers():
    # the delta method against the direct spread of h* over independent batches of replicates
    log_h = np.log(ch01_nw.bandwidth_grid(13))
    batches = [ch01_nw.mse_curves(400, np.exp(log_h), replicates=60, n_queries=11, rng=s) for s in range(40)]
    minimisers = [ch01_nw.argmin_log_bandwidth(log_h, c.mean(axis=0)) for c in batches]
    delta = np.mean([ch01_nw.log_h_star_variance(log_h, c) for c in batches])
    spread = np.var(minimisers, ddof=1)
    assert 0.5 < delta / spread < 2  # an SE within a factor sqrt(2) (40 batches: spread ±23 %)
