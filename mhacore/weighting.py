"""Structured head-mixing weights and optimal simplex weights (claim C6, Theorem 7.1 of the
summary of arXiv:2605.20271; chapter 7).

Uniform, geometric (``α_h ∝ r^{h−1}``) and Fibonacci (``α_h = F_h/(F_{H+2} − 1)``) weights,
their sum of squares ``Σα_h²`` and effective head count ``1/Σα_h²``, the ensemble MSE
``αᵀMα`` for a second-moment matrix ``M = C + b bᵀ`` of the head errors, and the weights
on the simplex that minimise it (a small quadratic program, solved exactly through
non-negative least squares).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg
import scipy.optimize
import torch

from ._validation import as_float64_numpy, check_bool, check_int, check_positive, check_simplex

__all__ = [
    "uniform_weights",
    "geometric_weights",
    "fibonacci_weights",
    "sum_of_squares",
    "effective_heads",
    "error_second_moment",
    "ensemble_mse",
    "optimal_weights",
]


def uniform_weights(n_heads: int) -> np.ndarray:
    """Uniform weights ``α_h = 1/H``.

    Parameters
    ----------
    n_heads : int
        ``H ≥ 1``.

    Returns
    -------
    numpy.ndarray of shape (H,)

    Examples
    --------
    >>> uniform_weights(4)
    array([0.25, 0.25, 0.25, 0.25])
    """
    n_heads = check_int(n_heads, "n_heads")
    return np.full(n_heads, 1.0 / n_heads)


def geometric_weights(n_heads: int, ratio: float) -> np.ndarray:
    """Geometric weights ``α_h = r^{h−1} / Σ_j r^{j−1}``, ``h = 1, …, H`` (claim C6).

    With ``0 < r < 1`` the first head gets the largest weight; ``r = 1`` is uniform.

    Parameters
    ----------
    n_heads : int
        ``H ≥ 1``.
    ratio : float
        ``r``, a finite number > 0.

    Returns
    -------
    numpy.ndarray of shape (H,)

    Raises
    ------
    ValueError, TypeError
        ``n_heads`` not an integer ≥ 1; ``ratio`` not a finite number > 0.

    Examples
    --------
    >>> geometric_weights(3, 0.5) * 7
    array([4., 2., 1.])
    """
    n_heads = check_int(n_heads, "n_heads")
    ratio = check_positive(ratio, "ratio")
    # log-space powers, normalised by the largest, so no overflow for large H or r
    logs = np.arange(n_heads) * math.log(ratio)  # (H,)
    powers = np.exp(logs - logs.max())
    return powers / powers.sum()


def _fibonacci(count: int) -> list[int]:
    """The exact integers ``F_1, …, F_count`` (``F_1 = F_2 = 1``)."""
    numbers_ = [1, 1]
    while len(numbers_) < count:
        numbers_.append(numbers_[-1] + numbers_[-2])
    return numbers_[:count]


def fibonacci_weights(n_heads: int) -> np.ndarray:
    """Fibonacci weights ``α_h = F_h / (F_{H+2} − 1)``, ``h = 1, …, H`` (claim C6).

    They *increase* with ``h``: the last head gets the largest weight. The denominator
    is ``Σ_{h≤H} F_h = F_{H+2} − 1``.

    Parameters
    ----------
    n_heads : int
        ``H ≥ 1``.

    Returns
    -------
    numpy.ndarray of shape (H,)

    Examples
    --------
    >>> fibonacci_weights(4) * 7  # F_1..F_4 = 1, 1, 2, 3 and F_6 - 1 = 7
    array([1., 1., 2., 3.])
    """
    n_heads = check_int(n_heads, "n_heads")
    fib = _fibonacci(n_heads + 2)
    total = fib[-1] - 1  # F_{H+2} - 1, exact integer
    return np.array([f / total for f in fib[:n_heads]])


def sum_of_squares(alpha) -> float:
    """``Σ_h α_h²`` of weights on the simplex; it lies in ``[1/H, 1]``.

    Under equicorrelated heads (variance ``V``, correlation ``ρ``) the ensemble variance
    is ``V[ρ + (1 − ρ)Σα_h²]`` (claim C6).

    Parameters
    ----------
    alpha : array_like of shape (H,)
        Entries ≥ 0 summing to 1.

    Returns
    -------
    float

    Examples
    --------
    >>> sum_of_squares([0.5, 0.25, 0.25])
    0.375
    """
    alpha = _simplex(alpha)
    return float(alpha @ alpha)


def effective_heads(alpha) -> float:
    """Effective head count ``1/Σα_h²`` (``H`` for uniform weights, 1 for one head).

    Parameters
    ----------
    alpha : array_like of shape (H,)
        Entries ≥ 0 summing to 1.

    Returns
    -------
    float

    Examples
    --------
    >>> effective_heads([0.25, 0.25, 0.25, 0.25])
    4.0
    """
    return 1.0 / sum_of_squares(alpha)


def _simplex(alpha) -> np.ndarray:
    if not isinstance(alpha, (np.ndarray, torch.Tensor)):
        alpha = as_float64_numpy(alpha, "alpha")  # lists; clear errors for str, None, ragged
    shape = tuple(alpha.shape)
    if len(shape) != 1 or shape[0] == 0:
        raise ValueError(f"alpha must have shape (H,) with H >= 1; got {shape}")
    return check_simplex(alpha, shape[0])  # keeps alpha's dtype for the tolerance


def _square_matrix(matrix, name: str) -> np.ndarray:
    """``matrix`` as float64 after checking it is square, finite and symmetric.

    Symmetric to the rounding of its own dtype: ``|M − Mᵀ| ≤ rtol·max|M|`` with ``rtol =
    max(1e-10, 64·eps)`` (float32 matrices computed as ``A Aᵀ`` may differ by an ulp).
    """
    dtype = getattr(matrix, "dtype", None)
    eps = torch.finfo(dtype).eps if isinstance(dtype, torch.dtype) and dtype.is_floating_point else (
        np.finfo(dtype).eps if isinstance(dtype, np.dtype) and dtype.kind == "f" else np.finfo(np.float64).eps)
    mat = as_float64_numpy(matrix, name)
    if mat.ndim != 2 or mat.shape[0] != mat.shape[1] or mat.shape[0] == 0:
        raise ValueError(f"{name} must have shape (H, H) with H >= 1; got {mat.shape}")
    if not np.isfinite(mat).all():
        raise ValueError(f"{name} must contain only finite values; got {mat.tolist()}")
    rtol = max(1e-10, 64 * float(eps))
    with np.errstate(over="ignore", invalid="ignore"):  # M − Mᵀ of entries near the float range
        if not np.allclose(mat, mat.T, rtol=rtol, atol=rtol * 1e-2 * max(1.0, np.abs(mat).max())):
            raise ValueError(f"{name} must be symmetric; got largest asymmetry {np.abs(mat - mat.T).max():.3g}")
    return mat / 2 + mat.T / 2  # not (M + Mᵀ)/2, which overflows near the float range


def _power_of_two_scale(mat: np.ndarray) -> float:
    """A power of two near ``max|M|`` (1 for a zero matrix): ``M`` divided by it is exact
    and has entries in ``[-2, 2]``, so neither huge nor subnormal entries lose anything."""
    largest = float(np.abs(mat).max())
    return math.ldexp(1.0, math.frexp(largest)[1] - 1) if largest > 0 else 1.0  # 2^1024 would overflow


def error_second_moment(covariance, bias=None) -> np.ndarray:
    """Second moment ``M = C + b bᵀ`` of the head errors, averaged over queries.

    The ensemble MSE of weights ``α`` is then ``αᵀMα`` (claim C2 in matrix form).

    Parameters
    ----------
    covariance : array_like of shape (H, H) or (H, H, m)
        Head covariances ``C_hh'`` (``V_h`` on the diagonal), per query if 3-D
        (as ``BiasVarianceCovariance.covariance_matrix``).
    bias : array_like of shape (H,) or (H, m), optional
        Head biases ``b_h``, per query if 2-D (as ``BiasVarianceCovariance.head_bias``);
        default zero. Must match ``covariance`` in ``m``.

    Returns
    -------
    numpy.ndarray of shape (H, H)
        ``mean over queries of C + b bᵀ``.

    Raises
    ------
    ValueError
        Shapes that do not match, or non-finite entries.

    Examples
    --------
    >>> error_second_moment([[1.0, 0.5], [0.5, 2.0]], bias=[1.0, 0.0])
    array([[2. , 0.5],
           [0.5, 2. ]])
    """
    cov = as_float64_numpy(covariance, "covariance")
    if cov.ndim == 2:
        cov = cov[:, :, None]  # (H, H, 1)
    if cov.ndim != 3 or cov.shape[0] != cov.shape[1] or cov.shape[0] == 0:
        raise ValueError(f"covariance must have shape (H, H) or (H, H, m); got {np.shape(covariance)}")
    n_heads, _, m = cov.shape
    b = np.zeros((n_heads, m)) if bias is None else as_float64_numpy(bias, "bias")
    if b.ndim == 1:
        b = b[:, None]  # (H, 1)
    if b.shape != (n_heads, m):
        raise ValueError(f"bias must have shape (H,) or (H, m) = ({n_heads}, {m}) matching covariance; "
                         f"got {np.shape(bias)}")
    if not (np.isfinite(cov).all() and np.isfinite(b).all()):
        raise ValueError("covariance and bias must contain only finite values; got a NaN or inf")
    with np.errstate(over="ignore"):
        second = (cov + b[:, None, :] * b[None, :, :]).mean(axis=2)  # (H, H)
    if not np.isfinite(second).all():
        raise ValueError("covariance + bias biasᵀ overflows float64 (finite inputs whose products exceed "
                         f"{np.finfo(np.float64).max:.3g}); rescale the covariance and bias")
    return second


def ensemble_mse(alpha, second_moment) -> float:
    """Ensemble MSE ``αᵀMα`` for mixing weights ``α`` and error second moment ``M``.

    Parameters
    ----------
    alpha : array_like of shape (H,)
        Entries ≥ 0 summing to 1.
    second_moment : array_like of shape (H, H)
        Symmetric, e.g. from :func:`error_second_moment`.

    Returns
    -------
    float

    Examples
    --------
    Equicorrelated heads, ``V = 1``, ``ρ = 0.5``, uniform weights: ``ρ + (1 − ρ)/H``.

    >>> ensemble_mse([0.5, 0.5], [[1.0, 0.5], [0.5, 1.0]])
    0.75
    """
    alpha = _simplex(alpha)
    mat = _square_matrix(second_moment, "second_moment")
    if mat.shape[0] != alpha.size:
        raise ValueError(f"second_moment must have shape ({alpha.size}, {alpha.size}) to match alpha; got {mat.shape}")
    scale = _power_of_two_scale(mat)  # |αᵀMα| ≤ max|M| for α in the simplex: finite after scaling back
    return float(alpha @ (mat / scale) @ alpha) * scale


def optimal_weights(second_moment, *, nonnegative: bool = True) -> np.ndarray:
    """Weights minimising ``αᵀMα`` subject to ``Σα_h = 1`` (and ``α ≥ 0``) (claim C6).

    Without the sign constraint the minimiser is ``M⁻¹1 / 1ᵀM⁻¹1`` (inverse-covariance
    weights when ``M = C``). With it (the simplex), the problem is a small quadratic
    program, solved exactly: with ``M = LLᵀ`` (Cholesky), ``β = argmin_{β≥0}
    ‖Lᵀβ − L⁻¹1‖²`` (non-negative least squares) satisfies the KKT conditions of
    ``min ½βᵀMβ − 1ᵀβ, β ≥ 0``, and ``α = β/Σβ`` those of the simplex problem.
    Uniform weights are the answer (with or without the sign constraint) if and only if
    ``M1 ∝ 1``: every row of ``M`` has the same sum.

    Parameters
    ----------
    second_moment : array_like of shape (H, H)
        Symmetric positive definite ``M = C + b bᵀ``.
    nonnegative : bool
        ``True``: weights on the simplex; ``False``: only ``Σα_h = 1``.

    Returns
    -------
    numpy.ndarray of shape (H,)

    Raises
    ------
    ValueError
        ``second_moment`` not square, symmetric, finite and positive definite.

    Examples
    --------
    Independent heads with variances 1 and 3: weights ∝ 1/V_h = (3/4, 1/4).

    >>> optimal_weights([[1.0, 0.0], [0.0, 3.0]])
    array([0.75, 0.25])
    """
    nonnegative = check_bool(nonnegative, "nonnegative")
    mat = _square_matrix(second_moment, "second_moment")
    scale = _power_of_two_scale(mat)
    mat = mat / scale  # the weights do not change with the scale of M; subnormal M works
    try:
        lower = scipy.linalg.cholesky(mat, lower=True)
    except np.linalg.LinAlgError as exc:
        smallest = float(np.linalg.eigvalsh(mat).min()) * scale
        raise ValueError(f"second_moment must be positive definite; got smallest eigenvalue {smallest:.3g}") from exc
    ones = np.ones(mat.shape[0])
    if not nonnegative:
        beta = scipy.linalg.cho_solve((lower, True), ones)  # M⁻¹1
        return beta / beta.sum()
    target = scipy.linalg.solve_triangular(lower, ones, lower=True)  # L⁻¹1
    beta, _ = scipy.optimize.nnls(lower.T, target)
    return beta / beta.sum()
