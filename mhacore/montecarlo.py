"""Monte Carlo engine: replicate training sets, all heads on all replicates in one call.

A :class:`DataModel` fixes ``y = f(x) + ε`` with ``Var ε = σ²`` and a design distribution
for ``x ∈ R^p``. :func:`simulate_heads` draws ``R`` replicate training sets (random design,
or one fixed design with fresh noise), evaluates every head of a :class:`MultiHeadNW` on
every replicate with batched calls (chunks of replicates, any torch device) and returns
the ``(R, H, m)`` predictions that :func:`mhacore.bias_variance_covariance` decomposes
(claim C2). Randomness: replicate ``r`` draws from its own child generator (``spawn``), so
results do not depend on the chunk size or the device. Under ``torchrun`` the chunks are
shared by the ranks (:func:`mhacore.distributed.map_items`) and every rank gets the same
``(R, H, m)`` array, identical to a single-process run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from tqdm import tqdm

from . import distributed
from ._rng import spawn
from ._validation import (as_float64_numpy, as_tensors, check_bool, check_device, check_finite, check_float_dtype,
                          check_int, check_nonnegative)
from .attention import MultiHeadNW
from .decomposition import BiasVarianceCovariance, bias_variance_covariance

__all__ = ["DataModel", "simulate_heads", "simulate_decomposition"]

DESIGNS = ("uniform", "normal")
CHUNK_LOGITS = 2**24  # head x query x key products per replicate chunk
PROGRESS_LOGITS = 2**31  # show a progress bar by default above this much work


@dataclass(frozen=True)
class DataModel:
    """Regression model ``y = f(x) + ε``, ``ε ~ N(0, σ²)`` independent, ``x ~ design``.

    Parameters
    ----------
    f : callable
        Vectorised regression function: float64 array ``(..., p)`` -> ``(...)``.
    p : int
        Covariate dimension ``≥ 1``.
    sigma : float
        Noise standard deviation ``≥ 0``.
    design : {"uniform", "normal"} or callable
        ``"uniform"`` on ``[-1, 1]^p``, ``"normal"`` standard normal, or
        ``design(rng, shape)`` returning an array of shape ``(*shape, p)``.

    Examples
    --------
    >>> import numpy as np
    >>> model = DataModel(f=lambda x: x.sum(-1), p=2, sigma=0.0)
    >>> keys, values = model.sample(np.random.default_rng(0), n=3)
    >>> keys.shape, bool(np.allclose(values, keys.sum(-1)))
    ((3, 2), True)
    """

    f: Callable[[np.ndarray], np.ndarray]
    p: int
    sigma: float
    design: str | Callable = "uniform"

    def __post_init__(self):
        if not callable(self.f):
            raise TypeError(f"f must be callable; got {type(self.f).__name__}")
        check_int(self.p, "p")
        check_nonnegative(self.sigma, "sigma")
        if not callable(self.design) and self.design not in DESIGNS:
            raise ValueError(f"design must be one of {DESIGNS} or a callable; got {self.design!r}")

    def sample_design(self, rng: np.random.Generator, shape: tuple) -> np.ndarray:
        """Covariates of shape ``(*shape, p)``, float64."""
        if self.design == "uniform":
            return rng.uniform(-1.0, 1.0, size=(*shape, self.p))
        if self.design == "normal":
            return rng.standard_normal(size=(*shape, self.p))
        x = np.asarray(self.design(rng, tuple(shape)), dtype=np.float64)
        if x.shape != (*shape, self.p):
            raise ValueError(f"design(rng, shape) must return shape {(*shape, self.p)}; got {x.shape}")
        return x

    def sample(self, rng: np.random.Generator, n: int, keys=None):
        """One training set: keys ``(n, p)`` (drawn unless given) and values ``(n,)``."""
        keys = self.sample_design(rng, (n,)) if keys is None else keys
        return keys, self.responses(keys, rng)

    def responses(self, keys: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Noisy responses ``f(keys) + σ ε`` of shape ``keys.shape[:-1]``.

        What ``f`` returns is checked as ``f(x)``: real, finite and of the right shape; noise
        that overflows names ``sigma``.
        """
        clean = as_float64_numpy(self.f(keys), "f(x)")  # TypeError for strings, None, ...
        if clean.shape != keys.shape[:-1]:
            raise ValueError(f"f must map shape (..., p) to (...); got {keys.shape} -> {clean.shape}")
        check_finite(torch.from_numpy(clean), "f(x)")
        with np.errstate(over="ignore"):
            responses = clean + self.sigma * rng.standard_normal(size=clean.shape)
        if not np.isfinite(responses).all():
            raise ValueError(f"the responses f(x) + sigma * noise overflow float64 with sigma={self.sigma!r} "
                             f"(largest |f(x)| {np.abs(clean).max():.3g}); use a smaller sigma or rescale f")
        return responses


