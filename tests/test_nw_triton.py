"""Tests for mhacore.nw_triton (the fused Triton NW kernel) and the CUDA dispatch in mhacore.nw.

No GPU is needed: Triton's interpreter (``TRITON_INTERPRET=1``, set by tests/conftest.py
before Triton is imported) runs the kernel on CPU tensors with numpy. The interpreter
computes every ``tl.dot`` with numpy's matmul in the operands' dtype whatever
``input_precision`` says, so the "no TF32" setting is checked instead on the PTX of the
kernel compiled for sm_90 (last test), and on a GPU by ``benchmarks/gpu_check.py``'s error
column. The interpreter is slow (about 0.1–0.5 s a call here), so the sizes are small;
blocks of 16 make several ragged key and query blocks out of them.
"""

import importlib
import importlib.util
import math
import os

import numpy as np
import pytest
import torch

from mhacore import nw as nw_module
from mhacore import nw_estimate

HAS_TRITON = importlib.util.find_spec("triton") is not None
requires_triton = pytest.mark.skipif(
    not HAS_TRITON, reason="triton is not installed (pinned in requirements.txt): the interpreter tests need it"
)
SMALL_BLOCKS = {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 2}
EPS32 = float(torch.finfo(torch.float32).eps)


@pytest.fixture(scope="module")
def nw_triton():
    """mhacore.nw_triton with its kernel run by Triton's interpreter (tests/conftest.py sets TRITON_INTERPRET)."""
    if not HAS_TRITON:
        pytest.skip("triton is not installed (pinned in requirements.txt): the interpreter tests need it")
    module = importlib.import_module("mhacore.nw_triton")
    if type(module._nw_kernel).__name__ != "InterpretedFunction":
        pytest.skip(f"triton was imported with TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET')!r}; "
                    "these tests need its interpreter")
    return module


def reference(queries, keys, values, kernel, scale):
    """Float64 NW from the definition: softmax over keys of the logits, times the values.

    ``(..., m, d), (..., n, d), (..., n, e) -> (..., m, e)``, computed by torch in float64.
    """
    q, k, v = (x.double() for x in (queries, keys, values))
    if kernel == "softmax":
        logits = scale * q @ k.transpose(-1, -2)  # (..., m, n)
    else:
        logits = -scale * (q.unsqueeze(-2) - k.unsqueeze(-3)).square().sum(-1)  # (..., m, n)
    return torch.softmax(logits, dim=-1) @ v  # (..., m, e)


def draw(seed, *shapes, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype) for shape in shapes]


def relative_error(got, expected):
    return ((got.double() - expected).abs().max() / expected.abs().max()).item()


# float64: rounding of O(d) operations per logit; float32: the 1e-5 target
TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5}
CASES = [("softmax", 0.4, "auto"), ("gaussian", 0.5, "direct"), ("gaussian", 0.5, "centred")]


@requires_triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("kernel", "scale", "form"), CASES)
def test_matches_float64_reference_with_ragged_blocks_and_broadcast_batches(nw_triton, kernel, scale, form, dtype):
    # m = 37 and n = 75 are not multiples of the 16-wide blocks; queries (2, 1), keys (1, 3)
    # and values (2, 3) broadcast to the batch (2, 3), read through stride-0 views
    queries, keys, values = draw(1, (2, 1, 37, 5), (1, 3, 75, 5), (2, 3, 75, 2), dtype=dtype)
    got = nw_triton.triton_estimate(
        queries, keys, values, kernel=kernel, scale=scale, gaussian_form=form, blocks=SMALL_BLOCKS
    )
    assert got.shape == (2, 3, 37, 2) and got.dtype == dtype
    assert relative_error(got, reference(queries, keys, values, kernel, scale)) <= TOLERANCE[dtype]


@requires_triton
@pytest.mark.parametrize("width", range(1, 9))
def test_every_value_width_matches_nw_estimate_float64(nw_triton, width):
    # widths 1 (summed directly) and 2..8 (a dot product on 16 register columns), both
    # kernels, float32 and float64 alternating; the oracle is the existing float64 nw_estimate
    dtype = torch.float32 if width % 2 else torch.float64
    queries, keys, values = draw(10 + width, (21, 3), (40, 3), (40, width))
    kernel, params = ("softmax", {"temperature": 0.9}) if width <= 4 else ("gaussian", {"bandwidth": 0.7})
    scale = nw_module._kernel_scale(kernel, params.get("temperature"), params.get("bandwidth"), 3)
    got = nw_triton.triton_estimate(*(x.to(dtype) for x in (queries, keys, values)), kernel=kernel, scale=scale,
                                    blocks=SMALL_BLOCKS)
    expected = nw_estimate(queries, keys, values, kernel=kernel, **params)  # (21, width)
    assert got.shape == (21, width)
    assert relative_error(got, expected) <= TOLERANCE[dtype]


