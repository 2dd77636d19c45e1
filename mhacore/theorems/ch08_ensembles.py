"""Chapter 8 checks: one principle, three ensembles (claim C7).

An average of ``B`` exchangeable members with variance ``σ²`` and pairwise correlation ``ρ``
has variance ``ρσ² + (1 − ρ)σ²/B`` (the equicorrelation form; Hastie, Tibshirani and
Friedman 2009, eq. 15.1; Breiman 2001 bounds a forest's error by ``ρ̄`` times a tree's).

* ``forest-breiman-variance``: for scikit-learn's ``RandomForestRegressor``, ``σ²`` and ``ρσ²``
  are estimated (pooled over trees, pairs and queries) from the per-tree predictions
  (``estimators_``) on replicate training sets.  On the same replicates the check measures
  the variance of the average of the first ``k = B // 2`` trees and compares it with
  ``ρσ² + (1 − ρ)σ²/k`` (4·SE of the paired per-replicate differences).  With pooled
  moments the formula at ``k = B`` is an identity for any members (``1ᵀΣ1/B²``), so the
  full-forest comparison (kept in ``details``) tests only that ``predict`` averages
  ``estimators_``; the ``k < B`` subset is what tests that the trees are exchangeable.
  Both the training set and the trees' randomness (bootstrap, feature subsampling) are
  redrawn per replicate.
* ``colony-breiman-variance``: in the stylised scouting model of :mod:`mhacore.colony`, the
  Monte Carlo variance of the colony's collective estimate matches ``ρσ² + (1 − ρ)σ²/N``
  with ``ρ = π²s²/(s² + s_δ²)`` from the model's parameters (4·SE).
"""

from __future__ import annotations

import numpy as np

from .. import distributed
from .._rng import spawn
from .._validation import check_int
from ..colony import colony_variance, scout_moments, simulate_assessments
from ..montecarlo import DataModel
from ._registry import Measurement, register, standard_error
from ..ensemble_rho import colony_prediction, forest_data, head_prediction, split_share_probability
from ..forests import (breiman_terms, forest_model, forest_tree_predictions, ratio_se, subset_comparison,
                       variance_terms)

__all__ = ["forest_model", "forest_tree_predictions", "breiman_terms", "variance_terms", "ratio_se",
           "subset_comparison"]

SETTINGS = {
    "book": dict(n=60, p=5, m=10, n_trees=10, replicates=500, min_samples_leaf=5, colonies=100000),
    "large": dict(n=60, p=5, m=10, n_trees=10, replicates=5000, min_samples_leaf=5, colonies=1000000),
}
COLONY = dict(recruit_prob=0.5, assessment_sd=1.0, reassess_sd=0.5, n_scouts=10)
#: Colonies per block of ``colony-breiman-variance``: block ``b`` is simulated (one batched
#: call) from ``replicate_rng(seed, b)``, whatever the number of ranks.
COLONY_BLOCK = 10_000