def _draw(model, children, n, fixed_keys):
    """Stack replicate training sets: keys (r, n, p) or (n, p), values (r, n)."""
    if fixed_keys is not None:
        values = np.stack([model.responses(fixed_keys, g) for g in children])  # (r, n)
        return fixed_keys, values
    keys = np.stack([model.sample_design(g, (n,)) for g in children])  # (r, n, p)
    return keys, np.stack([model.responses(k, g) for k, g in zip(keys, children)])  # (r, n)


def simulate_heads(
    model: DataModel,
    mha: MultiHeadNW,
    n: int,
    queries,
    n_replicates: int,
    rng=None,
    *,
    fixed_design=False,
    device="cpu",
    dtype=torch.float64,
    chunk_size=None,
    progress=None,
) -> np.ndarray:
    """Predictions of every head on ``R`` replicate training sets (input to claim C2).

    Parameters
    ----------
    model : DataModel
    mha : MultiHeadNW
        With ``mha.p == model.p``.
    n : int
        Training-set size ``≥ 1``.
    queries : array_like of shape (m, p)
        Fixed query points.
    n_replicates : int
        ``R ≥ 1``.
    rng : None, int or numpy.random.Generator
        Replicate ``r`` uses child ``r + 1`` of ``spawn(rng, R + 1)``; child 0 draws the
        fixed design.
    fixed_design : bool or array_like of shape (n, p)
        ``False``: a fresh design per replicate (random design). ``True``: one design
        drawn once, fresh noise per replicate (conditional on the design). An array: that
        design.
    device : str or torch.device
        Where the heads run (e.g. ``"cuda"``); data are drawn by numpy, so results agree
        across devices up to rounding. It must exist on this machine.
    dtype : torch.dtype, numpy dtype or str
        Computation dtype, float32 or float64 (default); integer dtypes are refused (they
        would truncate the data).
    chunk_size : int, optional
        Replicates per batched call; default keeps ``~1.7e7`` head-query-key products per
        call.
    progress : bool, optional
        tqdm progress bar over chunks; default on only for long runs (> 2^31 products).

    Returns
    -------
    numpy.ndarray of shape (R, H, m), float64

    Raises
    ------
    ValueError, TypeError
        Bad sizes, queries of the wrong shape, a fixed design of the wrong shape, or a
        model/attention dimension mismatch.

    Examples
    --------
    With σ = 0 and a constant ``f`` every head predicts the constant exactly:

    >>> import numpy as np
    >>> model = DataModel(f=lambda x: np.full(x.shape[:-1], 2.0), p=2, sigma=0.0)
    >>> mha = MultiHeadNW(np.ones((3, 2, 1)), np.ones((3, 2, 1)))
    >>> preds = simulate_heads(model, mha, n=10, queries=np.zeros((4, 2)), n_replicates=5, rng=0)
    >>> preds.shape, bool(np.allclose(preds, 2.0))
    ((5, 3, 4), True)
    """
    if not isinstance(model, DataModel):
        raise TypeError(f"model must be a DataModel; got {type(model).__name__}")
    if not isinstance(mha, MultiHeadNW):
        raise TypeError(f"mha must be a MultiHeadNW; got {type(mha).__name__}")
    if mha.p != model.p:
        raise ValueError(f"mha.p must equal model.p = {model.p}; got {mha.p}")
    n, n_replicates = check_int(n, "n"), check_int(n_replicates, "n_replicates")
    dtype, device = check_float_dtype(dtype), check_device(device)
    progress = check_bool(progress, "progress", allow_none=True)
    (queries,), _ = as_tensors({"queries": queries}, {"queries": 2})
    if queries.shape[1:] != (model.p,) or queries.ndim != 2:
        raise ValueError(f"queries must have shape (m, p) with p = {model.p}; got {tuple(queries.shape)}")
    queries = queries.to(device=device, dtype=dtype)  # (m, p)
    children = spawn(rng, n_replicates + 1)
    fixed_keys = _fixed_design(model, fixed_design, n, children[0])
    work = mha.n_heads * queries.shape[0] * n  # products per replicate
    step = check_int(chunk_size, "chunk_size") if chunk_size is not None else max(1, CHUNK_LOGITS // work)
    starts = range(0, n_replicates, step)
    show = progress if progress is not None else (len(starts) > 1 and work * n_replicates > PROGRESS_LOGITS)
    bar = tqdm(total=len(starts), disable=not show, desc="replicates", unit="chunk")
    to = lambda a: torch.as_tensor(a, device=device, dtype=dtype)  # noqa: E731

    def chunk(i):  # replicates starts[i] .. starts[i] + step - 1, the same on any rank
        r0 = starts[i]
        keys, values = _draw(model, children[1 + r0 : 1 + r0 + step], n, fixed_keys)
        heads = mha.head_estimates(queries, to(keys), to(values))  # (r, H, m)
        bar.update()
        return heads.detach().cpu().double().numpy()

    # under torchrun each rank computes its shard of the chunks (mhacore.distributed)
    chunks = distributed.map_items(chunk, len(starts))
    bar.close()
    return np.concatenate(chunks, axis=0)  # (R, H, m)


def _fixed_design(model, fixed_design, n, rng):
    """None for a random design, else the (n, p) float64 design."""
    if fixed_design is False:
        return None
    if fixed_design is True:
        return model.sample_design(rng, (n,))
    (keys,), _ = as_tensors({"fixed_design": fixed_design}, {"fixed_design": 2})
    if tuple(keys.shape) != (n, model.p):
        raise ValueError(f"fixed_design must be a bool or an array of shape (n, p) = {(n, model.p)}; got {tuple(keys.shape)}")
    return keys.detach().cpu().double().numpy()


def simulate_decomposition(model, mha, n, queries, n_replicates, rng=None, **kwargs) -> BiasVarianceCovariance:
    """:func:`simulate_heads` followed by :func:`bias_variance_covariance` against ``f(queries)``.

    Keyword arguments go to :func:`simulate_heads`; ``mha.alpha`` mixes the heads.

    Examples
    --------
    >>> import numpy as np
    >>> model = DataModel(f=lambda x: np.zeros(x.shape[:-1]), p=1, sigma=1.0)
    >>> mha = MultiHeadNW(np.zeros((2, 1, 1)), np.zeros((2, 1, 1)))  # flat weights: the sample mean
    >>> d = simulate_decomposition(model, mha, n=4, queries=np.zeros((1, 1)), n_replicates=20000, rng=1)
    >>> bool(abs(d.mse - 1 / 4) < 4 * np.sqrt(2 / 20000) / 4), round(d.mean_correlation, 6)
    (True, 1.0)
    """
    predictions = simulate_heads(model, mha, n, queries, n_replicates, rng, **kwargs)  # (R, H, m)
    (queries,), _ = as_tensors({"queries": queries}, {"queries": 2})
    target = np.asarray(model.f(queries.detach().cpu().double().numpy()), dtype=np.float64)  # (m,)
    return bias_variance_covariance(predictions, target, mha.alpha)