@requires_triton
@pytest.mark.parametrize("d", [1, 16, 33, 128])
@pytest.mark.parametrize(("kernel", "form"), [("softmax", "auto"), ("gaussian", "direct")])
def test_feature_widths_up_to_128(nw_triton, d, kernel, form):
    # padded feature blocks of 16, 16, 64 and 128 columns; the direct form loops over all d
    queries, keys, values = draw(20 + d, (9, d), (23, d), (23, 1), dtype=torch.float32)
    scale = 1.0 / math.sqrt(d) if kernel == "softmax" else 0.5 / d
    got = nw_triton.triton_estimate(queries, keys, values, kernel=kernel, scale=scale, gaussian_form=form,
                                    blocks=SMALL_BLOCKS)
    assert relative_error(got, reference(queries, keys, values, kernel, scale)) <= TOLERANCE[torch.float32]


@requires_triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_large_temperature_scaled_logits(nw_triton, dtype):
    # temperature 1e-3 on keys that differ from one direction by ~1e-3: logits ~4e3 (exp
    # overflows without the running maximum) that differ by O(1) between keys, so the weight
    # is shared. A float32 logit carries a rounding error of at most about
    # (d + 4)·eps32·scale·Σ_j|q_j k_j|; an error δ in every logit moves an estimate by at most
    # (e^{2δ} − 1)·max|v|, the float32 tolerance (an error of float32 logits, not of the kernel)
    base, jitter, noise, values = draw(30, (1, 4), (50, 4), (19, 4), (50, 1))
    base = 1.0 + base.abs()  # (1, 4)
    keys, queries = (base + 1e-3 * jitter).to(dtype), (base + 0.1 * noise).to(dtype)  # (50, 4), (19, 4)
    values, scale = values.to(dtype), 1e3
    got = nw_triton.triton_estimate(queries, keys, values, kernel="softmax", scale=scale, blocks=SMALL_BLOCKS)
    expected = reference(queries, keys, values, "softmax", scale)
    weights = torch.softmax(scale * queries.double() @ keys.double().T, dim=-1)  # (19, 50)
    assert (weights.max(-1).values < 0.9).all()  # no query puts (nearly) all weight on one key
    assert torch.isfinite(got).all()
    if dtype == torch.float64:
        assert relative_error(got, expected) <= 1e-10
    else:
        delta = (4 + 4) * EPS32 * scale * (queries.double().abs() @ keys.double().abs().T).max().item()
        assert (got.double() - expected).abs().max().item() <= math.expm1(2 * delta) * values.abs().max().item()


@requires_triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_tiny_bandwidth_uses_direct_distances_and_stays_accurate(nw_triton, dtype):
    # bandwidth 1e-4 on data offset by 10: clusters of 6 keys within about a bandwidth share
    # the weight of the queries placed among them. The expansion's bound fails, so "auto"
    # takes direct differences, whose float32 logits err by about (d + 3)·eps32 relative
    # (the shared logits are O(1) here); the centred form errs by 1.8 on these data
    bandwidth, scale = 1e-4, 0.5e8
    centres, jitter, values, noise = draw(40, (10, 1, 3), (10, 6, 3), (60, 1), (10, 2, 3))
    keys = (10.0 + centres + 0.5 * bandwidth * jitter).reshape(60, 3)  # (60, 3)
    queries = (10.0 + centres + 0.5 * bandwidth * noise).reshape(20, 3)  # (20, 3)
    q, k, v = (x.to(dtype) for x in (queries, keys, values))
    centred = k - k.mean(0)
    assert not nw_module._expansion_is_accurate(
        (q - k.mean(0)).double().square().sum(-1).max(), centred.double().square().sum(-1).max(), scale, 3, dtype
    )
    expected = reference(q, k, v, "gaussian", scale)  # from the same (rounded) inputs
    weights = torch.softmax(-scale * torch.cdist(q.double(), k.double()).square(), dim=-1)  # (20, 60)
    assert (weights.max(-1).values < 0.9).all()  # the weight is shared within each cluster
    got = nw_triton.triton_estimate(q, k, v, kernel="gaussian", scale=scale, blocks=SMALL_BLOCKS)
    assert relative_error(got, expected) <= (1e-12 if dtype == torch.float64 else 1e-5)


