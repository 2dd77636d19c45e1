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
from .ch03_bvc import design_moments

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


def forest_model(p=5, sigma=1.0):
    """``y = 2 sin(x_1 + x_2) + ε``, ``x ~ U[-1, 1]^p``: two relevant covariates of ``p``."""
    return DataModel(f=lambda x: 2.0 * np.sin(x[..., 0] + x[..., 1]), p=p, sigma=sigma, design="uniform")


def forest_tree_predictions(model, n, queries, n_replicates, rng, *, n_trees=10, max_features=1.0,
                            min_samples_leaf=5):
    """Per-tree and forest predictions of ``RandomForestRegressor`` on ``R`` replicate training sets.

    Replicate ``r`` draws a fresh training set ``(n, p)`` from ``model`` and a fresh
    ``random_state`` for the forest (its trees' bootstrap and feature subsampling), both
    from child ``r`` of ``spawn(rng, R)``.

    Parameters
    ----------
    model : DataModel
    n : int
        Training-set size.
    queries : ndarray of shape (m, p)
    n_replicates : int
        ``R``.
    rng : None, int or numpy.random.Generator
    n_trees, max_features, min_samples_leaf
        Passed to ``RandomForestRegressor`` (``n_estimators`` for ``n_trees``).  A sequence
        of ``G`` values of ``max_features`` splits the ``B`` trees into ``G`` equal groups
        (in order), each a forest of its own fitted on the same training set: a forest whose
        trees are *not* exchangeable, used to measure the power of the check.

    Returns
    -------
    trees : ndarray of shape (R, B, m)
        Each tree's prediction (``forest.estimators_[b].predict``).
    forest : ndarray of shape (R, m)
        ``forest.predict(queries)``.
    """
    from sklearn.ensemble import RandomForestRegressor  # imported here: only the forest needs it

    n, n_replicates = check_int(n, "n"), check_int(n_replicates, "n_replicates")
    n_trees = check_int(n_trees, "n_trees")
    groups = tuple(max_features) if isinstance(max_features, (tuple, list)) else (max_features,)
    if not groups or n_trees % len(groups):
        raise ValueError(f"max_features must be one value or a non-empty sequence whose length divides "
                         f"n_trees = {n_trees}; got {max_features!r}")
    queries = np.asarray(queries, dtype=np.float64)  # (m, p)
    children = spawn(rng, n_replicates)
    per_group = n_trees // len(groups)

    def replicate(r):  # scikit-learn runs on the CPU; under torchrun the ranks share these
        g = children[r]
        keys, values = model.sample(g, n)  # (n, p), (n,): one training set for every group
        fits = [RandomForestRegressor(n_estimators=per_group, max_features=mf,
                                      min_samples_leaf=min_samples_leaf,
                                      random_state=int(g.integers(2**31 - 1)), n_jobs=1).fit(keys, values)
                for mf in groups]
        trees = np.stack([t.predict(queries) for fit in fits for t in fit.estimators_])  # (B, m)
        return trees, np.mean([fit.predict(queries) for fit in fits], axis=0)  # (B, m), (m,): equal groups

    trees, forest = zip(*distributed.map_items(replicate, n_replicates))
    return np.stack(trees), np.stack(forest)  # (R, B, m), (R, m)


def breiman_terms(members):
    """Per-replicate summands of ``σ²``, ``ρσ²`` (pooled over queries) from member predictions.

    Parameters
    ----------
    members : ndarray of shape (R, B, m)
        Predictions of ``B`` exchangeable members on ``R`` replicates at ``m`` queries.

    Returns
    -------
    var_terms, cov_terms : ndarray of shape (R,)
        Their means are the unbiased member variance and pairwise covariance, averaged over
        members (pairs) and queries (:func:`mhacore.theorems.ch03_bvc.design_moments`); the
        pooled correlation is ``cov_terms.mean() / var_terms.mean()``.
    """
    return design_moments(np.asarray(members, dtype=np.float64))


