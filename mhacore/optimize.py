"""Optimising key subspaces on the Stiefel manifold (claim C4, seed's Theorem 5.1).

Chapter 5 asks whether minimising the mean squared error of a multi-head NW ensemble
drives the heads' key subspaces apart. Here every head ``h`` is described by an
orthonormal basis ``U_h ∈ St(p, d_head)`` (``U_hᵀU_h = I``); its query and key projections
are tied, ``w_query[h] = w_key[h] = scale · U_h``, so a head depends only on its subspace
``col(U_h)`` and the Head Diversity Index of :mod:`mhacore.diversity` measures exactly
what the optimiser moves. :func:`optimize_subspaces` runs Riemannian gradient descent on
the product of Stiefel manifolds (Euclidean gradient by torch autograd, projected onto the
tangent space, QR retraction; Absil, Mahony & Sepulchre 2008) and records HDI and the
loss terms along the way.

Losses (each a callable ``loss(bases) -> (scalar tensor, dict of floats)``):

* :func:`design_mse_loss` — the exact design-conditional MSE of claim C2 averaged over a
  few fixed designs: ``(Σ_h α_h b_h)² + σ² ‖Σ_h α_h w^h‖²`` per query, no Monte Carlo noise.
* :func:`monte_carlo_mse_loss` — squared error of the ensemble on fresh replicate training
  sets at every step (stochastic gradient).
* :func:`overlap_model_loss` — the C3 model ``B² + V[ρ̄ + (1−ρ̄)/H]`` with head correlation
  ``ρ_hh' = ρ₀ + (1−ρ₀)‖U_hᵀU_h'‖²_F / d_head``: MSE is affine and decreasing in HDI.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from ._rng import as_generator
from ._validation import as_float64_numpy, check_int, check_nonnegative, check_positive, check_probability, check_simplex
from .diversity import head_diversity_index
from .montecarlo import DataModel

__all__ = [
    "OptimizationResult",
    "identical_subspaces",
    "random_subspaces",
    "retract",
    "tangent_projection",
    "design_mse_loss",
    "monte_carlo_mse_loss",
    "overlap_model_loss",
    "optimize_subspaces",
]


# ----------------------------------------------------------------------------- geometry
def retract(matrices: torch.Tensor) -> torch.Tensor:
    """QR retraction onto the Stiefel manifold, batched: (..., p, k) -> (..., p, k).

    Returns the ``Q`` factor with signs fixed so that ``R`` has a positive diagonal (the
    unique Gram–Schmidt basis of the columns).

    Examples
    --------
    >>> import torch
    >>> q = retract(torch.tensor([[2.0, 1.0], [0.0, -3.0], [0.0, 0.0]]))
    >>> bool(torch.allclose(q, torch.tensor([[1.0, 0.0], [0.0, -1.0], [0.0, 0.0]])))
    True
    """
    q, r = torch.linalg.qr(matrices)  # (..., p, k), (..., k, k)
    signs = torch.where(torch.diagonal(r, dim1=-2, dim2=-1) < 0, -1.0, 1.0).to(q.dtype)
    return q * signs.unsqueeze(-2)


def tangent_projection(bases: torch.Tensor, gradient: torch.Tensor) -> torch.Tensor:
    """Riemannian gradient on St(p, k): ``G − U sym(UᵀG)`` (embedded metric), batched.

    Examples
    --------
    >>> import torch
    >>> u = torch.eye(3)[:, :1]
    >>> tangent_projection(u, torch.tensor([[2.0], [1.0], [0.0]])).flatten()
    tensor([0., 1., 0.])
    """
    inner = bases.transpose(-1, -2) @ gradient  # (..., k, k)
    return gradient - bases @ (0.5 * (inner + inner.transpose(-1, -2)))


def _check_shape(n_heads, d_head, p):
    n_heads = check_int(n_heads, "n_heads")
    d_head = check_int(d_head, "d_head")
    p = check_int(p, "p")
    if d_head > p:
        raise ValueError(f"d_head must be <= p = {p}; got {d_head}")
    return n_heads, d_head, p


def random_subspaces(n_heads, d_head, p, rng=None) -> np.ndarray:
    """Haar-random orthonormal bases, one per head: array of shape (H, p, d_head).

    Examples
    --------
    >>> import numpy as np
    >>> u = random_subspaces(3, 2, 5, rng=0)
    >>> u.shape, bool(np.allclose(u[1].T @ u[1], np.eye(2)))
    ((3, 5, 2), True)
    """
    n_heads, d_head, p = _check_shape(n_heads, d_head, p)
    gaussian = as_generator(rng).standard_normal((n_heads, p, d_head))
    return retract(torch.from_numpy(gaussian)).numpy()  # (H, p, d_head)


def identical_subspaces(n_heads, d_head, p, *, jitter=0.0, rng=None) -> np.ndarray:
    """``H`` copies of one random subspace, optionally perturbed: shape (H, p, d_head).

    Exactly identical heads are a fixed point of every symmetric loss (all heads receive
    the same gradient), so an optimiser started there never separates them; a small
    ``jitter`` (standard deviation of a Gaussian perturbation before re-orthonormalising)
    breaks the symmetry, as random initialisation does in training.

    Examples
    --------
    >>> from mhacore.diversity import head_diversity_index
    >>> round(head_diversity_index(identical_subspaces(4, 2, 8, rng=0)), 12)
    0.0
    >>> 0 < head_diversity_index(identical_subspaces(4, 2, 8, jitter=1e-2, rng=0)) < 1e-3
    True
    """
    n_heads, d_head, p = _check_shape(n_heads, d_head, p)
    jitter = check_nonnegative(jitter, "jitter")
    rng = as_generator(rng)
    base = rng.standard_normal((1, p, d_head)).repeat(n_heads, axis=0)  # (H, p, d_head)
    noise = rng.standard_normal((n_heads, p, d_head))
    return retract(torch.from_numpy(base + jitter * noise)).numpy()  # (H, p, d_head)


# ----------------------------------------------------------------------------- losses
def _head_weights(bases, queries, keys, scale, temperature):
    """Softmax NW weights of tied heads: (..., H, m, n) from bases (H, p, d) and data."""
    q = torch.einsum("...mp,hpd->...hmd", queries, bases)  # (..., H, m, d)
    k = torch.einsum("...np,hpd->...hnd", keys, bases)  # (..., H, n, d)
    logits = (scale**2 / temperature) * q @ k.transpose(-1, -2)  # (..., H, m, n)
    return torch.softmax(logits, dim=-1)


def _mixing(alpha, n_heads, dtype):
    """Mixing weights as a tensor; a torch ``alpha`` keeps its graph (gradients reach it)."""
    checked = check_simplex(alpha, n_heads)
    if isinstance(alpha, torch.Tensor):
        return alpha.to(dtype=dtype, device="cpu")
    return torch.as_tensor(checked, dtype=dtype)


def design_mse_loss(model: DataModel, n, m, *, n_designs=8, scale=1.0, temperature=None,
                    alpha=None, rng=None) -> Callable:
    """Exact design-conditional MSE of tied softmax heads, averaged over fixed designs.

    Draws ``n_designs`` training designs ``(n, p)`` and query sets ``(m, p)`` from
    ``model`` once; for bases ``U`` the loss is the mean over designs and queries of
    ``(Σ_h α_h b_h(x))² + σ² ‖Σ_h α_h w^h(x)‖²`` (claim C2 with ``f`` known), where
    ``w^h = softmax(scale² ⟨U_hᵀx, U_hᵀx_i⟩ / temperature)``.

    Parameters
    ----------
    model : DataModel
    n, m : int
        Training points and queries per design.
    n_designs : int
        Number of fixed designs averaged.
    scale : float
        ``w_key = w_query = scale · U`` (> 0).
    temperature : float, optional
        Softmax temperature; default ``sqrt(d_head)`` (fixed at the first call).
    alpha : array_like of shape (H,), optional
        Mixing weights; default uniform.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    callable
        ``loss(bases (H, p, d_head) tensor) -> (mse tensor, {"mse", "bias_sq", "variance",
        "covariance", "mean_correlation"})``; ``variance = Σα²V_h`` and ``covariance =
        Σ_{h≠h'} α_h α_h' C_hh'`` with ``C_hh' = σ²⟨w^h, w^h'⟩``.
    """
    if not isinstance(model, DataModel):
        raise TypeError(f"model must be a mhacore.DataModel; got {type(model).__name__}")
    n, m, n_designs = check_int(n, "n"), check_int(m, "m"), check_int(n_designs, "n_designs")
    scale = check_positive(scale, "scale")
    temperature = check_positive(temperature, "temperature", allow_none=True)
    rng = as_generator(rng)
    keys = torch.from_numpy(model.sample_design(rng, (n_designs, n)))  # (B, n, p)
    queries = torch.from_numpy(model.sample_design(rng, (n_designs, m)))  # (B, m, p)
    f_keys = torch.from_numpy(np.asarray(model.f(keys.numpy()), dtype=np.float64))  # (B, n)
    f_queries = torch.from_numpy(np.asarray(model.f(queries.numpy()), dtype=np.float64))  # (B, m)
    sigma2 = float(model.sigma) ** 2

    def loss(bases):
        n_heads, _, d_head = bases.shape
        tau = math.sqrt(d_head) if temperature is None else temperature
        a = _mixing(alpha, n_heads, bases.dtype)
        weights = _head_weights(bases, queries, keys, scale, tau)  # (B, H, m, n)
        head_bias = weights @ f_keys.unsqueeze(1).unsqueeze(-1)  # (B, H, m, 1)
        head_bias = head_bias.squeeze(-1) - f_queries.unsqueeze(1)  # (B, H, m)
        bias_sq = (torch.einsum("h,bhm->bm", a, head_bias) ** 2).mean()
        gram = sigma2 * torch.einsum("bhmn,bgmn->bhgm", weights, weights)  # (B, H, H, m)
        mixed = torch.einsum("h,g,bhgm->bhgm", a, a, gram)
        variance = torch.diagonal(mixed, dim1=1, dim2=2).sum(-1).mean()
        covariance = mixed.sum((1, 2)).mean() - variance
        mse = bias_sq + variance + covariance
        diag = torch.diagonal(gram, dim1=1, dim2=2).clamp_min(1e-300)  # (B, m, H)
        corr = gram / torch.sqrt(diag.transpose(1, 2).unsqueeze(2) * diag.transpose(1, 2).unsqueeze(1))
        off = ~torch.eye(n_heads, dtype=torch.bool)
        mean_corr = corr[:, off].mean() if n_heads > 1 and sigma2 > 0 else torch.tensor(float("nan"))
        terms = {"mse": mse, "bias_sq": bias_sq, "variance": variance, "covariance": covariance,
                 "mean_correlation": mean_corr}
        return mse, {k: float(v.detach()) for k, v in terms.items()}

    return loss


def monte_carlo_mse_loss(model: DataModel, n, m, *, n_replicates=16, scale=1.0, temperature=None,
                         alpha=None, rng=None) -> Callable:
    """Squared error of the ensemble on fresh replicate training sets at every call.

    Each call draws ``n_replicates`` designs with noisy responses and query sets, and
    returns the mean of ``(Σ_h α_h f̂_h(x) − f(x))²``: an unbiased estimate of the
    random-design MSE, so gradient descent on it is stochastic gradient descent.

    Returns
    -------
    callable
        ``loss(bases) -> (mse estimate tensor, {"mse": float})``.
    """
    if not isinstance(model, DataModel):
        raise TypeError(f"model must be a mhacore.DataModel; got {type(model).__name__}")
    n, m = check_int(n, "n"), check_int(m, "m")
    n_replicates = check_int(n_replicates, "n_replicates")
    scale = check_positive(scale, "scale")
    temperature = check_positive(temperature, "temperature", allow_none=True)
    rng = as_generator(rng)

    def loss(bases):
        n_heads, _, d_head = bases.shape
        tau = math.sqrt(d_head) if temperature is None else temperature
        a = _mixing(alpha, n_heads, bases.dtype)
        keys = model.sample_design(rng, (n_replicates, n))  # (R, n, p)
        values = torch.from_numpy(model.responses(keys, rng))  # (R, n)
        queries = model.sample_design(rng, (n_replicates, m))  # (R, m, p)
        target = torch.from_numpy(np.asarray(model.f(queries), dtype=np.float64))  # (R, m)
        weights = _head_weights(bases, torch.from_numpy(queries), torch.from_numpy(keys), scale, tau)
        heads = (weights @ values.unsqueeze(1).unsqueeze(-1)).squeeze(-1)  # (R, H, m)
        mse = ((torch.einsum("h,rhm->rm", a, heads) - target) ** 2).mean()
        return mse, {"mse": float(mse.detach())}

    return loss


def overlap_model_loss(*, variance=1.0, rho0=0.0, bias_sq=0.0) -> Callable:
    """MSE of the C3 overlap model, as a function of the bases (uniform mixing).

    ``ρ_hh' = ρ₀ + (1−ρ₀) ‖U_hᵀU_h'‖²_F / d_head`` and equal per-head variance ``V`` give
    ``MSE = B² + V[ρ̄ + (1−ρ̄)/H]`` with ``ρ̄ = ρ₀ + (1−ρ₀)(1 − HDI)``, so the minimiser is the
    most diverse feasible configuration (claims C3, C4).

    Examples
    --------
    >>> import torch
    >>> loss = overlap_model_loss(variance=1.0, rho0=0.0)
    >>> mse, terms = loss(torch.eye(4, dtype=torch.float64).unsqueeze(-1))  # 4 orthogonal lines
    >>> round(terms["hdi"], 12), round(terms["mse"], 12)
    (1.0, 0.25)
    """
    variance = check_positive(variance, "variance")
    rho0 = check_probability(rho0, "rho0")
    bias_sq = check_nonnegative(bias_sq, "bias_sq")

    def loss(bases):
        n_heads, _, d_head = bases.shape
        overlaps = torch.einsum("hpi,gpj->hgij", bases, bases).pow(2).sum((-1, -2))  # (H, H)
        off = overlaps.sum() - torch.diagonal(overlaps).sum()
        hdi = 1.0 - off / (n_heads * (n_heads - 1) * d_head)
        rho_bar = rho0 + (1.0 - rho0) * (1.0 - hdi)
        mse = bias_sq + variance * (rho_bar + (1.0 - rho_bar) / n_heads)
        return mse, {"mse": float(mse.detach()), "hdi": float(hdi.detach()), "mean_correlation": float(rho_bar.detach())}

    return loss


# ----------------------------------------------------------------------------- optimiser
def _evaluate(loss, bases, step):
    """``loss(bases)``, checked: a finite scalar tensor that depends on the bases, and a dict."""
    out = loss(bases)
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], torch.Tensor)
            and out[0].numel() == 1 and isinstance(out[1], dict)):
        raise TypeError("loss must return (scalar tensor, dict of floats); "
                        f"got {type(out).__name__} {out!r:.80}")
    value, terms = out
    if not value.requires_grad:
        raise ValueError("loss must return a tensor computed from the bases (it has no gradient); "
                         f"got {value!r}")
    if not torch.isfinite(value.detach()).all():
        raise ValueError(f"loss must return a finite value; got {float(value.detach())} at step {step}")
    return value.reshape(()), terms


@dataclass(frozen=True)
class OptimizationResult:
    """Outcome of :func:`optimize_subspaces`.

    Attributes
    ----------
    bases : numpy.ndarray of shape (H, p, d_head)
        Final orthonormal bases (multiply by the loss's ``scale`` for ``w_key``).
    history : dict of str to numpy.ndarray
        ``"step"``, ``"hdi"`` (via :func:`mhacore.head_diversity_index`), ``"loss"``,
        ``"gradient_norm"`` and every term the loss reports, one entry per recorded step.
    """

    bases: np.ndarray
    history: dict = field(default_factory=dict)


def optimize_subspaces(initial_bases, loss: Callable, *, n_steps=200, learning_rate=0.1,
                       record_every=10, max_step=0.5, gradient_tolerance=None) -> OptimizationResult:
    """Riemannian gradient descent of ``loss`` over ``H`` key subspaces (claim C4).

    One step: Euclidean gradient ``G`` (torch autograd), tangent projection
    ``ξ = G − U sym(UᵀG)`` per head, step ``U − η ξ`` (its Frobenius norm clipped to
    ``max_step`` per head) and QR retraction back to ``St(p, d_head)``.

    Parameters
    ----------
    initial_bases : array_like of shape (H, p, d_head)
        Starting bases; re-orthonormalised first.
    loss : callable
        ``loss(bases tensor (H, p, d_head)) -> (scalar tensor, dict of floats)``, e.g.
        :func:`design_mse_loss`.
    n_steps : int
        Gradient steps (≥ 1); the most steps when ``gradient_tolerance`` is given.
    learning_rate : float
        Step size ``η > 0``.
    record_every : int
        Record history every this many steps (and at the first and last step).
    max_step : float
        Per-head cap on the Frobenius norm of ``η ξ`` (> 0): keeps early steps stable.
    gradient_tolerance : float, optional
        Stop at the first step whose Riemannian gradient norm ``‖ξ‖`` is at most this
        (> 0); that step is recorded. ``None``: run all ``n_steps``.

    Returns
    -------
    OptimizationResult

    Examples
    --------
    Minimising the overlap model from nearly identical heads reaches HDI = 1 when
    ``H·d_head ≤ p``:

    >>> start = identical_subspaces(4, 2, 8, jitter=0.05, rng=0)
    >>> result = optimize_subspaces(start, overlap_model_loss(), n_steps=300, learning_rate=0.5)
    >>> print(f"HDI {result.history['hdi'][0]:.2f} -> {result.history['hdi'][-1]:.6f}")
    HDI 0.01 -> 1.000000
    """
    start = as_float64_numpy(initial_bases, "initial_bases")
    if start.ndim != 3 or start.shape[0] < 2 or start.shape[2] > start.shape[1]:
        raise ValueError(f"initial_bases must have shape (H, p, d_head) with H >= 2 and d_head <= p; got {start.shape}")
    if not np.isfinite(start).all():
        raise ValueError("initial_bases must contain only finite values")
    if not callable(loss):
        raise TypeError(f"loss must be callable; got {type(loss).__name__}")
    n_steps = check_int(n_steps, "n_steps")
    record_every = check_int(record_every, "record_every")
    learning_rate = check_positive(learning_rate, "learning_rate")
    max_step = check_positive(max_step, "max_step")
    if gradient_tolerance is not None:
        gradient_tolerance = check_positive(gradient_tolerance, "gradient_tolerance")
    bases = retract(torch.from_numpy(start))  # (H, p, d_head)
    history: dict[str, list] = {}

    def record(step, value, terms, grad_norm):
        row = {"step": step, "hdi": head_diversity_index(bases.numpy()), "loss": float(value),
               "gradient_norm": grad_norm, **terms}
        for key, v in row.items():
            history.setdefault(key, []).append(v)

    for step in range(n_steps + 1):
        u = bases.clone().requires_grad_(True)
        value, terms = _evaluate(loss, u, step)
        (gradient,) = torch.autograd.grad(value, u)
        direction = tangent_projection(bases, gradient)  # (H, p, d_head)
        grad_norm = float(direction.norm())
        last = step == n_steps or (gradient_tolerance is not None and grad_norm <= gradient_tolerance)
        if step % record_every == 0 or last:
            record(step, value.detach(), terms, grad_norm)
        if last:
            break
        move = learning_rate * direction
        norms = move.norm(dim=(-2, -1), keepdim=True).clamp_min(1e-300)  # (H, 1, 1)
        move = move * torch.clamp(max_step / norms, max=1.0)
        bases = retract(bases - move).detach()
    return OptimizationResult(bases.numpy(), {k: np.asarray(v) for k, v in history.items()})
