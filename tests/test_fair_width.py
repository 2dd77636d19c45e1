"""The fair width sweep (mhacore.fair_width) against implementations it did not write:
torch's scaled_dot_product_attention, explicit masked softmaxes, scikit-learn's
LinearRegression and statsmodels' KernelReg; and its sweep's bookkeeping."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from mhacore import fair_width as fw

REPORT = Path(__file__).resolve().parents[1] / "reports" / "sweep-heads-width.json"
D64 = torch.float64


def _problem(b=2, h=3, n=23, d=6, d_head=2, t=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    w_q = torch.randn(b, h, d, d_head, generator=g, dtype=D64)
    w_k = torch.randn(b, h, d, d_head, generator=g, dtype=D64)
    keys = torch.randn(b, n, d, generator=g, dtype=D64)
    values = torch.randn(b, n, t, generator=g, dtype=D64)
    scales = torch.rand(b, generator=g, dtype=D64) * 2 + 0.2
    return w_q, w_k, keys, values, scales


def _sdpa(w_q, w_k, queries, keys, values, scales, mask=None):
    """Heads by torch.nn.functional.scaled_dot_product_attention: (B, H, q, T)."""
    q = torch.einsum("bqd,bhdk->bhqk", queries, w_q)
    k = torch.einsum("bnd,bhdk->bhnk", keys, w_k)
    v = values[:, None].expand(-1, q.shape[1], -1, -1)
    out = []
    for i in range(len(scales)):  # one scale per design
        scale = float(scales[i]) / math.sqrt(w_q.shape[-1])
        out.append(torch.nn.functional.scaled_dot_product_attention(
            q[i:i + 1], k[i:i + 1], v[i:i + 1], attn_mask=mask, scale=scale))
    return torch.cat(out)


def test_head_outputs_equal_torch_attention():
    w_q, w_k, keys, values, scales = _problem()
    queries = torch.randn(2, 7, 6, dtype=D64)
    got = fw.head_outputs(w_q, w_k, keys, values, queries, scales)
    torch.testing.assert_close(got, _sdpa(w_q, w_k, queries, keys, values, scales))


def test_fold_outputs_equal_masked_attention():
    """Each of the three outputs is attention with a mask over the keys it may use."""
    w_q, w_k, keys, values, scales = _problem()
    n, folds = keys.shape[1], fw.FOLDS
    fold = torch.arange(n) % folds
    loo, held, within = fw.fold_outputs(w_q, w_k, keys, values, scales)
    eye = torch.eye(n, dtype=torch.bool)
    torch.testing.assert_close(loo, _sdpa(w_q, w_k, keys, keys, values, scales, ~eye))
    other_fold = fold[:, None] != fold[None, :]  # (n, n): key j outside i's fold
    torch.testing.assert_close(held, _sdpa(w_q, w_k, keys, keys, values, scales,
                                           other_fold))
    for k in range(folds):
        allowed = (fold[None, :] != k) & ~eye  # keys outside fold k, not i
        expect = _sdpa(w_q, w_k, keys, keys, values, scales, allowed)
        rows = fold != k
        torch.testing.assert_close(within[:, :, rows, :, k], expect[:, :, rows])


def test_fold_outputs_do_not_cancel_when_one_fold_holds_almost_all_the_weight():
    """Point 0's own fold holds a key with ~1e25 times the weight of every other key: the
    held-out average (from the other folds) must still be accurate, which a total minus
    the own fold's sum would not be."""
    keys = torch.zeros(1, 10, 1, dtype=D64)
    keys[0, :, 0] = torch.tensor([30.0, 1, 2, 3, 4, 31, 1, 2, 3, 4.5])
    values = torch.cos(keys)
    w = torch.ones(1, 1, 1, 1, dtype=D64)
    scale = torch.tensor([0.07], dtype=D64)
    _, held, _ = fw.fold_outputs(w, w, keys, values, scale)
    fold = torch.arange(10) % fw.FOLDS
    expect = _sdpa(w, w, keys, keys, values, scale, fold[:, None] != fold[None, :])
    torch.testing.assert_close(held, expect, rtol=1e-12, atol=0)
    # beyond the floating-point range the set's average is NaN, as documented
    _, held, _ = fw.fold_outputs(w, w, keys, values, torch.tensor([25.0], dtype=D64))
    assert torch.isnan(held[0, 0, 0, 0]) and torch.isfinite(held[0, 0, 1:5]).all()