@register(
    "forest-breiman-variance",
    kind="empirical",
    claim_id="C7",
    title="The mean of k of a forest's B trees has variance ρσ² + (1 − ρ)σ²/k (trees exchangeable)",
    chapter="08-three-ensembles",
    claim="Over random training sets and tree randomness, with σ² and ρσ² pooled from the per-tree predictions of "
          "RandomForestRegressor (B trees), the variance of the mean of the first k = B // 2 trees, on the same "
          "replicates, equals ρσ² + (1 − ρ)σ²/k.",
    symbolic="Var((1/k)Σ_{b≤k} T_b) = (1/k²)(kσ² + k(k−1)ρσ²) for exchangeable trees (SymPy).",
    caveat="With pooled moments the k = B form is an identity for any members; only k < B tests exchangeability. "
           "σ², ρσ² are averaged over queries; unconditional on the training set.",
    power='Book scale (paired SE ≈ 0.006 on 0.34): detects 4 SE ≈ 0.024 (7 %). Halves of bagged trees and max_features=0.2 trees fail (z = 8.4); halves with max_features=0.6 (z = 2.6) or 0.8 (z = 2.0) pass: it detects gross, not mild, differences between the trees.'
)
@distributed.sharded  # its forests are fitted replicate by replicate, shared by the ranks
def _check_forest(scale, device, seed, max_features=1.0):
    s = SETTINGS[scale]
    rng = np.random.default_rng(seed)
    model = forest_model(s["p"])
    queries = model.sample_design(rng, (s["m"],))  # (m, p)
    kw = dict(n_trees=s["n_trees"], min_samples_leaf=s["min_samples_leaf"], max_features=max_features)
    trees, forest = forest_tree_predictions(model, s["n"], queries, s["replicates"], rng, **kw)  # (R, B, m)
    b = s["n_trees"]
    k = b // 2
    estimate, prediction, se = subset_comparison(trees, k)
    var_terms, cov_terms = breiman_terms(trees)
    full_terms, forest_terms = cov_terms + (var_terms - cov_terms) / b, variance_terms(forest)  # (R,), (R,)
    # k = B on the same replicates: an identity (1ᵀΣ1/B²), so this SE is rounding only;
    # the comparison tests only that predict averages estimators_
    full_se = standard_error(forest_terms - full_terms)
    return Measurement(estimate=estimate, prediction=prediction, standard_error=se,
                       details=dict(k=k, n_trees=b, full_estimate=float(forest_terms.mean()),
                                    full_prediction=float(full_terms.mean()), full_standard_error=full_se,
                                    predict_is_tree_mean=float(np.abs(forest - trees.mean(axis=1)).max()),
                                    sigma_sq=float(var_terms.mean()), rho=float(cov_terms.mean() / var_terms.mean()),
                                    rho_se=ratio_se(cov_terms, var_terms),
                                    replicates=s["replicates"], n=s["n"], m=s["m"]))


@register(
    "colony-breiman-variance",
    kind="model",
    claim_id="C7",
    title="A colony's collective estimate has variance ρσ² + (1 − ρ)σ²/N",
    chapter="08-three-ensembles",
    claim="In the stylised scouting model (recruitment with probability π copies a leader's assessment), "
          "the variance of the mean of N scouts is ρσ² + (1 − ρ)σ²/N with σ² = s² + s_δ², ρ = π²s²/(s² + s_δ²).",
    symbolic="E[(A_i − q)(A_j − q)] = π²s² by expanding B_iL + (1 − B_i)E_i + δ_i (SymPy); the equicorrelation form.",
    caveat="A stylised model inspired by Temnothorax nest-site assessment, not a model of ant behaviour.",
    power='Book scale (SE 0.0018 on 0.35): detects 4 SE ≈ 0.0072 (2 %), i.e. a scout correlation ρ off by about 0.0064 (a recruitment probability off by about 0.008).'
)
@distributed.sharded  # its blocks of colonies are shared by the ranks
def _check_colony(scale, device, seed):
    s = SETTINGS[scale]
    c = COLONY
    a = distributed.map_blocks(  # (R, N), each block (block, N) at once
        lambda size, gen: simulate_assessments(size, c["n_scouts"], c["recruit_prob"], c["assessment_sd"],
                                               c["reassess_sd"], rng=gen),
        s["colonies"], COLONY_BLOCK, seed)
    terms = variance_terms(a.mean(axis=1))  # (R,)
    variance, rho = scout_moments(c["recruit_prob"], c["assessment_sd"], c["reassess_sd"])
    prediction = colony_variance(c["recruit_prob"], c["n_scouts"], c["assessment_sd"], c["reassess_sd"])
    var_terms, cov_terms = breiman_terms(a[:, :, None])
    return Measurement(estimate=float(terms.mean()), prediction=prediction, standard_error=standard_error(terms),
                       details=dict(sigma_sq=variance, rho=rho, rho_measured=float(cov_terms.mean() / var_terms.mean()),
                                    sigma_sq_measured=float(var_terms.mean()), colonies=s["colonies"], **c))


# --- cross-system predictions of rho, out of sample (claim C7 a; mhacore.ensemble_rho) -----
#
# Each check below predicts an ensemble's correlation rho from a mechanism *before* it is
# measured, at a setting the mechanism was not fitted on, with small live runs (a few
# seconds each); the committed large run of the same mechanisms is
# ``reports/ensemble-rho.json`` (``python -m mhacore.ensemble_rho --scale large``).

