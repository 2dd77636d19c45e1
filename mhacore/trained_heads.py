"""Chapter 9's experiment as a sweep: do trained heads diversify, and does it pay?

One multi-head attention layer (:mod:`mhacore.training`) learns in-context regression at a
fixed width ``d_model`` split into ``H`` heads of ``d_head = d_model / H``, for several prompt
lengths ``k`` and several seeds. Claims C3–C5 of ``MATH.md`` meet trained attention here:

* **C5, how many heads**: per ``(H, k)`` the held-out risk (mean ± SE over seeds), the best
  ``H`` per ``k`` with a paired z against the runner-up (paired over seeds: seed ``j`` sees the
  same training and held-out prompts at every ``H``), and three baselines on the same held-out
  prompts (minimum-norm least squares, Gaussian NW with a leave-one-out bandwidth, the
  constant context mean; :func:`mhacore.training.baseline_risks`);
* **C3/C4, do heads diversify**: at checkpoints from the initialisation (step 0) to the end,
  the HDI of the heads' key subspaces and of their query subspaces in ``R^d_model``
  (:func:`mhacore.diversity.head_diversity_indices`), the mean off-diagonal correlation
  of the heads' scalar outputs over held-out prompts (:func:`mhacore.training.head_outputs`)
  and the heads' weight overlap (:func:`weight_overlap`: the cosine of two heads' attention
  weights, the noise correlation of two NW smoothers of the same responses, claim C2);
* **diversity moved on purpose**: at one ``(H, k)`` the layer is also trained with the
  diversity penalty ``λ·(1 − HDI)`` (:func:`mhacore.training.diversity_penalty`) for several
  ``λ`` (``λ = 0`` is the grid's own unit), and risk is regressed on diversity.

Work is cut into units ``(family, H, k, λ, block)``: one :func:`mhacore.training.train` call
trains the seeds of one block together (one tensor program). Seed ``j`` of the sweep is the
training seed :func:`training_seeds` ``(seed, count)[j]``, a function of ``--seed`` and ``j``
alone, so a unit depends on its indices alone and the report is the same for any world size
(:func:`mhacore.sweeps.run_units`). Results are stored per seed; how seeds are blocked changes
them only by the rounding of batched products (:func:`mhacore.training.train`), which the
tests bound in float64.

What the HDI here is and is not: the key subspaces live in ``R^d_model``, but the layer reads
tokens ``(x, y, flag)`` through ``embed`` of rank ``x_dim + 2``, so part of each subspace is
never used by the function. The head-output correlation and the weight overlap are
functional measures.
"""

from __future__ import annotations

import math
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from .diversity import head_diversity_indices
from .training import (FAMILIES, training_seeds, Prompts, Task, TrainConfig, attention_weights, baseline_risks, head_outputs,
                       projections, sample_prompts, test_risk, train)
from ._validation import check_int, check_nonnegative, check_positive

__all__ = ["SIZES", "CHECKPOINT_FRACTIONS", "METRICS", "BASELINES", "settings", "training_seeds", "block_seeds",
           "plan_units", "unit_key", "run_unit", "unit_problem", "head_correlation", "weight_overlap",
           "cluster_regression", "seed_values", "summarise",
           "format_summary", "run_sweep", "load_report"]

#: Sweep sizes. ``seeds`` trained models per configuration, ``block_size`` seeds per unit
#: (trained together); ``penalties`` the ``λ`` values at ``(penalty_heads, penalty_length)``.
SIZES = {
    "tiny": dict(families=("smooth",), heads=(1, 2), prompt_lengths=(4, 8), seeds=2, block_size=1,
                 x_dim=2, d_model=8, noise=0.2, steps=6, batch_size=8, lr=1e-2, n_test=32,
                 penalty_heads=2, penalty_length=8, penalties=(0.0, 0.1), dtype="float64"),
    "small": dict(families=("smooth", "linear"), heads=(1, 4, 16), prompt_lengths=(8, 32), seeds=4,
                  block_size=4, x_dim=4, d_model=32, noise=0.2, steps=200, batch_size=64, lr=3e-3,
                  n_test=200, penalty_heads=4, penalty_length=32, penalties=(0.0, 0.1, 1.0),
                  dtype="float32"),
    "large": dict(families=("smooth", "linear"), heads=(1, 2, 4, 8, 16), prompt_lengths=(8, 16, 32, 64),
                  seeds=8, block_size=8, x_dim=4, d_model=32, noise=0.2, steps=2000, batch_size=64,
                  lr=3e-3, n_test=2000, penalty_heads=4, penalty_length=32,
                  penalties=(0.0, 0.003, 0.03, 0.3), dtype="float32"),
}
#: Checkpoints as fractions of ``steps`` (rounded to whole steps): 0 is the initialisation.
CHECKPOINT_FRACTIONS = (0.0, 0.125, 0.25, 0.5, 0.75, 1.0)
#: Per-seed, per-checkpoint numbers of a unit; all but the risk are absent (None) for one head.
METRICS = ("risk", "hdi_keys", "hdi_queries", "head_corr", "weight_overlap")
BASELINES = ("least_squares", "nw", "constant")
LOSS_WINDOWS = 20  # the training loss is stored as the means of this many windows of steps
N_BOOT = 2000  # seed-cluster bootstrap resamples of the regressions
BOOT_SEED = 7
#: Command-line names of the settings a resumed sweep must share with its file.
OPTION_NAMES = {"seed": "--seed", "steps": "--steps", "block_size": "--block-size"}


