"""Nadaraya–Watson weights and estimates: one attention head is one NW smoother.

Claim C0 of ``MATH.md``: with values ``v_i = y_i``, a softmax attention head computes
``f̂(x) = Σ_i w_i(x) y_i`` with ``w_i ∝ exp(⟨q, k_i⟩ / temperature)``, a Nadaraya–Watson
estimator with an exponential dot-product kernel; the Gaussian kernel
``w_i ∝ exp(−‖q − k_i‖² / (2·bandwidth²))`` is the classical one.

Both kernels are computed as a softmax of log-kernels (max-subtracted), so every row keeps
its largest weight ``exp(0)``: the "all weights underflow" case cannot happen — a query far
from every key puts its weight on the nearest keys. The logits themselves must fit their
dtype: inputs whose logits could exceed it (data near the float range, or a temperature or
bandwidth so small that the kernel scale overflows) are rejected up front with a
``ValueError`` that gives the bound, never turned into NaN. A scale that underflows to 0
(a huge temperature or bandwidth) is the exact limit, uniform weights. A softmax scale
``1/temperature`` beyond the data's dtype (1e40 in float32), or scaled entries
``q/temperature`` beyond it, on data whose logits still fit give float64 logits, cast back. Sums of kernel-weighted values, which the fused and
chunked paths form before normalising, are kept in range by dividing values near the
float range by a power of two (exact, multiplied back), and float16/bfloat16 running sums
are kept in float32.

Types and devices (the rule of :mod:`mhacore._validation`, for every public function):
floating inputs keep their dtype and the result has their promoted dtype; integer and
boolean inputs (numpy or torch) take the floating inputs' dtype, or float64 when none is
floating; complex, string, object and ragged inputs raise ``TypeError`` naming the
parameter; torch inputs share one device that holds data (not ``meta``) and numpy inputs
follow them; numpy in gives numpy out, torch in gives torch out.

Autograd: gradients flow to torch queries, keys and values on every path below (fused,
fused Gaussian, dense, chunked, and the direct-distance fallback at tiny bandwidths); the
paths avoid in-place steps on tensors that autograd needs when an input requires grad
(``tests/test_badinput_autograd.py`` runs ``gradcheck`` on each). Gradients do not flow to
``temperature`` or ``bandwidth`` (Python floats): a tensor that requires grad there is
refused with a ``TypeError``. These are first derivatives: the fused kernels' backward
has no derivative of its own and no forward mode. ``higher_order=True`` keeps to the dense
and chunked paths, written out of place, which torch differentiates to every order and in
forward mode (Hessians, ``gradgradcheck``); inside ``torch.func`` transforms (``vmap``,
``jacfwd``, ``hessian``) and for forward-mode dual tensors it is chosen by itself, and the
input checks read the values under the transform's wrappers.

Computation paths of :func:`nw_estimate` (``DESIGN.md``, performance notes):

* Triton (CUDA only): float32/float64 data with ``d ≤ 128`` and values of width 1–8 go
  through the fused kernel of :mod:`mhacore.nw_triton` when Triton imports; the paths below
  otherwise, and always on the CPU;
* fused: the softmax kernel through ``torch.nn.functional.scaled_dot_product_attention``
  with 4-D inputs and queries/keys or values zero-padded to one width (its fused kernels
  run only then; zero columns change neither dot products nor the values' own columns).
  Memory-flat. On the CPU in float32, widths 2–15 are padded further, to 16: torch 2.13's
  flash kernel then runs 1.1–1.5x faster (measured at n = 2000, m = 500 with AVX-512 and
  AVX2 dispatch; width 1 is faster still and kept, float64 is slower padded and is not);
* fused Gaussian (float64 data; float32 too on CUDA, under float32's bound): the same
  kernel on augmented rows
  ``[2s·q̃, −s] · [k̃, ‖k̃‖²] = −s‖q̃ − k̃‖² + s‖q̃‖²`` (``s = 1/(2·bandwidth²)``, data
  centred at the keys' mean; the per-query shift cancels in the softmax), when the error
  bound below allows. It replaces a materialised float64 softmax, which is memory-bound
  (2000 keys x 500 queries: 1.1–2x faster over several interleaved runs, 1 or 2 threads);
* dense: materialise the ``(..., m, n)`` weights when they take at most 8 MiB (Gaussian
  kernel in float32, or no fused kernel for this device/dtype);
* chunked: an online log-sum-exp over key blocks (~1024), chunking batch and queries too,
  otherwise (or when ``chunk_size`` is given).

Gaussian logits and the float32 trap. Written as a dot product,
``‖q−k‖² = ‖q‖² − 2⟨q,k⟩ + ‖k‖²`` (the form that would let SDPA run the Gaussian kernel on
augmented inputs) loses every digit in float32 when ``‖k‖²/h²`` is large (errors up to 0.9
at ``h = 5e-5``). So the Gaussian kernel never goes through the float32 expansion: its
logits are formed from data centred at the keys' mean, *in float64* (logit error ``≈ eps64·(‖q̃‖² + ‖k̃‖²)/(2h²)``,
checked against 1e-8 before use), falling back to direct float64 squared distances
(``torch.cdist`` without the expansion) at extreme bandwidths, and cast back to the input
dtype. This is 2–3x faster than direct distances on CPU and as accurate. For float32 data
the float64 logits are materialised (or chunked) and the softmax runs in float32: running
the fused kernel in float64 instead was measured no faster there.
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F

from ._expansion import GAUSSIAN_LOGIT_TOL, GAUSSIAN_LOGIT_TOL32, _expansion_is_accurate  # noqa: F401
from ._validation import as_tensors, check_bool, check_int, check_positive, concrete, restore, transformed

__all__ = ["nw_weights", "nw_estimate"]

KERNELS = ("softmax", "gaussian")
DENSE_LIMIT_BYTES = 8 * 2**20  # below this the materialising path is as fast
KEY_BLOCK = 1024  # keys per block of the online log-sum-exp
BLOCK_ELEMENTS = 2**22  # logits per block (16 MiB in float32)
CPU_FLOAT32_WIDTH = 16  # float32 widths 2..15 are zero-padded to this on the CPU (measured faster)


def _kernel_scale(kernel, temperature, bandwidth, d: int) -> float:
    """The factor multiplying the raw logits (⟨q,k⟩ or −‖q−k‖²).

    A scale that overflows float64 (a temperature or bandwidth too small) is rejected; one
    that underflows to 0 (huge temperature or bandwidth) is the exact limit, uniform weights.
    """
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}; got {kernel!r}")
    if kernel == "softmax":
        if bandwidth is not None:
            raise ValueError(f"bandwidth applies to kernel='gaussian' only; got {bandwidth!r} with kernel='softmax'")
        temperature = check_positive(temperature, "temperature", allow_none=True)
        if temperature is None:
            return 1.0 / math.sqrt(d)
        scale = 1.0 / temperature
        if not math.isfinite(scale):
            raise ValueError(f"temperature is too small: 1/temperature overflows float64; got {temperature!r}")
        return scale
    if temperature is not None:
        raise ValueError(f"temperature applies to kernel='softmax' only; got {temperature!r} with kernel='gaussian'")
    if bandwidth is None:
        raise ValueError("bandwidth must be a finite number > 0 for kernel='gaussian'; got None")
    bandwidth = check_positive(bandwidth, "bandwidth")
    scale = 0.5 / bandwidth / bandwidth  # not bandwidth**2: that raises OverflowError
    if not math.isfinite(scale):
        raise ValueError(f"bandwidth is too small: 1/(2·bandwidth²) overflows float64; got {bandwidth!r}")
    return scale


def _extent(x):
    """Per-feature minimum and maximum over every dimension but the last, in float64: (d,), (d,).

    Reductions only: a broadcast (stride-0) input is never materialised.
    """
    if x.ndim == 1:
        return x.double(), x.double()
    dims = tuple(range(x.ndim - 1))
    return x.amin(dim=dims).double(), x.amax(dim=dims).double()


def _check_logit_range(queries, keys, kernel: str, scale: float) -> tuple[float, bool]:
    """Reject inputs whose logits could exceed the range of the dtype they are formed in.

    Bounds without overflow: ``|⟨q,k⟩|·scale ≤ scale·d·max|q|·max|k|`` (softmax, formed in
    the data's dtype) and ``‖q−k‖²·scale ≤ scale·d·(max|q̃| + max|k̃|)²`` with ``q̃, k̃`` the
    data less the keys' mean (Gaussian, formed in float64), from per-feature extremes. A
    margin of 16 covers the partial sums. Inside these bounds the max-subtracted softmax
    is exact. Returns the bound on ``|logit|`` and whether softmax logits are formed in
    float64 ("wide"): when the scale ``1/temperature`` or the scaled entries ``scale·q``
    exceed the data's dtype although the logits fit it (a low temperature on small dot
    products, e.g. float16 queries of 10 against keys of 1e-3 at temperature 1e-3).
    """
    d = queries.shape[-1]
    wide = False
    if kernel == "softmax":
        dtype = queries.dtype
        a = float(torch.linalg.vector_norm(concrete(queries).detach(), ord=math.inf))  # max |entry|
        b = float(torch.linalg.vector_norm(concrete(keys).detach(), ord=math.inf))
        bound = scale * d * a * b
        step = scale * max(a, b)  # the scaled entries, formed before the dot products
        wide = scale > float(torch.finfo(dtype).max) or step > _limit(dtype)
        if not step <= _limit(torch.float64):
            bound = max(bound, step)  # refused below, naming the larger number
        what = f"largest |entry| {a:.3g} in queries and {b:.3g} in keys"
    else:
        dtype = torch.float64
        if transformed(queries, keys):  # the values underneath may hold the batch on any axis: no centring
            a = float(torch.linalg.vector_norm(concrete(queries).detach(), ord=math.inf))
            b = float(torch.linalg.vector_norm(concrete(keys).detach(), ord=math.inf))
        else:
            (q_min, q_max), (k_min, k_max) = _extent(queries.detach()), _extent(keys.detach())  # (d,) each
            c_min, c_max = _extent(keys.detach().mean(dim=-2, dtype=torch.float64))  # (d,): keys' means
            a = float(torch.maximum(q_max - c_min, c_max - q_min).max())
            b = float(torch.maximum(k_max - c_min, c_max - k_min).max())
        bound = scale * d * (a + b) * (a + b)
        what = f"largest |entry| {a:.3g} in queries and {b:.3g} in keys, less the keys' mean"
    limit = _limit(dtype)
    if not bound <= limit:  # also catches inf and NaN
        name = "softmax" if kernel == "softmax" else "Gaussian"
        fix = "raise the temperature" if kernel == "softmax" else "raise the bandwidth"
        raise ValueError(
            f"{name} logits of these inputs could overflow {str(dtype).removeprefix('torch.')}: "
            f"|logit| up to {bound:.3g} > {limit:.3g} (scale {scale:.3g}, {what}); rescale the data or {fix}"
        )
    return bound, wide


def _limit(dtype) -> float:
    """The largest |logit| allowed in ``dtype`` (a margin of 16 below its largest number)."""
    return float(torch.finfo(dtype).max) / 16


def _logits(queries, keys, kernel: str, scale: float, pure: bool = False, wide: bool = False):
    """Log-kernels ``(..., m, n)`` from queries ``(..., m, d)`` and keys ``(..., n, d)``.

    Softmax logits come in the data's dtype, or in float64 when ``wide``
    (:func:`_check_logit_range`); Gaussian logits in float64 (see :func:`_gaussian_logits`;
    :func:`_in_dtype` brings them to the data's dtype). ``pure``: only operations
    differentiable to every order and in forward mode (no ``cdist``).
    """
    if kernel == "softmax":
        if wide:  # the scale or the scaled entries exceed the dtype: float64 logits
            return (queries.double() * scale) @ keys.double().transpose(-1, -2)  # (..., m, n)
        return (queries * scale) @ keys.transpose(-1, -2)  # (..., m, n)
    return _gaussian_logits(queries, keys, scale, pure)


def _in_dtype(logits, dtype, bound: float):
    """Logits in ``dtype``; shifted by their row maximum first when ``bound`` exceeds its range.

    ``bound`` bounds ``|logit|`` (:func:`_check_logit_range`). The shift leaves the softmax
    unchanged and keeps the largest logit of every row at 0, so float64 Gaussian logits
    beyond float32's range still give float32 weights (the far keys' weights underflow to
    0, as they should); within the range a plain cast is as good, and a pass cheaper.
    """
    if logits.dtype == dtype:
        return logits
    if bound <= _limit(dtype):
        return logits.to(dtype)
    return (logits - logits.detach().amax(dim=-1, keepdim=True)).to(dtype)


def _gaussian_logits(queries, keys, scale: float, pure: bool = False):
    """``−‖q − k‖² · scale``, accurate in every dtype (the float32 trap of the expansion).

    ``‖q−k‖² = ‖q̃‖² − 2⟨q̃,k̃⟩ + ‖k̃‖²`` on data centred at the keys' mean, in float64:
    its logit error is about ``eps64 · scale · (‖q̃‖² + ‖k̃‖²)``, negligible unless the
    bandwidth is ~1e-7 of the data's spread; then direct squared distances (``torch.cdist``
    without the matrix-product expansion, in float64) are used instead. The expansion is one
    matrix product of augmented rows, ``[2s·q̃, −s, −s‖q̃‖²] · [k̃, ‖k̃‖², 1]``, so the
    ``(m, n)`` logits are written once. Returns float64 logits whatever the data's dtype.
    ``pure``: the fallback forms the differences ``(..., m, n, d)`` instead (``cdist`` has
    neither a second derivative nor forward mode), and the accuracy check reads the values
    under any ``torch.func`` wrapper.
    """
    centre = keys.mean(dim=-2, keepdim=True, dtype=torch.float64)  # (..., 1, d); float32 sums may overflow
    q, k = queries.double() - centre, keys.double() - centre  # (..., m, d), (..., n, d)
    q_sq, k_sq = q.square().sum(-1, keepdim=True), k.square().sum(-1, keepdim=True)  # (..., m, 1), (..., n, 1)
    if not _expansion_is_accurate(concrete(q_sq).max(), concrete(k_sq).max(), scale, q.shape[-1]):
        if pure:
            return (q.unsqueeze(-2) - k.unsqueeze(-3)).square().sum(-1).mul(-scale)  # (..., m, n, d) -> (..., m, n)
        distance = torch.cdist(q, k, compute_mode="donot_use_mm_for_euclid_dist")  # (..., m, n)
        if distance.requires_grad:  # cdist's backward needs its output: no in-place steps
            return distance.square().mul(-scale)
        return distance.square_().mul_(-scale)
    q_aug = torch.cat([q * (2 * scale), torch.full_like(q_sq, -scale), q_sq * -scale], dim=-1)  # (..., m, d+2)
    k_aug = torch.cat([k, k_sq, torch.ones_like(k_sq)], dim=-1)  # (..., n, d+2)
    return q_aug @ k_aug.transpose(-1, -2)  # (..., m, n): −s‖q−k‖², float64


def _check_pair(queries, keys):
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError(
            f"queries and keys must have the same feature dimension d; got {queries.shape[-1]} and {keys.shape[-1]}"
        )


def _batch_shape(name_shapes: dict) -> torch.Size:
    shapes = list(name_shapes.values())
    if all(shape == shapes[0] for shape in shapes):  # the common case, without torch's slow path
        return torch.Size(shapes[0])
    try:
        return torch.broadcast_shapes(*name_shapes.values())
    except RuntimeError:
        shapes = ", ".join(f"{k} {tuple(v)}" for k, v in name_shapes.items())
        raise ValueError(f"leading (batch) dimensions must broadcast; got {shapes}") from None


def nw_weights(queries, keys, *, kernel="softmax", temperature=None, bandwidth=None, higher_order=False):
    """Nadaraya–Watson weights of every query on every key (claim C0).

    Parameters
    ----------
    queries : array_like of shape (..., m, d)
        Query points (numpy array or torch tensor).
    keys : array_like of shape (..., n, d)
        Key (training) points; leading dimensions broadcast with those of ``queries``.
    kernel : {"softmax", "gaussian"}
        ``"softmax"``: ``w_i ∝ exp(⟨q, k_i⟩ / temperature)``; ``"gaussian"``:
        ``w_i ∝ exp(−‖q − k_i‖² / (2·bandwidth²))``.
    temperature : float, optional
        Softmax temperature > 0; default ``sqrt(d)``. Softmax kernel only.
    bandwidth : float
        Gaussian bandwidth > 0; required for the Gaussian kernel.
    higher_order : bool
        Build the result from operations that torch differentiates to every order and in
        forward mode, so that second derivatives (``create_graph=True``,
        ``torch.autograd.functional.hessian``) work. It only matters for the Gaussian kernel
        at bandwidths so small that direct distances are needed (``torch.cdist`` has no
        second derivative); those are then formed as ``(m, n, d)`` differences. On by
        itself inside ``torch.func`` transforms and for forward-mode dual tensors.

    Returns
    -------
    weights : array of shape (..., m, n)
        Non-negative, each row summing to 1; numpy in gives numpy out, torch in gives torch
        out on the same device; the dtype follows the inputs.

    Raises
    ------
    ValueError
        Unknown kernel; bad temperature or bandwidth (including one whose kernel scale
        overflows); NaN/inf or empty inputs; logits that could overflow the dtype; fewer
        than 2 dimensions; mismatched feature dimensions or batch shapes; a ``meta`` device.
    TypeError
        Non-numeric, complex, ragged or sparse inputs; non-numeric parameters; a
        ``temperature`` or ``bandwidth`` tensor that requires grad.

    Examples
    --------
    Two keys at equal distance from the query share the weight equally:

    >>> import numpy as np
    >>> nw_weights(np.array([[0.0]]), np.array([[-1.0], [1.0]]), kernel="gaussian", bandwidth=1.0)
    array([[0.5, 0.5]])

    With ``⟨q, k⟩ = (0, log 3)`` and temperature 1 the weights are ``(1/4, 3/4)``:

    >>> w = nw_weights(np.array([[1.0]]), np.array([[0.0], [np.log(3)]]), temperature=1.0)
    >>> np.round(w, 12)
    array([[0.25, 0.75]])
    """
    (queries, keys), is_torch = as_tensors({"queries": queries, "keys": keys}, {"queries": 2, "keys": 2})
    _check_pair(queries, keys)
    _batch_shape({"queries": queries.shape[:-2], "keys": keys.shape[:-2]})
    scale = _kernel_scale(kernel, temperature, bandwidth, queries.shape[-1])
    pure = check_bool(higher_order, "higher_order") or transformed(queries, keys)
    bound, wide = _check_logit_range(queries, keys, kernel, scale)
    logits = _logits(queries, keys, kernel, scale, pure, wide)  # (..., m, n)
    weights = torch.softmax(_in_dtype(logits, queries.dtype, bound), dim=-1)  # (..., m, n)
    return restore(weights, is_torch)


def nw_estimate(queries, keys, values, *, kernel="softmax", temperature=None, bandwidth=None, chunk_size=None,
                higher_order=False):
    """Nadaraya–Watson estimate ``Σ_i w_i(q) v_i`` at every query (claim C0).

    Never materialises the ``(m, n)`` weights when they would exceed 8 MiB: the softmax
    kernel runs torch's fused ``scaled_dot_product_attention`` (CPU and CUDA), and so does
    the Gaussian kernel on float64 data (on augmented rows); otherwise an online
    log-sum-exp over key blocks (see the module docstring).

    Parameters
    ----------
    queries : array_like of shape (..., m, d)
    keys : array_like of shape (..., n, d)
    values : array_like of shape (..., n) or (..., n, e)
        Responses. ``values.ndim == keys.ndim - 1`` means scalar values, ``values.ndim ==
        keys.ndim`` vector values. Leading dimensions of all three broadcast (give shared
        keys an explicit leading 1 when the values carry replicates).
    kernel, temperature, bandwidth
        As in :func:`nw_weights`.
    chunk_size : int, optional
        Force the chunked online-softmax path with key blocks of this size (default: pick
        the path automatically, blocks of 1024).
    higher_order : bool
        Take only paths built from operations that torch differentiates to every order and
        in forward mode: the materialised weights, or the chunked path when they would
        exceed 8 MiB, never the fused kernels (whose backward has no derivative of its own
        and no forward mode). Ask for it before a second derivative (``create_graph=True``,
        ``torch.autograd.functional.hessian``, ``gradgradcheck``); the default paths give
        first derivatives only and raise torch's "derivative ... is not implemented" on a
        second. On by itself inside ``torch.func`` transforms (``vmap``, ``jacfwd``,
        ``hessian``) and for forward-mode dual tensors (``torch.autograd.forward_ad``).

    Returns
    -------
    estimates : array of shape (..., m) or (..., m, e)
        Same kind (numpy/torch), device and dtype as the inputs.

    Raises
    ------
    ValueError, TypeError
        As :func:`nw_weights`; also mismatched numbers of keys and values, values of the
        wrong number of dimensions, a non-positive ``chunk_size``, or a ``higher_order``
        that is not a bool.

    Examples
    --------
    The estimate at the midpoint of two keys is the mean of their values:

    >>> import numpy as np
    >>> nw_estimate(np.array([[0.0]]), np.array([[-1.0], [1.0]]), np.array([2.0, 4.0]),
    ...             kernel="gaussian", bandwidth=0.5)
    array([3.])
    """
    arrays = {"queries": queries, "keys": keys, "values": values}
    (queries, keys, values), is_torch = as_tensors(arrays, {"queries": 2, "keys": 2, "values": 1})
    _check_pair(queries, keys)
    scalar = values.ndim == keys.ndim - 1
    if not scalar and values.ndim != keys.ndim:
        raise ValueError(
            f"values must have keys.ndim - 1 = {keys.ndim - 1} (scalar values) or keys.ndim = {keys.ndim} "
            f"(vector values) dimensions; got shape {tuple(values.shape)}"
        )
    values = values.unsqueeze(-1) if scalar else values  # (..., n, e)
    if values.shape[-2] != keys.shape[-2]:
        raise ValueError(f"values must have one entry per key (n = {keys.shape[-2]}); got {values.shape[-2]}")
    batch = _batch_shape({"queries": queries.shape[:-2], "keys": keys.shape[:-2], "values": values.shape[:-2]})
    scale = _kernel_scale(kernel, temperature, bandwidth, queries.shape[-1])
    bound, wide = _check_logit_range(queries, keys, kernel, scale)
    if chunk_size is not None:
        chunk_size = check_int(chunk_size, "chunk_size")
    pure = check_bool(higher_order, "higher_order") or transformed(queries, keys, values)
    values, factor = _scaled_values(values, keys.shape[-2])
    estimates = _estimate(queries, keys, values, batch, kernel, scale, chunk_size, bound, pure, wide)  # (..., m, e)
    if factor != 1.0:
        estimates = estimates * factor
    return restore(estimates.squeeze(-1) if scalar else estimates, is_torch)


def _scaled_values(values, n: int):
    """``values`` divided by a power of two when sums of ``n`` of them could overflow, and that factor.

    The fused and chunked paths sum kernel-weighted values before normalising (up to
    ``n·max|v|``): values near the float range would give inf although their average is
    finite. Scaling by a power of two is exact (the result is multiplied back), and is
    skipped, at the cost of one reduction, when ``n·max|v|`` fits with a margin of 16.
    """
    largest = float(torch.linalg.vector_norm(concrete(values).detach(), ord=math.inf))  # max |v|
    if largest * n <= _limit(values.dtype):
        return values, 1.0
    exponent = math.frexp(largest)[1] - 1  # largest = m·2^(exponent+1), m in [0.5, 1)
    if exponent == 0:
        return values, 1.0
    return values * math.ldexp(1.0, -exponent), math.ldexp(1.0, exponent)  # scaled |v| < 2


def _estimate(queries, keys, values, batch, kernel, scale, chunk_size, bound=0.0, pure=False, wide=False):
    """Dispatch to the fused, dense or chunked path; returns (*batch, m, e).

    ``pure``: the dense or chunked path only, out of place (any-order and forward-mode AD).
    ``wide``: softmax logits in float64 (:func:`_check_logit_range`), so no fused kernel.
    """
    m, n, e = queries.shape[-2], keys.shape[-2], values.shape[-1]
    out = None
    needs_grad = torch.is_grad_enabled() and any(x.requires_grad for x in (queries, keys, values))
    if kernel == "softmax" and wide:
        chunk_size = chunk_size or (None if math.prod(batch) * m * n * 8 <= DENSE_LIMIT_BYTES else KEY_BLOCK)
        fused_ok = False  # the fused kernels take the scale and scaled entries in the data's dtype
    else:
        fused_ok = not pure
    if fused_ok and chunk_size is None and queries.device.type == "cuda" and not needs_grad \
            and _differences_fit(queries, keys, kernel, bound):
        # the Triton kernel has no backward: autograd takes SDPA or the torch paths
        out = _triton_estimate(queries, keys, values, kernel, scale)  # (*batch, m, e) or None
    sdpa = fused_ok and chunk_size is None and out is None
    if sdpa and kernel == "softmax" and e <= _fused_width(queries.shape[-1], queries.device, queries.dtype):
        # fused SDPA needs values as wide as the queries: padding narrow values is free,
        # but padding queries and keys to wide values would multiply the logit work
        out = _fused(queries, keys, values, batch, scale)  # (*batch, m, e) or None
    elif sdpa and kernel == "gaussian" and _gaussian_fusable(queries.device.type, queries.dtype):
        out = _fused_gaussian(queries, keys, values, batch, scale)  # (*batch, m, e) or None
    if out is not None:
        return _FirstOrderOnly.apply(out) if out.requires_grad else out
    n_batch = math.prod(batch)
    if chunk_size is None and n_batch * m * n * queries.element_size() <= DENSE_LIMIT_BYTES:
        logits = _logits(queries, keys, kernel, scale, pure, wide)  # (..., m, n)
        weights = torch.softmax(_in_dtype(logits, queries.dtype, bound), dim=-1)
        return weights @ values  # (..., m, n) @ (..., n, e) -> (..., m, e)
    flat = [x.expand(*batch, *x.shape[-2:]).reshape(n_batch, *x.shape[-2:]) for x in (queries, keys, values)]
    out = _chunked(*flat, kernel, scale, chunk_size or KEY_BLOCK, pure, wide)  # (B, m, e)
    return out.reshape(*batch, m, e)


SECOND_ORDER = ("nw_estimate's fused kernels have first derivatives only; call it with "
                "higher_order=True before taking a second derivative (create_graph=True, "
                "torch.autograd.functional.hessian, gradgradcheck)")


class _FirstOrderOnly(torch.autograd.Function):
    """The identity on a fused kernel's output, whose backward refuses to build a graph.

    SDPA's backward has no derivative of its own, so torch fails a second derivative
    with "derivative for ..._backward is not implemented", which does not say what to do.
    Under ``create_graph=True`` (grad mode on inside the backward) this raises
    :data:`SECOND_ORDER` instead, which names ``higher_order=True``.
    """

    @staticmethod
    def forward(ctx, out):
        return out.view_as(out)

    @staticmethod
    def backward(ctx, grad):
        if torch.is_grad_enabled():
            raise RuntimeError(SECOND_ORDER)
        return grad


def _differences_fit(queries, keys, kernel, bound: float) -> bool:
    """Whether the Triton kernel's Gaussian inputs and logits fit the data's dtype (always true for softmax).

    It forms the keys' mean, ``q − k`` and the logits in the data's dtype, where the paths
    below work in float64 (float32 sums pass 3.4e38 for data near the float32 range, and
    logits bounded by ``bound`` may exceed it): it is used only when ``bound`` and
    ``n·max|k| + max|q|`` fit with a margin of 16.
    """
    if kernel == "softmax":
        return True
    if bound > _limit(queries.dtype):
        return False
    largest_q = float(torch.linalg.vector_norm(queries.detach(), ord=math.inf))
    largest_k = float(torch.linalg.vector_norm(keys.detach(), ord=math.inf))
    return keys.shape[-2] * largest_k + largest_q <= _limit(queries.dtype)


def _triton_estimate(queries, keys, values, kernel, scale):
    """The fused Triton kernel (:mod:`mhacore.nw_triton`) on CUDA when Triton imports and the shape fits, else None.

    ``(..., m, d), (..., n, d), (..., n, e) -> (*batch, m, e)``: float32/float64, ``d ≤ 128``,
    ``e ≤ 8``. Imported here, not at module level, so the CPU paths never load Triton.
    """
    from . import nw_triton

    if not nw_triton.available() or not nw_triton.fits(queries, keys, values):
        return None
    return nw_triton.triton_estimate(queries, keys, values, kernel=kernel, scale=scale)


def _fused_width(width: int, device: torch.device, dtype: torch.dtype) -> int:
    """The feature width at which SDPA's fused kernels get queries, keys and values.

    CUDA: a multiple of 8 (keeps the fused kernels eligible). CPU float32: 16 for widths
    2–15 (the flash kernel runs faster there; module docstring). Otherwise unchanged.
    """
    if device.type == "cuda":
        return -(-width // 8) * 8
    if dtype == torch.float32 and 1 < width < CPU_FLOAT32_WIDTH:
        return CPU_FLOAT32_WIDTH
    return width


def _fused(queries, keys, values, batch, scale):
    """Softmax NW through fused SDPA; (..., m, d), (..., n, d), (..., n, e) -> (*batch, m, e) or None.

    Each input is zero-padded at its own shape and only then broadcast to ``batch`` (a
    stride-0 view, which SDPA reads without copying): a key set shared by every replicate,
    or values shared by every head, stay one copy.
    """
    d, e = queries.shape[-1], values.shape[-1]
    width = _fused_width(max(d, e), queries.device, queries.dtype)
    if len(batch) <= 2:
        lead = (1,) * (2 - len(batch)) + tuple(batch)  # SDPA's fused kernels take (N, heads, L, width)
    else:
        lead = (math.prod(batch[:-1]), batch[-1])

    def four_d(x):  # (..., L, c) -> (*lead, L, width)
        x = F.pad(x, (0, width - x.shape[-1])) if x.shape[-1] < width else x
        return x.expand(*batch, *x.shape[-2:]).reshape(*lead, *x.shape[-2:])

    q, k, v = four_d(queries), four_d(keys), four_d(values)
    m = q.shape[-2]
    if queries.device.type == "cpu" and queries.dtype in (torch.float32, torch.float64):
        # the CPU flash kernel takes every unmasked 4-D float32/float64 input of equal widths,
        # so there is nothing to force (tests/test_nw.py checks the kernel in a profile)
        out = F.scaled_dot_product_attention(q, k, v, scale=scale)  # (*lead, m, width)
        return out.narrow(-1, 0, e).reshape(*batch, m, e)
    backends = [torch.nn.attention.SDPBackend.FLASH_ATTENTION, torch.nn.attention.SDPBackend.EFFICIENT_ATTENTION]
    try:
        with warnings.catch_warnings(), torch.nn.attention.sdpa_kernel(backends):
            warnings.simplefilter("ignore")
            out = F.scaled_dot_product_attention(q, k, v, scale=scale)  # (*lead, m, width)
    except RuntimeError:  # no fused kernel for this device/dtype/shape: caller chunks
        return None
    return out.narrow(-1, 0, e).reshape(*batch, m, e)


def _fused_gaussian(queries, keys, values, batch, scale):
    """Gaussian NW through fused SDPA on augmented float64 rows, or None.

    ``(..., m, d), (..., n, d), (..., n, e) -> (*batch, m, e)``. On data centred at the
    keys' mean, ``[2s·q̃, −s] · [k̃, ‖k̃‖²] = −s‖q̃ − k̃‖² + s‖q̃‖²``: the Gaussian logit plus a
    per-query constant, which the softmax ignores. Used for float64 data only, where it
    replaces a materialised float64 softmax (memory-bound) by the cache-blocked fused
    kernel; returns None (the caller falls back) when the expansion's error bound fails,
    when the values are wider than the augmented rows, or when no fused kernel runs.
    """
    d, e = queries.shape[-1], values.shape[-1]
    if e > _fused_width(d + 1, queries.device, queries.dtype):
        return None
    centre = keys.mean(dim=-2, keepdim=True)  # (..., 1, d)
    q, k = queries - centre, keys - centre  # (..., m, d), (..., n, d)
    k_sq = k.square().sum(-1, keepdim=True)  # (..., n, 1)
    if not _expansion_is_accurate(q.square().sum(-1).max(), k_sq.max(), scale, d, queries.dtype):
        return None
    q_aug = torch.cat([q * (2 * scale), q.new_full((*q.shape[:-1], 1), -scale)], dim=-1)  # (..., m, d+1)
    k_aug = torch.cat([k, k_sq], dim=-1)  # (..., n, d+1)
    return _fused(q_aug, k_aug, values, batch, 1.0)


def _gaussian_fusable(device_type: str, dtype: torch.dtype) -> bool:
    """Whether Gaussian data of this device type and dtype try the fused augmented-row path.

    CPU: float64 only (float32 keeps float64 logits; running the fused kernel in float64 was
    measured no faster there). CUDA: float32 and float64, the bound of
    :func:`_expansion_is_accurate` in the data's own dtype deciding.
    """
    if device_type == "cuda":
        return dtype in (torch.float32, torch.float64)
    return dtype == torch.float64


def _chunked(queries, keys, values, kernel, scale, key_block, pure=False, wide=False):
    """Online log-sum-exp NW; (B, m, d), (B, n, d), (B, n, e) -> (B, m, e), memory flat in n.

    Blocks of results are joined with ``torch.cat`` (no writes into a preallocated
    output), which ``torch.func.vmap`` and forward-mode AD accept.
    """
    n_batch, m, _ = queries.shape
    rows = max(1, BLOCK_ELEMENTS // key_block)  # batch x query rows per block
    q_step = min(m, rows)
    b_step = max(1, rows // q_step)
    groups = []
    for b0 in range(0, n_batch, b_step):
        blocks = [_online_softmax(queries[b0 : b0 + b_step, q0 : q0 + q_step],  # (b, mc, d)
                                  keys[b0 : b0 + b_step], values[b0 : b0 + b_step], kernel, scale, key_block,
                                  pure, wide)
                  for q0 in range(0, m, q_step)]  # each (b, mc, e)
        groups.append(torch.cat(blocks, dim=1) if len(blocks) > 1 else blocks[0])  # (b, m, e)
    return torch.cat(groups, dim=0) if len(groups) > 1 else groups[0]  # (B, m, e)


def _online_softmax(queries, keys, values, kernel, scale, key_block, pure=False, wide=False):
    """One query block against all keys, block by block; (b, mc, d) -> (b, mc, e).

    The running maximum stays in the logits' dtype (float64 for the Gaussian kernel), so
    the exponentials are taken of shifted logits before any cast to the data's dtype. Under
    autograd (or ``pure``) every step is out of place; otherwise the block's logits are
    reused in place.
    """
    running_max = running_sum = numerator = None
    # float16/bfloat16 sums of many keys pass float16's largest number (65504 keys of weight 1): accumulate in float32
    acc = torch.float32 if values.dtype in (torch.float16, torch.bfloat16) else values.dtype
    for k0 in range(0, keys.shape[1], key_block):
        logits = _logits(queries, keys[:, k0 : k0 + key_block], kernel, scale, pure, wide)  # (b, mc, kc)
        block_max = logits.detach().amax(dim=-1, keepdim=True)  # (b, mc, 1); a constant per row
        new_max = block_max if running_max is None else torch.maximum(running_max, block_max)
        if logits.requires_grad or pure:
            kernel_values = (logits - new_max).exp()
        else:
            kernel_values = logits.sub_(new_max).exp_()
        kernel_values = kernel_values.to(acc)  # (b, mc, kc)
        block_values = values[:, k0 : k0 + key_block].to(acc)  # (b, kc, e)
        if running_max is None:
            running_sum = kernel_values.sum(dim=-1, keepdim=True)  # (b, mc, 1)
            numerator = kernel_values @ block_values  # (b, mc, e)
        else:
            correction = torch.exp(running_max - new_max).to(acc)  # (b, mc, 1)
            running_sum = running_sum * correction + kernel_values.sum(dim=-1, keepdim=True)
            numerator = torch.baddbmm(numerator * correction, kernel_values, block_values)
        running_max = new_max
    return (numerator / running_sum).to(values.dtype)
