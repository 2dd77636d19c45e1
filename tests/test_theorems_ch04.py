"""Chapter 4's registered checks at book scale, and their construction helpers."""

import numpy as np
import pytest

import mhacore
from mhacore.optimize import random_subspaces
from mhacore import theorems
from mhacore.theorems import ch04_diversity as ch04


def test_rotated_pair_has_equal_principal_angles():
    angles = mhacore.principal_angles(*ch04.rotated_pair(0.3, 3, 7))
    np.testing.assert_allclose(angles, 0.3, atol=1e-14)


@pytest.mark.parametrize("theta", [0.0, 0.4, np.pi / 2])
def test_rotation_family_hdi_is_one_minus_cos4(theta):
    w = ch04.rotation_family(theta, 3, 2, 9, rng=1)
    np.testing.assert_allclose(np.einsum("hpi,hpj->hij", w, w), np.broadcast_to(np.eye(2), (3, 2, 2)), atol=1e-12)
    assert mhacore.head_diversity_index(w) == pytest.approx(1 - np.cos(theta) ** 4, abs=1e-12)


def test_rotation_family_needs_room():
    with pytest.raises(ValueError, match=r"p must be >= \(n_heads \+ 1\) \* d_head = 8; got 7"):
        ch04.rotation_family(0.1, 3, 2, 7)


def test_union_of_bases_is_tight_fusion_frame():
    w = ch04.union_of_bases(2, 3, 6, rng=0)  # 6 heads of 2 dims in R^6
    frame_operator = np.einsum("hpi,hqi->pq", w, w)
    np.testing.assert_allclose(frame_operator, 2 * np.eye(6), atol=1e-12)


def test_model_covariance_is_psd_with_unit_correlation_on_diagonal():
    w = random_subspaces(5, 2, 6, rng=3)
    cov = ch04.model_covariance(w, variance=2.0, rho0=0.1)
    np.testing.assert_allclose(np.diag(cov), 2.0, atol=1e-12)
    assert np.linalg.eigvalsh(cov).min() > -1e-12


def test_monotone_model_exact_slope_and_monte_carlo_agree(book_result):
    res = book_result("hdi-monotone-model")
    assert "SE" in res.tolerance_rule and res.passed  # the Monte Carlo slope is the tested quantity
    d = res.details
    assert abs(d["exact_slope"] - res.prediction) <= 1e-12 and d["max_abs_dev_from_affine"] < 1e-12


@pytest.mark.parametrize("error_scale", [3.0, 1.1])
def test_monotone_model_fails_when_the_simulated_errors_are_scaled(error_scale):
    # the referee's perturbation (errors x 3) and the smallest one the power line quotes
    from mhacore.theorems.ch04_diversity import _monotone_model

    m = _monotone_model("book", "cpu", theorems.DEFAULT_SEED, error_scale=error_scale)
    assert abs(m.estimate - m.prediction) > 4 * m.standard_error
    assert abs(m.details["exact_slope"] - m.prediction) <= 1e-12  # the exact part cannot see it


def test_monotone_model_lack_of_fit_catches_a_curved_bias_that_keeps_the_slope(book_result):
    """The referee's blind spot: bias² bent by a term orthogonal to (1, HDI) leaves the OLS
    slope unchanged, so only the lack-of-fit test can fail; at the registered seed the
    unperturbed model passes it and the bend of curvature 1 (as in the review) fails it."""
    from mhacore.theorems.ch04_diversity import _monotone_model

    plain = book_result("hdi-monotone-model")
    assert plain.passed and plain.details["conditions"] == {"lack-of-fit chi2 <= critical": True}
    assert plain.details["lack_of_fit_df"] == 9
    assert plain.details["lack_of_fit_chi2"] <= plain.details["lack_of_fit_critical"]
    bent = _monotone_model("book", "cpu", theorems.DEFAULT_SEED, curvature=1.0)
    assert abs(bent.estimate - bent.prediction) <= 4 * bent.standard_error  # the slope cannot see it
    assert bent.details["lack_of_fit_chi2"] > bent.details["lack_of_fit_critical"]
    assert bent.conditions == {"lack-of-fit chi2 <= critical": False}


def test_the_registry_fails_a_check_whose_lack_of_fit_fails(monkeypatch):
    import dataclasses

    from mhacore.theorems.ch04_diversity import _monotone_model

    theorem = theorems.REGISTRY["hdi-monotone-model"]
    bent = dataclasses.replace(theorem, check=lambda scale, device, seed: _monotone_model(
        scale, device, seed, curvature=1.0))
    monkeypatch.setitem(theorems.REGISTRY, "hdi-monotone-model", bent)
    result = theorems.run("hdi-monotone-model", scale="book")
    assert not result.passed and "lack-of-fit" in result.tolerance_rule
    assert abs(result.estimate - result.prediction) <= result.tolerance  # slope alone would pass


def test_small_angles_reports_worst_absolute_error(book_result):
    res = book_result("principal-angles-small")
    assert res.prediction == 0.0 and 0 <= res.estimate <= 1e-14
    assert res.details["max_abs_error_arccos"] > 1e-9


def test_monotone_model_lack_of_fit_is_against_the_law_not_the_simulation():
    """An MSE curved in HDI through the model itself (correlation a power of the overlap):
    simulation and exact model agree with each other, only the affine law can expose it."""
    from mhacore.theorems.ch04_diversity import _monotone_model

    m = _monotone_model("book", "cpu", theorems.DEFAULT_SEED, overlap_power=0.5)
    assert m.details["max_abs_dev_from_affine"] > 0.1
    assert abs(m.estimate - m.prediction) <= 4 * m.standard_error  # the slope alone passes
    assert m.conditions == {"lack-of-fit chi2 <= critical": False}


def test_frame_bound_condition_fails_for_a_bound_below_random_heads():
    from mhacore.theorems.ch04_diversity import _frame_bound

    m = _frame_bound("book", "cpu", theorems.DEFAULT_SEED, bound_shift=0.06)
    assert m.conditions == {"20 random configurations at or below the bound": False}
    assert all(_frame_bound("book", "cpu", theorems.DEFAULT_SEED).conditions.values())