# --- settings -----------------------------------------------------------------------------

def _penalties(values):
    """The ``λ`` grid: non-empty, numbers >= 0, 0 included, none twice; sorted."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__") or len(values) == 0:
        raise ValueError(f"penalties must be a non-empty list of numbers >= 0 including 0; got {values!r}")
    out = [check_nonnegative(v, "penalties") for v in values]
    if 0.0 not in out:
        raise ValueError(f"penalties must include 0 (the unpenalised layer is the comparison); got {out}")
    if len(set(out)) < len(out):
        raise ValueError(f"penalties must not repeat a value; got {out}")
    return sorted(out)


def settings(size="small", *, seed=20260521, overrides=None):
    """The sweep's settings: a row of :data:`SIZES` with ``overrides``, validated.

    Parameters
    ----------
    size : {"tiny", "small", "large"}
    seed : int
        Base seed (>= 0); the training seeds are :func:`training_seeds` ``(seed, seeds)``.
    overrides : dict, optional
        Replaces entries of the size's row (a ``None`` value is ignored); unknown keys raise.

    Returns
    -------
    dict
        The row with ``sweep``, ``size``, ``seed``, the grids sorted and ``checkpoints``
        (steps, from :data:`CHECKPOINT_FRACTIONS`) added.

    Raises
    ------
    ValueError
        Naming the setting, its constraint and its value: ``families`` a non-empty subset of
        ``("linear", "smooth")``; ``heads`` integers >= 1 dividing ``d_model``;
        ``prompt_lengths`` integers >= 2; ``seeds``, ``block_size``, ``x_dim``, ``d_model``,
        ``steps``, ``batch_size`` >= 1, ``n_test`` >= 2; ``lr`` > 0, ``noise`` >= 0;
        ``penalty_heads`` one of ``heads`` and >= 2 (unless ``penalties`` is ``[0]``),
        ``penalty_length`` one of ``prompt_lengths``; ``penalties`` >= 0 including 0;
        ``dtype`` "float32" or "float64".
    TypeError
        ``size`` not a string, ``overrides`` not a dict.

    Examples
    --------
    >>> s = settings("tiny", overrides={"seeds": 3})
    >>> s["seeds"], s["heads"], s["checkpoints"]
    (3, [1, 2], [0, 1, 2, 3, 4, 6])
    """
    if not isinstance(size, str):
        raise TypeError(f"size must be one of {sorted(SIZES)}; got {type(size).__name__} {size!r}")
    from .sweeps import _grid_values

    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}; got {size!r}")
    if overrides is not None and not isinstance(overrides, dict):
        raise TypeError(f"overrides must be a dict of settings; got {type(overrides).__name__}")
    unknown = sorted(set(overrides or {}) - set(SIZES[size]))
    if unknown:
        raise ValueError(f"overrides must name settings of {sorted(SIZES[size])}; got {unknown[0]!r}")
    s = dict(SIZES[size], **{k: v for k, v in (overrides or {}).items() if v is not None})
    families = s["families"]
    if (isinstance(families, (str, bytes)) or not hasattr(families, "__iter__")
            or not families or not set(families) <= set(FAMILIES) or len(set(families)) < len(families)):
        raise ValueError(f"families must be a non-empty list of distinct values of {FAMILIES}; got {families!r}")
    s["families"] = sorted(families, key=("smooth", "linear").index)  # smooth first: NW's natural task
    for key in ("seeds", "block_size", "x_dim", "d_model", "steps", "batch_size"):
        s[key] = check_int(s[key], key)
    s["n_test"] = check_int(s["n_test"], "n_test", minimum=2)
    s["heads"] = _grid_values(s["heads"], "heads", 1)
    bad = [h for h in s["heads"] if s["d_model"] % h]
    if bad:
        raise ValueError(f"heads must divide d_model = {s['d_model']} (d_head = d_model / H); got {bad[0]}")
    s["prompt_lengths"] = _grid_values(s["prompt_lengths"], "prompt_lengths", 2)
    s["noise"], s["lr"] = check_nonnegative(s["noise"], "noise"), check_positive(s["lr"], "lr")
    s["penalties"] = _penalties(s["penalties"])
    s["penalty_heads"] = check_int(s["penalty_heads"], "penalty_heads")
    if s["penalty_heads"] not in s["heads"] or (s["penalty_heads"] < 2 and len(s["penalties"]) > 1):
        raise ValueError(f"penalty_heads must be one of heads = {s['heads']} and >= 2 (a penalty needs two "
                         f"heads); got {s['penalty_heads']}")
    s["penalty_length"] = check_int(s["penalty_length"], "penalty_length")
    if s["penalty_length"] not in s["prompt_lengths"]:
        raise ValueError(f"penalty_length must be one of prompt_lengths = {s['prompt_lengths']}; "
                         f"got {s['penalty_length']}")
    if s["dtype"] not in ("float32", "float64"):
        raise ValueError(f"dtype must be 'float32' or 'float64'; got {s['dtype']!r}")
    checkpoints = sorted({int(round(f * s["steps"])) for f in CHECKPOINT_FRACTIONS})
    return dict(s, sweep="trained-heads", size=size, seed=check_int(seed, "seed", minimum=0),
                checkpoints=checkpoints)


def block_seeds(s, block):
    """Sweep seed indices of ``block``: ``block_size`` consecutive ones (the last block may be short).

    >>> block_seeds(settings("tiny", overrides={"seeds": 3, "block_size": 2}), 1)
    [2]
    """
    size = s["block_size"]
    return list(range(block * size, min(s["seeds"], (block + 1) * size)))


# --- units --------------------------------------------------------------------------------

def plan_units(s):
    """Units ``(family, H, k, λ, block)``: the grid at ``λ = 0``, then ``λ > 0`` at one ``(H, k)``;
    costliest first (smooth prompts cost most to draw, cost grows with ``k`` and ``H``).

    >>> plan_units(settings("tiny"))[:2]
    [('smooth', 2, 8, 0.0, 0), ('smooth', 2, 8, 0.0, 1)]
    """
    blocks = range(math.ceil(s["seeds"] / s["block_size"]))
    units = [(f, h, k, 0.0, b) for f in s["families"] for h in s["heads"] for k in s["prompt_lengths"]
             for b in blocks]
    units += [(f, s["penalty_heads"], s["penalty_length"], lam, b) for f in s["families"]
              for lam in s["penalties"] if lam > 0 for b in blocks]
    cost = lambda u: (-(2 if u[0] == "smooth" else 1) * u[2] * (8 + u[1]), u[3], u[4])  # noqa: E731
    return sorted(units, key=cost)


def unit_key(unit) -> str:
    """JSON key of a unit: ``"family=smooth,H=4,k=32,penalty=0.3,block=0"``."""
    family, n_heads, k, penalty, block = unit
    return f"family={family},H={n_heads},k={k},penalty={penalty:g},block={block}"


def head_correlation(contributions):
    """Correlation matrices of the heads' outputs over prompts, and their mean off-diagonal entry.

    Parameters
    ----------
    contributions : array_like of shape (S, H, B)
        Each head's scalar output on ``B`` prompts (:func:`mhacore.training.head_outputs`).

    Returns
    -------
    corr : numpy.ndarray of shape (S, H, H)
        NaN in the rows of a head whose outputs do not vary.
    mean_off : numpy.ndarray of shape (S,)
        Mean of the finite off-diagonal entries (NaN when none is, or ``H = 1``).

    Examples
    --------
    >>> c = np.array([[[1.0, 2.0, 3.0], [2.0, 4.0, 6.1], [3.0, 2.0, 1.0]]])  # (1, 3, 3)
    >>> corr, mean_off = head_correlation(c)
    >>> round(float(corr[0, 0, 2]), 6), round(float(mean_off[0]), 3)
    (-1.0, -0.333)
    """
    c = np.asarray(contributions, dtype=np.float64)
    if c.ndim != 3 or c.shape[-1] < 2:
        raise ValueError(f"contributions must have shape (S, H, B) with B >= 2; got {c.shape}")
    centred = c - c.mean(-1, keepdims=True)  # (S, H, B)
    cov = centred @ centred.transpose(0, 2, 1) / c.shape[-1]  # (S, H, H)
    sd = np.sqrt(np.diagonal(cov, axis1=1, axis2=2))  # (S, H)
    with np.errstate(divide="ignore", invalid="ignore"):
        corr = cov / (sd[:, :, None] * sd[:, None, :])  # (S, H, H)
    corr = np.where(sd[:, :, None] * sd[:, None, :] > 0, corr, np.nan)  # a head that does not vary: NaN
    off = ~np.eye(c.shape[1], dtype=bool)
    values = corr[:, off]  # (S, H (H - 1))
    finite = np.isfinite(values)
    with np.errstate(invalid="ignore"):
        mean_off = np.where(finite.any(-1), np.nansum(values, -1) / np.maximum(finite.sum(-1), 1), np.nan)
    return corr, mean_off


def weight_overlap(weights):
    """Mean cosine similarity of two heads' attention weights, over prompts and head pairs.

    For two NW smoothers of the same responses with independent noise of variance ``σ²``, the
    correlation of their noise parts is ``⟨w^h, w^h'⟩ / (‖w^h‖ ‖w^h'‖)`` (claim C2): the
    overlap of their weights, not of their subspaces.

    Parameters
    ----------
    weights : torch.Tensor of shape (S, H, B, k)
        Non-negative weights (:func:`mhacore.training.attention_weights`), ``H >= 2``.

    Returns
    -------
    numpy.ndarray of shape (S,)
        Mean over prompts and ordered head pairs ``h ≠ h'``; in [0, 1].

    Examples
    --------
    >>> w = torch.tensor([[[[1.0, 0.0]], [[0.0, 1.0]], [[0.5, 0.5]]]])  # (1, 3, 1, 2)
    >>> weight_overlap(w).round(6)  # pairs: 0, sqrt(1/2) twice
    array([0.471405])
    """
    if not isinstance(weights, torch.Tensor) or weights.ndim != 4 or weights.shape[1] < 2:
        raise ValueError(f"weights must be a tensor of shape (S, H, B, k) with H >= 2; got "
                         f"{getattr(weights, 'shape', type(weights).__name__)}")
    w = weights.detach().to("cpu", torch.float64)
    unit = w / torch.linalg.vector_norm(w, dim=-1, keepdim=True)  # (S, H, B, k)
    cosine = torch.einsum("shbk,sgbk->shg", unit, unit) / w.shape[2]  # (S, H, H): mean over prompts
    n_heads = w.shape[1]
    off = 1 - torch.eye(n_heads, dtype=torch.float64)
    return ((cosine * off).sum((-1, -2)) / (n_heads * (n_heads - 1))).clamp(0, 1).numpy()


def _listed(a, digits=None):
    """A JSON list; NaN as None."""
    a = np.asarray(a, dtype=np.float64)
    if digits is not None:
        a = np.round(a, digits)
    return np.where(np.isfinite(a), a, None).tolist() if a.size else a.tolist()


def run_unit(unit, s, ctx):
    """Train one block of seeds and measure them at every checkpoint.

    Parameters
    ----------
    unit : tuple
        ``(family, H, k, λ, block)`` of :func:`plan_units`.
    s : dict
        :func:`settings`.
    ctx : mhacore.distributed.Context
        Its ``device`` is where the models train (``settings["dtype"]``); held-out prompts
        (``n_test`` per seed, stream 2) are drawn on the CPU and cast, baselines run in float64.

    Returns
    -------
    dict
        ``seeds`` (training seeds), ``seed_index`` (sweep indices), ``risk``, ``hdi_keys``,
        ``hdi_queries``, ``head_corr``, ``weight_overlap`` of shape ``(S, C)`` (checkpoints
        ``settings["checkpoints"]``; all but the risk None for one head), ``corr_matrix`` (``init`` and ``trained``, the seeds'
        mean ``(H, H)``, None for one head), ``loss_curve`` ``(S, LOSS_WINDOWS)`` (window means
        of the training loss), ``baselines`` (``(S,)`` per baseline, in the units of the first
        ``H`` at ``λ = 0`` only; they do not depend on ``H``) and ``seconds``.
    """
    family, n_heads, k, penalty, block = unit
    t0 = time.perf_counter()
    index = block_seeds(s, block)
    seeds = [training_seeds(s["seed"], s["seeds"])[j] for j in index]
    task = Task(family, x_dim=s["x_dim"], n_context=k, noise=s["noise"])
    config = TrainConfig(task, d_model=s["d_model"], n_heads=n_heads, batch_size=s["batch_size"],
                         steps=s["steps"], lr=s["lr"], penalty=penalty)
    dtype, device = getattr(torch, s["dtype"]), ctx.device
    result = train(config, seeds, dtype=dtype, device=device, checkpoints=s["checkpoints"])
    held_out = sample_prompts(task, seeds, s["n_test"])  # (S, B, ...) float64 on the CPU
    prompts = Prompts(*(t.to(device=device, dtype=dtype) for t in held_out))  # the same numbers, cast
    n_seeds, n_cp = len(seeds), len(s["checkpoints"])
    out = {m: np.full((n_seeds, n_cp), np.nan) for m in METRICS}
    matrices = {}
    for c, step in enumerate(s["checkpoints"]):
        params = result.checkpoints[step]
        out["risk"][:, c] = test_risk(params, prompts)
        if n_heads > 1:
            w_query, w_key = projections(params)  # (S, H, d_model, d_head) each
            out["hdi_keys"][:, c] = head_diversity_indices(w_key)
            out["hdi_queries"][:, c] = head_diversity_indices(w_query)
            with torch.no_grad():
                contributions = head_outputs(params, prompts).to("cpu", torch.float64).numpy()  # (S, H, B)
                out["weight_overlap"][:, c] = weight_overlap(attention_weights(params, prompts))
            corr, out["head_corr"][:, c] = head_correlation(contributions)
            if c in (0, n_cp - 1):
                with warnings.catch_warnings():  # an entry NaN in every seed stays NaN (null)
                    warnings.simplefilter("ignore", RuntimeWarning)
                    matrices["init" if c == 0 else "trained"] = _listed(np.nanmean(corr, 0), 4)  # (H, H)
    windows = np.array_split(result.losses, min(LOSS_WINDOWS, s["steps"]), axis=1)
    unit_out = {"seeds": seeds, "seed_index": index,
                **{m: (_listed(out[m]) if n_heads > 1 or m == "risk" else None) for m in METRICS},
                "corr_matrix": matrices or None,
                "loss_curve": _listed(np.stack([w.mean(1) for w in windows], 1))}  # (S, W)
    if n_heads == s["heads"][0] and penalty == 0:
        risks = [baseline_risks(Prompts(*(t[i:i + 1] for t in held_out))) for i in range(n_seeds)]  # per seed
        unit_out["baselines"] = {b: [float(r[b][0]) for r in risks] for b in BASELINES}
    unit_out["seconds"] = round(time.perf_counter() - t0, 3)
    return unit_out


def unit_problem(unit, result, s):
    """Why a kept unit cannot be summarised (None when it can): its seeds are not this
    block's, or a metric, the loss curve or a baseline has the wrong shape or a number that is
    not finite (risks and losses also >= 0, HDIs and overlaps in [0, 1], correlations in [-1, 1])."""
    from .sweeps import _numbers

    if not isinstance(result, dict):
        return "not an object"
    index = block_seeds(s, unit[4])
    if result.get("seed_index") != index:
        return f"its seeds are not block {unit[4]}'s sweep seeds {index}"
    shape = (len(index), len(s["checkpoints"]))
    problem = _numbers(result.get("risk"), shape, "risk", 0.0)
    if problem:
        return problem
    for metric, low, high in (("hdi_keys", 0.0, 1.0), ("hdi_queries", 0.0, 1.0), ("weight_overlap", 0.0, 1.0),
                              ("head_corr", -1.0, 1.0)):
        value = result.get(metric)
        if unit[1] == 1:
            if value is not None:
                return f"{metric} must be null for one head"
            continue
        if metric == "head_corr":  # a dead head makes an entry null: allowed
            value = [[np.nan if v is None else v for v in row] for row in value] if isinstance(value, list) else value
            try:
                a = np.asarray(value, dtype=float)
            except (TypeError, ValueError, OverflowError):
                return f"{metric} is not an array of numbers"
            if a.shape != shape or (np.abs(a[np.isfinite(a)]) > high + 1e-9).any() or np.isinf(a).any():
                return f"{metric} has shape {a.shape}, expected {shape}, or a value outside [-1, 1]"
            continue
        problem = _numbers(value, shape, metric, low - 1e-12)
        if problem:
            return problem
        if (np.asarray(value, dtype=float) > high + 1e-12).any():
            return f"{metric} holds a value above {high}"
    problem = _numbers(result.get("loss_curve"), (len(index), min(LOSS_WINDOWS, s["steps"])), "loss_curve", 0.0)
    if problem:
        return problem
    if unit[1] == s["heads"][0] and unit[3] == 0:
        baselines = result.get("baselines")
        if not isinstance(baselines, dict):
            return "no baselines (the first H's units carry them)"
        for name in BASELINES:
            problem = _numbers(baselines.get(name), (len(index),), f"baselines[{name}]", 0.0)
            if problem:
                return problem
    return None


# --- summary ------------------------------------------------------------------------------

def _blocks(s):
    return range(math.ceil(s["seeds"] / s["block_size"]))


def _seed_values(report, family, n_heads, k, penalty, metric):
    """``metric`` of every seed at ``(family, H, k, λ)``, blocks concatenated: (N, C), NaN for null."""
    s = report["settings"]
    rows = []
    for b in _blocks(s):
        value = report["units"][unit_key((family, n_heads, k, float(penalty), b))][metric]
        rows.append(np.array([[np.nan if v is None else v for v in row] for row in value], dtype=float))
    return np.concatenate(rows)  # (N, C)


def seed_values(report, family, n_heads, k, metric, *, penalty=0.0, checkpoint=-1) -> np.ndarray:
    """One number per seed of a report's configuration ``(family, H, k, λ)``.

    Parameters
    ----------
    report : dict
        A trained-heads report (:func:`load_report`).
    family : str
    n_heads, k : int
        One of the report's ``heads`` and ``prompt_lengths``.
    metric : str
        One of :data:`METRICS`.
    penalty : float
        ``λ``; 0 for the grid, one of ``penalties`` at ``(penalty_heads, penalty_length)``.
    checkpoint : int
        Index into the report's ``checkpoints`` (``0``: initialisation; ``-1``: the end).

    Returns
    -------
    numpy.ndarray of shape (seeds,)
        Seed ``j`` in row ``j`` (NaN where the metric is undefined, e.g. HDI for one head).

    Examples
    --------
    >>> r = run_sweep("tiny", overrides={"heads": [1, 2], "prompt_lengths": [4], "penalty_length": 4,
    ...                                  "seeds": 2, "steps": 2}, log=None)
    >>> seed_values(r, "smooth", 2, 4, "risk").shape
    (2,)
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}; got {metric!r}")
    s = report["settings"]
    key = unit_key((family, n_heads, k, float(penalty), 0))
    if key not in report["units"]:
        raise ValueError(f"(family, H, k, penalty) must be a configuration of the report; got "
                         f"{(family, n_heads, k, penalty)!r}")
    check_int(checkpoint, "checkpoint", minimum=-len(s["checkpoints"]))
    if checkpoint >= len(s["checkpoints"]):
        raise ValueError(f"checkpoint must index the report's {len(s['checkpoints'])} checkpoints; got {checkpoint}")
    return _seed_values(report, family, n_heads, k, penalty, metric)[:, checkpoint]


