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

import contextlib
import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from . import distributed
from ._report import ReportBusy, report_lock
from ._validation import check_int, check_positive
from .theorems.ch06_heads_width import block_heads, signal

__all__ = ["SIZES", "ResumeRefused", "settings", "load_report", "splits", "block_risks", "plan_units", "unit_key",
           "run_sweep", "risk_table", "summarise", "format_summary", "best_width",
           "transition", "paired_gap", "law_predictions"]

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


REPORT = Path(__file__).resolve().parents[1] / "reports" / "sweep-heads-width-fixed.json"


def load_report(path=None) -> dict:
    """The sweep report at ``path``; default the committed ``reports/`` file."""
    from ._report import read_report

    return read_report(REPORT if path is None else path, "sweep")


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
        # one head of width D holds every column any split uses: c times the first D
        # columns of the rotation; the heads of split (H, d_k) are its consecutive
        # blocks of d_k columns (block_heads' order), so project once per design
        w = to(block_heads(rotation, 1, scale, budget).w_key[0])  # (p, D)
        k_all, q_all = to(keys) @ w, to(queries) @ w  # (n, D), (m, D)
        for i, d_head in enumerate(widths):
            heads = budget // d_head
            k = k_all.reshape(n, heads, d_head).transpose(0, 1)  # (H, n, d_k)
            q_proj = q_all.reshape(m, heads, d_head).transpose(0, 1)  # (H, m, d_k)
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
    from ._report import write_json_atomic  # fresh temporary name: no user file is touched

    write_json_atomic(path, report, indent=1)


class ResumeRefused(ValueError):
    """``resume=True`` met a file it must not extend (other settings, or not a sweep
    report); the file is left untouched."""


#: Command-line names of the settings a resumed sweep must share with its file.
OPTION_NAMES = {"seed": "--seed", "p": "--p", "m": "--queries",
                "block_size": "--block-size", "scale": "scale", "sigma": "sigma"}


def _count(value, name, minimum):
    return check_int(value, name, minimum=minimum)


