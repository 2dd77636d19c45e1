"""The Temnothorax house-hunting model of mhacore.house_hunting (claim C7, part b).

Monte Carlo rule used throughout (DESIGN.md house rule 9): a claimed difference must exceed
4 standard errors, and a claimed equality must hold within 4 standard errors, at the one
fixed seed written in the test; seeds are not searched and bands are not widened.
"""

import math

import numpy as np
import pytest

from mhacore import house_hunting as hh
from mhacore.house_hunting import (
    HouseHuntingParams,
    assessment_correlation,
    commitment_correlation,
    commitment_correlation_sweep,
    compare_with_published,
    simulate_emigrations,
    speed_accuracy_tradeoff,
    summarize,
)

ARRAYS = ("chosen_site", "final_site", "best", "decision_time", "completion_time", "split",
          "minority_share", "commitment_at_decision", "commitment_at_end", "first_assessment",
          "ever_recruited", "final_population", "tandem_runs", "transports")


def test_reproducible_from_the_seed():
    a = simulate_emigrations(40, rng=7, snapshot_minutes=(30,))
    b = simulate_emigrations(40, rng=np.random.default_rng(7), snapshot_minutes=(30,))
    c = simulate_emigrations(40, rng=8, snapshot_minutes=(30,))
    for name in ARRAYS + ("commitment_snapshots",):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert not np.array_equal(a.first_assessment, c.first_assessment, equal_nan=True)
    # sweeps: one spawned child per setting, so a row does not depend on the others
    one = speed_accuracy_tradeoff([3, 8], n_colonies=30, rng=5)
    two = speed_accuracy_tradeoff([3, 8], n_colonies=30, rng=5)
    assert one == two


@pytest.mark.parametrize("qualities, changes", [
    ((1.0, 0.5), {}),
    ((1.0, 0.5, 0.8), {"colony_size": 120}),
    ((0.9, 0.9), {"quorum_counts": "committed", "tandem_rate": 0.3}),
    ((1.0, 0.5), {"active_fraction": 1.0, "colony_size": 30}),  # no passive ants
])
def test_ants_are_never_created_or_lost(qualities, changes):
    p = HouseHuntingParams().replace(**changes)
    sim = simulate_emigrations(30, qualities, p, rng=3, record_populations=True)
    pops = sim.populations  # (R, T + 1, K + 1): old nest, then each site, every minute
    assert pops.shape[0] == 30 and pops.shape[2] == len(qualities) + 1
    assert (pops >= 0).all()
    assert (pops.sum(axis=2) == p.colony_size).all()  # at every minute, in every colony
    assert (sim.final_population.sum(axis=1) == p.colony_size).all()
    np.testing.assert_array_equal(pops[:, -1], sim.final_population)
    # carried ants are passive ants that left the old nest, one per transport
    assert (sim.transports <= p.n_passive).all()
    done = ~np.isnan(sim.completion_time)
    assert (sim.transports[done] == p.n_passive).all()
    # each scout is committed to at most one site, or searching (-1)
    assert sim.commitment_at_end.min() >= -1 and sim.commitment_at_end.max() < len(qualities)


def test_the_decision_is_the_first_quorum():
    # with quorum_counts="committed" the recorded populations are what a recruiter senses
    p = HouseHuntingParams(quorum=8, quorum_counts="committed")
    sim = simulate_emigrations(25, (1.0, 0.5), p, rng=4, record_populations=True)
    for r in range(25):
        t = int(sim.decision_time[r])
        sites = sim.populations[r, :, 1:]  # (T + 1, K)
        assert sites[t, sim.chosen_site[r]] >= p.quorum
        assert (sites[t - 1] < p.quorum).all()  # no site was quorate a minute earlier
    assert (sim.decision_time < sim.completion_time).all()


def test_accuracy_and_decision_time_rise_with_the_quorum():
    # the published qualitative result (Franks et al. 2003; Pratt & Sumpter 2006): a higher
    # quorum gives slower but more accurate decisions. Rule: at widely separated quorums the
    # difference exceeds 4 SE of the difference (independent rows: SE = sqrt(se1² + se2²)).
    low, high = speed_accuracy_tradeoff([2, 20], n_colonies=500, rng=20240601)
    for key in ("accuracy", "decision_time"):
        se = math.hypot(low[f"{key}_se"], high[f"{key}_se"])
        assert high[key] - low[key] > 4 * se, (key, low[key], high[key], se)
    assert low["undecided"] == high["undecided"] == 0