def test_concat_path_equals_least_squares_by_scikit_learn(monkeypatch):
    from sklearn.linear_model import LinearRegression

    monkeypatch.setattr(fw, "RIDGE", 0.0)  # the stabilising ridge moves beta by ~1e-6
    w_q, w_k, keys, values, scales = _problem(b=1, h=3, n=40, t=1)
    loo, held, within = fw.fold_outputs(w_q, w_k, keys, values, scales)
    test = torch.randn(1, 3, 9, dtype=D64, generator=torch.Generator().manual_seed(4))
    y = values[..., 0]
    err, pred = fw.combine("concat", loo[..., 0], held[..., 0], within[..., 0, :], test, y)
    full = LinearRegression().fit(loo[0, :, :, 0].T.numpy(), y[0].numpy())
    np.testing.assert_allclose(pred[0].numpy(), full.predict(test[0].T.numpy()),
                               rtol=1e-6, atol=1e-8)
    fold = np.arange(40) % fw.FOLDS
    for k in range(fw.FOLDS):
        train = fold != k
        fit = LinearRegression().fit(within[0, :, train, 0, k].T.numpy(), y[0, train].numpy())
        expect = y[0, ~train].numpy() - fit.predict(held[0, :, ~train, 0].T.numpy())
        np.testing.assert_allclose(err[0, ~train].numpy(), expect, rtol=1e-6, atol=1e-8)
    err_mix, pred_mix = fw.combine("mixture", loo[..., 0], held[..., 0],
                                   within[..., 0, :], test, y)
    torch.testing.assert_close(pred_mix, test.mean(1))
    torch.testing.assert_close(err_mix, y - held[..., 0].mean(1))


def test_concat_judged_on_held_out_folds_is_not_fooled_by_a_flat_kernel():
    """With s -> 0 each head's leave-one-out output is (sum y - y_i)/(n - 1), from which
    least squares recovers y_i exactly; the held-out folds must see through it."""
    w_q, w_k, keys, values, _ = _problem(b=1, h=2, n=50, t=1)
    tiny = torch.tensor([1e-9], dtype=D64)
    loo, held, within = fw.fold_outputs(w_q, w_k, keys, values, tiny)
    y = values[..., 0]
    beta = fw._lstsq(loo[..., 0].transpose(-1, -2), y, torch.ones_like(y))
    fitted = beta[..., :1] + (beta[..., 1:, None] * loo[..., 0]).sum(1)
    assert float(((fitted - y) ** 2).mean()) < 1e-6  # the trap: an exact in-sample fit
    err, _ = fw.combine("concat", loo[..., 0], held[..., 0], within[..., 0, :],
                        torch.zeros(1, 2, 3, dtype=D64), y)
    assert float((err**2).mean()) > 0.5 * float(y.var())  # no better than the mean


def test_nw_baseline_equals_statsmodels_kernel_regression():
    from statsmodels.nonparametric.kernel_regression import KernelReg

    g = np.random.default_rng(3)
    keys, queries = g.standard_normal((1, 30, 2)), g.standard_normal((1, 6, 2))
    y = np.sin(keys[0].sum(1)) + 0.3 * g.standard_normal(30)
    f_q = np.sin(queries[0].sum(1))
    got = fw.nw_cv(torch.tensor(keys), torch.tensor(y[None]), torch.tensor(queries),
                   torch.tensor(f_q[None]))
    cv, test = [], []
    for bw in fw.BANDWIDTHS:
        h = bw * math.sqrt(2)  # the bandwidths are multiples of sqrt(D)
        model = KernelReg(y, keys[0], "cc", reg_type="lc", bw=[h, h])
        loo = [KernelReg(np.delete(y, i), np.delete(keys[0], i, 0), "cc", reg_type="lc",
                         bw=[h, h]).fit(keys[0, i:i + 1])[0][0] for i in range(30)]
        cv.append(np.mean((y - np.array(loo)) ** 2))
        test.append(np.mean((model.fit(queries[0])[0] - f_q) ** 2))
    assert float(got[0]) == pytest.approx(test[int(np.argmin(cv))], rel=1e-8)


