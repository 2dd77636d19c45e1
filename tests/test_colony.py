"""The stylised scouting model of mhacore.colony (claim C7)."""

import numpy as np
import pytest

from mhacore.colony import colony_variance, scout_moments, simulate_assessments


def test_moments_closed_form_at_known_points():
    assert scout_moments(0.0, 2.0, 1.0) == (5.0, 0.0)  # no recruitment: independent scouts
    assert scout_moments(1.0, 1.0, 0.0) == (1.0, 1.0)  # everyone copies the leader
    variance, rho = scout_moments(0.5, 1.0, 0.5)
    assert variance == pytest.approx(1.25) and rho == pytest.approx(0.2)


def test_colony_variance_limits():
    assert colony_variance(0.0, 8, 2.0) == pytest.approx(4.0 / 8)  # sigma^2 / N
    assert colony_variance(1.0, 8, 2.0) == pytest.approx(4.0)  # rho = 1: no gain
    assert colony_variance(0.5, 1, 1.0, 0.5) == pytest.approx(1.25)  # one scout: sigma^2


def test_simulation_matches_the_model_moments_within_4se():
    # independent oracle: sample covariance of two scouts across colonies, against pi^2 s^2
    a = simulate_assessments(200_000, 2, 0.7, 1.5, 0.4, quality=3.0, rng=11)  # (R, 2)
    e = a - 3.0
    prod = e[:, 0] * e[:, 1]
    assert abs(prod.mean() - 0.49 * 2.25) <= 4 * prod.std(ddof=1) / np.sqrt(len(prod))
    sq = e[:, 0] ** 2
    assert abs(sq.mean() - (2.25 + 0.16)) <= 4 * sq.std(ddof=1) / np.sqrt(len(sq))
    m = e.mean(axis=1)  # (R,): scouts of one colony are correlated, colonies are independent
    assert abs(m.mean()) <= 4 * m.std(ddof=1) / np.sqrt(len(m))


def test_simulation_is_seeded_and_shaped():
    a = simulate_assessments(4, 3, 0.5, rng=5)
    b = simulate_assessments(4, 3, 0.5, rng=np.random.default_rng(5))
    assert a.shape == (4, 3) and np.array_equal(a, b)
    none_recruited = simulate_assessments(2000, 3, 0.0, reassess_sd=0.0, rng=1)
    # independent scouts: a sample correlation of R pairs has SE about 1/sqrt(R) at rho = 0
    assert abs(np.corrcoef(none_recruited.T)[0, 1]) <= 4 / np.sqrt(len(none_recruited))


@pytest.mark.parametrize("call, exc, match", [
    (lambda: scout_moments(1.5), ValueError, r"recruit_prob must be a number in \[0, 1\]; got 1.5"),
    (lambda: scout_moments(True), TypeError, "recruit_prob must be a number in"),
    (lambda: scout_moments(0.5, 0.0), ValueError, r"assessment_sd must be a finite number > 0; got 0.0"),
    (lambda: scout_moments(0.5, 1.0, -1.0), ValueError, r"reassess_sd must be a finite number >= 0; got -1.0"),
    (lambda: scout_moments(0.5, "1"), TypeError, "assessment_sd must be a finite number > 0"),
    (lambda: colony_variance(0.5, 0), ValueError, "n_scouts must be an integer >= 1; got 0"),
    (lambda: simulate_assessments(0, 3, 0.5), ValueError, "n_colonies must be an integer >= 1; got 0"),
    (lambda: simulate_assessments(2, 2.5, 0.5), TypeError, "n_scouts must be an integer >= 1"),
    (lambda: simulate_assessments(2, 2, 0.5, quality=float("nan")), ValueError, "quality must be a finite number"),
    (lambda: simulate_assessments(2, 2, 0.5, rng=-1), ValueError, "rng must be None, an integer >= 0"),
])
def test_bad_input_is_rejected(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
