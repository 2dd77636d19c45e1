"""Bias–variance–covariance decomposition of an ensemble of NW heads (claim C2).

``MATH.md`` claim C2 (the seed's Theorem 3.1): for the ensemble ``f̂ = Σ_h α_h f̂_h``,

    MSE(x) = (Σ_h α_h b_h(x))² + Σ_h α_h² V_h(x) + Σ_{h≠h'} α_h α_h' C_hh'(x).

:func:`bias_variance_covariance` computes the sample version from Monte Carlo predictions;
with ``ddof=0`` moments it holds exactly (to rounding). :func:`design_decomposition` gives
the conditional-on-design values from the weights: ``b_h = Σ_i w_i^h f(x_i) − f(x)``,
``V_h = σ² ‖w^h‖²``, ``C_hh' = σ² ⟨w^h, w^h'⟩`` (:func:`design_covariance`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validation import as_tensors, check_nonnegative, check_simplex

__all__ = ["BiasVarianceCovariance", "bias_variance_covariance", "design_covariance", "design_decomposition",
           "design_moments"]


@dataclass(frozen=True)
class BiasVarianceCovariance:
    """The terms of claim C2, per query and averaged over queries.

    Attributes
    ----------
    mse, bias_sq, variance, covariance : float
        Averages over the ``m`` queries of the per-query terms; ``mse == bias_sq +
        variance + covariance`` to rounding.
    mse_per_query, bias_sq_per_query, variance_per_query, covariance_per_query : ndarray (m,)
        ``variance = Σ_h α_h² V_h``, ``covariance = Σ_{h≠h'} α_h α_h' C_hh'``.
    bias_per_query : ndarray (m,)
        Ensemble bias ``Σ_h α_h b_h``.
    head_bias : ndarray (H, m)
        Per-head bias ``b_h``.
    covariance_matrix : ndarray (H, H, m)
        ``C_hh'`` per query (``V_h`` on the diagonal).
    mean_correlation : float
        Mean over queries and ordered pairs ``h ≠ h'`` of ``C_hh' / sqrt(V_h V_h')`` (pairs
        with zero variance skipped; NaN if none is left, e.g. ``H = 1``).
    alpha : ndarray (H,)
    n_replicates : int or None
        ``R`` for a Monte Carlo decomposition, ``None`` for the conditional one.
    """

    mse: float
    bias_sq: float
    variance: float
    covariance: float
    mse_per_query: np.ndarray
    bias_sq_per_query: np.ndarray
    variance_per_query: np.ndarray
    covariance_per_query: np.ndarray
    bias_per_query: np.ndarray
    head_bias: np.ndarray
    covariance_matrix: np.ndarray
    mean_correlation: float
    alpha: np.ndarray
    n_replicates: int | None = None


def _numpy64(arrays: dict, ndims: dict):
    tensors, _ = as_tensors(arrays, ndims)
    return [t.detach().cpu().double().numpy() for t in tensors]


def _mean_correlation(cov: np.ndarray) -> float:
    """Mean off-diagonal correlation from a (H, H, m) covariance stack."""
    n_heads = cov.shape[0]
    std = np.sqrt(np.clip(np.einsum("hhm->hm", cov), 0.0, None))  # (H, m)
    denom = std[:, None, :] * std[None, :, :]  # (H, H, m)
    off = ~np.eye(n_heads, dtype=bool)[:, :, None] & (denom > 0)  # (H, H, m)
    if not off.any():
        return float("nan")
    return float(np.mean(cov[off] / denom[off]))


def _assemble(head_bias, cov, alpha, mse_per_query, n_replicates):
    """Build the dataclass from per-head bias (H, m), covariance (H, H, m) and alpha (H,)."""
    bias = alpha @ head_bias  # (m,)
    weighted = alpha[:, None, None] * alpha[None, :, None] * cov  # (H, H, m)
    variance = np.einsum("hhm->m", weighted)  # (m,)
    covariance = weighted.sum(axis=(0, 1)) - variance  # (m,)
    if mse_per_query is None:
        mse_per_query = bias**2 + variance + covariance
    for name, term in (("mse", mse_per_query), ("bias", bias), ("variance", variance), ("covariance", covariance)):
        if not np.isfinite(term).all():
            raise ValueError(f"the {name} term overflows float64 (finite inputs whose squares exceed "
                             f"{np.finfo(np.float64).max:.3g}); rescale the predictions and targets")
    return BiasVarianceCovariance(
        mse=float(mse_per_query.mean()),
        bias_sq=float((bias**2).mean()),
        variance=float(variance.mean()),
        covariance=float(covariance.mean()),
        mse_per_query=mse_per_query,
        bias_sq_per_query=bias**2,
        variance_per_query=variance,
        covariance_per_query=covariance,
        bias_per_query=bias,
        head_bias=head_bias,
        covariance_matrix=cov,
        mean_correlation=_mean_correlation(cov),
        alpha=alpha,
        n_replicates=n_replicates,
    )


def bias_variance_covariance(head_predictions, target, alpha=None) -> BiasVarianceCovariance:
    """Monte Carlo bias–variance–covariance decomposition of an ensemble (claim C2).

    Moments use ``ddof=0`` over the ``R`` replicates, so the identity
    ``mse = bias_sq + variance + covariance`` holds exactly up to rounding (~1e-15
    relative); the terms are then unbiased estimates up to a factor ``(R−1)/R`` in the
    (co)variances.

    Parameters
    ----------
    head_predictions : array_like of shape (R, H, m)
        Prediction of head ``h`` at query ``j`` trained on replicate ``r``; ``R ≥ 2``.
    target : array_like of shape (m,)
        The true regression function ``f`` at the queries.
    alpha : array_like of shape (H,), optional
        Mixing weights in the simplex; default uniform.

    Returns
    -------
    BiasVarianceCovariance
        All arrays float64 numpy.

    Raises
    ------
    ValueError
        Wrong shapes, ``R < 2``, NaN/inf or empty inputs, ``alpha`` outside the simplex.

    Examples
    --------
    Two heads that always agree and scatter ±1 around a target of 0: no bias, variance
    ``(1/4 + 1/4)·1``, covariance ``2·(1/4)·1``, mse 1.

    >>> import numpy as np
    >>> preds = np.array([[[1.0], [1.0]], [[-1.0], [-1.0]]])  # (R=2, H=2, m=1)
    >>> d = bias_variance_covariance(preds, np.zeros(1))
    >>> d.mse, d.bias_sq, d.variance, d.covariance, d.mean_correlation
    (1.0, 0.0, 0.5, 0.5, 1.0)
    """
    predictions, target = _numpy64(
        {"head_predictions": head_predictions, "target": target}, {"head_predictions": 3, "target": 1}
    )
    if predictions.ndim != 3:
        raise ValueError(f"head_predictions must have shape (R, H, m); got {predictions.shape}")
    n_replicates, n_heads, m = predictions.shape
    if target.shape != (m,):
        raise ValueError(f"target must have shape (m,) = ({m},) to match head_predictions; got {target.shape}")
    if n_replicates < 2:
        raise ValueError(f"head_predictions must hold R >= 2 replicates; got R = {n_replicates}")
    alpha = check_simplex(alpha, n_heads)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported by _assemble
        return _monte_carlo(predictions, target, alpha)


def _monte_carlo(predictions, target, alpha):
    """The Monte Carlo terms from predictions (R, H, m), target (m,) and alpha (H,)."""
    n_replicates = predictions.shape[0]
    mean = predictions.mean(axis=0)  # (H, m)
    centred = predictions - mean  # (R, H, m)
    cov = np.einsum("rhm,rgm->hgm", centred, centred) / n_replicates  # (H, H, m), ddof=0
    ensemble = np.einsum("h,rhm->rm", alpha, predictions)  # (R, m)
    mse_per_query = ((ensemble - target) ** 2).mean(axis=0)  # (m,)
    return _assemble(mean - target, cov, alpha, mse_per_query, n_replicates)


def design_covariance(weights, sigma: float) -> np.ndarray:
    """Conditional head covariances ``C_hh'(x) = σ² ⟨w^h(x), w^h'(x)⟩`` (claim C2).

    Parameters
    ----------
    weights : array_like of shape (H, m, n)
        NW weights of every head (e.g. :meth:`MultiHeadNW.weights`).
    sigma : float
        Noise standard deviation ``σ ≥ 0``.

    Returns
    -------
    numpy.ndarray of shape (H, H, m)
        Float64; the diagonal holds ``V_h = σ² ‖w^h‖²``.

    Examples
    --------
    Uniform weights over n = 4 keys give ``V = σ²/4``:

    >>> import numpy as np
    >>> design_covariance(np.full((1, 1, 4), 0.25), sigma=2.0)
    array([[[1.]]])
    """
    (weights,) = _numpy64({"weights": weights}, {"weights": 3})
    if weights.ndim != 3:
        raise ValueError(f"weights must have shape (H, m, n); got {weights.shape}")
    sigma = check_nonnegative(sigma, "sigma")
    if not np.isfinite(sigma * sigma):
        raise ValueError(f"sigma is too large: sigma² overflows float64; got {sigma!r}")
    return sigma * sigma * np.einsum("hmn,gmn->hgm", weights, weights)  # (H, H, m)


def design_decomposition(weights, f_keys, f_queries, sigma: float, alpha=None) -> BiasVarianceCovariance:
    """Conditional-on-design bias–variance–covariance decomposition (claim C2).

    Parameters
    ----------
    weights : array_like of shape (H, m, n)
        NW weights of every head at the queries, for one fixed design.
    f_keys : array_like of shape (n,)
        ``f`` at the training points.
    f_queries : array_like of shape (m,)
        ``f`` at the queries.
    sigma : float
        Noise standard deviation ``σ ≥ 0``.
    alpha : array_like of shape (H,), optional

    Returns
    -------
    BiasVarianceCovariance
        With ``n_replicates=None``; ``mse = bias_sq + variance + covariance`` by definition.

    Examples
    --------
    One head averaging 4 keys where ``f = 1`` everywhere: no bias, ``V = σ²/4``.

    >>> import numpy as np
    >>> d = design_decomposition(np.full((1, 1, 4), 0.25), np.ones(4), np.ones(1), sigma=1.0)
    >>> d.bias_sq, d.variance, d.mse
    (0.0, 0.25, 0.25)
    """
    weights, f_keys, f_queries = _numpy64(
        {"weights": weights, "f_keys": f_keys, "f_queries": f_queries}, {"weights": 3, "f_keys": 1, "f_queries": 1}
    )
    if weights.ndim != 3:
        raise ValueError(f"weights must have shape (H, m, n); got {weights.shape}")
    n_heads, m, n = weights.shape
    if f_keys.shape != (n,):
        raise ValueError(f"f_keys must have shape (n,) = ({n},); got {f_keys.shape}")
    if f_queries.shape != (m,):
        raise ValueError(f"f_queries must have shape (m,) = ({m},); got {f_queries.shape}")
    alpha = check_simplex(alpha, n_heads)
    cov = design_covariance(weights, sigma)  # (H, H, m)
    head_bias = weights @ f_keys - f_queries  # (H, m)
    return _assemble(head_bias, cov, alpha, None, None)


def design_moments(predictions):
    """Per-replicate summands of the head variance and covariance, and their means.

    Parameters
    ----------
    predictions : ndarray of shape (R, H, m)

    Returns
    -------
    var_terms, cov_terms : ndarray of shape (R,)
        ``R/(R-1)·mean_{h,x}(f̂_h − f̄_h)²`` and the same for products over pairs ``h ≠ h'``;
        their means are the unbiased (ddof=1) sample variance and covariance averaged over
        heads (pairs) and queries, and ``std/√R`` is their standard error.
    """
    r, n_heads, _ = predictions.shape
    centred = predictions - predictions.mean(axis=0)  # (R, H, m)
    var_terms = (centred**2).mean(axis=(1, 2)) * r / (r - 1)  # (R,)
    total = centred.sum(axis=1)  # (R, m)
    off_diagonal = (total**2 - (centred**2).sum(axis=1)) / (n_heads * (n_heads - 1))  # mean over pairs, (R, m)
    cov_terms = off_diagonal.mean(axis=1) * r / (r - 1)  # (R,)
    return var_terms, cov_terms
