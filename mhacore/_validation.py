"""Boundary checks shared by the public functions of :mod:`mhacore`.

House rule 5 of ``DESIGN.md``: validate at the public boundary with ``ValueError`` /
``TypeError`` (never ``assert``); every message names the parameter, the constraint and the
value, e.g. ``bandwidth must be a finite number > 0; got 0.0``.

Array plumbing: public functions accept numpy arrays (or nested lists) and torch tensors.
:func:`as_tensors` turns them into torch tensors on one device with one floating dtype and
remembers whether the caller gave torch; :func:`restore` hands results back in kind
(numpy in, numpy out; torch in, torch out on the same device and dtype).

The conversion rule (one rule for every public function):

* floating inputs keep their dtype, and the common dtype is their promotion (float32 with
  float32 stays float32; any float64 gives float64);
* integer and boolean inputs (signed or unsigned, of any width), numpy or torch alike, take
  that floating dtype, or float64 when no input is floating (so ``[0, 1]`` and
  ``torch.tensor([0, 1])`` give the same numbers); integers too large for that dtype (above
  65504 for float16) are rejected with a ``ValueError`` that says so;
* complex, string, object, date and ragged (non-rectangular) inputs are rejected with a
  ``TypeError`` naming the parameter, as are sparse tensors and numpy dtypes torch lacks
  (``longdouble``);
* torch inputs must share one device, and it must hold data (a ``meta`` tensor is
  rejected); numpy inputs go to that device; ``device=`` arguments must name a device this
  machine has (:func:`check_device` allocates on it);
* ``dtype=`` arguments (:func:`check_float_dtype`) accept float32 or float64, as a torch
  dtype, a numpy dtype or its name, and nothing else (an integer dtype would truncate);
* scalar parameters accept Python, numpy and 0-d torch numbers; a tensor that requires
  grad is refused where gradients cannot flow to it; bool parameters accept only bools
  (:func:`check_bool`: ``"no"`` is not ``False``).
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

__all__ = [
    "as_tensors",
    "as_float64_numpy",
    "restore",
    "check_positive",
    "check_int",
    "check_nonnegative",
    "check_probability",
    "check_simplex",
    "check_finite",
    "check_float_dtype",
    "check_device",
    "check_real",
    "check_bool",
    "concrete",
    "transformed",
]

_DATA_DEVICES = "(cpu, cuda, ...)"


def _scalar(value, name: str):
    """A Python number from a Python, numpy or 0-d torch number, or ``value`` unchanged."""
    if isinstance(value, torch.Tensor):
        if value.requires_grad:
            raise TypeError(f"{name} requires grad, which is not supported: gradients do not flow to "
                            f"{name}; pass a float (or a detached tensor)")
        if value.ndim == 0 and not value.is_complex() and not value.is_meta:
            return value.item()
    elif isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "biuf":
        return value.item()
    return value


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
    return _real(value, name, "a finite number > 0", lambda v: math.isfinite(v) and v > 0)


def check_real(value, name: str) -> float:
    """Return ``value`` as a float after checking it is a finite number.

    Examples
    --------
    >>> check_real(-2, "quality")
    -2.0
    """
    return _real(value, name, "a finite number", math.isfinite)


def check_bool(value, name: str, *, allow_none: bool = False):
    """Return ``value`` as a bool (or None with ``allow_none``) after checking it is one.

    Python and numpy bools only: a string such as ``"no"`` or a number is a ``TypeError``,
    never silently truthy.

    Examples
    --------
    >>> check_bool("no", "nonnegative")
    Traceback (most recent call last):
    ...
    TypeError: nonnegative must be a bool; got str 'no'
    """
    if value is None and allow_none:
        return None
    if not isinstance(value, (bool, np.bool_)):
        allowed = "None or a bool" if allow_none else "a bool"
        raise TypeError(f"{name} must be {allowed}; got {type(value).__name__} {value!r}")
    return bool(value)


def check_nonnegative(value, name: str) -> float:
    """Return ``value`` as a float after checking it is a finite number >= 0.

    Examples
    --------
    >>> check_nonnegative(0, "sigma")
    0.0
    """
    return _real(value, name, "a finite number >= 0", lambda v: math.isfinite(v) and v >= 0)


def check_probability(value, name: str) -> float:
    """Return ``value`` as a float after checking it is a number in [0, 1].

    Examples
    --------
    >>> check_probability(1, "recruit_prob")
    1.0
    """
    return _real(value, name, "a number in [0, 1]", lambda v: 0.0 <= v <= 1.0)


def check_int(value, name: str, *, minimum: int = 1) -> int:
    """Return ``value`` as an int after checking it is an integer >= ``minimum``."""
    value = _scalar(value, name)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer >= {minimum}; got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def concrete(tensor: torch.Tensor) -> torch.Tensor:
    """The values under any ``torch.func`` wrapper (vmap, grad, jvp), for checks that read them.

    Inside ``torch.func.vmap`` or ``jacfwd`` a tensor is a wrapper whose values cannot be
    read (``.item()`` raises); the checks of this module read the tensor underneath, which
    holds every batch member. Outside a transform the tensor itself is returned.

    >>> import torch
    >>> concrete(torch.ones(2)).tolist()
    [1.0, 1.0]
    """
    functorch = getattr(torch._C, "_functorch", None)
    while functorch is not None and functorch.is_functorch_wrapped_tensor(tensor):
        tensor = functorch.get_unwrapped(tensor)
    return tensor


def transformed(*tensors) -> bool:
    """Whether any tensor is inside a ``torch.func`` transform or carries a forward-mode tangent.

    >>> import torch
    >>> transformed(torch.ones(2))
    False
    >>> seen = []
    >>> _ = torch.func.vmap(lambda x: seen.append(transformed(x)) or x)(torch.ones(3, 2))
    >>> seen
    [True]
    """
    functorch = getattr(torch._C, "_functorch", None)
    for t in tensors:
        if functorch is not None and functorch.is_functorch_wrapped_tensor(t):
            return True
        if torch.autograd.forward_ad.unpack_dual(t).tangent is not None:
            return True
    return False


def check_finite(tensor: torch.Tensor, name: str) -> None:
    """Raise ``ValueError`` if ``tensor`` holds NaN or infinite entries."""
    tensor = concrete(tensor).detach()
    if math.isfinite(tensor.sum().item()):  # one pass; NaN and inf propagate into the sum
        return  # (a finite sum can only come from finite entries; overflow falls through)
    bad = ~torch.isfinite(tensor)
    if bool(bad.any()):
        raise ValueError(
            f"{name} must contain only finite values; got {int(bad.sum())} NaN/inf "
            f"entries in an array of shape {tuple(tensor.shape)}"
        )


def _to_tensor(x, name: str) -> torch.Tensor:
    """``x`` as a torch tensor of a real dtype (integers and booleans not yet converted)."""
    return _to_tensor_kind(x, name)[0]


def _to_tensor_kind(x, name: str):
    """``x`` as a torch tensor, and whether it holds integers or booleans.

    Unsigned integers wider than 8 bits, which torch cannot compute with, become int32 /
    int64 when that holds every value, else float64 (a uint64 above 2**63); they still
    count as integers, so they follow the floating inputs' dtype like any integer.
    """
    if isinstance(x, torch.Tensor):
        tensor = x
        if tensor.layout != torch.strided:
            raise TypeError(f"{name} must be a dense (strided) tensor; got layout {tensor.layout}")
    elif isinstance(x, (np.ndarray, list, tuple, numbers.Number, np.generic)):
        try:
            array = np.asarray(x)
        except ValueError as exc:  # numpy refuses ragged nested sequences
            raise TypeError(f"{name} must be a rectangular numeric array; got a ragged nested "
                            f"sequence ({exc})") from None
        if array.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be a real numeric array; got dtype {array.dtype}")
        if not array.flags.writeable or not array.flags.c_contiguous:
            array = np.array(array, copy=True, order="C")
        if array.dtype.kind == "u" and array.dtype.itemsize > 1:  # torch lacks uint16..64 arithmetic
            wider = np.int64 if array.dtype.itemsize >= 4 else np.int32
            fits = array.size == 0 or array.max() <= np.iinfo(wider).max
            array = array.astype(wider if fits else np.float64)
            return torch.from_numpy(array), True
        try:
            tensor = torch.from_numpy(array)
        except TypeError:  # e.g. longdouble
            raise TypeError(f"{name} must be a real numeric array of a dtype torch supports (float16, float32, "
                            f"float64, integers or bool); got dtype {array.dtype}; cast it to float64") from None
    else:
        raise TypeError(f"{name} must be a numpy array, a torch tensor or a nested list; "
                        f"got {type(x).__name__}")
    if tensor.is_complex():
        raise TypeError(f"{name} must be a real numeric array; got dtype {tensor.dtype}")
    return tensor, not tensor.is_floating_point()


def _check_integers_fit(tensor: torch.Tensor, converted: torch.Tensor, name: str) -> None:
    """Raise when integers turned into inf on conversion to a narrow floating dtype."""
    if converted.is_meta or bool(torch.isfinite(converted).all()):
        return
    source = tensor.to(torch.float64)
    largest = source.flatten()[source.abs().argmax()].item()
    raise ValueError(f"{name} holds integers up to {largest:.0f}, which overflow {str(converted.dtype).removeprefix('torch.')} "
                     "(the dtype of the floating inputs); pass floating values or use a wider dtype")


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
        In the order of ``arrays``, all floating with one dtype, on the device of the torch
        inputs (CPU when every input is numpy); see the conversion rule in the module
        docstring.
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
    kinds = {name: _to_tensor_kind(x, name) for name, x in arrays.items()}
    tensors = {name: tensor for name, (tensor, _) in kinds.items()}
    devices = {t.device for name, t in tensors.items() if isinstance(arrays[name], torch.Tensor)}
    if len(devices) > 1:
        raise ValueError(f"torch inputs must be on one device; got {sorted(map(str, devices))}")
    device = devices.pop() if devices else torch.device("cpu")
    for name, t in tensors.items():
        if t.is_meta:
            raise ValueError(f"{name} must be on a device that holds data {_DATA_DEVICES}; got {t.device.type}")
    floating = [t.dtype for name, t in tensors.items() if not kinds[name][1]]
    dtype = floating[0] if floating else torch.float64  # integers and booleans follow the floats
    for other in floating[1:]:
        dtype = torch.promote_types(dtype, other)
    converted = {}
    for name, t in tensors.items():
        converted[name] = t if t.dtype == dtype else t.to(dtype)
        if kinds[name][1] and t.dtype != dtype and torch.finfo(dtype).max < 2.0**64:  # float16 only
            _check_integers_fit(t, converted[name], name)
    tensors = converted
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


def as_float64_numpy(x, name: str) -> np.ndarray:
    """``x`` (numpy, nested list or torch) as a float64 numpy array, with the messages of
    :func:`as_tensors` for non-numeric, complex or ragged input; NaN/inf are kept (the
    caller checks them with its own message).

    Examples
    --------
    >>> as_float64_numpy([[1, 2]], "matrix")
    array([[1., 2.]])
    """
    tensor = _to_tensor(x, name)
    if tensor.is_meta:
        raise ValueError(f"{name} must be on a device that holds data {_DATA_DEVICES}; got meta")
    return tensor.detach().to(device="cpu", dtype=torch.float64).numpy()


def restore(tensor: torch.Tensor, is_torch: bool):
    """Return ``tensor`` as torch (``is_torch``) or as a numpy array of the same dtype."""
    if is_torch:
        return tensor
    return tensor.detach().cpu().numpy()


def _eps(x) -> float:
    """Machine epsilon of the floating dtype of ``x`` (float64 for anything else)."""
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return float(torch.finfo(x.dtype).eps)
    if isinstance(x, np.ndarray) and x.dtype.kind == "f":
        return float(np.finfo(x.dtype).eps)
    return float(np.finfo(np.float64).eps)


def simplex_tolerance(alpha, n_heads: int, atol: float = 1e-8) -> float:
    """How far from 1 the sum of ``n_heads`` weights of ``alpha``'s dtype may be.

    ``max(atol, 4·H·eps)``: each of the ``H`` entries carries a rounding error of at most
    half an ulp of its own dtype, and the float64 sum adds no more than that again.
    """
    return max(atol, 4 * n_heads * _eps(alpha))


def _dtype_name(x) -> str:
    """The floating dtype of ``x`` by name (``float64`` for integers, booleans and lists)."""
    if isinstance(x, (torch.Tensor, np.ndarray)) and (x.dtype.is_floating_point if isinstance(x, torch.Tensor)
                                                      else x.dtype.kind == "f"):
        return str(x.dtype).removeprefix("torch.")
    return "float64"


def _shortest(value: float, x) -> str:
    """``value`` rounded to the floating dtype of ``x``, printed with the digits that identify it there."""
    name = _dtype_name(x)
    if name == "bfloat16":  # numpy has no bfloat16: print its exact value
        return repr(float(torch.tensor(value, dtype=torch.bfloat16)))
    return str(np.dtype(name).type(value))


def check_simplex(alpha, n_heads: int, name: str = "alpha", *, atol: float = 1e-8) -> np.ndarray:
    """Return ``alpha`` as a float64 numpy vector after checking it lies in the simplex.

    ``None`` gives uniform weights ``1/n_heads``. The sum may miss 1 by the rounding of
    ``alpha``'s own dtype (:func:`simplex_tolerance`): float32 weights that sum to 1 in
    float32 arithmetic are accepted. Torch tensors of any floating dtype (bfloat16 too)
    are read in torch, not through numpy.

    Examples
    --------
    >>> check_simplex(None, 4)
    array([0.25, 0.25, 0.25, 0.25])
    >>> check_simplex([0.5, 0.6], 2)
    Traceback (most recent call last):
    ...
    ValueError: alpha must lie in the simplex (entries >= 0 summing to 1); got sum 1.1 (off by 0.1; tolerance 1e-08 for float64)
    """
    if alpha is None:
        return np.full(n_heads, 1.0 / n_heads)
    source = alpha
    if isinstance(alpha, torch.Tensor):
        source = _to_tensor(alpha, name)  # dense, real
        if source.is_meta:
            raise ValueError(f"{name} must be on a device that holds data {_DATA_DEVICES}; got meta")
        alpha = source.detach().to(device="cpu", dtype=torch.float64).numpy()
    else:
        if not isinstance(alpha, np.ndarray):
            try:
                source = np.asarray(alpha)
            except ValueError:
                raise TypeError(f"{name} must be a rectangular numeric array; got a ragged nested sequence") from None
        if source.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be a real numeric array; got dtype {source.dtype}")
        alpha = np.asarray(source, dtype=np.float64)
    if alpha.shape != (n_heads,):
        raise ValueError(f"{name} must have shape ({n_heads},) (one weight per head); got {alpha.shape}")
    if not np.isfinite(alpha).all():
        raise ValueError(f"{name} must contain only finite values; got {alpha.tolist()}")
    if (alpha < 0).any():
        raise ValueError(
            f"{name} must lie in the simplex (entries >= 0 summing to 1); got min {float(alpha.min())!r}"
        )
    total = float(alpha.sum())
    tol = simplex_tolerance(source, n_heads, atol)
    if abs(total - 1.0) > tol:
        raise ValueError(
            f"{name} must lie in the simplex (entries >= 0 summing to 1); got sum {_shortest(total, source)} "
            f"(off by {abs(total - 1.0):.3g}; tolerance {tol:.3g} for {_dtype_name(source)})"
        )
    return alpha


_FLOAT_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def check_float_dtype(dtype, name: str = "dtype", *, numpy: bool = False):
    """Return ``dtype`` as a torch dtype (or a numpy dtype with ``numpy=True``).

    Accepts float32 or float64 given as a torch dtype, a numpy dtype (or type), or a name
    (``"float32"``, ``"torch.float64"``); anything else, integers above all (they would
    truncate the data), raises ``TypeError``.

    Examples
    --------
    >>> check_float_dtype("float32")
    torch.float32
    >>> check_float_dtype(torch.int64)
    Traceback (most recent call last):
    ...
    TypeError: dtype must be float32 or float64 (a torch or numpy dtype, or its name); got torch.int64
    """
    key = None
    if isinstance(dtype, torch.dtype):
        key = str(dtype).removeprefix("torch.")
    elif isinstance(dtype, str):
        key = dtype.removeprefix("torch.")
    elif dtype is not None and not isinstance(dtype, (bool, numbers.Number)):
        try:
            key = np.dtype(dtype).name
        except TypeError:
            key = None
    if key not in _FLOAT_DTYPES:
        raise TypeError(f"{name} must be float32 or float64 (a torch or numpy dtype, or its name); got {dtype!r}")
    return np.dtype(key) if numpy else _FLOAT_DTYPES[key]


def check_device(device, name: str = "device") -> torch.device:
    """Return ``device`` as a ``torch.device`` that holds data and exists on this machine.

    Examples
    --------
    >>> check_device("cpu")
    device(type='cpu')
    >>> check_device("meta")
    Traceback (most recent call last):
    ...
    ValueError: device must be a device that holds data (cpu, cuda, ...); got 'meta', which holds no data
    """
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"{name} must be a torch device such as 'cpu' or 'cuda'; got {type(device).__name__} {device!r}")
    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        parsed = None
    if parsed is None or (isinstance(device, str) and device != device.strip()):
        raise ValueError(f"{name} must be a torch device such as 'cpu' or 'cuda'; got {device!r}, "
                         "which is not a torch device")
    if parsed.type == "meta":
        raise ValueError(f"{name} must be a device that holds data {_DATA_DEVICES}; got {str(device)!r}, "
                         "which holds no data")
    if parsed.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (parsed.index or 0) >= count:
            present = "CUDA is not available" if count == 0 else f"{count} CUDA device(s) present"
            raise ValueError(f"{name} must be available on this machine; got {str(device)!r}, "
                             f"which is not available ({present})")
    elif parsed.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"{name} must be available on this machine; got {str(device)!r}, "
                         "which is not available (MPS is not available)")
    elif parsed.type not in ("cpu", "cuda", "mps"):  # xla, xpu, hpu, ...: whatever this torch lacks
        try:
            torch.empty(0, device=parsed)
        except Exception:  # RuntimeError, ImportError, ...: torch's message varies by backend
            raise ValueError(f"{name} must be available on this machine; got {str(device)!r}, "
                             f"which is not available (this torch build has no {parsed.type} backend)") from None
    return parsed


def _real(value, name: str, constraint: str, holds) -> float:
    """``value`` as a float: a real number (not a bool) for which ``holds`` is true, else
    ``TypeError``/``ValueError`` saying ``name must be <constraint>; got ...``."""
    value = _scalar(value, name)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be {constraint}; got {type(value).__name__} {value!r}")
    value = float(value)
    if not holds(value):
        raise ValueError(f"{name} must be {constraint}; got {value!r}")
    return value