def _baseline(report, family, k, name):
    """A baseline's risk per seed at ``(family, k)``: (N,)."""
    s = report["settings"]
    return np.concatenate([report["units"][unit_key((family, s["heads"][0], k, 0.0, b))]["baselines"][name]
                           for b in _blocks(s)]).astype(float)


def _mean_se(values):
    """Mean and standard error of the finite values (SE None with fewer than two)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return None, None
    se = float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else None
    return float(v.mean()), se


def _z(diff):
    """Paired z of the mean of ``diff`` over seeds (None with fewer than two finite values)."""
    mean, se = _mean_se(diff)
    if se is None:
        return None
    if se == 0:
        return None if mean == 0 else math.copysign(math.inf, mean)
    return mean / se


def _r(x, digits=5):
    return None if x is None or not np.isfinite(x) else round(float(x), digits)


def _stats(values, digits=5):
    mean, se = _mean_se(values)
    return {"mean": _r(mean, digits), "se": _r(se, digits)}


def _change(before, after):
    """``after − before`` per seed: mean, SE, paired z, and both ends' mean ± SE."""
    diff = np.asarray(after, float) - np.asarray(before, float)
    return {"init": _stats(before), "trained": _stats(after),
            "change": dict(_stats(diff), z=_r(_z(diff), 3))}