def _grid_values(values, key, minimum):
    """A grid axis: a non-empty list of integers ``>= minimum``, no value twice, sorted."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__") or not values:
        raise ValueError(f"{key} must be a non-empty list of integers >= {minimum}; "
                         f"got {values!r}")
    values = [_count(v, key, minimum) for v in values]
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        raise ValueError(f"{key} must not repeat a value (each is one row of the grid); "
                         f"got {repeated[0]} more than once in {values}")
    return sorted(values)  # the grid's rows in ascending order, whatever the order given


def settings(size="small", *, seed=20260521, scale=PROJECTION_SCALE, sigma=SIGMA,
             overrides=None):
    """The sweep's settings: a row of :data:`SIZES` with ``overrides``, validated.

    Raises ``ValueError`` naming the setting: budgets ``D >= 2`` (one split has no
    width to choose), sizes ``n >= 2``, neither with a repeated value (both are sorted), ``blocks``, ``block_size``, ``m`` (queries per
    design) and ``p`` at least 1, ``p`` at least every budget.

    >>> settings("tiny", overrides={"blocks": 5})["blocks"]
    5
    """
    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}; got {size!r}")
    s = dict(SIZES[size], **{k: v for k, v in (overrides or {}).items()
                             if v is not None})
    for key, minimum in (("budgets", 2), ("n_values", 2)):
        s[key] = _grid_values(s[key], key, minimum)
    for key in ("blocks", "block_size", "m", "p"):
        s[key] = _count(s[key], key, 1)
    if max(s["budgets"]) > s["p"]:
        raise ValueError(f"p must be at least every budget D (the budgets share one "
                         f"space R^p); got p = {s['p']} and D = {max(s['budgets'])}")
    return dict(s, size=size, seed=check_int(seed, "seed", minimum=0),
                scale=check_positive(scale, "scale"),
                sigma=check_positive(sigma, "sigma"))


def _kept_units(out, new, option_names=None, sweep_name="heads-width-fixed"):
    """Units of the sweep report ``out`` that a run of ``sweep_name`` with settings
    ``new`` may keep, or :class:`ResumeRefused` naming the sweep or setting that differs
    (a report's settings name its sweep; the fixed sweep's, written first, do not).

    A file's units are kept when every setting but the grid (budgets, n values, number
    of blocks) and the size's name is equal: the run may grow the grid.
    """
    if not out.exists():
        return {}, []
    try:
        old = json.loads(out.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # also an integer of 5000 digits
        raise ResumeRefused(f"{out} is not a sweep report (not JSON: {exc})") from None
    except (RecursionError, MemoryError):
        raise ResumeRefused(f"{out} is not a sweep report (JSON nested too deeply or too "
                            "large)") from None
    if (not isinstance(old, dict) or not isinstance(old.get("settings"), dict)
            or not isinstance(old.get("units"), dict)
            or not isinstance(old.get("runs", []), list)):
        raise ResumeRefused(f"{out} is not a sweep report (no settings and units); "
                            "write to another --out")
    skip = {"budgets", "n_values", "blocks", "size"}
    made_by = old["settings"].get("sweep", "heads-width-fixed")
    if made_by != sweep_name:
        raise ResumeRefused(
            f"{out} is a report of the sweep {made_by} and this run is the sweep "
            f"{sweep_name}; refusing to mix their units. Write to another --out")
    for key, value in new.items():
        if key not in skip and old["settings"].get(key) != value:
            name = (OPTION_NAMES if option_names is None else option_names).get(key, key)
            size = old["settings"].get("size")
            hint = f" (its --size was {size})" if size != new["size"] else ""
            raise ResumeRefused(
                f"{out} was made with {name} {old['settings'].get(key)!r}{hint} and this "
                f"run has {name} {value!r}; refusing to mix or overwrite its units. Rerun "
                f"with the same {name}, or write to another --out")
    return old["units"], old.get("runs", [])


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
        Keep the units already in ``out`` (needs ``out``; units outside this run's
        grid stay in the file too, unsummarised); they must have been drawn
        alike (same seed, ``p``, block size, queries, scale and noise), else
        :class:`ResumeRefused` is raised and the file is left untouched. A resumed run
        may add budgets, sizes or blocks to a finished sweep.
    command : list of str, optional
        Command line recorded in the provenance.
    log : callable or None
        Progress lines (rank 0 only).

    Raises
    ------
    ValueError
        For a bad setting (:func:`settings`) or an ``out`` that is not a new file or a
        sweep report (a folder, a device, a FIFO, another file), before any work;
        :class:`ResumeRefused` when ``out`` cannot be resumed.
    mhacore._report.ReportBusy
        When another run is writing ``out`` (it holds the report's lock).
    KeyboardInterrupt
        Re-raised with ``saved``, the number of units in ``out`` (or ``None``
        without ``out``).

    Returns
    -------
    dict
        The report: ``settings``, ``units`` (per unit, the block's per-split squared
        bias and spread, designs in order), ``summary`` (:func:`summarise`),
        ``provenance`` and ``distributed`` (world size, backend, each rank's device).
    """
    settings_ = settings(size, seed=seed, scale=scale, sigma=sigma, overrides=overrides)
    return run_units(Sweep("heads-width-fixed", plan=lambda s: plan_units(
        s["budgets"], s["n_values"], s["blocks"]), key=unit_key,
        # looked up at call time, so that a test can replace _unit
        unit=lambda u, s, ctx: _unit(u, s, ctx), summarise=summarise,
        option_names=OPTION_NAMES, unit_problem=unit_problem), settings_, device=device,
        out=out, resume=resume, command=command, log=log)


class Sweep:
    """What :func:`run_units` needs of a sweep: its name, ``plan(settings)`` (the
    units), ``key(unit)`` (the unit's JSON key), ``unit(unit, settings, ctx)`` (its
    result), ``summarise(report)`` and the command-line names of its settings."""

    def __init__(self, name, *, plan, key, unit, summarise, option_names, unit_problem):
        self.name, self.plan, self.key, self.unit = name, plan, key, unit
        self.summarise, self.option_names = summarise, option_names
        self.unit_problem = unit_problem  # (unit, result, settings) -> str or None


def _numbers(value, shape, name, minimum=-math.inf):
    """Why ``value`` is not an array of finite numbers ``>= minimum`` of ``shape``."""
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError, OverflowError):  # Overflow: an integer beyond a float
        return f"{name} is not an array of finite numbers"
    if a.shape != tuple(shape):
        return f"{name} has shape {a.shape}, expected {tuple(shape)}"
    if not np.isfinite(a).all():
        return f"{name} holds a value that is not finite"
    if (a < minimum).any():
        return f"{name} holds a value below {minimum}"
    return None