def test_projections_have_the_promised_shape():
    g = np.random.default_rng(1)
    rotation = np.linalg.qr(g.standard_normal((8, 8)))[0]
    perm = g.permutation(8)
    u = np.full(8, 1 / math.sqrt(8))
    for d_head in fw.splits(8):
        heads = 8 // d_head
        for kind, target in (("random", None), ("signal-aware", "single-index"),
                             ("signal-aware", "additive")):
            w = fw.projections(kind, target, rotation, perm, d_head)
            assert w.shape == (heads, 8, d_head)
            for h in range(heads):  # orthonormal columns
                np.testing.assert_allclose(w[h].T @ w[h], np.eye(d_head), atol=1e-12)
            if target == "single-index":  # u in every head's span
                np.testing.assert_allclose(np.linalg.norm(w.transpose(0, 2, 1) @ u, axis=1),
                                           1.0, atol=1e-12)
            if target == "additive":  # coordinate axes, each used once
                assert set(np.abs(w).ravel().round(12)) <= {0.0, 1.0}
                np.testing.assert_allclose(np.abs(w).sum((0, 2)), 1.0)
    with pytest.raises(ValueError, match="not defined for target 'radial'"):
        fw.projections("signal-aware", "radial", rotation, perm, 2)


def test_targets_have_mean_zero_and_the_stated_variance():
    x = torch.randn(200_000, 6, generator=torch.Generator().manual_seed(5), dtype=D64)
    var = 2 * (1 - math.exp(-2))
    for name in fw.TARGETS:
        f = fw.target_values(name, x)
        se_mean = float(f.std()) / math.sqrt(len(f))
        se_var = float(((f - f.mean()) ** 2).std()) / math.sqrt(len(f))
        assert abs(float(f.mean())) < 4 * se_mean, name
        assert abs(float(f.var()) - var) < 4 * se_var, name


def test_learning_lowers_the_held_out_loss_and_zero_steps_change_nothing():
    g = torch.Generator().manual_seed(2)
    keys = torch.randn(2, 200, 4, generator=g)
    y = torch.stack([fw.target_values("single-index", keys)] * 2, 1)  # (B, 2, n)
    w = torch.as_tensor(np.stack([fw.projections(
        "random", None, np.linalg.qr(np.random.default_rng(i).standard_normal((4, 4)))[0],
        None, 2) for i in range(2)]), dtype=torch.float32)
    beta = torch.zeros(2, 2, 3)
    beta[..., 1:] = 0.5
    log_s = torch.zeros(2, 2)
    same = fw.learn_heads(w, log_s, beta, keys, y, [False, True], steps=0, generator=g)
    torch.testing.assert_close(same[0], w[:, None].expand(-1, 2, -1, -1, -1))

    def risk(w_q, w_k, s):
        return [float(fw._evaluate(w_q[:, j], w_k[:, j], keys, y[:, j, :, None], keys[:, :50],
                                   y[:, j, :50, None], s[:, j].exp())[o][0].mean())
                for j, o in enumerate(("mixture", "concat"))]

    before = risk(*same)
    after = risk(*fw.learn_heads(w, log_s, beta, keys, y, [False, True], steps=60,
                                 generator=torch.Generator().manual_seed(0)))
    assert after[0] < 0.8 * before[0] and after[1] < before[1]


def test_a_unit_is_the_same_whatever_else_runs():
    """A unit depends on its indices alone: run alone or in a sweep, bit for bit."""
    s = fw.settings("tiny", overrides={"budgets": [2], "n_values": [20], "blocks": 2,
                                       "steps": 2})

    class Ctx:
        device = "cpu"

    alone = fw.run_unit((2, 20, 1), s, Ctx)
    report = fw.run_sweep("tiny", overrides={"budgets": [2], "n_values": [20],
                                             "blocks": 2, "steps": 2}, log=None)
    unit = report["units"][fw.unit_key((2, 20, 1))]
    assert json.dumps({k: v for k, v in alone.items() if k != "seconds"}) == json.dumps(
        {k: v for k, v in unit.items() if k != "seconds"})