#: Book/large sizes of the cross-system checks.
RHO_SETTINGS = {
    "book": dict(forest_replicates=400, head_replicates=2000, head_designs=500, colonies=2000),
    "large": dict(forest_replicates=1000, head_replicates=8000, head_designs=2000, colonies=8000),
}
#: The forest check: real data, ``max_features`` fitted at the ends, predicted in between
#: (the values of ``mhacore.ensemble_rho.SCALES["book"]`` for this data set).
FOREST_RHO = dict(dataset="diabetes", max_features=(1, 4, 10), n_queries=40, n_trees=10)
#: The head checks: chapter 4's rotation family, shape (H, d_head, p) = (3, 2, 8).
HEAD_RHO = dict(shape=0, fit_theta=np.pi / 2, held_theta=np.pi / 6)
#: The colony checks: (tandem_rate, discovery_rate); the first two are the fit settings
#: (those of ``mhacore.ensemble_rho.COLONY_SETTINGS``).
COLONY_RHO_FIT = ((0.05, 0.013), (0.2, 0.013))
COLONY_RHO_HELD = {"recruitment": (0.1, 0.013), "discovery": (0.1, 0.026)}


def rho_line_contrast(members, shares, held=1):
    """A correlation predicted by a straight line through two settings, tested at a third.

    ``members`` holds ``G = 3`` groups of ``B`` members each, all fitted on the *same*
    replicates (common random numbers); group ``g`` has the pooled correlation ``ρ_g``
    (:func:`breiman_terms`) and a mechanism's covariate ``s_g`` (``shares``). The line
    ``ρ = a + b·s`` through the two other groups predicts ``ρ_held``; the SE of
    ``ρ_held − prediction`` is the delta method over replicates on the paired
    per-replicate influence values.

    Parameters
    ----------
    members : ndarray of shape (R, 3·B, m)
        Groups in order, ``B`` consecutive members each.
    shares : sequence of 3 floats
        The covariate of each group; the two fit groups must differ.
    held : int in {0, 1, 2}
        The held-out group.

    Returns
    -------
    estimate, prediction, standard_error : float
        Measured ``ρ_held``, the line's value there, the paired SE of their difference.
    rhos : list of 3 floats

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> shared = rng.standard_normal((4000, 1, 1))  # (R, 1, m)
    >>> scale = np.repeat([0.0, 1.0, 2.0], 4)[None, :, None]  # rho = 1/(1 + scale^2)
    >>> x = shared + scale * rng.standard_normal((4000, 12, 1))
    >>> est, pred, se, rhos = rho_line_contrast(x, [1.0, 0.5, 0.2])  # rho 1, 0.5, 0.2
    >>> bool(abs(est - pred) <= 4 * se)
    True
    """
    members = np.asarray(members, dtype=np.float64)  # (R, 3B, m)
    shares = [float(v) for v in shares]
    if members.ndim != 3 or members.shape[1] % 3 or members.shape[1] < 6 or len(shares) != 3:
        raise ValueError(f"members must have shape (R, 3·B, m) with B >= 2, and shares 3 values; got "
                         f"{members.shape} and {len(shares)} shares")
    held = check_int(held, "held", minimum=0)
    if held > 2:
        raise ValueError(f"held must be an integer in [0, 2]; got {held}")
    lo, hi = [g for g in range(3) if g != held]
    if shares[lo] == shares[hi]:
        raise ValueError(f"shares of the two fit groups must differ; got {shares[lo]} twice")
    b = members.shape[1] // 3
    rhos, influence = [], []
    for g in range(3):
        v, c = breiman_terms(members[:, g * b:(g + 1) * b])  # (R,), (R,)
        rho = c.mean() / v.mean()
        rhos.append(float(rho))
        influence.append((c - rho * v) / v.mean())  # (R,): influence of rho_g
    w_hi = (shares[held] - shares[lo]) / (shares[hi] - shares[lo])  # line through lo and hi
    w_lo = 1.0 - w_hi
    prediction = w_lo * rhos[lo] + w_hi * rhos[hi]
    diff = influence[held] - w_lo * influence[lo] - w_hi * influence[hi]  # (R,), paired
    return rhos[held], float(prediction), standard_error(diff), rhos