def unit_problem(unit, result, s):
    """Why a kept unit of the fixed sweep cannot be summarised (None when it can)."""
    if not isinstance(result, dict):
        return "not an object"
    shape = (len(splits(unit[0])), s["block_size"])
    return (_numbers(result.get("bias_sq"), shape, "bias_sq", 0.0)
            or _numbers(result.get("spread"), shape, "spread", 0.0))


def run_units(sweep, settings_, *, device="cpu", out=None, resume=False, command=None,
              log=print):
    """Run the units of ``sweep`` (a :class:`Sweep`) with validated settings, alone or as
    one rank of many; see :func:`run_sweep` for ``out``, ``resume`` and what it raises."""
    from ._provenance import provenance

    size = settings_["size"]
    if resume and out is None:
        raise ValueError("resume=True needs out (the report to resume)")
    out = None if out is None else Path(out)
    if out is not None:
        from ._report import out_problem

        problem = out_problem(out, None if resume else "sweep")
        if problem:
            raise ValueError(f"out must be a writable report file; {problem}")
    ctx = distributed.setup(device)
    lead = ctx.rank == 0
    held, busy = contextlib.ExitStack(), None
    if lead and out is not None:  # rank 0 alone writes the report
        try:
            held.enter_context(report_lock(out))
        except ReportBusy as exc:
            busy = exc
    busy = distributed.broadcast(busy)
    if busy is not None:
        raise busy
    with held:
        say = log if (lead and log is not None) else (lambda *a, **k: None)
        kept = ({}, [])
        if lead and resume:
            try:
                kept = _kept_units(out, settings_, sweep.option_names, sweep.name)
            except ResumeRefused as exc:
                kept = exc
        kept = distributed.broadcast(kept)
        if isinstance(kept, ResumeRefused):
            raise kept
        # every kept unit stays in the file, also those outside this run's grid (a smaller
        # --blocks or fewer sizes): the summary reads the grid's units only
        units_done = dict(kept[0])
        if lead and resume:  # a kept unit of the grid is summarised: it must be sound
            bad = next(((sweep.key(u), sweep.unit_problem(u, units_done[sweep.key(u)],
                                                          settings_))
                        for u in sweep.plan(settings_) if sweep.key(u) in units_done
                        and sweep.unit_problem(u, units_done[sweep.key(u)], settings_)),
                       None)
            bad = ResumeRefused(f"{out} holds unit {bad[0]} that cannot be summarised "
                                f"({bad[1]}); refusing to keep it. Remove that unit or "
                                "write to another --out") if bad else None
        else:
            bad = None
        bad = distributed.broadcast(bad)
        if bad is not None:
            raise bad
        run = {"provenance": provenance(command), "distributed": distributed.describe(ctx),
               "units_run": 0, "wall_s": 0.0}
        report = {"settings": settings_, "units": units_done, "runs": kept[1] + [run]}
        grid = sweep.plan(settings_)
        todo = [u for u in grid if sweep.key(u) not in units_done]
        say(f"sweep {sweep.name} {size}: {len(grid) - len(todo)} units kept, {len(todo)} to run on "
            f"{ctx.world_size} rank(s)")
        start, every = time.perf_counter(), max(1, len(todo) // (20 * ctx.world_size))
        saved = None
        try:
            for r0 in range(0, len(todo), ctx.world_size):
                batch = todo[r0:r0 + ctx.world_size]
                results = distributed.map_items(lambda i: sweep.unit(batch[i], settings_, ctx),
                                                len(batch))
                for unit, result in zip(batch, results):
                    report["units"][sweep.key(unit)] = result
                run["units_run"] += len(batch)
                run["wall_s"] = round(time.perf_counter() - start, 3)
                if lead and out is not None:
                    _write_atomic(out, report)
                    saved = len(report["units"])
                if (r0 // ctx.world_size) % every == 0 or r0 + len(batch) == len(todo):
                    say(f"  {r0 + len(batch)}/{len(todo)} units, {run['wall_s']:.0f} s")
        except KeyboardInterrupt as exc:
            if out is not None and saved is None:  # nothing written yet: kept units only
                saved = len(kept[0])  # the file as it was (empty without resume)
            exc.saved = saved
            raise
        report["summary"] = sweep.summarise(report)
        if lead and out is not None:
            _write_atomic(out, report)
        return report


def _unit(unit, s, ctx):
    budget, n, block = unit
    size = s["block_size"]
    t0 = time.perf_counter()
    bias_sq, spread = block_risks(budget, n, range(block * size, (block + 1) * size),
                                  seed=s["seed"], m=s["m"], p=s["p"], scale=s["scale"],
                                  sigma=s["sigma"], device=ctx.device)
    return {"bias_sq": bias_sq.tolist(), "spread": spread.tolist(),
            "seconds": round(time.perf_counter() - t0, 3)}


N_BOOT = 2000  # bootstrap resamples of the replicate blocks
BOOT_SEED = 7
LEVEL = (2.5, 97.5)  # percentile interval


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


def _best(widths, risk):
    """Argmin index ``(...)`` and interpolated ``d_k*`` ``(...)`` of risks ``(..., W)``.

    A parabola in ``log d_k`` through an interior argmin and its two neighbours gives
    the vertex, clipped to the neighbours; at an edge the value is the edge width.
    """
    x = np.log(np.asarray(widths, dtype=float))  # (W,)
    j = np.argmin(risk, axis=-1)  # (...)
    inner = np.clip(j, 1, len(x) - 2)
    take = lambda k: np.take_along_axis(risk, k[..., None], -1)[..., 0]  # noqa: E731
    x0, x1, x2 = x[inner - 1], x[inner], x[inner + 1]
    y0, y1, y2 = take(inner - 1), take(inner), take(inner + 1)
    num = (x1 - x0) ** 2 * (y1 - y2) - (x1 - x2) ** 2 * (y1 - y0)
    den = (x1 - x0) * (y1 - y2) - (x1 - x2) * (y1 - y0)  # < 0 for a convex parabola
    with np.errstate(divide="ignore", invalid="ignore"):
        vertex = np.where(den < 0, x1 - 0.5 * num / den, x1)
    vertex = np.clip(vertex, x0, x2)
    edge = (j == 0) | (j == len(x) - 1)
    return j, np.exp(np.where(edge, x[j], vertex))


def best_width(widths, risk):
    """Best width of one risk curve: discrete argmin, edge flag, interpolated ``d_k*``.

    When the argmin is interior, a parabola in ``log d_k`` through it and its two
    neighbours gives the interpolated optimum (inside the neighbours' range). At an
    edge the optimum is *censored*: the best feasible width is the edge (``1`` or
    ``D``), the unconstrained optimum lies at or beyond it, and ``edge`` says which.

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
    x = np.asarray(widths, dtype=float)  # (W,)
    y = np.asarray(risk, dtype=float)  # (W,)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2:
        raise ValueError(f"widths and risk must be 1-D of equal length >= 2; got "
                         f"{x.shape} and {y.shape}")
    if len(x) == 2:  # no interior point
        j = int(np.argmin(y))
        return {"discrete": int(widths[j]), "interpolated": float(widths[j]),
                "edge": "low" if j == 0 else "high"}
    j, value = _best(x, y)
    edge = "low" if j == 0 else "high" if j == len(x) - 1 else None
    return {"discrete": int(widths[int(j)]), "interpolated": float(value),
            "edge": edge}


def transition(n_values, d_star, budget):
    """Where the best width of one budget climbs from ``1`` to ``D``.

    Parameters
    ----------
    n_values : array_like of shape (N,)
        Ascending sizes.
    d_star : array_like of shape (..., N)
        Best widths (interpolated; censored ones at ``1`` or ``D``).
    budget : int

    Returns
    -------
    dict of arrays of shape (...):
        ``n_half``, the size at which ``d_k*`` first exceeds ``√D``, by linear
        interpolation of ``log d_k*`` in ``log n`` between the grid points around the
        crossing (``0`` when it exceeds ``√D`` at the first size, ``inf`` when it never
        does); ``n_first_full``, the first size with ``d_k* = D`` (``inf`` if none);
        ``n_last_one``, the last size below ``n_half`` with ``d_k* = 1`` (``0`` if none).

    Examples
    --------
    >>> t = transition([10, 100, 1000, 10000], [1, 2, 8, 16], 16)
    >>> float(t["n_half"]), float(t["n_first_full"]), float(t["n_last_one"])
    (316.22776601683796, 10000.0, 10.0)
    """
    n = np.asarray(n_values, dtype=float)  # (N,)
    y = np.log(np.asarray(d_star, dtype=float))  # (..., N)
    half = 0.5 * math.log(budget)
    above = y > half
    first = np.argmax(above, axis=-1)  # (...), 0 when none is above
    none = ~above.any(-1)
    prev = np.maximum(first - 1, 0)
    take = lambda a, k: np.take_along_axis(a, k[..., None], -1)[..., 0]  # noqa: E731
    y0, y1 = take(y, prev), take(y, first)
    ln = np.log(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(y1 > y0, (half - y0) / (y1 - y0), 1.0)
    n_half = np.exp(ln[prev] + frac * (ln[first] - ln[prev]))
    n_half = np.where(none, np.inf, np.where(first == 0, 0.0, n_half))
    full = np.isclose(y, math.log(budget))
    n_full = np.where(full.any(-1), n[np.argmax(full, axis=-1)], np.inf)
    one = np.isclose(y, 0.0) & (n < n_half[..., None])
    last = len(n) - 1 - np.argmax(one[..., ::-1], axis=-1)
    n_one = np.where(one.any(-1), n[last], 0.0)
    return {"n_half": n_half, "n_first_full": n_full, "n_last_one": n_one}


def paired_gap(table):
    """Best and second-best width of each row, and their paired z over blocks.

    ``table`` has shape ``(N, W, blocks)``; the widths are ranked by their block
    mean, and ``z`` is the mean over blocks of ``MSE(second) − MSE(best)`` divided by
    its standard error (``> 0``; small values mean a near-tie). With one block there is
    no standard error, and ``z`` is NaN.

    >>> t = np.array([[[1.0, 1.2, 0.9], [2.0, 2.1, 2.2]]])  # (1, 2, 3)
    >>> best, second, z = paired_gap(t)
    >>> best.tolist(), second.tolist(), round(float(z[0]), 3)
    ([0], [1], 8.875)
    """
    mean = table.mean(-1)  # (N, W)
    order = np.argsort(mean, axis=-1)
    best, second = order[:, 0], order[:, 1]
    rows = np.arange(len(table))
    diff = table[rows, second] - table[rows, best]  # (N, blocks)
    if diff.shape[-1] < 2:  # std(ddof=1) of one block is undefined
        return best, second, np.full(len(rows), np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):  # blocks all equal: ±inf, or NaN
        z = diff.mean(-1) / (diff.std(-1, ddof=1) / math.sqrt(diff.shape[-1]))
    return best, second, z


def law_predictions(n_lo, n_hi):
    """Log-log slopes of ``d_k*`` in ``n`` and ``D`` that each law predicts (``d = 1``).

    (a) one head, classical rates: ``d_k* ∝ n^{2/(d+4)}``, no ``D``; (b) logarithmic:
    ``d_k* ∝ log n``, whose log-log slope between ``n_lo`` and ``n_hi`` is
    ``Δ log log n / Δ log n``, no ``D``; the ensemble law at ``ρ = 0``:
    ``d_k* ∝ (nD)^{2/(d+6)}``. Larger ``d`` lowers (a) and the ensemble law. These are
    asymptotic (large ``n``, continuous ``d_k``) statements about other risk models.

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


def _size(x):
    """A size for JSON: ``None`` for a censored value (``0`` or ``inf``)."""
    x = float(x)
    return round(x, 3) if 0 < x < math.inf else None


def _interval(samples):
    """Percentile interval of bootstrap sizes; ``None`` ends are censored (below the
    first size or beyond the last)."""
    lo, hi = np.percentile(samples, LEVEL, method="inverted_cdf")
    return [_size(lo), _size(hi)]


def summarise(report, n_boot=N_BOOT):
    """Best widths per ``(D, n)`` and each budget's transition, with block intervals.

    Each point gives the best width (discrete and interpolated, an edge optimum
    censored at ``1`` or ``D`` and kept), the percentile interval of the interpolated
    width over ``n_boot`` resamples of the replicate blocks (the same blocks at every
    ``n`` and budget, so the designs stay paired), the second-best width and the paired
    z between the two. Each budget gives its transition sizes (:func:`transition`)
    with intervals from the same resamples. ``n0_slope`` is the least-squares slope of
    ``log n_half`` on ``log D`` over the budgets whose ``n_half`` interval is finite,
    with its interval and the slopes between neighbouring budgets (so that a bend is
    visible): a description of the transition's position, not a law.
    """
    s = report["settings"]
    budgets, n_values = s["budgets"], np.asarray(s["n_values"])
    tables = {b: risk_table(report, b) for b in budgets}  # (N, W, blocks) each
    rng = np.random.default_rng(BOOT_SEED)
    picks = rng.integers(0, s["blocks"], (n_boot, s["blocks"]))  # (n_boot, blocks)
    points, trans = [], {}
    for b in budgets:
        widths = splits(b)
        table = tables[b]
        j, d_star = _best(widths, table.mean(-1))  # (N,)
        best, second, z = paired_gap(table)
        boot = table[:, :, picks].mean(-1).transpose(2, 0, 1)  # (n_boot, N, W)
        jb, d_boot = _best(widths, boot)  # (n_boot, N)
        for i, n in enumerate(n_values):
            edge = "low" if j[i] == 0 else "high" if j[i] == len(widths) - 1 else None
            lo, hi = np.percentile(d_boot[:, i], LEVEL)
            points.append({
                "D": b, "n": int(n), "d_k_star": int(widths[j[i]]),
                "d_k_star_interpolated": round(float(d_star[i]), 6),
                "d_k_star_interval": [round(float(lo), 4), round(float(hi), 4)],
                "edge": edge,
                "interior_share": round(float(np.mean((jb[:, i] > 0)
                                                      & (jb[:, i] < len(widths) - 1))),
                                        4),
                "second_best": int(widths[second[i]]),
                "paired_z": round(float(z[i]), 3)})
        point_t = transition(n_values, d_star, b)
        boot_t = transition(n_values, d_boot, b)  # arrays of shape (n_boot,)
        trans[b] = {k: {"value": _size(point_t[k]), "interval": _interval(boot_t[k]),
                        "censored_share": round(float(np.mean(
                            ~np.isfinite(boot_t[k]) | (boot_t[k] == 0))), 4)}
                    for k in point_t}
        trans[b]["_boot"] = boot_t["n_half"]
    fitted = [b for b in budgets
              if None not in trans[b]["n_half"]["interval"]
              and trans[b]["n_half"]["value"] is not None]
    slope = {"budgets": fitted}
    if len(fitted) >= 2:
        x = np.log(fitted)
        y = np.log([trans[b]["n_half"]["value"] for b in fitted])
        y_boot = np.log(np.stack([trans[b]["_boot"] for b in fitted], -1))
        ok = np.isfinite(y_boot).all(-1) & (y_boot > -np.inf).all(-1)
        boot_slopes = np.polyfit(x, y_boot[ok].T, 1)[0] if ok.any() else np.array([])
        slope.update(value=round(float(np.polyfit(x, y, 1)[0]), 4),
                     interval=([round(float(v), 4) for v in
                                np.percentile(boot_slopes, LEVEL)]
                               if ok.mean() >= 0.9 else None),
                     neighbours=[round(float(v), 4) for v in np.diff(y) / np.diff(x)])
    for b in budgets:
        del trans[b]["_boot"]
    return {"points": points, "transition": {str(b): trans[b] for b in budgets},
            "n0_slope": slope, "n_boot": n_boot,
            "interval": "2.5-97.5 % bootstrap over replicate blocks",
            "laws": law_predictions(float(n_values.min()), float(n_values.max()))}


def format_summary(summary):
    """The summary as a few lines of text.

    A point's line gives the grid optimum ``d_k*`` and its paired z against the
    second-best width, then the interpolated optimum with its bootstrap interval (the
    interval belongs to the interpolated value, not to the grid optimum).
    """
    lines = []
    for p in summary["points"]:
        flag = f" (censored: {p['edge']})" if p["edge"] else ""
        lo, hi = p["d_k_star_interval"]
        lines.append(f"D = {p['D']:>4}, n = {p['n']:>6}: d_k* = {p['d_k_star']:>4} on "
                     f"the grid (vs {p['second_best']}: z = {p['paired_z']:.1f}); "
                     f"interpolated {p['d_k_star_interpolated']:.3g}, 95 % "
                     f"[{lo:.3g}, {hi:.3g}]{flag}")
    for b, t in summary["transition"].items():
        cells = []
        for key, label in (("n_last_one", "last n with d_k* = 1"),
                           ("n_half", "d_k* > sqrt(D) from n"),
                           ("n_first_full", "first n with d_k* = D")):
            lo, hi = t[key]["interval"]
            value = "censored" if t[key]["value"] is None else f"{t[key]['value']:.4g}"
            cells.append(f"{label} {value} [{'-' if lo is None else f'{lo:.4g}'}, "
                         f"{'-' if hi is None else f'{hi:.4g}'}]")
        lines.append(f"D = {b}: " + "; ".join(cells))
    slope = summary["n0_slope"]
    if "value" in slope:
        ci = slope["interval"]
        ci = "n/a" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"
        lines.append(f"slope of log n_half on log D over D = {slope['budgets']}: "
                     f"{slope['value']:.3f}, 95 % {ci}; between neighbours "
                     f"{slope['neighbours']}")
    return "\n".join(lines)