def test_equal_sites_are_chosen_half_the_time():
    # symmetry: with equal qualities "accuracy" is the share choosing site 0; its exact SE at
    # 1/2 is sqrt(1/4R)
    R = 1000
    sim = simulate_emigrations(R, (0.8, 0.8), rng=99)
    assert abs(sim.best.mean() - 0.5) <= 4 * math.sqrt(0.25 / R)
    assert (sim.chosen_site >= 0).all()


def test_noiseless_assessment_and_a_high_quorum_nearly_always_pick_the_best():
    # "nearly always": the lower 4-SE bound of the accuracy exceeds 0.95
    p = HouseHuntingParams(assessment_sd=0.0, quorum=25)
    s = summarize(simulate_emigrations(400, (1.0, 0.5), p, rng=12))
    assert s["accuracy"] - 4 * s["accuracy_se"] > 0.95, s
    # wiring check, exact: if every scout's threshold lies between the sites and nobody
    # errs, nobody ever accepts the poor site
    strict = p.replace(high_threshold_fraction=1.0, quorum=10)
    sim = simulate_emigrations(50, (1.0, 0.5), strict, rng=13)
    assert sim.best.all() and (sim.commitment_at_end != 1).all()


def test_assessments_are_independent_between_scouts():
    sim = simulate_emigrations(600, rng=21)
    c = assessment_correlation(sim)
    assert c["n_pairs"] > 500 and abs(c["rho"]) <= 4 * c["rho_se"]
    # assessment errors have the stated standard deviation (SE of a sample SD ~ sd/sqrt(2m))
    errors = sim.first_assessment[:, :, 0] - 1.0
    errors = errors[np.isfinite(errors)]
    assert abs(errors.std() - 0.2) <= 4 * 0.2 / math.sqrt(2 * len(errors))
    assert math.isnan(assessment_correlation(
        simulate_emigrations(50, params=HouseHuntingParams(assessment_sd=0.0), rng=1))["rho"])


def test_commitments_are_correlated_through_recruitment_only():
    # at a fixed minute, scouts that never recruit one another commit independently (rho = 0
    # within 4 SE); strong recruitment correlates them (rho > 4 SE)
    none, strong = commitment_correlation_sweep("tandem_rate", [0.0, 0.3], n_colonies=800,
                                                when=30, rng=31)
    assert abs(none["rho"]) <= 4 * none["rho_se"], none
    assert strong["rho"] > 4 * strong["rho_se"], strong
    assert strong["rho"] - none["rho"] > 4 * math.hypot(strong["rho_se"], none["rho_se"])
    # C7's identity, exact by construction: Var(share) = rho s2 + (1 - rho) s2 / n
    for row in (none, strong):
        assert row["design_effect"] == pytest.approx(1 + (row["n_scouts"] - 1) * row["rho"], abs=1e-9)


def test_colony_size_sweep_scales_the_scouts_and_the_quorum():
    rows = hh.accuracy_by_colony_size([60, 208], n_colonies=40, quorum_fraction=0.2, rng=2)
    assert [(r["n_active"], r["quorum"]) for r in rows] == [(15, 3), (52, 10)]
    assert all(0.0 <= r["accuracy"] <= 1.0 for r in rows)


def test_the_published_comparison_quotes_only_numbers_that_were_read():
    rows = compare_with_published(60, rng=0)
    published = {row["quantity"]: row["published"] for row in rows}
    assert published["share of the colony's workers that ever recruit"] == pytest.approx(1 / 3)
    assert published["colony transport rate / colony tandem-run rate"] == 3.0
    assert [row["published"] for row in rows[2:]] == [None, None, None]  # unread: not filled in
    share = rows[0]["simulated"]
    assert 0.0 < share <= HouseHuntingParams().n_active / 208  # only scouts recruit


def test_parameter_sources_cover_every_parameter():
    fields = {f for f in HouseHuntingParams.__dataclass_fields__}
    assert set(hh.PARAMETER_SOURCES) == fields


SIM = None


def _sim():
    global SIM
    if SIM is None:
        SIM = simulate_emigrations(5, rng=0)
    return SIM