@register(
    "forest-rho-max-features",
    kind="empirical",
    claim_id="C7",
    finding="fails",
    title="Tree correlation on real data is predicted from max_features (a + b·s_p(m), fitted at the ends)",
    chapter="08-three-ensembles",
    claim="For RandomForestRegressor on scikit-learn's diabetes data (training sets of 150 patients, 40 held-out "
          "patients as queries), the correlation of two trees is ρ(m) = a + b·s_p(m), with s_p(m) the chance that "
          "two trees split a node on the same covariate when each takes the best of m drawn at random; a and b "
          "fitted at m = 1 and m = p = 10 predict ρ at m = 4.",
    symbolic="s_p(m) = Σ_k P_k², P_k = C(p − k, m − 1)/C(p, m): 1/p at m = 1 and 1 at m = p (exact sums); the "
             "line through the two fitted points is an exact interpolation.",
    caveat="The mechanism assumes one fixed ranking of the covariates at every node; real data need not have one. "
           "Fit and held-out forests share their training sets (paired SE). The large run "
           "(reports/ensemble-rho.json) refutes it at 5 of 8 held-out m on these data and does not refute it on the "
           "synthetic data.",
    power="Book scale (400 replicates, paired SE ≈ 0.003 on ρ(4) ≈ 0.08): detects a held-out ρ off the line by "
          "4 SE ≈ 0.012 (about a sixth of ρ). The deviation is about 0.02: the default seed gives z = 6.8. With "
          "200 replicates the mean z over seeds 1-20 was 5.9 and one seed fell short of 4; with the replicates "
          "doubled, the mean z is 7.9 and no seed falls short.",
)
def _check_forest_rho(scale, device, seed, max_features=None):

    s, f = RHO_SETTINGS[scale], FOREST_RHO
    grid = tuple(f["max_features"] if max_features is None else max_features)
    data_rng, tree_rng = spawn(seed, 2)
    data = forest_data(f["dataset"], n_queries=f["n_queries"], rng=data_rng)
    trees, _ = forest_tree_predictions(data.model, data.n_train, data.queries, s["forest_replicates"], tree_rng,
                                       n_trees=3 * f["n_trees"], max_features=grid)  # (R, 3B, m)
    shares = [split_share_probability(m, data.n_features) for m in grid]
    estimate, prediction, se, rhos = rho_line_contrast(trees, shares)
    return Measurement(estimate=estimate, prediction=prediction, standard_error=se,
                       details=dict(dataset=f["dataset"], max_features=list(grid), shares=shares, rhos=rhos,
                                    z=(estimate - prediction) / se, replicates=s["forest_replicates"],
                                    n_train=data.n_train, n_queries=f["n_queries"]))


def _head_rows(scale, seed, signal):
    """Fit the overlap model at HDI = 1 and predict at the held-out angle (``signal`` data)."""

    s, h = RHO_SETTINGS[scale], HEAD_RHO
    out = head_prediction([(h["shape"], h["fit_theta"], "noise")], [(h["shape"], h["held_theta"], signal)],
                          n_replicates=s["head_replicates"], n_designs=s["head_designs"], seed=seed)
    return out, out["rows"][out["held_out_index"][0]]


@register(
    "heads-rho-weight-overlap",
    kind="empirical",
    claim_id="C7",
    title="Head correlation is predicted, with nothing fitted, by the overlap of the heads' attention weights",
    chapter="08-three-ensembles",
    claim="For three tied softmax heads (chapter 4's rotation family at θ = π/6, HDI ≈ 0.44) reading a radial "
          "signal, the pooled correlation of the heads' predictions over training sets equals the weight overlap "
          "Σ_{h≠h'} E⟨w^h, w^h'⟩ / ((H − 1) Σ_h E‖w^h‖²) computed from the weights alone.",
    symbolic="C_hh' = σ²⟨w^h, w^h'⟩ given the design (chapter 3's identity), averaged over designs.",
    caveat="Exact in expectation for pure noise; with a signal it leaves out the spread of the heads' conditional "
           "means, so it is a genuine prediction only there. The large run's held-out radial z are all positive "
           "(1.3 to 1.8).",
    power="Book scale (SE ≈ 0.007 on ρ ≈ 0.33): detects a prediction off by 4 SE ≈ 0.03 (about 9 % of ρ); the "
          "overlap model's error at this angle (0.25) is about 35 SE of this check.",
)
def _check_heads_weight(scale, device, seed):
    _, row = _head_rows(scale, seed, "radial")
    se = float(np.hypot(row["rho_se"], row["weight_rho_se"]))
    return Measurement(estimate=row["rho"], prediction=row["weight_rho"], standard_error=se,
                       details=dict(hdi=row["hdi"], theta=row["theta"], signal=row["signal"],
                                    overlap_prediction=row["predicted"], z=(row["rho"] - row["weight_rho"]) / se))


