"""The width experiment of claim C5 made fair: every split gets what a statistician
would give it.

Chapter 6's first grid keeps one projection scale for every width and every ``n`` (the
analogue of never choosing a bandwidth), draws projections blind to the signal, mixes
heads convexly, and spends budgets ``D`` inside a larger data space. Here, for every
split ``H·d_k = D`` of a budget, in a data space ``R^D`` as wide as the budget:

* the **temperature** is chosen from the data by 5-fold cross-validation over
  :data:`SCALES` (the oracle choice, which needs the truth, is recorded beside it);
* the **projections** are of three kinds from one initialisation family: ``random``
  (orthogonal blocks of a random rotation, as chapter 6), ``signal-aware`` (every head
  contains the single-index direction; for the additive target, heads on blocks of
  coordinates), and ``learned`` (``W_Q``, ``W_K`` per head and the temperature, trained
  by Adam for a fixed number of steps on the error at held-out batches, from the random
  kind and its cross-validated temperature; no early stopping);
* the heads are combined on two **output paths**: the convex ``mixture`` of claim C1
  (uniform weights ``1/H``) and the transformer's ``concat``: concatenation followed by
  a learned ``W_O``, here a signed combination ``β₀ + Σ_h β_h ŷ_h`` fitted by least
  squares on the heads' leave-one-out outputs (stacking), judged on held-out folds;
* three **targets** of equal variance: ``single-index`` ``2 sin(1ᵀx/√D)``, ``additive``
  ``(2/√D) Σ_j sin x_j`` and ``radial`` ``a (‖x‖² − D)/√(2D)``;
* two **baselines**: the constant predictor ``ȳ`` and a Gaussian Nadaraya–Watson smoother
  in ``R^D`` whose bandwidth is chosen by leave-one-out cross-validation.

A head's weight on key ``x_j`` at query ``q`` is ``softmax_j(s⟨W_Qᵀq, W_Kᵀx_j⟩/√d_k)``;
``s = 1/τ'`` is the inverse temperature relative to the standard ``√d_k``. Risks are
``E (ŷ(q) − f(q))²`` over fresh queries (the noise ``σ²`` of a new response is left out).

Work is cut into units ``(D, n, block)`` as in :mod:`mhacore.sweeps`; design ``r`` of
budget ``D`` draws its rotation, permutation and queries from ``replicate_rng(seed, D, r)``
and its keys and noise from ``replicate_rng(seed, D, r, n)``; the learned heads' minibatches
come from a torch generator seeded by the unit alone, so a unit depends on its indices and
the report is the same for any world size.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from ._rng import replicate_rng
from ._validation import check_int
from .i18n import N_

__all__ = ["TARGETS", "OUTPUTS", "PROJECTIONS", "SCALES", "BANDWIDTHS", "SIZES",
           "SIGMA", "target_values", "projections", "head_outputs", "combine",
           "nw_cv", "learn_heads", "block_cells", "settings", "plan_units", "unit_key",
           "run_unit", "summarise", "format_summary", "splits", "run_sweep", "load_report"]

# marked for the catalog: the book's figures name them (mhacore.figures)
TARGETS = (N_("single-index"), N_("additive"), N_("radial"))
OUTPUTS = (N_("mixture"), N_("concat"))
PROJECTIONS = (N_("random"), N_("signal-aware"), N_("learned"))
#: Targets whose heads are also learned (the radial target has random heads only).
LEARNED = ("single-index", "additive")
#: Inverse temperatures ``s`` (relative to ``√d_k``) that cross-validation chooses from.
SCALES = tuple(2.0**k for k in range(-3, 6))
#: Bandwidths of the Gaussian NW baseline, in units of ``√D`` (the keys' typical norm).
BANDWIDTHS = tuple(2.0 ** (k / 2) for k in range(-7, 5))
SIGMA = 1.0
RIDGE = 1e-8  # relative ridge of the stacking fit (keeps H + 1 > n solvable)
LEARN = dict(lr=0.03, batch=64)
CHUNK = 1 << 23  # logits per softmax call
DTYPE = torch.float32  # the heads; least squares run in float64

#: Sweep sizes: budgets ``D`` (= p), sample sizes, blocks of designs, designs per block,
#: queries per design, gradient steps of the learned heads.
SIZES = {
    "tiny": dict(budgets=(2, 4), n_values=(20, 60), blocks=2, block_size=2, m=16,
                 steps=5),
    "small": dict(budgets=(4, 8), n_values=(20, 200), blocks=2, block_size=3, m=100,
                  steps=30),
    "large": dict(budgets=(4, 8, 16), n_values=(20, 60, 200, 600, 2000), blocks=4,
                  block_size=3, m=200, steps=60),
}
_AMPLITUDE = 2.0 * math.sqrt((1 - math.exp(-2.0)) / 2)  # radial: same variance as sin


def splits(budget):
    """Widths ``d_k`` dividing ``budget``, ascending, as a list
    (:func:`mhacore.sweeps.splits`)."""
    from .sweeps import splits as widths

    return widths(budget).tolist()


def target_values(name, x):
    """The regression function ``name`` of :data:`TARGETS` at ``x`` of shape (..., D).

    All three have mean 0 and variance ``2(1 − e⁻²)`` under ``x ~ N(0, I_D)``.

    >>> x = torch.zeros(1, 4, dtype=torch.float64)
    >>> [round(float(target_values(t, x)[0]), 3) for t in TARGETS]
    [0.0, 0.0, -1.86]
    """
    d = x.shape[-1]
    if name == "single-index":
        return 2.0 * torch.sin(x.sum(-1) / math.sqrt(d))
    if name == "additive":
        return 2.0 / math.sqrt(d) * torch.sin(x).sum(-1)
    if name == "radial":
        return _AMPLITUDE * ((x**2).sum(-1) - d) / math.sqrt(2 * d)
    raise ValueError(f"target must be one of {TARGETS}; got {name!r}")


def _design(seed, budget, r, n, m):
    """Rotation (D, D), permutation (D,), queries (m, D), keys (n, D), noise (n,)."""
    g = replicate_rng(seed, budget, r)
    rotation = np.linalg.qr(g.standard_normal((budget, budget)))[0]  # (D, D)
    permutation = g.permutation(budget)  # (D,)
    queries = g.standard_normal((m, budget))  # (m, D), shared by every n
    h = replicate_rng(seed, budget, r, n)
    keys = h.standard_normal((n, budget))  # (n, D)
    noise = SIGMA * h.standard_normal(n)  # (n,)
    return rotation, permutation, queries, keys, noise


def projections(kind, target, rotation, permutation, d_head):
    """Orthonormal head projections ``(H, D, d_k)`` of one design.

    ``random``: consecutive blocks of ``d_k`` columns of ``rotation``. ``signal-aware``:
    for the single-index target every head holds ``u = 1/√D`` and ``d_k − 1`` columns of
    a rotation of ``u``'s complement (``d_k = 1``: ``H`` copies of ``u``); for the
    additive target, blocks of coordinate axes in the order ``permutation``. The radial
    target has no direction, so it has no signal-aware kind (``ValueError``).

    >>> r = np.linalg.qr(np.random.default_rng(0).standard_normal((4, 4)))[0]
    >>> w = projections("signal-aware", "single-index", r, np.arange(4), 2)
    >>> w.shape, np.allclose(w[:, :, 0], 0.5) or np.allclose(w[:, :, 0], -0.5)
    ((2, 4, 2), True)
    """
    budget = rotation.shape[0]
    heads = budget // d_head
    if kind == "random":
        cols = rotation
    elif kind == "signal-aware" and target == "single-index":
        u = np.full((budget, 1), 1 / math.sqrt(budget))  # (D, 1)
        basis = np.linalg.qr(np.hstack([u, rotation[:, :-1]]))[0]  # (D, D), column 0 = ±u
        rest = basis[:, 1:1 + heads * (d_head - 1)]  # (D, H (d_k - 1))
        blocks = rest.reshape(budget, heads, d_head - 1)  # (D, H, d_k - 1)
        w = np.concatenate([np.broadcast_to(basis[:, :1, None], (budget, heads, 1)),
                            blocks], axis=2)  # (D, H, d_k)
        return w.transpose(1, 0, 2).copy()  # (H, D, d_k)
    elif kind == "signal-aware" and target == "additive":
        cols = np.eye(budget)[:, permutation]  # (D, D)
    else:
        raise ValueError(f"projection kind {kind!r} is not defined for target {target!r}")
    return cols.reshape(budget, heads, d_head).transpose(1, 0, 2).copy()  # (H, D, d_k)


FOLDS = 5  # cross-validation folds: point i belongs to fold i mod FOLDS


def head_outputs(w_query, w_key, keys, values, queries, scales):
    """Every head's kernel-weighted average of ``values`` at new points.

    Parameters
    ----------
    w_query, w_key : tensor (B, H, D, d_k)
        Projections of ``B`` designs.
    keys : tensor (B, n, D)
    values : tensor (B, n, T)
        Responses of ``T`` targets.
    queries : tensor (B, q, D)
    scales : tensor (B,)
        Inverse temperatures ``s``.

    Returns
    -------
    tensor (B, H, q, T)

    Examples
    --------
    >>> k = torch.randn(1, 5, 2, dtype=torch.float64)
    >>> w = torch.eye(2, dtype=torch.float64).reshape(1, 1, 2, 2)
    >>> out = head_outputs(w, w, k, k[..., :1], k[:, :2], torch.tensor([0.0]))
    >>> torch.allclose(out[0, 0, :, 0], k[0, :, 0].mean().expand(2))
    True
    """
    d_head = w_query.shape[-1]
    qp = torch.einsum("bqd,bhdk->bhqk", queries, w_query)  # (B, H, q, d_k)
    kp = torch.einsum("bnd,bhdk->bhnk", keys, w_key)  # (B, H, n, d_k)
    b, h, q, _ = qp.shape
    step = max(1, CHUNK // (b * h * kp.shape[2]))
    out = []
    for q0 in range(0, q, step):
        logits = qp[:, :, q0:q0 + step] @ kp.transpose(2, 3)  # (B, H, c, n)
        logits = logits * (scales / math.sqrt(d_head))[:, None, None, None]
        out.append(torch.softmax(logits, -1) @ values[:, None])  # (B, H, c, T)
    return torch.cat(out, 2)


def fold_outputs(w_query, w_key, keys, values, scales, folds=FOLDS):
    """Every head's outputs at the keys themselves, as cross-validation needs them.

    Point ``i`` is in fold ``i mod folds`` and is never its own key. With ``e_ij`` the
    head's weight on key ``j`` before normalising (relative to the row's largest), one
    matrix product gives the sums of ``e_ij y_j`` and ``e_ij`` over each fold; every
    output below is a ratio of sums of these positive partial sums (no subtraction, so
    no cancellation). Where every key of a set has a weight below the floating-point
    range relative to the row's largest (a temperature far too low), its output is NaN.

    Returns
    -------
    loo : tensor (B, H, n, T)
        From every key but ``i`` (leave one out).
    held_out : tensor (B, H, n, T)
        From the keys outside ``i``'s fold: a prediction at a point the head never saw.
    within : tensor (B, H, n, T, folds)
        Entry ``k`` (for ``i`` outside fold ``k``): from the keys outside fold ``k``
        but ``i`` (leave one out within the training folds of fold ``k``).
    """
    d_head = w_query.shape[-1]
    b, n, t = values.shape
    fold = torch.arange(n) % folds  # (n,)
    onehot = torch.nn.functional.one_hot(fold, folds).to(values.dtype)  # (n, K)
    columns = torch.cat([(values[..., None] * onehot[:, None]).reshape(b, n, t * folds),
                         onehot.expand(b, n, folds)], -1)  # (B, n, (T + 1) K)
    qp = torch.einsum("bnd,bhdk->bhnk", keys, w_query)  # (B, H, n, d_k)
    kp = torch.einsum("bnd,bhdk->bhnk", keys, w_key)  # (B, H, n, d_k)
    h = qp.shape[1]
    step = max(1, CHUNK // (b * h * n))
    others = (~torch.eye(folds, dtype=torch.bool)).to(values.dtype)  # (K, K)
    loo, held, within = [], [], []
    for q0 in range(0, n, step):
        rows = torch.arange(q0, min(n, q0 + step))  # (c,)
        c = len(rows)
        logits = qp[:, :, rows] @ kp.transpose(2, 3)  # (B, H, c, n)
        logits = logits * (scales / math.sqrt(d_head))[:, None, None, None]
        logits[:, :, torch.arange(c), rows] = -math.inf  # i is not its own key
        e = torch.exp(logits - logits.amax(-1, keepdim=True))  # (B, H, c, n)
        sums = e @ columns[:, None]  # (B, H, c, (T + 1) K)
        num = sums[..., :t * folds].reshape(b, h, c, t, folds)  # (B, H, c, T, K)
        den = sums[..., t * folds:]  # (B, H, c, K)
        loo.append(num.sum(-1) / den.sum(-1)[..., None])
        keep = 1.0 - onehot[rows]  # (c, K): the folds other than i's
        held.append((num * keep[:, None]).sum(-1) / (den * keep).sum(-1)[..., None])
        within.append((num @ others) / (den @ others)[..., None, :])  # (B, H, c, T, K)
    return torch.cat(loo, 2), torch.cat(held, 2), torch.cat(within, 2)


def _lstsq(features, y, weight):
    """Weighted least squares ``β`` of ``y`` on ``[1, features]``, a tiny relative ridge.

    ``features`` (..., n, H), ``y`` (..., n), ``weight`` (..., n) of 0/1; returns (..., H+1).
    """
    features, y, weight = features.double(), y.double(), weight.double()
    design = torch.cat([torch.ones_like(features[..., :1]), features], -1)  # (..., n, H+1)
    weighted = design * weight[..., None]
    gram = weighted.transpose(-1, -2) @ design  # (..., H+1, H+1)
    scale = gram.diagonal(dim1=-2, dim2=-1).mean(-1)[..., None, None]
    eye = torch.eye(gram.shape[-1], dtype=gram.dtype)
    rhs = weighted.transpose(-1, -2) @ y[..., None]  # (..., H+1, 1)
    return torch.linalg.solve(gram + RIDGE * scale * eye, rhs)[..., 0]


def combine(output, loo, held, within, test, y):
    """Cross-validation errors and test predictions of one output path.

    ``loo``, ``held`` (..., H, n), ``within`` (..., H, n, K) from :func:`fold_outputs`,
    ``test`` (..., H, m), ``y`` (..., n). ``mixture`` averages the heads: its error at
    ``i`` is ``y_i`` minus the average of the held-out outputs. ``concat`` combines them
    by ``β₀ + Σ β_h ŷ_h`` with ``β`` fitted by least squares on the heads' leave-one-out
    outputs (stacking): for fold ``k`` on the training folds' within-fold outputs, then
    applied to fold ``k``'s held-out outputs; the test prediction uses ``β`` fitted on
    all ``n``. Returns the errors (..., n) and the test predictions (..., m).

    Fitting ``β`` on leave-one-out outputs and judging it on the same points would be
    fooled: a nearly flat kernel's leave-one-out output is ``(Σ y − y_i)/(n − 1)``, from
    which ``β = −(n − 1)`` recovers ``y_i`` exactly. Judging on held-out folds is not.
    """
    if output == "mixture":
        return y - held.mean(-2), test.mean(-2)
    if output != "concat":
        raise ValueError(f"output must be one of {OUTPUTS}; got {output!r}")
    n, folds = within.shape[-2:]
    fold = torch.arange(n) % folds
    train = (fold[None, :] != torch.arange(folds)[:, None]).to(y.dtype)  # (K, n)
    feats = within.movedim(-1, -3).transpose(-1, -2)  # (..., K, n, H)
    beta_k = _lstsq(feats, y[..., None, :], train)  # (..., K, H+1)
    beta_i = beta_k[..., fold, :]  # (..., n, H+1): the fit without i's fold
    pred_i = beta_i[..., 0] + (beta_i[..., 1:] * held.transpose(-1, -2)).sum(-1)
    beta = _lstsq(loo.transpose(-1, -2), y, torch.ones_like(y))  # (..., H+1)
    pred = beta[..., :1] + (beta[..., 1:, None] * test).sum(-2)  # (..., m)
    return y - pred_i, pred


def nw_cv(keys, y, queries, f_queries, bandwidths=BANDWIDTHS):
    """Gaussian NW in ``R^D`` with a leave-one-out bandwidth: test MSE per design (B,).

    ``keys`` (B, n, D), ``y`` (B, n), ``queries`` (B, m, D), ``f_queries`` (B, m). The
    bandwidths are multiples of ``√D``.
    """
    d = keys.shape[-1]
    sq_keys = torch.cdist(keys, keys) ** 2  # (B, n, n)
    sq_queries = torch.cdist(queries, keys) ** 2  # (B, m, n)
    eye = torch.eye(keys.shape[1], dtype=torch.bool)
    cv, tests = [], []
    for bw in bandwidths:
        h2 = 2 * (bw**2) * d
        loo = torch.softmax((-sq_keys / h2).masked_fill(eye, -math.inf), -1) @ y[..., None]
        cv.append(((y - loo[..., 0]) ** 2).mean(-1))  # (B,)
        pred = torch.softmax(-sq_queries / h2, -1) @ y[..., None]  # (B, m, 1)
        tests.append(((pred[..., 0] - f_queries) ** 2).mean(-1))  # (B,)
    cv, tests = torch.stack(cv, -1), torch.stack(tests, -1)  # (B, K)
    return tests.gather(-1, cv.argmin(-1, keepdim=True))[..., 0]


def learn_heads(w_init, log_scale, beta, keys, y, concat, *, steps, generator,
                lr=LEARN["lr"], batch=LEARN["batch"]):
    """Projections learned by gradient descent, for ``G`` problems on the same keys at once.

    Trains ``W_Q``, ``W_K`` (B, G, H, D, d_k), both from ``w_init`` (B, H, D, d_k), and
    the log inverse temperature (B, G) from ``log_scale``, by Adam. Problem ``g`` has
    responses ``y[:, g]`` (B, G, n) and the output path ``concat[g]`` (bool): the concat
    problems also train ``β`` (B, G, H + 1) from ``beta``. Each step holds out a random
    batch of ``min(batch, n // FOLDS)`` points and predicts them from the other keys; the
    loss is the squared error there, summed over designs and problems. The held-out
    points are no keys, so no point's response reaches its own prediction.
    Returns ``(w_q, w_k, log_s)``.
    """
    g = y.shape[1]
    w_q = w_init[:, None].repeat(1, g, 1, 1, 1).requires_grad_(True)
    w_k = w_init[:, None].repeat(1, g, 1, 1, 1).requires_grad_(True)
    log_s = log_scale.clone().requires_grad_(True)
    beta = beta.clone().to(w_init.dtype).requires_grad_(True)
    opt = torch.optim.Adam([w_q, w_k, log_s, beta], lr=lr)
    mix = torch.as_tensor([not c for c in concat])[None, :, None]  # (1, G, 1)
    n = y.shape[-1]
    size = max(1, min(batch, n // FOLDS))
    d_head = w_init.shape[-1]
    for _ in range(steps):
        rows = torch.randperm(n, generator=generator)[:size]  # (c,)
        qp = torch.einsum("bqd,bghdk->bghqk", keys[:, rows], w_q)  # (B, G, H, c, d_k)
        kp = torch.einsum("bnd,bghdk->bghnk", keys, w_k)  # (B, G, H, n, d_k)
        logits = qp @ kp.transpose(-1, -2) / math.sqrt(d_head)  # (B, G, H, c, n)
        logits = logits * log_s.exp()[..., None, None, None]
        logits[..., rows] = -math.inf  # the batch predicts from the other keys
        heads = (torch.softmax(logits, -1) @ y[:, :, None, :, None])[..., 0]  # (B, G, H, c)
        stacked = beta[..., :1] + (beta[..., 1:, None] * heads).sum(2)  # (B, G, c)
        pred = torch.where(mix, heads.mean(2), stacked)  # (B, G, c)
        loss = ((y[..., rows] - pred) ** 2).mean(-1).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return w_q.detach(), w_k.detach(), log_s.detach()


def _evaluate(w_q, w_k, keys, ys, queries, f_q, scale, outputs=OUTPUTS):
    """Cross-validation error and test MSE, per output path, at one inverse temperature.

    ``ys`` (B, n, T), ``f_q`` (B, m, T), ``scale`` (B,). Returns ``{output: (cv, test)}``
    with tensors (B, T) for each of ``outputs``.
    """
    loo, held, within = fold_outputs(w_q, w_k, keys, ys, scale)  # (B, H, n, T[, K])
    test = head_outputs(w_q, w_k, keys, ys, queries, scale)  # (B, H, m, T)
    out = {}
    for output in outputs:
        err, pred = combine(output, loo.movedim(-1, 1), held.movedim(-1, 1),
                            within.movedim(-2, 1), test.movedim(-1, 1),
                            ys.movedim(-1, 1))  # (B, T, n), (B, T, m)
        out[output] = ((err**2).mean(-1), ((pred - f_q.movedim(-1, 1)) ** 2).mean(-1))
    return out


def block_cells(budget, n, designs, *, seed, m, steps, device="cpu"):
    """Every cell's test MSE for one budget, one ``n`` and a block of designs.

    Returns a dict: ``constant`` and ``nw_cv`` ``{target: [B]}``, and ``cells``
    ``{"target|output|projection": {"mse", "oracle", "scale", "oracle_scale",
    "edge": [[B] per split]}}`` (splits ascending). ``mse`` is the test MSE at the
    inverse temperature chosen by cross-validation (``scale``), ``oracle`` the least over
    :data:`SCALES` (at ``oracle_scale``), ``edge`` whether the chosen one is an end of
    :data:`SCALES`; learned heads choose their own, so their ``oracle`` is their ``mse``.
    """
    budget, n, m = (check_int(v, k, minimum=2 if k != "m" else 1)
                    for k, v in (("budget", budget), ("n", n), ("m", m)))
    to = lambda a: torch.as_tensor(np.asarray(a), dtype=DTYPE, device=device)  # noqa: E731
    draws = [_design(seed, budget, r, n, m) for r in designs]
    rot, perm = [d[0] for d in draws], [d[1] for d in draws]
    queries = to(np.stack([d[2] for d in draws]))  # (B, m, D)
    keys = to(np.stack([d[3] for d in draws]))  # (B, n, D)
    noise = to(np.stack([d[4] for d in draws]))  # (B, n)
    f_keys = torch.stack([target_values(t, keys) for t in TARGETS], -1)  # (B, n, T)
    f_q = torch.stack([target_values(t, queries) for t in TARGETS], -1)  # (B, m, T)
    ys = f_keys + noise[..., None]  # (B, n, T)
    b = len(designs)
    out = {"constant": {}, "nw_cv": {}, "cells": {}}
    for t, name in enumerate(TARGETS):
        mean = ys[..., t].mean(-1, keepdim=True)  # (B, 1)
        out["constant"][name] = ((f_q[..., t] - mean) ** 2).mean(-1).tolist()
        out["nw_cv"][name] = nw_cv(keys, ys[..., t], queries, f_q[..., t]).tolist()
    gen = torch.Generator().manual_seed(int(np.random.SeedSequence(
        seed, spawn_key=(budget, n, int(designs[0]))).generate_state(1)[0]))
    for d_head in splits(budget):
        starts = {}  # (target, output) -> the random heads' chosen scale (B,)
        kinds = {"random": [projections("random", None, r, p, d_head)
                            for r, p in zip(rot, perm)]}
        for name in ("single-index", "additive"):
            kinds[f"signal-aware:{name}"] = [
                projections("signal-aware", name, r, p, d_head) for r, p in zip(rot, perm)]
        for kind, w in kinds.items():
            w = to(np.stack(w))  # (B, H, D, d_k)
            per_scale = [_evaluate(w, w, keys, ys, queries, f_q, to([s] * b))
                         for s in SCALES]
            for output in OUTPUTS:
                cv = torch.stack([r[output][0] for r in per_scale], -1)  # (B, T, S)
                cv = cv.nan_to_num(math.inf)  # a set of keys out of range: never chosen
                test = torch.stack([r[output][1] for r in per_scale], -1)  # (B, T, S)
                pick, best = cv.argmin(-1), test.argmin(-1)  # (B, T)
                for t, name in enumerate(TARGETS):
                    if ":" in kind and kind.split(":")[1] != name:
                        continue
                    cell = out["cells"].setdefault(
                        f"{name}|{output}|{kind.split(':')[0]}", _empty())
                    cell["mse"].append(test[:, t].gather(-1, pick[:, t, None])[:, 0].tolist())
                    cell["oracle"].append(test[:, t].min(-1).values.tolist())
                    cell["scale"].append([SCALES[i] for i in pick[:, t].tolist()])
                    cell["oracle_scale"].append([SCALES[i] for i in best[:, t].tolist()])
                    cell["edge"].append([i in (0, len(SCALES) - 1)
                                         for i in pick[:, t].tolist()])
                    if kind == "random":
                        starts[name, output] = to([SCALES[i] for i in pick[:, t].tolist()])
        w = to(np.stack(kinds["random"]))  # (B, H, D, d_k)
        problems = [(t, name, output) for t, name in enumerate(TARGETS)
                    if name in LEARNED for output in OUTPUTS]
        starts = torch.stack([starts[name, output] for _, name, output in problems],
                             1)  # (B, G)
        beta = torch.zeros(b, len(problems), budget // d_head + 1, dtype=DTYPE)
        for j, (t, name, output) in enumerate(problems):
            if output == "concat":  # the random heads' stacking fit at their scale
                loo = fold_outputs(w, w, keys, ys[..., t:t + 1], starts[:, j])[0][..., 0]
                beta[:, j] = _lstsq(loo.transpose(-1, -2), ys[..., t],
                                    torch.ones_like(ys[..., t]))
        w_q, w_k, log_s = learn_heads(
            w, starts.log(), beta, keys, torch.stack([ys[..., t] for t, _, _ in problems], 1),
            [output == "concat" for *_, output in problems], steps=steps, generator=gen)
        for j, (t, name, output) in enumerate(problems):
            res = _evaluate(w_q[:, j], w_k[:, j], keys, ys[..., t:t + 1], queries,
                            f_q[..., t:t + 1], log_s[:, j].exp(),
                            outputs=(output,))[output][1][:, 0]  # (B,)
            cell = out["cells"].setdefault(f"{name}|{output}|learned", _empty())
            cell["mse"].append(res.tolist())
            cell["oracle"].append(res.tolist())
            cell["scale"].append(log_s[:, j].exp().tolist())
            cell["oracle_scale"].append(log_s[:, j].exp().tolist())
            cell["edge"].append([False] * b)
    return out


def _empty():
    return {"mse": [], "oracle": [], "scale": [], "oracle_scale": [], "edge": []}


# --- the sweep: units, settings, summary --------------------------------------------

def settings(size="small", *, seed=20260521, overrides=None):
    """The fair sweep's settings: a row of :data:`SIZES` with ``overrides``, validated.

    Budgets ``D >= 2`` (``p = D``), sizes ``n >= 2 FOLDS``, neither repeated (both are
    sorted); ``blocks``, ``block_size``, ``m`` at least 1, ``steps`` at least 0.

    >>> settings("tiny", overrides={"blocks": 3})["blocks"]
    3
    """
    from .sweeps import _grid_values

    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}; got {size!r}")
    s = dict(SIZES[size], **{k: v for k, v in (overrides or {}).items()
                             if v is not None})
    s["budgets"] = _grid_values(s["budgets"], "budgets", 2)
    s["n_values"] = _grid_values(s["n_values"], "n_values", 2 * FOLDS)
    for key, minimum in (("blocks", 1), ("block_size", 1), ("m", 1), ("steps", 0)):
        s[key] = check_int(s[key], key, minimum=minimum)
    return dict(s, sweep="heads-width", size=size,
                seed=check_int(seed, "seed", minimum=0), sigma=SIGMA,
                scales=list(SCALES), folds=FOLDS, learn=dict(LEARN), dtype=str(DTYPE))


#: Command-line names of the settings a resumed sweep must share with its file.
OPTION_NAMES = {"seed": "--seed", "m": "--queries", "block_size": "--block-size",
                "steps": "--steps"}


def plan_units(s):
    """Units ``(D, n, block)``, costliest first.

    >>> plan_units(settings("tiny"))[0]
    (4, 60, 0)
    """
    units = [(b, n, k) for b in s["budgets"] for n in s["n_values"]
             for k in range(s["blocks"])]
    return sorted(units, key=lambda u: (-sum(u[0] // d for d in splits(u[0])) * u[1] ** 2,
                                        u[2]))


def unit_key(unit) -> str:
    """JSON key of a unit: ``"D=8,n=30,block=0"``."""
    return "D={},n={},block={}".format(*unit)


def run_unit(unit, s, ctx):
    """One unit's cells (:func:`block_cells`) and its time."""
    budget, n, block = unit
    size = s["block_size"]
    t0 = time.perf_counter()
    cells = block_cells(budget, n, list(range(block * size, (block + 1) * size)),
                        seed=s["seed"], m=s["m"], steps=s["steps"], device=ctx.device)
    return dict(cells, seconds=round(time.perf_counter() - t0, 3))


def unit_problem(unit, result, s):
    """Why a kept unit cannot be summarised (None when it can): every target's baselines
    and every cell of :func:`block_cells`, of the right shape, finite and (MSEs, scales)
    positive."""
    from .sweeps import _numbers

    if not isinstance(result, dict) or not all(
            isinstance(result.get(k), dict) for k in ("constant", "nw_cv", "cells")):
        return "not a unit of this sweep (no constant, nw_cv and cells)"
    designs = s["block_size"]
    for part in ("constant", "nw_cv"):
        for t in TARGETS:
            problem = _numbers(result[part].get(t), (designs,), f"{part}[{t}]", 0.0)
            if problem:
                return problem
    widths = len(splits(unit[0]))
    expected = {f"{t}|{o}|{p}" for t in TARGETS for o in OUTPUTS for p in PROJECTIONS
                if not (p == "signal-aware" and t == "radial")
                and not (p == "learned" and t not in LEARNED)}
    if set(result["cells"]) != expected:
        return "its cells are not this sweep's (target, output, projection) triples"
    for key, cell in result["cells"].items():
        if not isinstance(cell, dict):
            return f"cell {key} is not an object"
        for field in ("mse", "oracle", "scale"):
            problem = _numbers(cell.get(field), (widths, designs), f"{key} {field}",
                               0.0)
            if problem:
                return problem
        if np.asarray(cell.get("edge"), dtype=object).shape != (widths, designs):
            return f"{key} edge has the wrong shape"
    return None


def _z(diff):
    """Paired z of the mean of ``diff`` (R,): NaN with one design."""
    diff = np.asarray(diff, dtype=float)
    if len(diff) < 2:
        return float("nan")
    se = diff.std(ddof=1) / math.sqrt(len(diff))
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(diff.mean() / se) if se > 0 else float(np.sign(diff.mean()) * np.inf)


def _gather(report, budget, n):
    """Designs of every block at ``(D, n)``, concatenated in block order."""
    s = report["settings"]
    units = [report["units"][unit_key((budget, n, k))] for k in range(s["blocks"])]
    merged = {"constant": {}, "nw_cv": {}, "cells": {}}
    for part in ("constant", "nw_cv"):
        for t in TARGETS:
            merged[part][t] = np.concatenate([u[part][t] for u in units])  # (R,)
    for key in units[0]["cells"]:
        merged["cells"][key] = {f: np.concatenate([np.asarray(u["cells"][key][f], float)
                                                   for u in units], axis=1)  # (W, R)
                                for f in ("mse", "oracle", "scale", "edge")}
    return merged


def summarise(report):
    """One entry per ``(target, output, projection, D, n)``: the best split and its
    evidence.

    Each cell gives ``widths`` and per split the mean test MSE and its SE over designs
    (``mse``, ``se``), the best width and the runner-up with the paired z of
    ``MSE(runner-up) − MSE(best)`` (``runner_up_z``), the constant predictor's MSE
    (``baseline_mse``) and the paired z of ``MSE(constant) − MSE(best)``
    (``best_vs_baseline_z``; ``beats_constant`` when it is at least 4), the
    cross-validated NW smoother's MSE (``nw_cv_mse``, with ``best_vs_nw_z`` of
    ``MSE(NW) − MSE(best)``), the best width under the oracle temperature, and the share
    of chosen temperatures at an end of the grid (``edge_share``).
    """
    s = report["settings"]
    cells = []
    for budget in s["budgets"]:
        widths = splits(budget)
        for n in s["n_values"]:
            g = _gather(report, budget, n)
            for key, c in g["cells"].items():
                target, output, projection = key.split("|")
                mse = c["mse"]  # (W, R)
                means = mse.mean(1)
                order = np.argsort(means)
                best, second = int(order[0]), int(order[1])
                const, nw = g["constant"][target], g["nw_cv"][target]
                cells.append({
                    "target": target, "output": output, "projection": projection,
                    "D": budget, "p": budget, "n": n, "widths": widths,
                    "mse": [round(float(v), 5) for v in means],
                    "se": [round(float(v), 5) for v in
                           mse.std(1, ddof=1) / math.sqrt(mse.shape[1])],
                    "best_width": widths[best], "runner_up": widths[second],
                    "runner_up_z": round(_z(mse[second] - mse[best]), 3),
                    "best_mse": round(float(means[best]), 5),
                    "baseline_mse": round(float(const.mean()), 5),
                    "best_vs_baseline_z": round(_z(const - mse[best]), 3),
                    "beats_constant": bool(_z(const - mse[best]) >= 4),
                    "nw_cv_mse": round(float(nw.mean()), 5),
                    "best_vs_nw_z": round(_z(nw - mse[best]), 3),
                    "oracle_best_width": widths[int(np.argmin(c["oracle"].mean(1)))],
                    "median_scale": [round(float(v), 4) for v in np.median(c["scale"], 1)],
                    "edge_share": round(float(c["edge"].mean()), 4)})
    return {"cells": cells, "designs": s["blocks"] * s["block_size"],
            "rule": "beats_constant: paired z of MSE(constant) - MSE(best) >= 4"}


def format_summary(summary):
    """The summary as one line per cell."""
    lines = []
    for c in summary["cells"]:
        mark = "" if c["beats_constant"] else "  (not better than the constant)"
        lines.append(
            f"{c['target']:>12} {c['output']:>7} {c['projection']:>12} D = {c['D']:>2}, "
            f"n = {c['n']:>5}: d_k* = {c['best_width']:>2} (vs {c['runner_up']}: "
            f"z = {c['runner_up_z']:.1f}); MSE {c['best_mse']:.3f}, constant "
            f"{c['baseline_mse']:.3f} (z = {c['best_vs_baseline_z']:.1f}), NW "
            f"{c['nw_cv_mse']:.3f}{mark}")
    return "\n".join(lines)


def run_sweep(size="small", *, seed=20260521, device="cpu", out=None, resume=False,
              overrides=None, command=None, log=print):
    """Run the fair heads-and-width sweep, alone or as one rank of many.

    As :func:`mhacore.sweeps.run_sweep` (units ``(D, n, block)``, the report rewritten
    by rank 0 after every round, ``resume`` keeping the finished units of a report made
    with the same seed, queries, block size and steps), with :func:`settings` and
    :func:`summarise` of this module.

    Examples
    --------
    >>> r = run_sweep("tiny", overrides={"budgets": [2], "n_values": [10],
    ...                                   "blocks": 1, "steps": 1}, log=None)
    >>> sorted({c["projection"] for c in r["summary"]["cells"]})
    ['learned', 'random', 'signal-aware']
    """
    from . import sweeps

    s = settings(size, seed=seed, overrides=overrides)
    spec = sweeps.Sweep("heads-width", plan=plan_units, key=unit_key, unit=run_unit,
                        summarise=summarise, option_names=OPTION_NAMES,
                        unit_problem=unit_problem)
    return sweeps.run_units(spec, s, device=device, out=out, resume=resume,
                            command=command, log=log)


REPORT = Path(__file__).resolve().parents[1] / "reports" / "sweep-heads-width.json"


def load_report(path=None) -> dict:
    """The fair sweep's report at ``path``; default the committed ``reports/`` file."""
    from .sweeps import load_report as load

    return load(REPORT if path is None else path)
