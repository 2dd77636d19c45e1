"""Boundary checks shared by the public functions of :mod:`mhacore`.

House rule 5 of ``DESIGN.md``: validate at the public boundary with ``ValueError`` /
``TypeError`` (never ``assert``); every message names the parameter, the constraint and the
value, e.g. ``bandwidth must be a finite number > 0; got 0.0``.

Array plumbing: public functions accept numpy arrays (or nested lists) and torch tensors.
:func:`as_tensors` turns them into torch tensors on one device with one floating dtype and
remembers whether the caller gave torch; :func:`restore` hands results back in kind
(numpy in, numpy out; torch in, torch out on the same device and dtype).
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

__all__ = [
    "as_tensors",
    "restore",
    "check_positive",
    "check_int",
    "check_simplex",
    "check_finite",
]


def check_positive(value, name: str, *, allow_none: bool = False):
    """Return ``value`` as a float after checking it is a finite number > 0.

    Examples
    --------
    >>> check_positive(2, "bandwidth")
    2.0
    >>> check_positive(0.0, "bandwidth")
    Traceback (most recent call last):
    ...
    ValueError: bandwidth must be a finite number > 0; got 0.0
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a finite number > 0; got {type(value).__name__} {value!r}")
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    return value


def check_int(value, name: str, *, minimum: int = 1) -> int:
    """Return ``value`` as an int after checking it is an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer >= {minimum}; got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def check_finite(tensor: torch.Tensor, name: str) -> None:
    """Raise ``ValueError`` if ``tensor`` holds NaN or infinite entries."""
    if math.isfinite(tensor.sum().item()):  # one pass; NaN and inf propagate into the sum
        return  # (a finite sum can only come from finite entries; overflow falls through)
    bad = ~torch.isfinite(tensor)
    if bool(bad.any()):
        raise ValueError(
            f"{name} must contain only finite values; got {int(bad.sum())} NaN/inf "
            f"entries in an array of shape {tuple(tensor.shape)}"
        )


def _to_tensor(x, name: str) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        tensor = x
    elif isinstance(x, (np.ndarray, list, tuple, numbers.Number, np.generic)):
        array = np.asarray(x)
        if array.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be a real numeric array; got dtype {array.dtype}")
        if array.dtype.kind != "f":
            array = array.astype(np.float64)
        if not array.flags.writeable or not array.flags.c_contiguous:
            array = np.array(array, copy=True, order="C")
        tensor = torch.from_numpy(array)
    else:
        raise TypeError(f"{name} must be a numpy array or a torch tensor; got {type(x).__name__}")
    if tensor.is_complex() or tensor.dtype == torch.bool:
        raise TypeError(f"{name} must be a real numeric array; got dtype {tensor.dtype}")
    if not tensor.is_floating_point():
        tensor = tensor.to(torch.get_default_dtype())
    return tensor


def as_tensors(arrays: dict, min_ndims: dict, *, finite: bool = True):
    """Validate named arrays and convert them to torch on one device with one dtype.

    Parameters
    ----------
    arrays : dict of str to array_like
        Parameter name -> numpy array, nested list or torch tensor.
    min_ndims : dict of str to int
        Parameter name -> minimum number of dimensions.
    finite : bool
        Reject NaN and infinite entries.

    Returns
    -------
    tensors : list of torch.Tensor
        In the order of ``arrays``, all floating with the promoted dtype, on the device of
        the torch inputs (CPU when every input is numpy).
    is_torch : bool
        Whether any input was a torch tensor (then results are returned as torch).

    Raises
    ------
    TypeError
        Non-numeric or complex inputs, or an unsupported container.
    ValueError
        Too few dimensions, empty arrays, NaN/inf entries, or torch inputs on different
        devices.
    """
    is_torch = any(isinstance(x, torch.Tensor) for x in arrays.values())
    tensors = {name: _to_tensor(x, name) for name, x in arrays.items()}
    devices = {t.device for name, t in tensors.items() if isinstance(arrays[name], torch.Tensor)}
    if len(devices) > 1:
        raise ValueError(f"torch inputs must be on one device; got {sorted(map(str, devices))}")
    device = devices.pop() if devices else torch.device("cpu")
    dtype = tensors[next(iter(tensors))].dtype
    for t in tensors.values():
        dtype = torch.promote_types(dtype, t.dtype)
    for name, t in tensors.items():
        if t.ndim < min_ndims[name]:
            raise ValueError(
                f"{name} must have at least {min_ndims[name]} dimensions; got shape {tuple(t.shape)}"
            )
        if t.numel() == 0:
            raise ValueError(f"{name} must not be empty; got shape {tuple(t.shape)}")
        if finite:
            check_finite(t, name)
    return [t.to(device=device, dtype=dtype) for t in tensors.values()], is_torch


def restore(tensor: torch.Tensor, is_torch: bool):
    """Return ``tensor`` as torch (``is_torch``) or as a numpy array of the same dtype."""
    if is_torch:
        return tensor
    return tensor.detach().cpu().numpy()


def check_simplex(alpha, n_heads: int, name: str = "alpha", *, atol: float = 1e-8) -> np.ndarray:
    """Return ``alpha`` as a float64 numpy vector after checking it lies in the simplex.

    ``None`` gives uniform weights ``1/n_heads``.

    Examples
    --------
    >>> check_simplex(None, 4)
    array([0.25, 0.25, 0.25, 0.25])
    >>> check_simplex([0.5, 0.6], 2)
    Traceback (most recent call last):
    ...
    ValueError: alpha must lie in the simplex (entries >= 0 summing to 1); got sum 1.1
    """
    if alpha is None:
        return np.full(n_heads, 1.0 / n_heads)
    if isinstance(alpha, torch.Tensor):
        alpha = alpha.detach().cpu().numpy()
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.shape != (n_heads,):
        raise ValueError(f"{name} must have shape ({n_heads},) (one weight per head); got {alpha.shape}")
    if not np.isfinite(alpha).all():
        raise ValueError(f"{name} must contain only finite values; got {alpha.tolist()}")
    if (alpha < 0).any():
        raise ValueError(
            f"{name} must lie in the simplex (entries >= 0 summing to 1); got min {alpha.min():.6g}"
        )
    if abs(alpha.sum() - 1.0) > atol:
        raise ValueError(
            f"{name} must lie in the simplex (entries >= 0 summing to 1); got sum {alpha.sum():.6g}"
        )
    return alpha
