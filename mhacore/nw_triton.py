"""A fused Nadaraya–Watson kernel in Triton for narrow values (CUDA; CPU through Triton's interpreter).

One program takes a block of queries and runs an online softmax over key blocks (the
chunked path of :mod:`mhacore.nw`, fused): per key block it forms the logits, updates the
running maximum and the running sum of ``exp(logit − max)``, and the running numerator
``Σ_i exp(logit_i − max)·v_i``; nothing of size ``m × n`` is written. Arithmetic is in the
inputs' dtype throughout: float32 dot products with ``input_precision="ieee"`` (no TF32;
``"tf32x3"``, an error-compensated split on tensor cores, is a launch option that
``benchmarks/gpu_check.py`` times against it), or float64. Values of width ``e`` = 1–8 are read as they are (no zero-padding in memory to
the query width, unlike SDPA): width 1 is summed directly, widths 2–8 are padded to 16
columns in registers for the dot product.

Logits, in base 2 (``exp(x) = 2^(x·log₂e)``, the factor folded into the queries):

* softmax: ``scale·⟨q, k⟩`` with ``scale = 1/temperature``;
* Gaussian, centred form: on data centred at the keys' mean,
  ``2s·⟨q̃, k̃⟩ − s·‖k̃‖²`` (``s = 1/(2·bandwidth²)``; the per-query ``−s‖q̃‖²`` cancels in
  the softmax). Used only when the rounding bound of :func:`mhacore._expansion._expansion_is_accurate`
  holds in the inputs' dtype (``(2d + 16)·eps·s·(max‖q̃‖² + max‖k̃‖²)`` at most 2e-6 in
  float32, 1e-8 in float64);
* Gaussian, direct form otherwise: ``−s·log₂e·Σ_j (q_j − k_j)²`` on the raw data, one
  subtraction and one multiply-add per coordinate. A float difference carries a rounding
  error relative to itself, so each logit is accurate to about ``(d + 3)·eps`` relative at
  any bandwidth (centring or scaling the data first would add errors relative to the
  data's spread, which dominate at tiny bandwidths).

Batch dimensions broadcast as in :func:`mhacore.nw.nw_estimate`: each input is expanded to
the common batch shape and viewed as ``(B1, B2, L, c)`` with ``B2`` the last batch dimension
(a stride-0 broadcast stays a view when it can); the kernel reads every input through its
own strides. Triton's interpreter (``TRITON_INTERPRET=1``) runs the same kernel on CPU
tensors, which is how the tests check it without a GPU.
"""

from __future__ import annotations

import math

import torch

from ._expansion import _expansion_is_accurate

try:
    import triton
    import triton.language as tl
except ImportError:  # no Triton: mhacore.nw keeps SDPA on CUDA
    triton = None

__all__ = ["available", "fits", "triton_estimate"]

MAX_VALUE_WIDTH = 8  # values wider than this go through SDPA
MAX_FEATURES = 128  # d of queries and keys
MAX_BATCH_PROGRAMS = 65535  # CUDA's limit on the grid's second axis (one program row per batch entry)
DTYPES = (torch.float32, torch.float64)
LOG2E = 1.0 / math.log(2.0)
LOGITS_DOT, LOGITS_DOT_KEY_BIAS, LOGITS_DIRECT = 0, 1, 2  # the kernel's three logit forms
GAUSSIAN_FORMS = ("auto", "centred", "direct")


def available() -> bool:
    """Whether Triton imports (it ships with torch's CUDA wheels; ``requirements.txt`` pins it)."""
    return triton is not None


def fits(queries, keys, values) -> bool:
    """Whether the kernel takes these inputs: (..., m, d), (..., n, d), (..., n, e) tensors.

    One dtype of float32/float64, ``d ≤ 128``, ``1 ≤ e ≤ 8``, at most 65535 batch entries
    (CUDA's grid limit), and offsets within one batch entry below 2³¹ (the kernel's int32
    index arithmetic; batch offsets are int64).

    Examples
    --------
    >>> fits(torch.zeros(5, 16), torch.zeros(7, 16), torch.zeros(7, 1))
    True
    >>> fits(torch.zeros(5, 16), torch.zeros(7, 16), torch.zeros(7, 9))  # values too wide
    False
    """
    d, e = queries.shape[-1], values.shape[-1]
    if not (1 <= d <= MAX_FEATURES and 1 <= e <= MAX_VALUE_WIDTH and queries.dtype in DTYPES):
        return False
    if not keys.dtype == values.dtype == queries.dtype:
        return False
    batch = torch.broadcast_shapes(queries.shape[:-2], keys.shape[:-2], values.shape[:-2])
    span = max((x.shape[-2] - 1) * abs(x.stride(-2)) + (x.shape[-1] - 1) * abs(x.stride(-1)) for x in (queries, keys, values))
    return math.prod(batch) <= MAX_BATCH_PROGRAMS and span < 2**31


