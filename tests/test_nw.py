"""Tests for mhacore.nw: NW weights and estimates (claim C0)."""

import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st
from hypothesis.extra.numpy import arrays
from scipy.special import logsumexp
from statsmodels.nonparametric.kernel_regression import KernelReg

from mhacore import nw_estimate, nw_weights
from mhacore import nw as nw_module


def reference(queries, keys, values, kernel="softmax", scale=None):
    """Float64 log-sum-exp reference: weights = exp(L - logsumexp(L))."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (queries, keys, values))
    if kernel == "softmax":
        logits = q @ k.T * scale
    else:
        logits = -((q[:, None, :] - k[None, :, :]) ** 2).sum(-1) * scale
    weights = np.exp(logits - logsumexp(logits, axis=1, keepdims=True))  # (m, n)
    return weights @ v


def data(rng, m, n, d, e=None, dtype=np.float64):
    v = rng.normal(size=(n,) if e is None else (n, e))
    return [a.astype(dtype) for a in (rng.normal(size=(m, d)), rng.normal(size=(n, d)), v)]


def test_gaussian_matches_statsmodels_kernelreg():
    # Provenance: statsmodels KernelReg local-constant (NW) with a product Gaussian kernel of
    # fixed bandwidth h in every coordinate = isotropic exp(-|q-k|^2 / (2 h^2)).
    rng = np.random.default_rng(0)
    queries, keys, values = data(rng, 12, 80, 2)
    fitted = KernelReg(values, keys, var_type="cc", reg_type="lc", bw=[0.4, 0.4]).fit(queries)[0]
    np.testing.assert_allclose(nw_estimate(queries, keys, values, kernel="gaussian", bandwidth=0.4), fitted, rtol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_softmax_matches_torch_sdpa(dtype):
    # Provenance: torch's scaled_dot_product_attention with an explicit scale 1/temperature.
    g = torch.Generator().manual_seed(1)
    queries, keys, values = (torch.randn(2, s, 5, generator=g, dtype=dtype) for s in (30, 70, 70))
    expected = torch.nn.functional.scaled_dot_product_attention(queries, keys, values, scale=1 / 1.7)
    torch.testing.assert_close(nw_estimate(queries, keys, values, temperature=1.7), expected)


PATHS = {  # (m, n, chunk_size): dense, fused SDPA (weights > 8 MiB), chunked online softmax
    "dense": (40, 300, None),
    "fused": (520, 2100, None),
    "chunked": (70, 1500, 256),
}


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("kernel", ["softmax", "gaussian"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("e", [None, 4])
def test_matches_float64_logsumexp_reference(path, kernel, dtype, e):
    m, n, chunk = PATHS[path]
    rng = np.random.default_rng(2)
    queries, keys, values = data(rng, m, n, 3, e, dtype)
    params = {"temperature": 0.5} if kernel == "softmax" else {"bandwidth": 0.3}
    scale = 2.0 if kernel == "softmax" else 1 / (2 * 0.3**2)
    got = nw_estimate(queries, keys, values, kernel=kernel, chunk_size=chunk, **params)
    assert got.dtype == dtype and got.shape == ((m,) if e is None else (m, e))
    tol = 1e-12 if dtype == np.float64 else 2e-5  # float32: a few ulps of |values| <= ~4
    np.testing.assert_allclose(got, reference(queries, keys, values, kernel, scale), rtol=tol, atol=tol)


def test_fused_path_used_for_large_softmax(monkeypatch):
    calls = []
    original = nw_module._fused
    monkeypatch.setattr(nw_module, "_fused", lambda *a: calls.append(1) or original(*a))
    rng = np.random.default_rng(3)
    nw_estimate(*data(rng, 520, 2100, 3))
    assert calls == [1]


def test_gaussian_float32_small_bandwidth_is_accurate():
    # The dot-product expansion loses every digit here (|k|^2/h^2 ~ 1e10); direct squared
    # distances keep float32 accuracy. Inputs are exactly representable in float32.
    rng = np.random.default_rng(4)
    keys = (100 + rng.uniform(0, 0.01, size=(3000, 2))).astype(np.float32)
    queries = (100 + rng.uniform(0, 0.01, size=(50, 2))).astype(np.float32)
    values = rng.normal(size=3000).astype(np.float32)
    h = 2e-4
    expected = reference(queries, keys, values, "gaussian", 1 / (2 * h**2))
    for chunk in (None, 512):
        got = nw_estimate(queries, keys, values, kernel="gaussian", bandwidth=h, chunk_size=chunk)
        np.testing.assert_allclose(got, expected, atol=1e-3)


def test_gaussian_extreme_bandwidth_uses_direct_distances():
    # bandwidth 1e-5 of the data's spread: the float64 expansion's error bound fails and
    # direct squared distances take over; the answer still matches the reference
    rng = np.random.default_rng(8)
    queries, keys, values = data(rng, 20, 300, 2)
    keys[:20] = queries + 1e-5 * rng.normal(size=(20, 2))  # every query has a near key
    for chunk in (None, 64):
        got = nw_estimate(queries, keys, values, kernel="gaussian", bandwidth=1e-5, chunk_size=chunk)
        np.testing.assert_allclose(got, reference(queries, keys, values, "gaussian", 1 / (2 * 1e-10)), rtol=1e-9, atol=1e-9)


def test_leading_dimensions_broadcast():
    rng = np.random.default_rng(5)
    queries = rng.normal(size=(3, 1, 6, 2))
    keys = rng.normal(size=(1, 2, 9, 2))
    values = rng.normal(size=(1, 2, 9))
    got = nw_estimate(queries, keys, values)
    gaussian = nw_estimate(queries, keys, values, kernel="gaussian", bandwidth=0.7)  # fused, augmented rows
    assert got.shape == gaussian.shape == (3, 2, 6)
    for i in range(3):
        for j in range(2):
            np.testing.assert_allclose(got[i, j], reference(queries[i, 0], keys[0, j], values[0, j], scale=2**-0.5))
            np.testing.assert_allclose(gaussian[i, j], reference(queries[i, 0], keys[0, j], values[0, j], "gaussian",
                                                                 1 / (2 * 0.7**2)), rtol=1e-12, atol=1e-14)
    assert nw_weights(queries, keys).shape == (3, 2, 6, 9)


def test_kinds_devices_and_dtypes_follow_input():
    rng = np.random.default_rng(6)
    queries, keys, values = data(rng, 4, 7, 2)
    assert isinstance(nw_estimate(queries.tolist(), keys, values), np.ndarray)
    t32 = [torch.tensor(a, dtype=torch.float32) for a in (queries, keys, values)]
    out = nw_estimate(*t32)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and out.device == t32[0].device
    assert nw_weights(queries.astype(np.float32), keys.astype(np.float32)).dtype == np.float32


def test_default_temperature_is_sqrt_d():
    rng = np.random.default_rng(7)
    queries, keys, _ = data(rng, 3, 5, 4)
    np.testing.assert_allclose(nw_weights(queries, keys), nw_weights(queries, keys, temperature=2.0))


finite = st.floats(-10, 10, allow_nan=False, width=64)


@st.composite
def problems(draw):
    m, n, d = draw(st.integers(1, 4)), draw(st.integers(1, 8)), draw(st.integers(1, 3))
    queries = draw(arrays(np.float64, (m, d), elements=finite))
    keys = draw(arrays(np.float64, (n, d), elements=finite))
    values = draw(arrays(np.float64, (n,), elements=finite))
    kernel = draw(st.sampled_from(["softmax", "gaussian"]))
    params = {"temperature": draw(st.floats(0.05, 10))} if kernel == "softmax" else {"bandwidth": draw(st.floats(0.05, 10))}
    return queries, keys, values, kernel, params


@given(problems())
def test_weights_are_a_probability_vector(problem):
    queries, keys, _, kernel, params = problem
    weights = nw_weights(queries, keys, kernel=kernel, **params)
    assert (weights >= 0).all()
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-12)


@given(problems(), st.sampled_from([None, 2]))
def test_estimate_lies_in_the_range_of_values(problem, chunk):
    queries, keys, values, kernel, params = problem
    est = nw_estimate(queries, keys, values, kernel=kernel, chunk_size=chunk, **params)
    slack = 1e-12 * (1 + np.abs(values).max())
    assert (est >= values.min() - slack).all() and (est <= values.max() + slack).all()


@given(problems(), st.randoms(use_true_random=False))
def test_invariant_to_permuting_training_pairs(problem, random):
    queries, keys, values, kernel, params = problem
    order = list(range(len(values)))
    random.shuffle(order)
    np.testing.assert_allclose(
        nw_estimate(queries, keys[order], values[order], kernel=kernel, **params),
        nw_estimate(queries, keys, values, kernel=kernel, **params),
        rtol=1e-12, atol=1e-12,
    )


@given(problems(), arrays(np.float64, (8,), elements=finite), st.floats(-3, 3))
def test_linear_in_the_values(problem, other, a):
    queries, keys, values, kernel, params = problem
    other = other[: len(values)]
    est = lambda v: nw_estimate(queries, keys, v, kernel=kernel, **params)  # noqa: E731
    np.testing.assert_allclose(est(values + a * other), est(values) + a * est(other), atol=1e-9)


@given(st.floats(1.0, 1e4), st.sampled_from([np.float32, np.float64]), st.sampled_from([None, 3]))
def test_extreme_logits_stay_finite(size, dtype, chunk):
    # logits up to ±1e4 overflow a naive exp in both float32 and float64
    queries = np.array([[size], [-size]], dtype=dtype)
    keys = np.array([[1.0], [-1.0], [0.5], [0.0]], dtype=dtype)
    values = np.array([1.0, 2.0, 3.0, 4.0], dtype=dtype)
    est = nw_estimate(queries, keys, values, temperature=1.0, chunk_size=chunk)
    assert np.isfinite(est).all()
    if size > 100:  # all weight on the key with the largest logit
        np.testing.assert_allclose(est, [1.0, 2.0])
    weights = nw_weights(queries, keys, kernel="gaussian", bandwidth=1e-3)
    assert np.isfinite(weights).all()


def test_gpu_check_smoke_path_runs_on_cpu():
    # benchmarks/gpu_check.py's correctness logic, on CPU at small sizes (the GPU run is manual)
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"
    result = subprocess.run([sys.executable, str(script), "--device", "cpu", "--small", "--skip-timings"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all correctness checks passed" in result.stdout


@pytest.mark.parametrize("chunk_size", [None, 7])
def test_values_wider_than_queries_on_every_path(chunk_size):
    """Many value columns (e > d) skip fused SDPA, whose padding would widen q and k too."""
    rng = np.random.default_rng(11)
    queries, keys = rng.normal(size=(9, 2)), rng.normal(size=(40, 2))
    values = rng.normal(size=(40, 25))  # (n, e), e >> d
    got = nw_estimate(queries, keys, values, temperature=0.7, chunk_size=chunk_size)
    logits = queries @ keys.T / 0.7
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got, weights @ values, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cpu_softmax_runs_the_fused_flash_kernel(dtype):
    """Scalar values are padded so that SDPA's fused CPU kernel runs, not its slow math path
    (which silently materialises two (m, n) matrices)."""
    g = torch.Generator().manual_seed(0)
    queries = torch.randn(600, 4, generator=g, dtype=dtype)
    keys, values = torch.randn(2000, 4, generator=g, dtype=dtype), torch.randn(2000, generator=g, dtype=dtype)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        nw_estimate(queries, keys, values)
    names = {event.name for event in prof.events()}
    assert any("flash_attention" in name for name in names), sorted(n for n in names if "attention" in n)
    assert not any("_scaled_dot_product_attention_math" in name for name in names)


def test_float64_gaussian_runs_the_fused_kernel_on_augmented_rows():
    """float64 Gaussian NW goes through SDPA on rows [2s·q̃, −s] · [k̃, ‖k̃‖²] (a per-query
    shift of the logits, which the softmax ignores) instead of a materialised softmax, and
    still matches the float64 reference to rounding."""
    rng = np.random.default_rng(12)
    queries, keys, values = data(rng, 300, 2500, 5)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        got = nw_estimate(queries, keys, values, kernel="gaussian", bandwidth=0.6)
    assert any("flash_attention" in event.name for event in prof.events())
    expected = reference(queries, keys, values, "gaussian", 1 / (2 * 0.6**2))
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_path_with_three_broadcast_batch_dims_and_strided_inputs(dtype):
    """More than two leading dimensions (merged for SDPA's 4-D layout), broadcast ones
    (stride-0 views) and non-contiguous inputs give the reference answer."""
    rng = np.random.default_rng(13)
    queries = rng.normal(size=(2, 1, 3, 5, 4)).astype(dtype)
    keys = np.swapaxes(rng.normal(size=(1, 3, 1, 4, 11)), -1, -2).astype(dtype)  # (1, 3, 1, 11, 4), strided
    values = rng.normal(size=(2, 3, 1, 11, 6)).astype(dtype)  # e = 6 > d = 4
    t = [torch.from_numpy(np.ascontiguousarray(a)) for a in (queries, keys, values)]
    t[1] = t[1].transpose(-1, -2).contiguous().transpose(-1, -2)  # non-contiguous keys
    got = nw_estimate(*t, temperature=0.9)
    assert got.shape == (2, 3, 3, 5, 6)
    tol = 1e-12 if dtype == np.float64 else 2e-5
    for i, j, k in np.ndindex(2, 3, 3):
        expected = reference(queries[i, 0, k], keys[0, j, 0], values[i, j, 0], scale=1 / 0.9)
        np.testing.assert_allclose(got[i, j, k].numpy(), expected, rtol=tol, atol=tol)
