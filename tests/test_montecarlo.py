"""Tests for mhacore.montecarlo: batched replicate simulation."""

import numpy as np
import pytest
import torch

from mhacore import DataModel, MultiHeadNW, simulate_decomposition, simulate_heads
from mhacore._rng import as_generator, spawn, torch_generator


def setup(rng=0):
    rng = np.random.default_rng(rng)
    model = DataModel(f=lambda x: np.cos(x).sum(-1), p=3, sigma=0.2, design="normal")
    mha = MultiHeadNW(rng.normal(size=(2, 3, 2)), rng.normal(size=(2, 3, 2)))
    return model, mha, rng.normal(size=(4, 3))


def test_batched_run_equals_a_loop_over_replicates():
    model, mha, queries = setup()
    preds = simulate_heads(model, mha, 15, queries, 6, rng=7)
    assert preds.shape == (6, 2, 4) and preds.dtype == np.float64
    children = spawn(7, 7)
    for r in range(6):
        keys, values = model.sample(children[r + 1], 15)
        np.testing.assert_allclose(preds[r], mha.head_estimates(queries, keys, values), rtol=1e-12)


def test_reproducible_and_independent_of_chunking_and_dtype():
    model, mha, queries = setup()
    a = simulate_heads(model, mha, 15, queries, 5, rng=1)
    np.testing.assert_array_equal(a, simulate_heads(model, mha, 15, queries, 5, rng=np.random.default_rng(1)))
    np.testing.assert_allclose(a, simulate_heads(model, mha, 15, queries, 5, rng=1, chunk_size=2), rtol=1e-12)
    b = simulate_heads(model, mha, 15, queries, 5, rng=1, dtype=torch.float32, progress=True)
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert not np.allclose(a, simulate_heads(model, mha, 15, queries, 5, rng=2))


def test_fixed_design_shares_keys():
    model = DataModel(f=lambda x: x[..., 0], p=1, sigma=0.0)
    mha = MultiHeadNW(np.ones((1, 1, 1)), np.ones((1, 1, 1)))
    preds = simulate_heads(model, mha, 8, np.zeros((2, 1)), 4, rng=3, fixed_design=True)
    np.testing.assert_allclose(preds, preds[:1].repeat(4, axis=0))  # σ = 0: identical replicates
    random = simulate_heads(model, mha, 8, np.zeros((2, 1)), 4, rng=3)
    assert np.ptp(random[:, 0, 0]) > 0


def test_custom_design_and_decomposition():
    model = DataModel(f=lambda x: np.zeros(x.shape[:-1]), p=1, sigma=1.0, design=lambda rng, shape: rng.uniform(2, 3, (*shape, 1)))
    mha = MultiHeadNW(np.zeros((2, 1, 1)), np.zeros((2, 1, 1)))
    d = simulate_decomposition(model, mha, 5, np.zeros((1, 1)), 4000, rng=4)
    assert abs(d.mse - 1 / 5) <= 4 * np.sqrt(2 / 4000) / 5  # sample mean of 5 N(0,1): Var = 1/5
    with pytest.raises(ValueError, match=r"design\(rng, shape\) must return shape"):
        DataModel(f=np.sum, p=2, sigma=1.0, design=lambda rng, shape: rng.normal(size=shape)).sample_design(as_generator(0), (3,))


def test_rng_plumbing():
    g = np.random.default_rng(0)
    assert as_generator(g) is g
    assert as_generator(5).random() == as_generator(5).random()
    with pytest.raises(TypeError, match="rng must be None, an integer"):
        as_generator("seed")
    with pytest.raises(TypeError, match="rng must be None, an integer"):
        as_generator(True)
    with pytest.raises(ValueError, match="rng must be None, an integer >= 0"):
        as_generator(-1)
    with pytest.raises(ValueError, match="n_children must be an integer >= 0"):
        spawn(0, -1)
    assert torch.equal(torch.rand(3, generator=torch_generator(1)), torch.rand(3, generator=torch_generator(1)))