def triton_estimate(queries, keys, values, *, kernel="softmax", scale, gaussian_form="auto", blocks=None):
    """Nadaraya–Watson estimates through the fused Triton kernel.

    Parameters
    ----------
    queries : torch.Tensor of shape (..., m, d)
    keys : torch.Tensor of shape (..., n, d)
    values : torch.Tensor of shape (..., n, e)
        Vector values (give scalar values a trailing axis of 1); ``1 ≤ e ≤ 8``, ``d ≤ 128``,
        float32 or float64, all three of one dtype and device (CUDA, or CPU under
        ``TRITON_INTERPRET=1``). Leading dimensions broadcast.
    kernel : {"softmax", "gaussian"}
    scale : float
        Factor of the raw logits: ``1/temperature`` (softmax) or ``1/(2·bandwidth²)`` (Gaussian).
    gaussian_form : {"auto", "centred", "direct"}
        Gaussian logits from the centred expansion or from direct differences; ``"auto"``
        takes the centred form when its rounding bound holds (module docstring).
    blocks : dict, optional
        Launch settings ``BLOCK_M``, ``BLOCK_N`` (powers of two ≥ 16), ``num_warps``,
        ``num_stages`` and optionally ``precision`` of the float32 dot products (``"ieee"``,
        the default, or ``"tf32x3"``); default from :func:`default_blocks`.

    Returns
    -------
    estimates : torch.Tensor of shape (*batch, m, e)
        ``batch`` the broadcast leading shape; same dtype and device as the inputs.

    Raises
    ------
    ImportError
        Triton is not installed.
    ValueError
        An unknown kernel or Gaussian form, or a shape, dtype or batch size the kernel does not take.

    Examples
    --------
    Under ``TRITON_INTERPRET=1`` (CPU tensors), the midpoint of two keys gets the mean:

    >>> import os, torch
    >>> if os.environ.get("TRITON_INTERPRET") == "1" and available():
    ...     out = triton_estimate(torch.zeros(1, 1), torch.tensor([[-1.0], [1.0]]),
    ...                           torch.tensor([[2.0], [4.0]]), kernel="gaussian", scale=2.0)
    ...     assert abs(out.item() - 3.0) < 1e-6
    """
    if triton is None:
        raise ImportError("triton_estimate needs the triton package (pinned in requirements.txt)")
    if kernel not in ("softmax", "gaussian"):
        raise ValueError(f"kernel must be 'softmax' or 'gaussian'; got {kernel!r}")
    if gaussian_form not in GAUSSIAN_FORMS:
        raise ValueError(f"gaussian_form must be one of {GAUSSIAN_FORMS}; got {gaussian_form!r}")
    batch = torch.broadcast_shapes(queries.shape[:-2], keys.shape[:-2], values.shape[:-2])
    d, e = queries.shape[-1], values.shape[-1]
    if not fits(queries, keys, values):
        raise ValueError(
            f"triton_estimate takes d ≤ {MAX_FEATURES}, 1 ≤ e ≤ {MAX_VALUE_WIDTH}, one dtype of {DTYPES}, at most "
            f"{MAX_BATCH_PROGRAMS} batch entries and offsets below 2**31 within one; got d = {d}, e = {e}, dtypes "
            f"{queries.dtype}/{keys.dtype}/{values.dtype}, shapes {tuple(queries.shape)}/{tuple(keys.shape)}/"
            f"{tuple(values.shape)}"
        )
    queries, keys, key_bias, logits = _prepared_logit_inputs(queries, keys, kernel, scale, gaussian_form)
    blocks = blocks or default_blocks(d, queries.dtype, logits)
    return _launch(queries, keys, values, key_bias, batch, logits, scale * LOG2E, blocks)