@requires_triton
def test_refuses_shapes_it_does_not_take(nw_triton):
    queries, keys, values = draw(50, (4, 3), (6, 3), (6, 9))
    with pytest.raises(ValueError, match="1 ≤ e ≤ 8"):
        nw_triton.triton_estimate(queries, keys, values, scale=1.0)
    with pytest.raises(ValueError, match="d ≤ 128"):
        nw_triton.triton_estimate(torch.zeros(4, 129), torch.zeros(6, 129), torch.zeros(6, 1), scale=1.0)
    with pytest.raises(ValueError, match="gaussian_form"):
        nw_triton.triton_estimate(queries, keys, values[:, :1], kernel="gaussian", scale=1.0, gaussian_form="x")


@requires_triton
def test_dispatch_helper_falls_back_outside_the_kernels_range(nw_triton, monkeypatch):
    # mhacore.nw._triton_estimate (called on CUDA only) returns None for inputs the kernel
    # does not take, or without Triton, so nw_estimate keeps SDPA there; otherwise the estimate
    queries, keys, values = draw(60, (5, 3), (12, 3), (12, 9))
    assert nw_module._triton_estimate(queries, keys, values, "softmax", 1.0) is None  # e = 9
    half = [x.half() for x in (queries, keys, values[:, :2])]
    assert nw_module._triton_estimate(*half, "softmax", 1.0) is None  # float16
    assert nw_module._triton_estimate(queries, keys, values[:, :2].float(), "softmax", 1.0) is None  # mixed dtypes
    got = nw_module._triton_estimate(queries, keys, values[:, :2], "softmax", 1.0)  # (5, 2)
    assert relative_error(got, reference(queries, keys, values[:, :2], "softmax", 1.0)) <= 1e-12
    monkeypatch.setattr(nw_triton, "triton", None)  # as if Triton were not installed
    assert nw_module._triton_estimate(queries, keys, values[:, :2], "softmax", 1.0) is None
    with pytest.raises(ImportError, match="triton"):
        nw_triton.triton_estimate(queries, keys, values[:, :2], scale=1.0)


