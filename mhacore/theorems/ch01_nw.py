"""Chapter 1 checks: the Nadaraya–Watson estimator and its bandwidth rate.

Theorem (chapter 1, ``thm-nw-rate``): for a 1-D Gaussian-kernel NW estimator with a smooth
regression function and a uniform design, the leading bias is ``∝ h²``, the leading
variance ``∝ σ²/(n h)``, and the MSE-optimal bandwidth is ``h* ∝ n^{-1/5}``
(``n^{-1/(4+d)}`` in ``d`` dimensions).

The numerical check simulates the Monte Carlo MSE on a grid of bandwidths for several
sample sizes, locates ``h*(n)`` by a local quadratic fit of ``log MSE`` against ``log h``,
regresses ``log h*`` on ``log n`` and compares the slope with ``-1/5``. Its standard error
carries the noise of the ``h*`` estimates into the slope by the delta method, from the spread
of the Monte Carlo replicates (:func:`log_h_star_variance`). Over seeds 1-60 it ran about
10 % below the slopes' spread (sd of z 1.13) and a bootstrap that re-locates every ``h*(n)``
about 10 % above it; both reject −1/4. With five sample sizes (100 to 1600) the bootstrap SE
was 0.010 and could not.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .. import distributed
from ..nw import nw_estimate
from ._registry import Measurement, interior_argmin, register

__all__ = ["regression_function", "mse_curves", "argmin_log_bandwidth", "fit_rate"]

SIGMA = 0.5  # noise standard deviation of the chapter's model
QUERY_RANGE = (0.25, 0.75)  # interior queries: no boundary bias for the bandwidths used

SETTINGS = {
    # n values, bandwidth grid (log-spaced), replicates, queries, bootstrap resamples
    "book": dict(n_values=(100, 200, 400, 800, 1600, 3200), n_bandwidths=13, replicates=150, n_queries=21,
                 n_boot=400),
    "large": dict(n_values=(100, 200, 400, 800, 1600, 3200, 6400), n_bandwidths=19, replicates=1000, n_queries=41,
                  n_boot=1000),
}


SETTINGS_2D = {
    "book": dict(n_values=(100, 200, 400, 800), n_bandwidths=13, replicates=60, n_queries=25, n_boot=200),
    "large": dict(n_values=(100, 200, 400, 800, 1600, 3200), n_bandwidths=17, replicates=200, n_queries=25,
                  n_boot=400),
}
BANDWIDTHS_2D = (0.025, 0.2)  # brackets h* for d = 2 over the n values above
#: Replicates per block of :func:`rate_experiment`: block ``b`` at the ``i``-th sample size
#: draws from ``replicate_rng(seed, i, b)``, whatever the number of ranks.
REPLICATE_BLOCK = 250  # fewer, larger batched calls: small ones lose to thread sync on a busy CPU


def regression_function(x):
    """The chapter's regression function ``f(x) = sin(2πx)`` (array in, array out).

    On points of shape ``(..., d)`` with ``d > 1`` (a trailing axis), it is the sum
    ``Σ_j sin(2π x_j)`` over the coordinates; :func:`mse_curves` passes that shape when
    ``dim > 1``.
    """
    return np.sin(2 * np.pi * x) if isinstance(x, np.ndarray) else torch.sin(2 * math.pi * x)


def _signal(points, dim):
    """``f`` at points of shape ``(..., dim)``: the 1-D function, or its sum over coordinates."""
    values = regression_function(points)
    return values[..., 0] if dim == 1 else values.sum(-1)


def mse_curves(n, bandwidths, *, replicates, n_queries=41, sigma=SIGMA, rng=None, device="cpu", queries=None,
               dim=1):
    """Squared error of Gaussian NW per replicate and bandwidth, averaged over queries.

    Each replicate draws a fresh uniform design ``x_i ~ U(0, 1)^dim`` and fresh noise
    ``y_i = f(x_i) + σ ε_i``; every bandwidth uses the same replicates (common random
    numbers), so the curves are smooth in ``h``.

    Parameters
    ----------
    n : int
        Sample size.
    bandwidths : array_like of shape (J,)
    replicates : int
        Monte Carlo replicates R.
    n_queries : int
        Queries on an even grid of ``QUERY_RANGE`` (when ``queries`` is not given); for
        ``dim > 1``, the points of a ``n_queries^(1/dim)`` grid per axis, rounded down.
    sigma : float
    rng : numpy.random.Generator or int, optional
    device : str
    queries : array_like of shape (m,) or (m, dim), optional
        Query points in [0, 1]^dim instead of the interior grid (e.g. at the boundary).
    dim : int
        Dimension ``d`` of the design; ``f(x) = Σ_j sin(2π x_j)`` and a product Gaussian
        kernel with one bandwidth when ``dim > 1``.

    Returns
    -------
    errors : numpy.ndarray of shape (R, J)
        ``mean_x (f̂_h(x) − f(x))²`` for every replicate and bandwidth.
    """
    rng = np.random.default_rng(rng)
    if queries is None:
        per_axis = n_queries if dim == 1 else max(2, int(round(n_queries ** (1 / dim))))
        axis = torch.linspace(*QUERY_RANGE, per_axis, dtype=torch.float64)
        queries = torch.cartesian_prod(*[axis] * dim).reshape(-1, dim)  # (m, dim)
    queries = torch.as_tensor(queries, dtype=torch.float64).to(device).reshape(-1, dim)  # (m, dim)
    truth = _signal(queries, dim)  # (m,)
    x = torch.as_tensor(rng.uniform(size=(replicates, n, dim)), device=device)  # (R, n, dim)
    y = _signal(x, dim) + sigma * torch.as_tensor(rng.standard_normal((replicates, n)), device=device)  # (R, n)
    errors = np.empty((replicates, len(bandwidths)))
    for j, h in enumerate(bandwidths):
        estimates = nw_estimate(queries, x, y, kernel="gaussian", bandwidth=float(h))  # (R, m)
        errors[:, j] = ((estimates - truth) ** 2).mean(dim=-1).cpu().numpy()
    return errors


def argmin_log_bandwidth(log_bandwidths, mse, half_width=3):
    """Minimiser of a sampled MSE curve: a quadratic fit of ``log MSE`` on ``log h``.

    Fits the ``2·half_width + 1`` grid points centred on the sampled minimum (clipped to the
    grid) and returns the vertex, clipped to the fitted window.  The sampled minimum must be
    interior (:func:`~mhacore.theorems._registry.interior_argmin`): a minimum on the edge of
    the grid only bounds ``h*``, so it raises ``ValueError`` instead of returning the edge.

    >>> u = np.linspace(-2, 2, 21)
    >>> round(float(argmin_log_bandwidth(u, np.exp((u - 0.33) ** 2))), 10)
    0.33
    """
    log_bandwidths, mse = np.asarray(log_bandwidths), np.asarray(mse)
    j = interior_argmin(np.exp(log_bandwidths).round(5), mse, "bandwidth grid")
    lo = min(max(j - half_width, 0), len(mse) - 2 * half_width - 1)
    window = slice(lo, lo + 2 * half_width + 1)
    c2, c1, _ = np.polyfit(log_bandwidths[window], np.log(mse[window]), 2)
    vertex = -c1 / (2 * c2) if c2 > 0 else log_bandwidths[j]
    return float(np.clip(vertex, log_bandwidths[window][0], log_bandwidths[window][-1]))


def log_h_star_variance(log_bandwidths, curves, half_width=3):
    """Delta-method variance of :func:`argmin_log_bandwidth` of the mean of ``curves``.

    The vertex ``−β₁/(2β₂)`` of the quadratic fitted to ``log mean`` over the window is a
    smooth function of the window's mean MSEs; its gradient times their covariance (the
    spread of the replicates, over ``R``) gives its variance. The window is taken as fixed
    (it is, once the noise is small against the curve's depth).

    Parameters
    ----------
    log_bandwidths : array_like of shape (J,)
    curves : array_like of shape (R, J)
        Per-replicate MSE curves (:func:`mse_curves`), independent across replicates.

    Returns
    -------
    float

    Examples
    --------
    >>> u = np.linspace(-1, 1, 9)
    >>> rng = np.random.default_rng(0)
    >>> curves = np.exp(u**2) * (1 + 0.01 * rng.standard_normal((400, 1)))  # a common scale
    >>> log_h_star_variance(u, curves) < 1e-20  # a scale does not move the vertex
    True
    """
    log_bandwidths = np.asarray(log_bandwidths, dtype=np.float64)
    curves = np.asarray(curves, dtype=np.float64)  # (R, J)
    mean = curves.mean(axis=0)  # (J,)
    j = interior_argmin(np.exp(log_bandwidths).round(5), mean, "bandwidth grid")
    lo = min(max(j - half_width, 0), len(mean) - 2 * half_width - 1)
    window = slice(lo, lo + 2 * half_width + 1)
    pinv = np.linalg.pinv(np.vander(log_bandwidths[window], 3))  # (3, W): β = pinv · log mean
    b2, b1, _ = pinv @ np.log(mean[window])
    gradient = np.array([b1 / (2 * b2**2), -1 / (2 * b2), 0.0]) @ pinv / mean[window]  # (W,)
    cov = np.atleast_2d(np.cov(curves[:, window].T)) / len(curves)  # (W, W), of the means
    return float(gradient @ cov @ gradient)


def fit_rate(log_n, log_h_star):
    """Least-squares slope of ``log h*`` on ``log n`` and its classical (residual) SE."""
    log_n, log_h_star = np.asarray(log_n, float), np.asarray(log_h_star, float)
    centred = log_n - log_n.mean()
    slope = float(centred @ (log_h_star - log_h_star.mean()) / (centred @ centred))
    residuals = log_h_star - log_h_star.mean() - slope * centred
    se = math.sqrt(residuals @ residuals / (len(log_n) - 2) / (centred @ centred)) if len(log_n) > 2 else math.nan
    return slope, se


def bandwidth_grid(n_bandwidths, lo=0.018, hi=0.1):
    """The log-spaced bandwidth grid used for every n (wide enough to bracket all h*)."""
    return np.geomspace(lo, hi, n_bandwidths)


def rate_experiment(scale="book", device="cpu", seed=0, queries=None, bandwidths=None, dim=1):
    """The whole experiment: MSE curves, h*(n), slope, bootstrap SE. Returns a dict.

    ``queries`` (default: the interior grid) and ``bandwidths`` (default:
    :func:`bandwidth_grid`, or ``BANDWIDTHS_2D`` when ``dim = 2``) replace the check's;
    every ``h*(n)``, and every bootstrap re-location, must be interior to the bandwidth
    grid, or ``ValueError`` is raised.  ``dim = 2`` uses :data:`SETTINGS_2D`.

    The replicates at the ``i``-th sample size come in blocks of :data:`REPLICATE_BLOCK`,
    block ``b`` drawn from ``replicate_rng(seed, i, b)`` and shared by the ranks under
    ``torchrun``; the bootstrap draws from ``replicate_rng(seed, len(n_values))``.
    """
    if dim not in (1, 2):
        raise ValueError(f"dim must be 1 or 2; got {dim!r}")
    s = SETTINGS[scale] if dim == 1 else SETTINGS_2D[scale]
    if bandwidths is None:
        bandwidths = bandwidth_grid(s["n_bandwidths"]) if dim == 1 else np.geomspace(*BANDWIDTHS_2D, s["n_bandwidths"])
    bandwidths = np.asarray(bandwidths, float)
    log_h = np.log(bandwidths)
    curves = distributed.map_group_blocks(  # each (R, J), block b of n_i from replicate_rng(seed, i, b)
        lambda i, size, gen: mse_curves(s["n_values"][i], bandwidths, replicates=size, n_queries=s["n_queries"],
                                        rng=gen, device=device, queries=queries, dim=dim),
        len(s["n_values"]), s["replicates"], REPLICATE_BLOCK, seed)
    log_n = np.log(s["n_values"])
    log_h_star = np.array([argmin_log_bandwidth(log_h, c.mean(axis=0)) for c in curves])
    slope, regression_se = fit_rate(log_n, log_h_star)
    centred = (log_n - log_n.mean()) / ((log_n - log_n.mean()) ** 2).sum()  # slope = Σ c_i log h*_i
    variances = np.array([log_h_star_variance(log_h, c) for c in curves])  # (N,), independent n
    delta_se = float(np.sqrt(centred**2 @ variances))
    boot_rng, boot = distributed.replicate_rng(seed, len(s["n_values"])), np.empty(s["n_boot"])
    for b in range(s["n_boot"]):
        resampled = [argmin_log_bandwidth(log_h, c[boot_rng.integers(0, len(c), len(c))].mean(axis=0))
                     for c in curves]
        boot[b] = fit_rate(log_n, resampled)[0]
    return dict(n_values=list(s["n_values"]), bandwidths=bandwidths, curves=curves,
                h_star=np.exp(log_h_star), slope=slope, bootstrap_se=float(boot.std(ddof=1)),
                delta_se=delta_se,
                regression_se=regression_se, bootstrap_slopes=boot)


@register(
    "nw-bandwidth-rate",
    kind="model",
    claim_id="C0",
    title="MSE-optimal NW bandwidth shrinks like n^(-1/5) in one dimension",
    chapter="01-nadaraya-watson",
    claim="For 1-D Gaussian-kernel NW, h* ∝ n^(-1/(4+d)) = n^(-1/5): slope of log h* on log n is -1/5.",
    symbolic="SymPy: bias ~ h²f''/2, variance ~ σ²R(K)/(n h); minimising AMISE gives h* ∝ n^(-1/(4+d)).",
    caveat="Asymptotic: f twice differentiable, uniform design, interior queries (no boundary bias), "
           "h → 0 and n h → ∞; finite-n slopes carry higher-order terms.",
    power=("Book scale (delta-method SE 0.0052 from the replicates' spread; over seeds 1-60 the slopes' sd "
           "was 0.0059 and the bootstrap's SE 0.0065): detects a change of the slope by 4 SE ≈ 0.021. The exponent "
           "−1/4 that the chapter contrasts is rejected (z = +7.2 at the registered seed, about +9 on average; "
           "+5.2 with the bootstrap's SE). "
           "Boundary queries (true slope −1/3) on a grid that brackets h* (13 bandwidths from 0.004 to 0.1): "
           "slope −0.357 ± 0.017, z = −9.1, fails; on the check's own grid they stop the search (h* on the grid "
           "edge). It does not resolve the finite-n bias of the slope (about −0.004, 0.8 SE).")
)
@distributed.sharded  # its replicate blocks are shared by the ranks
def _check_rate(scale, device, seed):
    result = rate_experiment(scale, device, seed)
    return Measurement(
        estimate=result["slope"], prediction=-0.2, standard_error=result["delta_se"], rule="4se",
        details=dict(n_values=result["n_values"], h_star=[round(float(h), 5) for h in result["h_star"]],
                     bandwidths=[round(float(h), 5) for h in result["bandwidths"]],
                     mean_mse=[[float(f"{v:.5g}") for v in c.mean(axis=0)] for c in result["curves"]],
                     regression_se=round(result["regression_se"], 5),
                     bootstrap_se=round(result["bootstrap_se"], 5),
                     se_method="delta method from the replicates' spread"),
    )