def _prepared_logit_inputs(queries, keys, kernel, scale, gaussian_form):
    """Queries, keys and key bias for the kernel's base-2 logits, and the logit form.

    ``(..., m, d), (..., n, d) -> (..., m, d), (..., n, d), key_bias (..., n, 1) or None, form``.
    The dot-product forms fold the factor into the queries; the direct form gets it in the kernel.
    """
    if kernel == "softmax":
        return queries * (scale * LOG2E), keys, None, LOGITS_DOT
    if gaussian_form == "direct":
        return queries, keys, None, LOGITS_DIRECT
    centre = keys.mean(dim=-2, keepdim=True)  # (..., 1, d)
    q, k = queries - centre, keys - centre  # (..., m, d), (..., n, d)
    k_sq = k.double().square().sum(-1, keepdim=True)  # (..., n, 1)
    if gaussian_form == "auto":
        accurate = _expansion_is_accurate(q.double().square().sum(-1).max(), k_sq.max(), scale, q.shape[-1], q.dtype)
        if not accurate:
            return queries, keys, None, LOGITS_DIRECT
    key_bias = (k_sq * (-scale * LOG2E)).to(keys.dtype)  # (..., n, 1)
    return q * (2 * scale * LOG2E), k, key_bias, LOGITS_DOT_KEY_BIAS


def default_blocks(d: int, dtype: torch.dtype, logits: int = LOGITS_DOT) -> dict:
    """Launch settings by feature width and dtype (first guesses; see benchmarks/gpu_check.py)."""
    if dtype == torch.float64:
        return {"BLOCK_M": 32, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2}
    block_n = 64 if d <= 32 or logits == LOGITS_DIRECT else 32
    return {"BLOCK_M": 64, "BLOCK_N": block_n, "num_warps": 4, "num_stages": 2}


def _four_d(x, batch, lead):
    """``(..., L, c)`` broadcast to ``(*batch, L, c)`` and viewed as ``(B1, B2, L, c)`` (copies only if it must)."""
    return x.expand(*batch, *x.shape[-2:]).reshape(*lead, *x.shape[-2:])


def _launch(queries, keys, values, key_bias, batch, logits, direct_scale, blocks):
    """Run the kernel; (..., m, d), (..., n, d), (..., n, e), (..., n, 1) or None -> (*batch, m, e)."""
    lead = (1, 1) if not batch else (math.prod(batch[:-1]), batch[-1])  # (B1, B2)
    q, k, v = (_four_d(x, batch, lead) for x in (queries, keys, values))  # (B1, B2, m, d), (B1, B2, n, d), (B1, B2, n, e)
    bias = k[..., :1] if key_bias is None else _four_d(key_bias, batch, lead)  # (B1, B2, n, 1); unread without a bias
    m, n, d, e = q.shape[2], k.shape[2], q.shape[3], v.shape[3]
    out = q.new_empty(*lead, m, e)  # (B1, B2, m, e)
    direct_scale = q.new_full((1,), direct_scale)  # a tensor: a Python float would reach the kernel as float32
    block_m, block_n = blocks["BLOCK_M"], blocks["BLOCK_N"]
    grid = (triton.cdiv(m, block_m), lead[0] * lead[1])
    _nw_kernel[grid](
        q, k, v, bias, out, m, n, lead[1], direct_scale,
        *q.stride(), *k.stride(), *v.stride(), *bias.stride()[:3], *out.stride(),
        D=d, E=e, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=max(16, triton.next_power_of_2(d)),
        BLOCK_E=1 if e == 1 else 16, LOGITS=logits, PRECISION=blocks.get("precision", "ieee"),
        num_warps=blocks["num_warps"], num_stages=blocks["num_stages"],
    )
    return out.reshape(*batch, m, e)


