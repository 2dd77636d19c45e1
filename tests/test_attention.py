"""Tests for mhacore.attention: MultiHeadNW as an ensemble of NW heads (claim C1)."""

import math

import numpy as np
import pytest
import torch

from mhacore import MultiHeadNW, nw_estimate, nw_weights


def random_model(rng, n_heads=3, p=6, d_head=2, alpha=None):
    return MultiHeadNW(rng.normal(size=(n_heads, p, d_head)), rng.normal(size=(n_heads, p, d_head)), alpha=alpha)


def test_matches_an_explicit_per_head_loop():
    rng = np.random.default_rng(0)
    alpha = np.array([0.2, 0.3, 0.5])
    model = random_model(rng, alpha=alpha)
    queries, keys, values = rng.normal(size=(5, 6)), rng.normal(size=(40, 6)), rng.normal(size=40)
    loop = np.stack([
        nw_estimate(queries @ model.w_query[h].numpy(), keys @ model.w_key[h].numpy(), values, temperature=math.sqrt(2))
        for h in range(3)
    ])  # (H, m)
    np.testing.assert_allclose(model.head_estimates(queries, keys, values), loop, rtol=1e-12)
    np.testing.assert_allclose(model(queries, keys, values), alpha @ loop, rtol=1e-12)
    weights = model.weights(queries, keys)  # (H, m, n)
    np.testing.assert_allclose(weights @ values, loop, rtol=1e-12)
    # C1: the ensemble is itself a linear smoother with weights w̄ = Σ α_h w^h
    np.testing.assert_allclose(np.einsum("h,hmn->mn", alpha, weights) @ values, model(queries, keys, values), rtol=1e-12)


def restricted_torch_mha(rng, embed_dim, n_heads, alpha):
    """A random torch MHA whose value/output path is restricted as in claim C1."""
    torch.manual_seed(int(rng.integers(1000)))
    mha = torch.nn.MultiheadAttention(embed_dim, n_heads, batch_first=True, dtype=torch.float64)
    d_head = embed_dim // n_heads
    with torch.no_grad():
        mha.in_proj_bias.zero_()
        w_value = mha.in_proj_weight[2 * embed_dim :]
        w_value.zero_()
        w_value[torch.arange(n_heads) * d_head, 0] = 1.0  # head h's channel 0 reads the response
        mha.out_proj.weight.zero_()
        mha.out_proj.weight[0, torch.arange(n_heads) * d_head] = torch.tensor(alpha)  # Σ α_h head_h
        mha.out_proj.bias.zero_()
    return mha


def test_matches_restricted_torch_multihead_attention():
    # Provenance: torch.nn.MultiheadAttention itself, with the C1 value/output restriction.
    rng = np.random.default_rng(1)
    alpha = np.array([0.1, 0.6, 0.3])
    mha = restricted_torch_mha(rng, embed_dim=6, n_heads=3, alpha=alpha)
    queries, keys, y = rng.normal(size=(4, 6)), rng.normal(size=(25, 6)), rng.normal(size=25)
    value_input = np.zeros((25, 6))
    value_input[:, 0] = y
    t = lambda a: torch.tensor(a)[None]  # noqa: E731  (1, len, embed_dim)
    out, _ = mha(t(queries), t(keys), t(value_input), need_weights=False)
    model = MultiHeadNW.from_torch(mha, alpha=alpha)
    np.testing.assert_allclose(model(queries, keys, y), out[0, :, 0].detach().numpy(), rtol=1e-10)
    # torch's averaged attention weights are the uniform mixture of head weights
    _, averaged = mha(t(queries), t(keys), t(value_input), need_weights=True, average_attn_weights=True)
    np.testing.assert_allclose(model.weights(queries, keys).mean(0), averaged[0].detach().numpy(), rtol=1e-10)


def test_to_torch_round_trip():
    rng = np.random.default_rng(2)
    model = random_model(rng, n_heads=2, p=4, d_head=2, alpha=[0.25, 0.75])
    back = MultiHeadNW.from_torch(model.to_torch(), alpha=model.alpha)
    np.testing.assert_array_equal(back.w_query.numpy(), model.w_query.numpy())
    np.testing.assert_array_equal(back.w_key.numpy(), model.w_key.numpy())


