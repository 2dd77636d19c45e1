"""Forests as ensembles: per-tree predictions and the moments of exchangeable members.

The random-forest side of claim C7 (chapter 8), shared by the chapter's registered checks
(:mod:`mhacore.theorems.ch08_ensembles`) and the cross-system predictions
(:mod:`mhacore.ensemble_rho`): scikit-learn's ``RandomForestRegressor`` fitted on replicate
training sets with its per-tree predictions (``estimators_``), and the per-replicate terms
of the members' variance and covariance from which ``σ²``, ``ρσ²`` and the variance of a
mean of ``k`` members are estimated with their standard errors.
"""

from __future__ import annotations

import numpy as np

from . import distributed
from ._rng import spawn
from ._stats import standard_error
from ._validation import check_int
from .decomposition import design_moments
from .montecarlo import DataModel

__all__ = ["forest_model", "forest_tree_predictions", "breiman_terms", "variance_terms", "ratio_se",
           "subset_comparison"]


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
        members (pairs) and queries (:func:`mhacore.decomposition.design_moments`); the
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