if triton is not None:

    @triton.jit
    def _nw_kernel(
        queries, keys, values, key_bias, out, m, n, heads, direct_scale_ptr,
        q_s0, q_s1, q_s2, q_s3, k_s0, k_s1, k_s2, k_s3, v_s0, v_s1, v_s2, v_s3, b_s0, b_s1, b_s2,
        o_s0, o_s1, o_s2, o_s3,
        D: tl.constexpr, E: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_D: tl.constexpr, BLOCK_E: tl.constexpr, LOGITS: tl.constexpr, PRECISION: tl.constexpr,
    ):
        """One block of BLOCK_M queries of batch entry (b1, b2) against all n keys, online softmax."""
        pid_b = tl.program_id(1).to(tl.int64)
        b1, b2 = pid_b // heads, pid_b % heads
        queries += b1 * q_s0 + b2 * q_s1
        keys += b1 * k_s0 + b2 * k_s1
        values += b1 * v_s0 + b2 * v_s1
        key_bias += b1 * b_s0 + b2 * b_s1
        out += b1 * o_s0 + b2 * o_s1
        dtype = out.dtype.element_ty
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
        row_ok = rows < m
        cols_d, cols_e = tl.arange(0, BLOCK_D), tl.arange(0, BLOCK_E)  # (BLOCK_D,), (BLOCK_E,)
        if LOGITS != 2:  # dot-product logits: the query block stays in registers
            q = tl.load(queries + rows[:, None] * q_s2 + cols_d[None, :] * q_s3,
                        mask=row_ok[:, None] & (cols_d[None, :] < D), other=0.0)  # (BLOCK_M, BLOCK_D)
        neg_scale = -tl.load(direct_scale_ptr)  # direct Gaussian form only
        running_max = tl.full((BLOCK_M,), float("-inf"), dtype)
        running_sum = tl.zeros((BLOCK_M,), dtype)
        numerator = tl.zeros((BLOCK_M, BLOCK_E), dtype)
        for start in range(0, n, BLOCK_N):
            key_idx = start + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
            key_ok = key_idx < n
            if LOGITS == 2:  # −s·log₂e·Σ_j (q_j − k_j)², coordinate by coordinate
                distance = tl.zeros((BLOCK_M, BLOCK_N), dtype)
                for j in range(D):  # a loop, not unrolled: unrolling d = 128 took minutes to compile
                    q_j = tl.load(queries + rows * q_s2 + j * q_s3, mask=row_ok, other=0.0)  # (BLOCK_M,)
                    k_j = tl.load(keys + key_idx * k_s2 + j * k_s3, mask=key_ok, other=0.0)  # (BLOCK_N,)
                    diff = q_j[:, None] - k_j[None, :]
                    distance += diff * diff
                logits = distance * neg_scale
            else:
                k = tl.load(keys + key_idx[:, None] * k_s2 + cols_d[None, :] * k_s3,
                            mask=key_ok[:, None] & (cols_d[None, :] < D), other=0.0)  # (BLOCK_N, BLOCK_D)
                logits = tl.dot(q, tl.trans(k), input_precision=PRECISION)  # (BLOCK_M, BLOCK_N)
                if LOGITS == 1:
                    logits += tl.load(key_bias + key_idx * b_s2, mask=key_ok, other=0.0)[None, :]
            logits = tl.where(key_ok[None, :], logits, float("-inf"))
            new_max = tl.maximum(running_max, tl.max(logits, 1))  # finite: every block has a key
            correction = tl.exp2(running_max - new_max)  # 0 on the first block
            weights = tl.exp2(logits - new_max[:, None])  # (BLOCK_M, BLOCK_N), unnormalised
            running_sum = running_sum * correction + tl.sum(weights, 1)
            v = tl.load(values + key_idx[:, None] * v_s2 + cols_e[None, :] * v_s3,
                        mask=key_ok[:, None] & (cols_e[None, :] < E), other=0.0)  # (BLOCK_N, BLOCK_E)
            if BLOCK_E == 1:
                update = tl.sum(weights[:, :, None] * v[None, :, :], 1)  # (BLOCK_M, 1)
            else:
                update = tl.dot(weights, v, input_precision=PRECISION)  # (BLOCK_M, BLOCK_E)
            numerator = numerator * correction[:, None] + update
            running_max = new_max
        estimates = numerator / running_sum[:, None]  # (BLOCK_M, BLOCK_E)
        tl.store(out + rows[:, None] * o_s2 + cols_e[None, :] * o_s3, estimates,
                 mask=row_ok[:, None] & (cols_e[None, :] < E))