@pytest.mark.parametrize("call, exc, match", [
    (lambda: simulate_emigrations(0), ValueError, "n_colonies must be an integer >= 1; got 0"),
    (lambda: simulate_emigrations(2.5), TypeError, "n_colonies must be an integer >= 1"),
    (lambda: simulate_emigrations(2, [1.0]), ValueError, "qualities must be a sequence of at least 2"),
    (lambda: simulate_emigrations(2, "ab"), TypeError, "qualities must be a sequence"),
    (lambda: simulate_emigrations(2, [1.0, float("nan")]), ValueError, "qualities must be a sequence"),
    (lambda: simulate_emigrations(2, [1.0, True]), TypeError, "qualities must be .* got an entry bool"),
    (lambda: simulate_emigrations(2, params={"quorum": 3}), TypeError, "params must be None or a HouseHuntingParams"),
    (lambda: simulate_emigrations(2, rng=-1), ValueError, "rng must be None, an integer >= 0"),
    (lambda: simulate_emigrations(2, record_populations="yes"), TypeError, "record_populations must be a bool"),
    (lambda: simulate_emigrations(2, snapshot_minutes=[-1]), ValueError,
     "snapshot_minutes entry must be an integer >= 0; got -1"),
    (lambda: HouseHuntingParams(quorum=0), ValueError, "quorum must be an integer >= 1; got 0"),
    (lambda: HouseHuntingParams(quorum=60), ValueError, r"quorum must be an integer in \[1, n_active = 52\]; got 60"),
    (lambda: HouseHuntingParams(active_fraction=0.0), ValueError, r"active_fraction must be a number in \(0, 1\]"),
    (lambda: HouseHuntingParams(active_fraction=1.5), ValueError, r"active_fraction must be a number in \[0, 1\]; got 1.5"),
    (lambda: HouseHuntingParams(colony_size=1), ValueError, "colony_size must be an integer >= 2; got 1"),
    (lambda: HouseHuntingParams(colony_size=True), TypeError, "colony_size must be an integer"),
    (lambda: HouseHuntingParams(tandem_rate=-0.1), ValueError, "tandem_rate must be a finite number >= 0; got -0.1"),
    (lambda: HouseHuntingParams(assessment_sd=float("nan")), ValueError, "assessment_sd must be a finite number >= 0"),
    (lambda: HouseHuntingParams(transport_rate="fast"), TypeError, "transport_rate must be a finite number >= 0"),
    (lambda: HouseHuntingParams(high_threshold_fraction=2), ValueError, r"high_threshold_fraction must be a number in \[0, 1\]"),
    (lambda: HouseHuntingParams(low_threshold=float("inf")), ValueError, "low_threshold must be a finite number"),
    (lambda: HouseHuntingParams(max_minutes=0), ValueError, "max_minutes must be an integer >= 1; got 0"),
    (lambda: HouseHuntingParams(quorum_counts="all"), ValueError, "quorum_counts must be one of 'recruiters', 'committed'; got 'all'"),
    (lambda: HouseHuntingParams(quorum_counts=1), TypeError, "quorum_counts must be one of"),
    (lambda: HouseHuntingParams().replace(bogus=1), TypeError, "unknown HouseHuntingParams field"),
    (lambda: summarize("result"), TypeError, "result must be an Emigrations"),
    (lambda: commitment_correlation(_sim(), when="later"), ValueError, "when must be 'end', 'decision' or a minute"),
    (lambda: commitment_correlation(_sim(), when=45), ValueError, "when must be 'end', 'decision' or a minute"),
    (lambda: assessment_correlation(_sim(), site=2), ValueError, r"site must be an integer in \[0, 1\]; got 2"),
    (lambda: speed_accuracy_tradeoff([]), ValueError, "quorums must be a non-empty sequence"),
    (lambda: speed_accuracy_tradeoff([0]), ValueError, "quorum must be an integer >= 1; got 0"),
    (lambda: speed_accuracy_tradeoff(5), TypeError, "quorums must be a non-empty sequence"),
    (lambda: commitment_correlation_sweep("colour", [1]), ValueError, "parameter must be one of"),
    (lambda: commitment_correlation_sweep("quorum", [2], when=-3), ValueError, "when must be 'end', 'decision' or an integer"),
    (lambda: hh.accuracy_by_colony_size([100], quorum_fraction=0.0), ValueError, "quorum_fraction must be None or"),
    (lambda: compare_with_published(0), ValueError, "n_colonies must be an integer >= 1; got 0"),
])
def test_bad_input_is_rejected(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
