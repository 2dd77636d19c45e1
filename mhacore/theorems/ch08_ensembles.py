"""Chapter 8 checks: one principle, three ensembles (claim C7).

An average of ``B`` exchangeable members with variance ``σ²`` and pairwise correlation ``ρ``
has variance ``ρσ² + (1 − ρ)σ²/B`` (Breiman 2001).

* ``forest-breiman-variance``: for scikit-learn's ``RandomForestRegressor``, ``σ²`` and ``ρ``
  are estimated from the per-tree predictions (``estimators_``) on one set of replicate
  training sets; the formula's prediction is compared with the measured variance of the
  forest's own prediction on an independent set of replicates (4·SE).  Both the training
  set and the trees' randomness (bootstrap, feature subsampling) are redrawn per replicate.
* ``colony-breiman-variance``: in the stylised scouting model of :mod:`mhacore.colony`, the
  Monte Carlo variance of the colony's collective estimate matches ``ρσ² + (1 − ρ)σ²/N``
  with ``ρ = π²s²/(s² + s_δ²)`` from the model's parameters (4·SE).
"""

from __future__ import annotations

import numpy as np

from .._rng import spawn
from .._validation import check_int
from ..colony import colony_variance, scout_moments, simulate_assessments
from ..montecarlo import DataModel
from ._registry import Measurement, register
from .ch03_bvc import design_moments

__all__ = ["forest_model", "forest_tree_predictions", "breiman_terms", "variance_terms"]

SETTINGS = {
    "book": dict(n=60, p=5, m=10, n_trees=10, replicates=250, min_samples_leaf=5, colonies=100000),
    "large": dict(n=60, p=5, m=10, n_trees=10, replicates=2500, min_samples_leaf=5, colonies=1000000),
}
COLONY = dict(recruit_prob=0.5, assessment_sd=1.0, reassess_sd=0.5, n_scouts=10)


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
        Passed to ``RandomForestRegressor`` (``n_estimators`` for ``n_trees``).

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
    queries = np.asarray(queries, dtype=np.float64)  # (m, p)
    trees = np.empty((n_replicates, n_trees, len(queries)))  # (R, B, m)
    forest = np.empty((n_replicates, len(queries)))  # (R, m)
    for r, g in enumerate(spawn(rng, n_replicates)):
        keys, values = model.sample(g, n)  # (n, p), (n,)
        fit = RandomForestRegressor(n_estimators=n_trees, max_features=max_features,
                                    min_samples_leaf=min_samples_leaf,
                                    random_state=int(g.integers(2**31 - 1)), n_jobs=1).fit(keys, values)
        trees[r] = np.stack([t.predict(queries) for t in fit.estimators_])  # (B, m)
        forest[r] = fit.predict(queries)
    return trees, forest


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


def _se(terms):
    return float(terms.std(ddof=1) / np.sqrt(len(terms)))


@register(
    "forest-breiman-variance",
    title="A random forest's variance is ρσ² + (1 − ρ)σ²/B",
    chapter="08-three-ensembles",
    claim="Over random training sets and tree randomness, Var of RandomForestRegressor.predict with B trees equals "
          "ρσ² + (1 − ρ)σ²/B, with σ² and ρ measured from per-tree predictions on independent replicates.",
    symbolic="Var((1/B)Σ_b T_b) = (1/B²)(Bσ² + B(B−1)ρσ²) for exchangeable trees (SymPy).",
    caveat="σ², ρ are averaged over queries (the formula is linear in σ² and ρσ²); unconditional on the "
           "training set; trees within a forest are exchangeable.",
)
def _check_forest(scale, device, seed):
    s = SETTINGS[scale]
    rng = np.random.default_rng(seed)
    model = forest_model(s["p"])
    queries = model.sample_design(rng, (s["m"],))  # (m, p)
    fit_set, test_set = spawn(rng, 2)
    kw = dict(n_trees=s["n_trees"], min_samples_leaf=s["min_samples_leaf"])
    trees, _ = forest_tree_predictions(model, s["n"], queries, s["replicates"], fit_set, **kw)  # (R, B, m)
    var_terms, cov_terms = breiman_terms(trees)
    b = s["n_trees"]
    predicted_terms = cov_terms + (var_terms - cov_terms) / b  # (R,)
    _, forest = forest_tree_predictions(model, s["n"], queries, s["replicates"], test_set, **kw)  # (R, m)
    measured_terms = variance_terms(forest)
    se = float(np.hypot(_se(predicted_terms), _se(measured_terms)))  # independent replicate sets
    return Measurement(estimate=float(measured_terms.mean()), prediction=float(predicted_terms.mean()),
                       standard_error=se,
                       details=dict(sigma_sq=float(var_terms.mean()), rho=float(cov_terms.mean() / var_terms.mean()),
                                    n_trees=b, replicates=s["replicates"], n=s["n"], m=s["m"]))


@register(
    "colony-breiman-variance",
    title="A colony's collective estimate has variance ρσ² + (1 − ρ)σ²/N",
    chapter="08-three-ensembles",
    claim="In the stylised scouting model (recruitment with probability π copies a leader's assessment), "
          "the variance of the mean of N scouts is ρσ² + (1 − ρ)σ²/N with σ² = s² + s_δ², ρ = π²s²/(s² + s_δ²).",
    symbolic="E[(A_i − q)(A_j − q)] = π²s² by expanding B_iL + (1 − B_i)E_i + δ_i (SymPy); Breiman's form.",
    caveat="A stylised model inspired by Temnothorax nest-site assessment, not a model of ant behaviour.",
)
def _check_colony(scale, device, seed):
    s = SETTINGS[scale]
    c = COLONY
    a = simulate_assessments(s["colonies"], c["n_scouts"], c["recruit_prob"], c["assessment_sd"],
                             c["reassess_sd"], rng=seed)  # (R, N)
    terms = variance_terms(a.mean(axis=1))  # (R,)
    variance, rho = scout_moments(c["recruit_prob"], c["assessment_sd"], c["reassess_sd"])
    prediction = colony_variance(c["recruit_prob"], c["n_scouts"], c["assessment_sd"], c["reassess_sd"])
    var_terms, cov_terms = breiman_terms(a[:, :, None])
    return Measurement(estimate=float(terms.mean()), prediction=prediction, standard_error=_se(terms),
                       details=dict(sigma_sq=variance, rho=rho, rho_measured=float(cov_terms.mean() / var_terms.mean()),
                                    sigma_sq_measured=float(var_terms.mean()), colonies=s["colonies"], **c))