def test_fits_checks_the_int32_offsets_within_a_batch_entry():
    # a (2**31 / 16 + 1)-row key matrix of width 16 overflows the kernel's int32 offsets;
    # meta tensors stand in for it (fits reads shapes, strides and dtypes, never the data)
    pytest.importorskip("triton", reason="triton is not installed (pinned in requirements.txt)")
    from mhacore import nw_triton

    rows = 2**31 // 16 + 1
    queries, keys, values = (torch.empty(*shape, device="meta") for shape in ((4, 16), (rows, 16), (rows, 1)))
    assert not nw_triton.fits(queries, keys, values)
    assert nw_triton.fits(queries, keys[: rows // 2], values[: rows // 2])


def test_cpu_paths_never_reach_the_triton_kernel(monkeypatch):
    def forbidden(*args):
        raise AssertionError("the Triton kernel is for CUDA tensors only")

    monkeypatch.setattr(nw_module, "_triton_estimate", forbidden)
    queries, keys, values = draw(70, (6, 2), (30, 2), (30,))
    for kernel, params in (("softmax", {}), ("gaussian", {"bandwidth": 0.5})):
        expected = reference(queries, keys, values[:, None], kernel, nw_module._kernel_scale(
            kernel, None, params.get("bandwidth"), 2))[:, 0]
        np.testing.assert_allclose(nw_estimate(queries, keys, values, kernel=kernel, **params), expected, rtol=1e-12)


# The fused Gaussian decision (mhacore.nw): which device/dtype tries the augmented rows, and
# the rounding bound that must hold in the data's dtype. No GPU needed: the device type is an argument.


@pytest.mark.parametrize(
    ("device_type", "dtype", "fusable"),
    [("cpu", torch.float64, True), ("cpu", torch.float32, False), ("cuda", torch.float64, True),
     ("cuda", torch.float32, True), ("cuda", torch.float16, False), ("cpu", torch.bfloat16, False)],
)
def test_which_device_and_dtype_try_the_fused_gaussian_path(device_type, dtype, fusable):
    assert nw_module._gaussian_fusable(device_type, dtype) is fusable


@pytest.mark.parametrize(("dtype", "tolerance"), [(torch.float64, 1e-8), (torch.float32, 2e-6)])
def test_expansion_bound_switches_at_its_tolerance(dtype, tolerance):
    # (2d + 16)·eps·scale·(max‖q̃‖² + max‖k̃‖²) ≤ tolerance, with eps of the dtype
    d, scale, eps = 16, 0.5, float(torch.finfo(dtype).eps)
    edge = tolerance / ((2 * d + 16) * eps * scale)  # max‖q̃‖² + max‖k̃‖² at the bound
    assert nw_module._expansion_is_accurate(0.4 * edge, 0.59 * edge, scale, d, dtype)
    assert not nw_module._expansion_is_accurate(0.4 * edge, 0.61 * edge, scale, d, dtype)


def test_expansion_bound_on_typical_data():
    # standard normal data in d = 16, bandwidth 1 (the GPU shape): float64 passes,
    # float32 does not (its worst-case logit error bound is ~1e-4); bandwidth 30 passes both
    (keys,) = draw(80, (20000, 16))
    q_sq = k_sq = (keys - keys.mean(0)).square().sum(-1).max()
    assert nw_module._expansion_is_accurate(q_sq, k_sq, 0.5, 16, torch.float64)
    assert not nw_module._expansion_is_accurate(q_sq, k_sq, 0.5, 16, torch.float32)
    assert nw_module._expansion_is_accurate(q_sq, k_sq, 0.5 / 30**2, 16, torch.float32)


def test_float32_augmented_rows_within_1e5_where_the_bound_allows():
    # the fused float32 Gaussian path (SDPA on augmented rows; CPU SDPA here, CUDA uses the
    # same rows) on data right at the edge of the float32 bound: the estimate stays within
    # the 1e-5 relative target against the float64 estimate
    d = 4
    queries, keys, values = draw(90, (40, d), (300, d), (300, 1))
    q_sq = (queries - keys.mean(0)).square().sum(-1).max()
    k_sq = (keys - keys.mean(0)).square().sum(-1).max()
    scale = 0.99 * 2e-6 / ((2 * d + 16) * EPS32 * float(q_sq + k_sq))  # just inside the bound
    args32 = [x.float() for x in (queries, keys, values)]
    got = nw_module._fused_gaussian(*args32, torch.Size([]), scale)  # (40, 1), or None if refused
    assert got is not None and got.dtype == torch.float32
    assert relative_error(got, reference(queries, keys, values, "gaussian", scale)) <= 1e-5
    assert nw_module._fused_gaussian(*args32, torch.Size([]), 1.02 * scale / 0.99) is None  # just outside


# The same kernel compiled for an H100/H200 (sm_90) without a GPU: Triton's front end, LLVM
# and the ptxas shipped in the triton wheel. This checks what the interpreter cannot: that
# every logit form compiles, that float32 dot products are plain FMAs (no TF32 tensor-core
# instruction in the PTX), that float64 uses no approximate exp2, and that nothing spills.
# In a subprocess: the interpreter leaves triton.language patched in the process that ran it.
COMPILED = [("fp32", 0, 1, 16), ("fp32", 2, 8, 128), ("fp64", 1, 2, 64)]  # (dtype, logit form, e, d)
COMPILED_TF32X3 = ("fp32", 0, 4, 64)  # the launch option timed by gpu_check.py: it must compile, on tensor cores


def sm90_ptx(dtype, logits, width, d, precision="ieee"):
    """PTX of the kernel for sm_90 with 64 x 64 blocks and 4 warps (no GPU needed)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    from mhacore import nw_triton

    kernel = JITFunction(nw_triton._nw_kernel.fn)
    constants = {"D": d, "E": width, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_D": max(16, triton.next_power_of_2(d)),
                 "BLOCK_E": 1 if width == 1 else 16, "LOGITS": logits, "PRECISION": precision}
    pointers = ("queries", "keys", "values", "key_bias", "out", "direct_scale_ptr")
    signature = {name: ("constexpr" if name in constants else f"*{dtype}" if name in pointers else "i32")
                 for name in kernel.arg_names}
    compiled = triton.compile(ASTSource(kernel, signature, constants), target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": 4, "num_stages": 2})
    return compiled.asm["ptx"]


@requires_triton
def test_kernel_compiles_for_sm90_without_tf32():
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    code = ("import json, sys; sys.path.insert(0, 'tests'); from test_nw_triton import COMPILED, COMPILED_TF32X3, sm90_ptx; "
            "print(json.dumps([sm90_ptx(*case) for case in COMPILED] + [sm90_ptx(*COMPILED_TF32X3, 'tf32x3')]))")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"PYTHONPATH": str(root)}
    result = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    *ptxs, tf32x3 = json.loads(result.stdout.splitlines()[-1])
    assert "tf32" in tf32x3 and "mma" in tf32x3  # the error-compensated split runs on tensor cores
    for (dtype, logits, width, d), ptx in zip(COMPILED, ptxs, strict=True):
        case = f"{dtype}, logit form {logits}, e = {width}, d = {d}"
        assert ".entry _nw_kernel" in ptx, case
        assert "tf32" not in ptx, case
        assert ("ex2.approx" in ptx) == (dtype == "fp32"), case
        assert "st.local" not in ptx, case  # no register spills