@register(
    "heads-rho-hdi-overlap",
    kind="empirical",
    claim_id="C7",
    finding="fails",
    title="Head correlation is predicted from the head diversity index by ρ = ρ₀ + (1 − ρ₀)(1 − HDI)",
    chapter="08-three-ensembles",
    claim="For three tied softmax heads on pure noise, ρ₀ fitted where the heads are orthogonal (HDI = 1) predicts "
          "the pooled correlation at θ = π/6 (HDI ≈ 0.44) through chapter 4's overlap model.",
    symbolic="ρ = ρ₀ + (1 − ρ₀)(1 − HDI) (item 4 of thm-hdi, in the overlap model of chapter 4).",
    caveat="The overlap model is exact for its own Gaussian heads; real softmax heads are not those heads. The "
           "large run refutes it at 10 of 14 held-out settings, always predicting too high a ρ.",
    power="Book scale (SE ≈ 0.0065 on ρ ≈ 0.33): detects a prediction off by 4 SE ≈ 0.026; the measured error "
          "(about 0.26) is some 40 SE, so the verdict does not hang on the scale.",
)
def _check_heads_hdi(scale, device, seed):
    out, row = _head_rows(scale, seed, "noise")
    se = float(np.hypot(row["rho_se"], row["predicted_se"]))
    return Measurement(estimate=row["rho"], prediction=row["predicted"], standard_error=se,
                       details=dict(hdi=row["hdi"], theta=row["theta"], rho0=out["fitted"]["rho0"],
                                    weight_prediction=row["weight_rho"], z=row["z"]))


def _colony_row(scale, seed, held):

    out = colony_prediction([*COLONY_RHO_FIT, COLONY_RHO_HELD[held]], (0, 1),
                            n_colonies=RHO_SETTINGS[scale]["colonies"], seed=seed)
    row = out["rows"][2]
    return Measurement(estimate=row["rho"], prediction=row["predicted"], standard_error=row["z_se"],
                       details=dict(tandem_rate=row["tandem_rate"], discovery_rate=row["discovery_rate"],
                                    kappa=out["fitted"]["kappa"], kappa_se=out["fitted"]["kappa_se"],
                                    f=row["f"], share=row["share"], decided=row["decided"], z=row["z"],
                                    colonies=RHO_SETTINGS[scale]["colonies"]))


_COLONY_CLAIM = ("In the house-hunting model (mhacore.house_hunting; parameters from Pratt et al. 2002 and Masuda "
                 "et al. 2015), scouts' commitment correlation at minute 40 is ρ = κ·f/((1 − f)(1 − p)(n − 1)), "
                 "f the share of arrivals by tandem run, p the share committed to the good site, n the scouts, "
                 "with κ fitted at tandem rates 0.05 and 0.2 (discovery rate 0.013)")
_COLONY_SYMBOLIC = ("Clusters of one independent discoverer plus her tandem recruits: Var(S)/(np(1 − p)) = "
                    "(E[C²]/E[C] − p)/(1 − p); geometric clusters give κ = 2.")


# The same mechanism at tandem rate 0.1 (the fit settings' discovery rate) is not registered:
# its z sits near +2 at every scale (the fitted kappa's uncertainty dominates its SE), so at
# 4 SE its verdict changes from seed to seed (2 of seeds 1-20 fail). The chapter reads it
# from the committed large run instead.


@register(
    "colony-rho-discovery",
    kind="empirical",
    claim_id="C7",
    finding="fails",
    title="Scout correlation in a house-hunting colony is predicted from its recruitment structure (new discovery rate)",
    chapter="08-three-ensembles",
    claim=_COLONY_CLAIM + "; it predicts ρ at tandem rate 0.1 with the discovery rate doubled (0.026).",
    symbolic=_COLONY_SYMBOLIC,
    caveat="With faster discovery half the colonies have decided by minute 40, and quorum and transport change "
           "who is committed; the cluster mechanism has no quorum. The large run refutes it at 3 of 5 held-out "
           "settings (both changed discovery rates and tandem rate 0.3).",
    power="Book scale (SE ≈ 0.0017 on ρ ≈ 0.013): detects a prediction off by 4 SE ≈ 0.007; the measured error "
          "(about 0.016) is some 10 SE.",
)
def _check_colony_discovery(scale, device, seed):
    return _colony_row(scale, seed, "discovery")
