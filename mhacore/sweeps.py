"""Sweeps too large for a chapter: the heads-and-width sweep of claim C5.

The sweep computes the exact design-conditional risk of the uniform softmax ensemble
(chapter 6's model, :mod:`mhacore.theorems.ch06_heads_width`) for every split
``H·d_k = D`` of several budgets ``D`` at sample sizes ``n`` spanning decades, finds the
best width ``d_k*`` per ``(n, D)``, and fits its exponents in ``n`` and ``D``.

Work is cut into *units*: one grid point ``(D, n)`` times one block of designs. Design
``r`` of budget ``D`` draws its rotation and queries from ``replicate_rng(seed, D, r)``
and its ``n`` keys from ``replicate_rng(seed, D, r, n)``, so a unit depends on its
indices alone. :func:`run_sweep` hands units to ranks in rounds (one unit per rank per
round, :mod:`mhacore.distributed`), and rank 0 rewrites the JSON report atomically after
every round; with ``resume=True`` finished units are kept, so a killed job loses at most
the units in flight.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import numpy as np
import torch

from . import distributed
from ._validation import check_int, check_positive
from .theorems.ch06_heads_width import block_heads, signal

__all__ = ["SIZES", "load_report", "splits", "block_risks", "plan_units", "unit_key",
           "run_sweep", "risk_table", "summarise", "format_summary", "best_width",
           "fit_exponents", "law_predictions"]

#: Sweep sizes: budgets, ambient dimension ``p`` (one for every budget), sample sizes,
#: blocks of designs, designs per block, queries. The large size's sizes ``n`` are
#: six per decade from 10 to about 31 600.
SIZES = {
    "tiny": dict(budgets=(4, 8), p=8, n_values=(20, 200), blocks=3, block_size=2, m=8),
    "small": dict(budgets=(8, 16, 32), p=32, n_values=(30, 100, 300, 1000, 3000),
                  blocks=4, block_size=2, m=16),
    "large": dict(budgets=(8, 16, 32, 64, 128), p=128,
                  n_values=tuple(int(round(10 ** (k / 6))) for k in range(6, 28)),
                  blocks=32, block_size=1, m=16),
}
PROJECTION_SCALE = 1.5  # chapter 6's grid: c = 1.5, sigma = 3
SIGMA = 3.0
CHUNK_LOGITS = 1 << 22  # head-query-key products per softmax call


def splits(budget: int) -> np.ndarray:
    """Head widths ``d_k`` dividing ``budget``, ascending (``H = budget / d_k``).

    >>> splits(12).tolist()
    [1, 2, 3, 4, 6, 12]
    """
    budget = check_int(budget, "budget")
    return np.array([d for d in range(1, budget + 1) if budget % d == 0])


REPORT = Path(__file__).resolve().parents[1] / "reports" / "sweep-heads-width.json"


def load_report(path=None) -> dict:
    """The sweep report at ``path``; default the committed ``reports/`` file."""
    path = REPORT if path is None else Path(path)
    if not path.exists():
        raise ValueError(f"path must be an existing sweep report; got {str(path)!r}")
    return json.loads(path.read_text(encoding="utf-8"))


def _design(seed, r, n, m, p):
    """Rotation (p, p), queries (m, p) and keys (n, p) of design ``r`` at size ``n``.

    The design does not depend on the budget: every budget ``D <= p`` of design ``r``
    sees the same data, and only its heads (the first ``D`` columns) differ.
    """
    g = distributed.replicate_rng(seed, p, r)
    rotation = np.linalg.qr(g.standard_normal((p, p)))[0]  # (p, p)
    queries = g.standard_normal((m, p))  # (m, p), shared by every n
    keys = distributed.replicate_rng(seed, p, r, n).standard_normal((n, p))  # (n, p)
    return rotation, queries, keys


def block_risks(budget, n, designs, *, seed, m, p=None, scale=PROJECTION_SCALE,
                sigma=SIGMA, device="cpu"):
    """Squared bias and spread of the uniform ensemble, every split, several designs.

    Keys and queries live in ``R^p`` whatever the budget, so that only the budget
    changes between budgets. Head ``h`` of the split ``(H, d_k)`` is ``scale`` times
    columns ``h d_k .. (h+1) d_k - 1`` of the design's ``p × p`` rotation, tied
    (``W_Q = W_K``), temperature ``√d_k``: chapter 6's
    :func:`~mhacore.theorems.ch06_heads_width.block_heads`, as in its
    :func:`~mhacore.theorems.ch06_heads_width.budget_grid`. Conditional
    on the design, the ensemble's MSE at query ``q`` is ``(w̄ᵀf(K) − f(q))² + σ²‖w̄‖²``
    with ``w̄`` the mean of the heads' weights.

    Parameters
    ----------
    budget : int
        ``D = H·d_k`` (at most ``p``).
    n : int
        Number of keys.
    designs : sequence of int
        Design indices ``r``.
    seed : int
    m : int
        Queries per design.
    p : int, optional
        Dimension of keys and queries (default ``budget``).
    scale, sigma : float
        Projection scale ``c`` and noise level ``σ``.
    device : str
        Torch device of the computation (float64).

    Returns
    -------
    bias_sq, spread : ndarray of shape (len(splits(budget)), len(designs))
        Means over queries of the squared bias and of ``σ²‖w̄‖²``.

    Examples
    --------
    >>> b, s = block_risks(4, 50, [0, 1], seed=0, m=5)
    >>> b.shape, bool((s > 0).all())
    ((3, 2), True)
    """
    budget, n, m = (check_int(v, k) for k, v in (("budget", budget), ("n", n),
                                                    ("m", m)))
    p = budget if p is None else check_int(p, "p")
    if budget > p:
        raise ValueError(f"budget must be at most p = {p}; got {budget}")
    scale, sigma = check_positive(scale, "scale"), check_positive(sigma, "sigma")
    widths = splits(budget)
    bias_sq = np.empty((len(widths), len(designs)))
    spread = np.empty_like(bias_sq)
    to = lambda a: torch.as_tensor(a, dtype=torch.float64, device=device)  # noqa: E731
    for j, r in enumerate(designs):
        rotation, queries, keys = _design(seed, check_int(r, "r", minimum=0), n, m, p)
        f_keys = to(signal(keys))  # (n,)
        f_queries = to(signal(queries))  # (m,)
        keys, queries = to(keys), to(queries)
        for i, d_head in enumerate(widths):
            heads = budget // d_head
            w = to(block_heads(rotation, heads, scale, budget).w_key)  # (H, p, d_k)
            k = torch.einsum("np,hpk->hnk", keys, w)  # (H, n, d_k)
            q_proj = torch.einsum("mp,hpk->hmk", queries, w)  # (H, m, d_k)
            step = max(1, CHUNK_LOGITS // (heads * n))
            err, norm = [], []
            for q0 in range(0, m, step):
                q = q_proj[:, q0:q0 + step]  # (H, mc, d_k)
                logits = q @ k.transpose(1, 2) / math.sqrt(d_head)  # (H, mc, n)
                w_bar = torch.softmax(logits, dim=-1).mean(0)  # (mc, n)
                err.append(w_bar @ f_keys - f_queries[q0:q0 + step])  # (mc,)
                norm.append((w_bar**2).sum(-1))  # (mc,)
            bias_sq[i, j] = float((torch.cat(err) ** 2).mean())
            spread[i, j] = sigma**2 * float(torch.cat(norm).mean())
    return bias_sq, spread


def plan_units(budgets, n_values, blocks):
    """Units ``(D, n, block)``, costliest first (so each round's units cost alike).

    >>> plan_units((4, 8), (10, 100), 1)[0]
    (8, 100, 0)
    """
    units = [(int(b), int(n), k) for b in budgets for n in n_values
             for k in range(blocks)]
    cost = lambda u: (-u[0] * len(splits(u[0])) * u[1], u[2])  # noqa: E731
    return sorted(units, key=cost)  # costliest first; low blocks first among equals


def unit_key(unit) -> str:
    """JSON key of a unit: ``"D=8,n=30,block=0"``."""
    return "D={},n={},block={}".format(*unit)


def _write_atomic(path: Path, report: dict) -> None:
    from ._outdir import write_json_atomic  # fresh temporary name: no user file is touched

    write_json_atomic(path, report, indent=1)


def _settings(size, seed, scale, sigma, overrides):
    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}; got {size!r}")
    s = dict(SIZES[size], **{k: v for k, v in (overrides or {}).items()
                             if v is not None})
    s = dict(s, budgets=[int(b) for b in s["budgets"]],
             n_values=[int(n) for n in s["n_values"]], p=check_int(s["p"], "p"))
    if max(s["budgets"]) > s["p"]:
        raise ValueError(f"p must be at least every budget D (the budgets share one "
                         f"space R^p); got p = {s['p']} and D = {max(s['budgets'])}")
    return dict(s, size=size, seed=check_int(seed, "seed", minimum=0),
                scale=check_positive(scale, "scale"),
                sigma=check_positive(sigma, "sigma"))


def _same_draws(old, new):
    """Whether units of ``old`` are units of ``new``: all settings equal but the
    grid (budgets, n values, number of blocks) and the size's name."""
    skip = {"budgets", "n_values", "blocks", "size"}
    return bool(old) and all(old.get(k) == v for k, v in new.items() if k not in skip)


def run_sweep(size="small", *, seed=20260521, scale=PROJECTION_SCALE, sigma=SIGMA,
              device="cpu", out=None, resume=False, overrides=None, command=None,
              log=print):
    """Run the heads-and-width sweep, alone or as one rank of many.

    Parameters
    ----------
    size : {"tiny", "small", "large"}
        A row of :data:`SIZES`; ``overrides`` (dict) replaces any of its entries.
    seed, scale, sigma : see :func:`block_risks`.
    device : str
        ``"cpu"`` or ``"cuda"`` (each rank uses ``cuda:LOCAL_RANK``).
    out : path, optional
        JSON report, rewritten by rank 0 after every round of units.
    resume : bool
        Keep the units already in ``out`` (needs ``out``) when they were drawn alike
        (same seed, block size, queries, scale and noise): a resumed run may also add
        budgets, sizes or blocks to a finished sweep.
    command : list of str, optional
        Command line recorded in the provenance.
    log : callable or None
        Progress lines (rank 0 only).

    Returns
    -------
    dict
        The report: ``settings``, ``units`` (per unit, the block's per-split squared
        bias and spread, designs in order), ``summary`` (:func:`summarise`),
        ``provenance`` and ``distributed`` (world size, backend, each rank's device).
    """
    from ._provenance import provenance

    settings = _settings(size, seed, scale, sigma, overrides)
    if resume and out is None:
        raise ValueError("resume=True needs out (the report to resume)")
    out = None if out is None else Path(out)
    ctx = distributed.setup(device)
    lead = ctx.rank == 0
    say = log if (lead and log is not None) else (lambda *a, **k: None)
    old = {}
    if lead and resume and out.exists():
        old = json.loads(out.read_text(encoding="utf-8"))
        if not _same_draws(old.get("settings", {}), settings):
            say(f"--resume: {out} has other settings; starting afresh")
            old = {}
    wanted = {unit_key(u) for u in plan_units(settings["budgets"], settings["n_values"],
                                              settings["blocks"])}
    units_done = distributed.broadcast({k: v for k, v in old.get("units", {}).items()
                                        if k in wanted})
    run = {"provenance": provenance(command), "distributed": distributed.describe(ctx),
           "units_run": 0, "wall_s": 0.0}
    report = {"settings": settings, "units": units_done,
              "runs": old.get("runs", []) + [run]}
    todo = [u for u in plan_units(settings["budgets"], settings["n_values"],
                                  settings["blocks"]) if unit_key(u) not in units_done]
    say(f"sweep {size}: {len(units_done)} units kept, {len(todo)} to run on "
        f"{ctx.world_size} rank(s)")
    start, every = time.perf_counter(), max(1, len(todo) // (20 * ctx.world_size))
    for r0 in range(0, len(todo), ctx.world_size):
        batch = todo[r0:r0 + ctx.world_size]
        results = distributed.map_items(lambda i: _unit(batch[i], settings, ctx), len(batch))
        for unit, result in zip(batch, results):
            report["units"][unit_key(unit)] = result
        run["units_run"] += len(batch)
        run["wall_s"] = round(time.perf_counter() - start, 3)
        if lead and out is not None:
            _write_atomic(out, report)
        if (r0 // ctx.world_size) % every == 0 or r0 + len(batch) == len(todo):
            say(f"  {r0 + len(batch)}/{len(todo)} units, {run['wall_s']:.0f} s")
    report["summary"] = summarise(report)
    if lead and out is not None:
        _write_atomic(out, report)
    return report


def _unit(unit, settings, ctx):
    budget, n, block = unit
    size = settings["block_size"]
    t0 = time.perf_counter()
    bias_sq, spread = block_risks(budget, n, range(block * size, (block + 1) * size),
                                  seed=settings["seed"], m=settings["m"],
                                  p=settings["p"], scale=settings["scale"], sigma=settings["sigma"],
                                  device=ctx.device)
    return {"bias_sq": bias_sq.tolist(), "spread": spread.tolist(),
            "seconds": round(time.perf_counter() - t0, 3)}


N_BOOT = 2000  # bootstrap resamples of the replicate blocks
BOOT_SEED = 7


def risk_table(report, budget):
    """Block-mean MSE ``(len(n_values), len(splits), blocks)`` of one budget ``D``."""
    s = report["settings"]
    out = np.empty((len(s["n_values"]), len(splits(budget)), s["blocks"]))
    for i, n in enumerate(s["n_values"]):
        for k in range(s["blocks"]):
            unit = report["units"][unit_key((budget, n, k))]
            mse = np.asarray(unit["bias_sq"]) + np.asarray(unit["spread"])  # (W, B)
            out[i, :, k] = mse.mean(axis=1)
    return out


def best_width(widths, risk):
    """Best width of one risk curve: discrete argmin, edge flag, interpolated ``d_k*``.

    When the argmin is interior, a parabola in ``log d_k`` through it and its two
    neighbours gives the interpolated optimum (inside the neighbours' range); at an
    edge the interpolated value is the edge width and ``edge`` says which.

    Parameters
    ----------
    widths : array_like of shape (W,)
        Ascending widths.
    risk : array_like of shape (W,)

    Returns
    -------
    dict with ``discrete`` (int), ``interpolated`` (float) and ``edge`` (``"low"``,
    ``"high"`` or ``None``).

    Examples
    --------
    >>> best_width([1, 2, 4], [3.0, 1.0, 3.0])
    {'discrete': 2, 'interpolated': 2.0, 'edge': None}
    >>> best_width([1, 2, 4], [3.0, 2.0, 1.0])["edge"]
    'high'
    """
    x = np.log(np.asarray(widths, dtype=float))  # (W,)
    y = np.asarray(risk, dtype=float)  # (W,)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2:
        raise ValueError(f"widths and risk must be 1-D of equal length >= 2; got "
                         f"{x.shape} and {y.shape}")
    j = int(np.argmin(y))
    if j in (0, len(x) - 1):
        edge = "low" if j == 0 else "high"
        return {"discrete": int(widths[j]), "interpolated": float(widths[j]),
                "edge": edge}
    a, b, c = np.polyfit(x[j - 1:j + 2], y[j - 1:j + 2], 2)
    vertex = -b / (2 * a) if a > 0 else x[j]
    vertex = float(np.clip(vertex, x[j - 1], x[j + 1]))
    return {"discrete": int(widths[j]), "interpolated": float(np.exp(vertex)),
            "edge": None}


def fit_exponents(n, budget, d_star):
    """Least squares ``log d_k* = a + b_n log n + b_D log D``.

    Returns ``(b_n, b_D)``; NaN where the points do not vary in that variable. With
    one budget only, ``b_D`` is NaN and ``b_n`` is the slope in ``n``.

    Examples
    --------
    >>> b_n, b_d = fit_exponents([10, 100, 10, 100], [8, 8, 64, 64], [1, 2, 2, 4])
    >>> round(b_n, 6), round(b_d, 6)
    (0.30103, 0.333333)
    """
    n, budget, d_star = (np.log(np.asarray(v, dtype=float)) for v in (n, budget, d_star))
    has_n = n.size > 0 and np.ptp(n) > 0
    has_d = n.size > 0 and np.ptp(budget) > 0
    cols = [np.ones_like(n), n] + ([budget] if has_d else [])
    if not has_n or n.size <= len(cols):  # at least one residual degree of freedom
        return float("nan"), float("nan")
    coef = np.linalg.lstsq(np.stack(cols, axis=1), d_star, rcond=None)[0]
    return float(coef[1]), float(coef[2]) if has_d else float("nan")


def _optima(report, block_index):
    """Best widths at every grid point from the blocks ``block_index`` (with repeats)."""
    s = report["settings"]
    rows = []
    for budget in s["budgets"]:
        table = report["_tables"][budget][:, :, block_index].mean(-1)  # (N, W)
        for i, n in enumerate(s["n_values"]):
            rows.append((budget, n, best_width(splits(budget), table[i])))
    return rows


def _fit(rows, only_n=None):
    inner = [(b, n, o["interpolated"]) for b, n, o in rows
             if o["edge"] is None and (only_n is None or n in only_n)]
    if not inner:
        return float("nan"), float("nan")
    budgets, ns, ds = zip(*inner)
    return fit_exponents(ns, budgets, ds)


def law_predictions(n_lo, n_hi):
    """Exponents each law predicts, at the data dimension ``d = 1`` (their largest).

    (a) one head, classical rates: ``d_k* ∝ n^{2/(d+4)}``, no ``D``; (b) logarithmic:
    ``d_k* ∝ log n``, whose log-log slope between ``n_lo`` and ``n_hi`` is
    ``Δ log log n / Δ log n``, no ``D``; the ensemble law at ``ρ = 0``:
    ``d_k* ∝ (nD)^{2/(d+6)}``. Larger ``d`` lowers (a) and the ensemble law.

    >>> {k: round(v["n"], 3) for k, v in law_predictions(100, 10000).items()}
    {'single-head (a)': 0.4, 'logarithmic (b)': 0.151, 'ensemble, rho = 0': 0.286}
    """
    if n_hi > n_lo:
        log_slope = ((math.log(math.log(n_hi)) - math.log(math.log(n_lo)))
                     / (math.log(n_hi) - math.log(n_lo)))
    else:  # one n: the local slope 1 / log n
        log_slope = 1 / math.log(n_lo)
    return {"single-head (a)": {"n": 2 / 5, "D": 0.0},
            "logarithmic (b)": {"n": log_slope, "D": 0.0},
            "ensemble, rho = 0": {"n": 2 / 7, "D": 2 / 7}}


def _finite(x):
    return float(x) if math.isfinite(x) else None


def summarise(report, n_boot=N_BOOT):
    """Best widths, edge flags, exponents with bootstrap intervals, law predictions.

    Intervals are the 2.5 % and 97.5 % points over ``n_boot`` resamples of the replicate
    blocks (the same blocks at every grid point, so designs shared by several ``n``
    stay paired); each resample re-finds every optimum and refits. Points whose optimum
    sits at an edge of the grid of widths are excluded from the fit and listed. The
    ``_balanced`` exponents refit on the sizes ``n`` at which every budget's optimum is
    interior (``balanced_n``), so that the edges do not decide which budgets are fitted.
    """
    s = report["settings"]
    report = dict(report, _tables={b: risk_table(report, b) for b in s["budgets"]})
    blocks = np.arange(s["blocks"])
    rows = _optima(report, blocks)
    # sizes at which every budget's optimum is interior: a fit there is not shaped by
    # which points the edges removed
    balanced = [n for n in s["n_values"]
                if all(o["edge"] is None for _, m, o in rows if m == n)]
    b_n, b_d = _fit(rows)
    rng = np.random.default_rng(BOOT_SEED)
    boot, interior = [], np.zeros(len(rows))
    for _ in range(n_boot):
        resampled = _optima(report, rng.integers(0, s["blocks"], s["blocks"]))
        boot.append(_fit(resampled) + _fit(resampled, balanced))
        interior += [o["edge"] is None for _, _, o in resampled]
    boot = np.array(boot)  # (n_boot, 4): b_n, b_D, then both at the balanced sizes
    bal_n, bal_d = _fit(rows, balanced)
    inner_n = [n for _, n, o in rows if o["edge"] is None]
    points = [{"D": b, "n": n, "d_k_star": o["discrete"],
               "d_k_star_interpolated": round(o["interpolated"], 6), "edge": o["edge"],
               "interior_share": round(float(share) / n_boot, 4)}
              for (b, n, o), share in zip(rows, interior)]

    def interval(col):  # None when over 10 % of the resamples cannot fit
        v = boot[:, col][np.isfinite(boot[:, col])]
        if len(v) < 0.9 * n_boot:
            return None
        return [float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))]
    summary = {"points": points,
               "edges": [f"D={p['D']}, n={p['n']}: {p['edge']}" for p in points
                         if p["edge"]],
               "exponent_n": _finite(b_n), "exponent_n_interval": interval(0),
               "exponent_D": _finite(b_d), "exponent_D_interval": interval(1),
               "balanced_n": balanced,
               "exponent_n_balanced": _finite(bal_n),
               "exponent_n_balanced_interval": interval(2),
               "exponent_D_balanced": _finite(bal_d),
               "exponent_D_balanced_interval": interval(3),
               "interior_points": len(inner_n), "n_boot": n_boot,
               "interval": "2.5-97.5 % bootstrap over replicate blocks"}
    if inner_n:
        summary["interior_n_range"] = [min(inner_n), max(inner_n)]
        summary["laws"] = law_predictions(min(inner_n), max(inner_n))
    return summary


def format_summary(summary):
    """The summary as a few lines of text."""
    lines = []
    for p in summary["points"]:
        flag = f" (edge: {p['edge']})" if p["edge"] else ""
        lines.append(f"D = {p['D']:>4}, n = {p['n']:>6}: d_k* = {p['d_k_star']:>4} "
                     f"(interpolated {p['d_k_star_interpolated']:.3g}, interior in "
                     f"{100 * p['interior_share']:.0f} % of resamples){flag}")
    for name in ("n", "D", "n_balanced", "D_balanced"):
        ci = summary[f"exponent_{name}_interval"]
        ci = "n/a" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"
        value = summary[f"exponent_{name}"]
        value = "n/a" if value is None else f"{value:.3f}"
        label = name.replace("_balanced", " (balanced sizes)")
        lines.append(f"exponent in {label}: {value}, 95 % {ci}")
    lines.append(f"  (sizes with every budget interior: {summary['balanced_n']})")
    for law, pred in summary.get("laws", {}).items():
        lines.append(f"  {law}: n {pred['n']:.3f}, D {pred['D']:.3f}")
    return "\n".join(lines)