def test_summary_marks_cells_that_do_not_beat_the_constant():
    s = fw.settings("tiny", overrides={"budgets": [2], "n_values": [20], "blocks": 1,
                                       "block_size": 4})
    unit = {"constant": {t: [1.0, 1.1, 0.9, 1.0] for t in fw.TARGETS},
            "nw_cv": {t: [0.5, 0.6, 0.5, 0.4] for t in fw.TARGETS},
            "cells": {"single-index|mixture|random": {
                "mse": [[0.2, 0.25, 0.21, 0.22], [0.99, 1.2, 0.8, 1.05]],
                "oracle": [[0.2] * 4, [0.9] * 4], "scale": [[1.0] * 4, [2.0] * 4],
                "oracle_scale": [[1.0] * 4, [2.0] * 4],
                "edge": [[False] * 4, [True, False, False, False]]}}}
    report = {"settings": s, "units": {fw.unit_key((2, 20, 0)): unit}}
    (cell,) = fw.summarise(report)["cells"]
    assert cell["best_width"] == 1 and cell["runner_up"] == 2 and cell["beats_constant"]
    assert cell["runner_up_z"] > 4 and cell["edge_share"] == 0.125
    assert cell["nw_cv_mse"] == 0.5 and cell["best_vs_nw_z"] > 4
    unit["cells"]["single-index|mixture|random"]["mse"][0] = [0.99, 1.2, 0.8, 1.05]
    (cell,) = fw.summarise(report)["cells"]
    assert not cell["beats_constant"] and "not better than the constant" in \
        fw.format_summary({"cells": [cell]})


@pytest.mark.parametrize("overrides, pattern", [
    ({"n_values": [5]}, r"n_values must be an integer >= 10; got 5"),
    ({"budgets": [4, 4]}, r"budgets must not repeat a value"),
    ({"steps": -1}, r"steps must be an integer >= 0; got -1"),
    ({"m": 0}, r"m must be an integer >= 1; got 0"),
])
def test_bad_settings_name_the_setting(overrides, pattern):
    with pytest.raises(ValueError, match=pattern):
        fw.settings("tiny", overrides=overrides)


def test_resume_refuses_the_other_sweeps_report(tmp_path):
    from mhacore import sweeps

    out = tmp_path / "fixed.json"
    sweeps.run_sweep("tiny", overrides={"budgets": [4], "n_values": [20], "blocks": 1},
                     out=out, log=None)
    before = out.read_bytes()
    with pytest.raises(sweeps.ResumeRefused, match="the sweep"):
        fw.run_sweep("tiny", out=out, resume=True, log=None)
    assert out.read_bytes() == before


def test_committed_report_is_complete_and_its_summary_reproducible():
    report = json.loads(REPORT.read_text(encoding="utf-8"))
    s = report["settings"]
    assert set(report["units"]) == {fw.unit_key(u) for u in fw.plan_units(s)}
    assert json.dumps(fw.summarise(report)) == json.dumps(report["summary"])
    cells = report["summary"]["cells"]
    assert {c["target"] for c in cells} >= {"single-index", "additive"}
    assert {c["output"] for c in cells} == {"mixture", "concat"}
    assert {"random", "learned"} <= {c["projection"] for c in cells}
    assert len(s["budgets"]) >= 3 and all(c["p"] == c["D"] for c in cells)
    assert max(s["n_values"]) / min(s["n_values"]) >= 100
    keys = {"target", "output", "projection", "D", "p", "n", "best_width", "runner_up_z",
            "baseline_mse", "best_vs_baseline_z", "nw_cv_mse"}
    assert all(keys <= set(c) for c in cells)


@pytest.mark.parametrize("spoil, pattern", [
    (lambda u: u["constant"].update({"radial": [float("nan")] * 2}),
     r"constant\[radial\] holds a value that is not finite"),
    (lambda u: u["cells"]["single-index|mixture|random"]["mse"].pop(),
     r"single-index\|mixture\|random mse has shape \(1, 2\), expected \(2, 2\)"),
    (lambda u: u["cells"]["additive|concat|learned"]["mse"][0].__setitem__(0, -1e308),
     r"additive\|concat\|learned mse holds a value below 0.0"),
    (lambda u: u["cells"].pop("radial|concat|random"), r"cells are not this sweep's"),
    (lambda u: u.clear(), r"not a unit of this sweep"),
])
def test_resume_refuses_a_kept_unit_it_cannot_summarise(refuses_spoiled_unit, spoil,
                                                        pattern):
    grid = {"budgets": [2], "n_values": [20], "blocks": 1, "steps": 1}
    refuses_spoiled_unit(lambda **kw: fw.run_sweep("tiny", overrides=grid, **kw),
                         fw.unit_key((2, 20, 0)), spoil, pattern)