def variance_terms(estimates):
    """Per-replicate summands of the unbiased variance of an estimate, averaged over queries.

    Parameters
    ----------
    estimates : ndarray of shape (R, m) or (R,)

    Returns
    -------
    ndarray of shape (R,)
        ``R/(R−1) · mean_x (est_r(x) − mean_r est(x))²``; mean = unbiased variance, std/√R = SE.

    Examples
    --------
    >>> float(variance_terms(np.array([1.0, 3.0])).mean())  # unbiased variance of {1, 3}
    2.0
    """
    est = np.asarray(estimates, dtype=np.float64).reshape(len(estimates), -1)  # (R, m)
    r = len(est)
    return ((est - est.mean(axis=0)) ** 2).mean(axis=1) * r / (r - 1)  # (R,)


def ratio_se(numerator_terms, denominator_terms):
    """Delta-method SE of ``mean(numerator_terms) / mean(denominator_terms)`` over replicates.

    Parameters
    ----------
    numerator_terms, denominator_terms : ndarray of shape (R,)
        Per-replicate summands, e.g. ``cov_terms`` and ``var_terms`` of :func:`breiman_terms`
        (the ratio is then the pooled correlation ``ρ``).

    Returns
    -------
    float
        ``std_r(a_r − ratio · b_r) / (mean(b) √R)``.

    Examples
    --------
    >>> ratio_se(np.array([1.0, 2.0, 3.0]), np.array([2.0, 4.0, 6.0]))  # exact ratio 1/2: no spread
    0.0
    """
    a = np.asarray(numerator_terms, dtype=np.float64)
    b = np.asarray(denominator_terms, dtype=np.float64)
    ratio = a.mean() / b.mean()
    return float((a - ratio * b).std(ddof=1) / (b.mean() * np.sqrt(len(a))))


def subset_comparison(members, k):
    """The equicorrelation form for the mean of the first ``k`` members, paired on the same replicates.

    Per replicate ``r``, the prediction term is ``c_r + (v_r − c_r)/k`` with ``v_r``, ``c_r``
    the summands of ``σ²`` and ``ρσ²`` pooled over all ``B`` members (and pairs, and
    queries), and the measured term is the summand of the variance of
    ``members[:, :k].mean(axis=1)``.  Both means are unbiased, so for ``k < B`` they agree
    only if the members are exchangeable (equal variances and covariances); for ``k = B``
    they agree for any members, since pooled moments give ``1ᵀΣ1/B²``.  Taking both on the
    same replicates cancels the common part of their noise: the SE is that of the paired
    per-replicate differences.

    Parameters
    ----------
    members : ndarray of shape (R, B, m)
        Member predictions on ``R`` replicates at ``m`` queries.
    k : int, 1 <= k <= B

    Returns
    -------
    estimate, prediction, standard_error : float

    Examples
    --------
    >>> x = np.random.default_rng(0).standard_normal((4000, 4, 1))  # i.i.d. members: rho = 0
    >>> est, pred, se = subset_comparison(x, 2)
    >>> bool(abs(est - pred) <= 4 * se) and abs(pred - 0.5) < 0.05
    True
    """
    members = np.asarray(members, dtype=np.float64)  # (R, B, m)
    k = check_int(k, "k")
    if not 1 <= k <= members.shape[1]:
        raise ValueError(f"k must be an integer in [1, B={members.shape[1]}]; got {k}")
    var_terms, cov_terms = breiman_terms(members)  # (R,), (R,)
    predicted_terms = cov_terms + (var_terms - cov_terms) / k  # (R,)
    measured_terms = variance_terms(members[:, :k].mean(axis=1))  # (R,)
    se = standard_error(measured_terms - predicted_terms)  # paired over replicates
    return float(measured_terms.mean()), float(predicted_terms.mean()), se


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