def cluster_regression(x, y, cluster, group, *, n_boot=N_BOOT, seed=BOOT_SEED):
    """Slope of ``y`` on ``x`` with fixed effects ``group``, and a seed-cluster bootstrap.

    The point estimate is ordinary least squares after removing each group's mean from ``x``
    and ``y``; the bootstrap resamples whole clusters (seeds) with replacement, ``n_boot``
    times (weights: how often each cluster is drawn), and gives the standard error (SD of the
    resampled slopes) and the 95 % percentile interval.

    Parameters
    ----------
    x, y : array_like of shape (n,)
        Rows with a NaN in either are dropped.
    cluster : array_like of int, shape (n,)
    group : array_like of int, shape (n,)
        Fixed-effect groups (a group may span clusters).
    n_boot : int
    seed : int
        Seed of the bootstrap's generator.

    Returns
    -------
    dict with ``slope``, ``se``, ``ci`` ([low, high]), ``z`` (slope / se), ``n_obs``,
    ``n_clusters`` and ``x_sd`` (SD of ``x`` within groups); the numbers are None when ``x``
    does not vary within groups.

    Examples
    --------
    >>> x = np.array([0.0, 1.0, 0.0, 1.0, 0.0, 1.0])
    >>> out = cluster_regression(x, 2 * x + [0, 0, 1, 1, 5, 5], [0, 0, 1, 1, 2, 2], [0, 0, 1, 1, 2, 2])
    >>> out["slope"], out["ci"]
    (2.0, [2.0, 2.0])
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    _, c = np.unique(np.asarray(cluster)[keep], return_inverse=True)
    _, g = np.unique(np.asarray(group)[keep], return_inverse=True)
    n_c, n_g = int(c.max(initial=-1)) + 1, int(g.max(initial=-1)) + 1
    empty = {"slope": None, "se": None, "ci": None, "z": None, "n_obs": int(len(x)), "n_clusters": n_c,
             "x_sd": None}
    if len(x) < 2:
        return empty

    def sums(values):  # (n_c, n_g): per cluster and group
        out = np.zeros((n_c, n_g))
        np.add.at(out, (c, g), values)
        return out

    n_cg, x_cg, y_cg = sums(np.ones_like(x)), sums(x), sums(y)  # (n_c, n_g) each
    xx_c, xy_c = np.bincount(c, x * x, n_c), np.bincount(c, x * y, n_c)  # (n_c,)

    def slopes(weights):  # weights (R, n_c) -> slopes (R,)
        n, sx, sy = weights @ n_cg, weights @ x_cg, weights @ y_cg  # (R, n_g)
        with np.errstate(divide="ignore", invalid="ignore"):
            sxx = weights @ xx_c - np.where(n > 0, sx * sx / n, 0).sum(-1)
            sxy = weights @ xy_c - np.where(n > 0, sx * sy / n, 0).sum(-1)
            return np.where(sxx > 1e-14 * np.maximum(weights @ xx_c, 1e-300), sxy / sxx, np.nan)

    slope = float(slopes(np.ones((1, n_c)))[0])
    if not np.isfinite(slope):
        return empty
    n_all, sx_all = n_cg.sum(0), x_cg.sum(0)
    x_sd = math.sqrt(max(float(xx_c.sum() - (sx_all**2 / np.maximum(n_all, 1)).sum()), 0.0) / len(x))
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(n_c, np.full(n_c, 1 / n_c), size=n_boot).astype(float)  # (n_boot, n_c)
    boot = slopes(weights)
    boot = boot[np.isfinite(boot)]
    se = float(boot.std(ddof=1)) if len(boot) > 1 else None
    ci = [float(v) for v in np.percentile(boot, (2.5, 97.5))] if len(boot) > 1 else None
    return {"slope": slope, "se": se, "ci": ci,
            "z": None if not se else slope / se, "n_obs": int(len(x)), "n_clusters": n_c, "x_sd": x_sd}


def _rounded(regression, digits=5):
    out = dict(regression)
    for key in ("slope", "se", "z", "x_sd"):
        out[key] = _r(out[key], 3 if key == "z" else digits)
    out["ci"] = None if out["ci"] is None else [_r(v, digits) for v in out["ci"]]
    return out


def _regressions(report, family):
    """Risk on each diversity measure (hdi_keys, hdi_queries, head_corr), three ways."""
    s = report["settings"]
    last = len(s["checkpoints"]) - 1
    multi = [h for h in s["heads"] if h > 1]
    designs = {}
    if len(s["penalties"]) > 1:  # (seed, λ) at the end of training; within seed
        rows = {m: np.concatenate([_seed_values(report, family, s["penalty_heads"], s["penalty_length"], lam, m)[:, last]
                                   for lam in s["penalties"]]) for m in METRICS}
        seeds = np.tile(np.arange(s["seeds"]), len(s["penalties"]))
        designs["penalty"] = (rows, seeds, seeds)
    cells = [(h, k) for h in multi for k in s["prompt_lengths"]]
    if cells:  # (seed, cell) at the end of training; within cell
        rows = {m: np.concatenate([_seed_values(report, family, h, k, 0.0, m)[:, last] for h, k in cells])
                for m in METRICS}
        seeds = np.tile(np.arange(s["seeds"]), len(cells))
        designs["across_seeds"] = (rows, seeds, np.repeat(np.arange(len(cells)), s["seeds"]))
        # (seed, cell, checkpoint): every checkpoint of every run; within run (cell and seed)
        rows = {m: np.concatenate([_seed_values(report, family, h, k, 0.0, m).ravel() for h, k in cells])
                for m in METRICS}
        n_cp = len(s["checkpoints"])
        seeds = np.tile(np.repeat(np.arange(s["seeds"]), n_cp), len(cells))
        runs = np.repeat(np.arange(len(cells) * s["seeds"]), n_cp)
        designs["trajectory"] = (rows, seeds, runs)
    out = []
    for design, (rows, seeds, groups) in designs.items():
        for metric in METRICS[1:]:
            out.append(dict(family=family, design=design, x=metric,
                            **_rounded(cluster_regression(rows[metric], rows["risk"], seeds, groups))))
    return out


#: What each regression design compares (the summary's ``regression_designs``).
DESIGNS = {
    "penalty": "seeds x penalties at (penalty_heads, penalty_length), end of training; fixed effect per seed "
               "(diversity moved on purpose by the penalty)",
    "across_seeds": "seeds x (H >= 2, k) cells at lambda = 0, end of training; fixed effect per cell "
                    "(natural variation between seeds)",
    "trajectory": "every checkpoint of every lambda = 0 run with H >= 2; fixed effect per run "
                  "(co-movement during training: confounded with training progress)",
}


def summarise(report):
    """Risks, best ``H``, diversity before and after training, the penalty sweep, regressions.

    Returns
    -------
    dict
        ``cells`` per ``(family, H, k)`` at ``λ = 0``: final held-out risk (mean ± SE over seeds),
        its fall over the last stretch of training (``last_gain``: risk at the second-to-last
        checkpoint minus the last, mean ± SE, paired z, and relative to the final risk), and for
        ``H >= 2`` each diversity measure at initialisation and after training with the paired
        change (``hdi_keys``, ``hdi_queries``, ``head_corr``); ``best`` per ``(family, k)``: the
        best ``H`` by mean risk, the runner-up and the paired z of ``risk(runner-up) −
        risk(best)``, the baselines' risks and the paired z of ``baseline − best`` (positive:
        the trained layer is better); ``hdi_change`` per ``(family, H)``: the change of each
        measure averaged over ``k`` per seed, mean ± SE and z; ``penalty`` per ``(family, λ)``:
        each measure and the risk (mean ± SE) with paired z against ``λ = 0``;
        ``regressions``: slope of risk on each measure (:func:`cluster_regression`) in the
        designs of :data:`DESIGNS`.
    """
    s = report["settings"]
    last = len(s["checkpoints"]) - 1
    cells, best, change, penalty, regressions = [], [], [], [], []
    for family in s["families"]:
        for n_heads in s["heads"]:
            per_k = {m: [] for m in METRICS[1:]}
            for k in s["prompt_lengths"]:
                risk = _seed_values(report, family, n_heads, k, 0.0, "risk")  # (N, C)
                gain = risk[:, last - 1] - risk[:, last] if last > 0 else np.full(len(risk), np.nan)
                mean_final = _mean_se(risk[:, last])[0]
                cell = {"family": family, "H": n_heads, "d_head": s["d_model"] // n_heads, "k": k,
                        "risk": _stats(risk[:, last]), "risk_init": _stats(risk[:, 0]),
                        "last_gain": dict(_stats(gain), z=_r(_z(gain), 3),
                                          relative=_r(_mean_se(gain)[0] / mean_final if mean_final else None, 4),
                                          steps=[s["checkpoints"][max(last - 1, 0)], s["checkpoints"][last]])}
                if n_heads > 1:
                    for m in METRICS[1:]:
                        values = _seed_values(report, family, n_heads, k, 0.0, m)
                        cell[m] = _change(values[:, 0], values[:, last])
                        per_k[m].append(values[:, last] - values[:, 0])
                cells.append(cell)
            if n_heads > 1:
                entry = {"family": family, "H": n_heads}
                for m in METRICS[1:]:
                    diff = np.mean(per_k[m], 0)  # (N,): the seed's mean change over k
                    entry[m] = dict(_stats(diff), z=_r(_z(diff), 3))
                change.append(entry)
        for k in s["prompt_lengths"]:
            risks = np.stack([_seed_values(report, family, h, k, 0.0, "risk")[:, last] for h in s["heads"]])  # (nH, N)
            order = np.argsort(risks.mean(1), kind="stable")
            entry = {"family": family, "k": k, "risk": [_r(v) for v in risks.mean(1)],
                     "best_H": s["heads"][order[0]], "best_risk": _stats(risks[order[0]])}
            if len(order) > 1:
                entry.update(runner_up=s["heads"][order[1]], runner_up_z=_r(_z(risks[order[1]] - risks[order[0]]), 3))
            for name in BASELINES:
                base = _baseline(report, family, k, name)
                entry[name] = _stats(base)
                entry[f"{name}_z"] = _r(_z(base - risks[order[0]]), 3)
            best.append(entry)
        if len(s["penalties"]) > 1:
            h, k = s["penalty_heads"], s["penalty_length"]
            zero = {m: _seed_values(report, family, h, k, 0.0, m)[:, last] for m in METRICS}
            for lam in s["penalties"]:
                entry = {"family": family, "H": h, "k": k, "penalty": lam}
                for m in METRICS:
                    values = _seed_values(report, family, h, k, lam, m)[:, last]
                    entry[m] = dict(_stats(values), vs_zero_z=_r(_z(values - zero[m]), 3) if lam > 0 else None)
                penalty.append(entry)
        regressions += _regressions(report, family)
    return {"cells": cells, "best": best, "hdi_change": change, "penalty": penalty, "regressions": regressions,
            "seeds": s["seeds"], "regression_designs": DESIGNS,
            "regression_method": f"OLS with fixed effects; SE and 95 % percentile CI from a seed-cluster bootstrap "
                                 f"({N_BOOT} resamples of whole seeds, generator seed {BOOT_SEED})",
            "z": "paired over seeds: mean difference / its standard error"}


def _pm(stat, digits=3):
    if stat["mean"] is None:
        return "n/a"
    return f"{stat['mean']:.{digits}f}" + ("" if stat["se"] is None else f" ± {stat['se']:.{digits}f}")


def _zs(z):
    return "n/a" if z is None else f"{z:.1f}"


def format_summary(summary):
    """The summary as text: best H per k, diversity changes, the penalty sweep, regressions."""
    lines = ["best H per k (held-out risk, mean ± SE over seeds; z paired over seeds):"]
    for b in summary["best"]:
        lines.append(f"  {b['family']:>6} k = {b['k']:>3}: H* = {b['best_H']:>2} risk {_pm(b['best_risk'])}"
                     + (f" (vs H = {b['runner_up']}: z = {_zs(b['runner_up_z'])})" if "runner_up" in b else "")
                     + f"; NW {_pm(b['nw'])} (z = {_zs(b['nw_z'])}), least squares {_pm(b['least_squares'])},"
                     f" constant {_pm(b['constant'])}")
    lines.append("risk per (H, k) after training, and its fall over the last checkpoints (relative):")
    for c in summary["cells"]:
        g = c["last_gain"]
        lines.append(f"  {c['family']:>6} H = {c['H']:>2} k = {c['k']:>3}: {_pm(c['risk'])}; fall "
                     f"{_pm(g, 4)} (z = {_zs(g['z'])}, {100 * (g['relative'] or 0):.1f} %)")
    lines.append("diversity after training minus at initialisation (mean over k per seed; mean ± SE, z):")
    for e in summary["hdi_change"]:
        lines.append(f"  {e['family']:>6} H = {e['H']:>2}: " + "; ".join(
            f"{m} {_pm(e[m])} (z = {_zs(e[m]['z'])})" for m in METRICS[1:]))
    if summary["penalty"]:
        lines.append("penalty sweep (end of training; z against lambda = 0):")
        for p in summary["penalty"]:
            lines.append(f"  {p['family']:>6} H = {p['H']} k = {p['k']} lambda = {p['penalty']:g}: " + "; ".join(
                f"{m} {_pm(p[m])}" + ("" if p[m]["vs_zero_z"] is None else f" (z = {_zs(p[m]['vs_zero_z'])})")
                for m in METRICS))
    lines.append(f"slope of risk on diversity ({summary['regression_method']}):")
    for r in summary["regressions"]:
        ci = "n/a" if r["ci"] is None else f"[{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]"
        slope = "n/a" if r["slope"] is None else f"{r['slope']:.3f}"
        lines.append(f"  {r['family']:>6} {r['design']:>12} {r['x']:>11}: slope {slope}, 95 % {ci} "
                     f"(z = {_zs(r['z'])}, {r['n_obs']} rows, {r['n_clusters']} seeds, within-SD of x "
                     f"{'n/a' if r['x_sd'] is None else format(r['x_sd'], '.3f')})")
    return "\n".join(lines)


# --- the sweep ----------------------------------------------------------------------------

def run_sweep(size="small", *, seed=20260521, device="cpu", out=None, resume=False, overrides=None,
              command=None, log=print):
    """Run the trained-heads sweep, alone or as one rank of many.

    As :func:`mhacore.sweeps.run_sweep`: units ``(family, H, k, λ, block)`` shared by the ranks,
    the report rewritten by rank 0 after every round, ``resume`` keeping the finished units of a
    report of this sweep made with the same settings (:class:`mhacore.sweeps.ResumeRefused`
    otherwise, the file untouched); with :func:`settings`, :func:`run_unit` and :func:`summarise`
    of this module. Each run's entry in ``runs`` records the machine
    (:func:`mhacore.distributed.describe`, provenance) and its wall seconds.

    Examples
    --------
    >>> r = run_sweep("tiny", overrides={"heads": [2], "prompt_lengths": [4], "penalty_length": 4,
    ...                                  "seeds": 2, "steps": 2}, log=None)
    >>> [(b["k"], b["best_H"]) for b in r["summary"]["best"]]
    [(4, 2)]
    """
    from . import sweeps

    s = settings(size, seed=seed, overrides=overrides)
    spec = sweeps.Sweep("trained-heads", plan=plan_units, key=unit_key, unit=run_unit, summarise=summarise,
                        option_names=OPTION_NAMES, unit_problem=unit_problem)
    return sweeps.run_units(spec, s, device=device, out=out, resume=resume, command=command, log=log)


REPORT = Path(__file__).resolve().parents[1] / "reports" / "sweep-trained-heads.json"


def load_report(path=None) -> dict:
    """The trained-heads report at ``path``; default the committed ``reports/`` file."""
    from .sweeps import load_report as load

    return load(REPORT if path is None else path)