def test_replicate_batch_matches_loop():
    rng = np.random.default_rng(3)
    model = random_model(rng)
    queries = rng.normal(size=(5, 6))
    keys, values = rng.normal(size=(4, 30, 6)), rng.normal(size=(4, 30))
    batched = model.head_estimates(queries, keys, values)
    assert batched.shape == (4, 3, 5)
    for r in range(4):
        np.testing.assert_allclose(batched[r], model.head_estimates(queries, keys[r], values[r]), rtol=1e-12)
    shared = model.head_estimates(queries, keys[0], values)  # fixed design, replicated noise
    for r in range(4):
        np.testing.assert_allclose(shared[r], model.head_estimates(queries, keys[0], values[r]), rtol=1e-12)
    assert model(queries, keys, values).shape == (4, 5)
    grid = rng.normal(size=(2, 3, 30))  # replicates on a 2-D grid share the design too
    shared_grid = model.head_estimates(queries, keys[0], grid)
    assert shared_grid.shape == (2, 3, 3, 5)
    np.testing.assert_allclose(shared_grid[1, 2], model.head_estimates(queries, keys[0], grid[1, 2]),
                               rtol=1e-12)


def test_large_problem_uses_same_answer_on_every_path():
    rng = np.random.default_rng(4)
    model = random_model(rng, n_heads=2, p=3, d_head=2)
    queries, keys, values = rng.normal(size=(600, 3)), rng.normal(size=(1200, 3)), rng.normal(size=1200)
    fused = model.head_estimates(queries, keys, values)  # 2*600*1200*8 B > 8 MiB: fused path
    chunked = model.head_estimates(queries, keys, values, chunk_size=500)
    dense = model.weights(queries, keys) @ values
    np.testing.assert_allclose(fused, dense, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(chunked, dense, rtol=1e-11, atol=1e-13)


def test_float32_replicates_projected_to_the_fused_width_match_float64():
    """float32 on the CPU: heads are projected straight to width 16 (zero weight columns) and
    replicate values are padded once and shared by the heads; the answer is the float64 one."""
    rng = np.random.default_rng(6)
    model = random_model(rng)  # d_head = 2: projected to width 16
    queries, keys, values = rng.normal(size=(7, 6)), rng.normal(size=(3, 40, 6)), rng.normal(size=(3, 40))
    expected = model.head_estimates(queries, keys, values)  # float64, (3, 3, 7)
    t32 = [torch.tensor(a, dtype=torch.float32) for a in (queries, keys, values)]
    for chunk_size in (None, 16):
        got = model.head_estimates(*t32, chunk_size=chunk_size)
        assert got.dtype == torch.float32 and got.shape == (3, 3, 7)
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)
    per_query_set = model.head_estimates(t32[0].expand(3, 7, 6), t32[1], t32[2])  # queries carry the batch too
    np.testing.assert_allclose(per_query_set.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_torch_float32_in_torch_float32_out():
    rng = np.random.default_rng(5)
    model = random_model(rng)
    data = [torch.tensor(a, dtype=torch.float32) for a in (rng.normal(size=(5, 6)), rng.normal(size=(20, 6)), rng.normal(size=20))]
    out = model(*data)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and out.shape == (5,)
    expected = model(*(d.double().numpy() for d in data))
    torch.testing.assert_close(out, torch.tensor(expected, dtype=torch.float32))


def test_defaults_and_repr():
    model = random_model(np.random.default_rng(6), n_heads=4, d_head=4)
    np.testing.assert_allclose(model.alpha, 0.25)
    assert model.temperature == 2.0
    assert "n_heads=4" in repr(model)


def test_from_torch_rejects_biases_and_other_modules():
    mha = torch.nn.MultiheadAttention(4, 2)
    with torch.no_grad():
        mha.in_proj_bias.fill_(0.1)
    with pytest.raises(ValueError, match="zero query/key biases"):
        MultiHeadNW.from_torch(mha)
    with pytest.raises(TypeError, match="torch.nn.MultiheadAttention"):
        MultiHeadNW.from_torch(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="kdim"):
        MultiHeadNW.from_torch(torch.nn.MultiheadAttention(4, 2, kdim=3, vdim=3))
    model = MultiHeadNW(np.ones((2, 3, 1)), np.ones((2, 3, 1)))
    with pytest.raises(ValueError, match="p == n_heads"):
        model.to_torch()
