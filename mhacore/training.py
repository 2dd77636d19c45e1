"""Trained attention: one multi-head attention layer learns in-context regression.

Earlier chapters read attention heads as Nadaraya–Watson smoothers with *given*
projections; here they are *trained* (the setting of Garg et al., 2022). A prompt is
``(x_1, y_1, ..., x_k, y_k, x_query)`` with ``x ~ N(0, I_d)``, ``y = f(x) + noise`` and
``f`` drawn afresh per prompt from a family (:class:`Task`); the layer predicts ``y_query``.

The model (:func:`predict`), one per seed: tokens ``(x, y, flag)`` in ``R^(d+2)``, a
context token ``(x_i, y_i, 0)`` and the query token ``(x_query, 0, 1)`` (response unknown,
flag set), embedded by ``embed`` ``(d + 2, d_model)``; ``n_heads`` heads of width
``d_head = d_model / n_heads`` with ``w_query[h]``, ``w_key[h]``, ``w_value[h]``
``(d_model, d_head)``; the query attends to the ``k`` context tokens only,
``weights = softmax(⟨q, k_i⟩ / sqrt(d_head))``; the heads go through ``w_out``
(torch's ``out_proj`` on the concatenated heads) and a ``readout`` vector to a scalar.
No biases: ``torch.nn.MultiheadAttention(bias=False)`` between two bias-free ``Linear`` maps.

Without biases the prediction is a sum over heads, ``ŷ = Σ_h c_h``, with
``c_h = Σ_i weights_hi u_hi`` and scalar values ``u_hi = e_i w_value[h] w_out[h] readout``:
each trained head is an NW smoother of its own read-out of the context (claim C0), the
layer an ensemble of them with unit weights (:func:`head_outputs`). The same algebra folds
the layer into token space (:func:`_folded`): ``logit_hi = z_iᵀ A_h z_q`` with a
``(d+1, d+2)`` matrix ``A_h`` per head, and ``u_hi = z_i · u_h``. Training evaluates it so,
with an order of magnitude fewer operations than projecting every token to ``d_model``
(same function and gradients; the tests compare with ``torch.nn.MultiheadAttention``).

All ``S`` seeds of a configuration train in one tensor program: every parameter has a
leading seed dimension, the forward pass is batched ``einsum``, the objective is the *sum*
of the seeds' losses (each seed's gradient is its own) and ``torch.optim.Adam``, which is
elementwise, updates them seed by seed in one call.

Randomness comes from the seed alone (``DESIGN.md``, rule 7): seed ``s`` draws its initial
parameters from ``replicate_rng(s, 0)``, its training prompts from ``replicate_rng(s, 1)``
(step after step) and held-out prompts from ``replicate_rng(s, 2)``, each through a CPU
``torch.Generator``; numbers are drawn on the CPU, then cast and moved, so they do not
depend on the other seeds, the dtype, the device or the world size.

Diversity penalty ``λ·P`` (after Li et al., 2018, "Multi-head attention with disagreement
regularization", on key subspaces): ``P`` is the mean over ordered head pairs of
``‖U_hᵀ U_h'‖_F² / d_head``, ``U_h`` an orthonormal (QR) basis of ``col(w_key[h])``, i.e.
``P = 1 − HDI`` of :func:`mhacore.diversity.head_diversity_index` (claim C3); differentiable.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from ._rng import replicate_rng, torch_generator
from ._validation import check_device, check_float_dtype, check_int, check_nonnegative, check_positive
from .nw import nw_estimate, nw_weights

__all__ = ["FAMILIES", "Task", "TrainConfig", "Prompts", "AttentionParams", "TrainResult", "prompt_stream", "sample_prompts",
           "init_params", "predict", "head_outputs", "attention_weights", "projections", "diversity_penalty", "token_keys", "test_risk", "train", "training_seeds",
           "baseline_predictions", "baseline_risks"]

FAMILIES = ("linear", "smooth")
#: Where the diversity penalty measures the heads (:class:`TrainConfig` ``penalty_space``).
PENALTY_SPACES = ("keys", "tokens")
INIT_STREAM, TRAIN_STREAM, TEST_STREAM = 0, 1, 2


@dataclass(frozen=True)
class Task:
    """A family of in-context regression prompts.

    Parameters
    ----------
    family : {"linear", "smooth"}
        ``"linear"``: ``f(x) = w·x`` with ``w ~ N(0, I_d / d)``. ``"smooth"``: random
        Fourier features ``f(x) = sqrt(2/M) Σ_m a_m cos(ω_m·x + b_m)`` with ``a_m ~ N(0, 1)``,
        ``ω_m ~ N(0, I_d / ℓ²)``, ``b_m ~ U(0, 2π)``: a draw from an approximate Gaussian
        process with the Gaussian kernel of length-scale ``ℓ``. Both have ``Var f(x) = 1``.
    x_dim : int
        ``d``, the dimension of ``x``.
    n_context : int
        ``k``, the number of (x, y) pairs before the query.
    noise : float
        Standard deviation of the Gaussian noise added to every ``y`` (query included).
    length_scale : float, optional
        ``ℓ`` of the smooth family; default ``sqrt(x_dim)`` (points ``x ~ N(0, I_d)`` are
        about ``sqrt(2d)`` apart, so ``f`` varies on the scale of the data).
    n_features : int
        ``M``, the number of random features of the smooth family.

    Examples
    --------
    >>> Task("smooth", x_dim=4).length_scale
    2.0
    """

    family: str = "linear"
    x_dim: int = 8
    n_context: int = 32
    noise: float = 0.0
    length_scale: float | None = None
    n_features: int = 64

    def __post_init__(self):
        if not isinstance(self.family, str):
            raise TypeError(f"family must be one of {FAMILIES}; got {type(self.family).__name__} {self.family!r}")
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {FAMILIES}; got {self.family!r}")
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen)
        set_("x_dim", check_int(self.x_dim, "x_dim"))
        set_("n_context", check_int(self.n_context, "n_context"))
        set_("noise", check_nonnegative(self.noise, "noise"))
        set_("n_features", check_int(self.n_features, "n_features"))
        scale = math.sqrt(self.x_dim) if self.length_scale is None else self.length_scale
        set_("length_scale", check_positive(scale, "length_scale"))


@dataclass(frozen=True)
class TrainConfig:
    """One model configuration and its optimisation (the book's defaults).

    Parameters
    ----------
    task : Task
    d_model : int
        Embedding width, a multiple of ``n_heads``.
    n_heads : int
    batch_size : int
        Fresh prompts per seed and step.
    steps : int
        Adam steps (>= 0).
    lr : float
        Adam's learning rate (betas (0.9, 0.999), eps 1e-8: torch's defaults).
    penalty : float
        ``λ >= 0``, weight of the diversity penalty (:func:`diversity_penalty`); ``λ > 0``
        needs ``n_heads >= 2``.
    penalty_space : {"keys", "tokens"}
        Where the penalty measures the heads' key subspaces: ``"keys"``, the columns of
        ``w_key[h]`` in ``R^d_model`` (the paper's HDI); ``"tokens"``, the token-space maps
        ``embed[:d+1] @ w_key[h]`` in ``R^(d+1)`` that the logits read (:func:`token_keys`;
        needs ``d_head <= d + 1``).

    Examples
    --------
    >>> TrainConfig(d_model=32, n_heads=4).d_head
    8
    """

    task: Task = Task()
    d_model: int = 32
    n_heads: int = 4
    batch_size: int = 64
    steps: int = 50
    lr: float = 1e-2
    penalty: float = 0.0
    penalty_space: str = "keys"

    def __post_init__(self):
        if not isinstance(self.task, Task):
            raise TypeError(f"task must be a Task; got {type(self.task).__name__}")
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen)
        set_("d_model", check_int(self.d_model, "d_model"))
        set_("n_heads", check_int(self.n_heads, "n_heads"))
        set_("batch_size", check_int(self.batch_size, "batch_size"))
        set_("steps", check_int(self.steps, "steps", minimum=0))
        set_("lr", check_positive(self.lr, "lr"))
        set_("penalty", check_nonnegative(self.penalty, "penalty"))
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model must be a multiple of n_heads = {self.n_heads}; got {self.d_model}")
        if self.penalty_space not in PENALTY_SPACES:
            raise ValueError(f"penalty_space must be one of {PENALTY_SPACES}; got {self.penalty_space!r}")
        if self.penalty_space == "tokens" and self.d_head > self.task.x_dim + 1:
            raise ValueError(f"penalty_space 'tokens' needs d_head <= x_dim + 1 = {self.task.x_dim + 1}; "
                             f"got d_head = {self.d_head}")
        if self.penalty > 0 and self.n_heads < 2:
            raise ValueError(f"n_heads must be >= 2 for a diversity penalty (penalty = {self.penalty}); got 1")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads


class Prompts(NamedTuple):
    """A batch of prompts for ``S`` seeds: ``B`` prompts each of ``k`` pairs and a query."""

    x_context: torch.Tensor  # (S, B, k, d)
    y_context: torch.Tensor  # (S, B, k)
    x_query: torch.Tensor  # (S, B, d)
    y_query: torch.Tensor  # (S, B)


class AttentionParams(NamedTuple):
    """Parameters of ``S`` attention models (one per seed), leading dimension ``S``."""

    embed: torch.Tensor  # (S, d + 2, d_model): token (x, y, flag) -> embedding
    w_query: torch.Tensor  # (S, H, d_model, d_head)
    w_key: torch.Tensor  # (S, H, d_model, d_head)
    w_value: torch.Tensor  # (S, H, d_model, d_head)
    w_out: torch.Tensor  # (S, H, d_head, d_model)
    readout: torch.Tensor  # (S, d_model)


@dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes
    ----------
    config : TrainConfig
    seeds : tuple of int
    losses : numpy.ndarray of shape (S, steps)
        Each seed's mean squared error on its batch at each step, before that step's update.
    penalties : numpy.ndarray of shape (S, steps)
        The diversity penalty ``P = 1 − HDI`` of the keys at each step (recorded also when
        ``config.penalty`` is 0).
    checkpoints : dict of int to AttentionParams
        Parameters after ``t`` updates (``0``: the initialisation), detached copies.
    """

    config: TrainConfig
    seeds: tuple
    losses: np.ndarray
    penalties: np.ndarray
    checkpoints: dict

    @property
    def params(self) -> AttentionParams:
        """The final parameters (the checkpoint at ``config.steps``)."""
        return self.checkpoints[self.config.steps]


def _check_seeds(seeds) -> tuple:
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__len__") or not hasattr(seeds, "__iter__"):
        raise TypeError(f"seeds must be a sequence of integers >= 0; got {type(seeds).__name__} {seeds!r}")
    if len(seeds) == 0:
        raise ValueError("seeds must be a non-empty sequence of integers >= 0; got an empty sequence")
    return tuple(check_int(s, f"seeds[{i}]", minimum=0) for i, s in enumerate(seeds))


def _draw(task: Task, generators, n_prompts: int) -> Prompts:
    """Prompts (S, B, ...) in float64 on the CPU, from one CPU generator per seed.

    One call per seed draws its normals in float32 (torch's CPU sampler is 6x faster there
    than in float64: sampling would otherwise outlast the training step); ``f`` and ``y``
    are computed in float64, all seeds at once.
    """
    k, d, m, n_seeds = task.n_context, task.x_dim, task.n_features, len(generators)
    sizes = [n_prompts * (k + 1) * d, n_prompts * (k + 1)]  # x, noise
    sizes += [n_prompts * d] if task.family == "linear" else [n_prompts * m * d, n_prompts * m]  # w | omega, a
    normals = torch.empty(n_seeds, sum(sizes), dtype=torch.float32)  # (S, total)
    uniforms = torch.empty(n_seeds, n_prompts, 1, m, dtype=torch.float32)  # (S, B, 1, M): phases (smooth)
    for s, gen in enumerate(generators):  # the draws only; the models never loop over seeds
        torch.randn(sum(sizes), generator=gen, out=normals[s])
        if task.family == "smooth":
            torch.rand(uniforms.shape[1:], generator=gen, out=uniforms[s])
    parts = normals.to(torch.float64).split(sizes, dim=1)
    x = parts[0].view(n_seeds, n_prompts, k + 1, d)  # (S, B, k+1, d): context, then query
    if task.family == "linear":
        w = parts[2].view(n_seeds, n_prompts, d) / math.sqrt(d)  # (S, B, d)
        f = (x * w[:, :, None]).sum(-1)  # (S, B, k+1); a batched matrix-vector product is slower
    else:
        omega = parts[2].reshape(n_seeds * n_prompts, m, d) / task.length_scale  # (S B, M, d)
        a = parts[3].reshape(n_seeds * n_prompts, m, 1)  # (S B, M, 1)
        phase = 2 * math.pi * uniforms.to(torch.float64).view(n_seeds * n_prompts, 1, m)  # (S B, 1, M)
        features = torch.baddbmm(phase, x.reshape(-1, k + 1, d), omega.transpose(1, 2)).cos_()  # (S B, k+1, M)
        f = math.sqrt(2 / m) * (features @ a).view(n_seeds, n_prompts, k + 1)  # (S, B, k+1)
    y = f + task.noise * parts[1].view(n_seeds, n_prompts, k + 1)  # (S, B, k+1)
    return Prompts(x[:, :, :k], y[:, :, :k], x[:, :, k], y[:, :, k])


def _to(prompts: Prompts, dtype, device) -> Prompts:
    return Prompts(*(t.to(device=device, dtype=dtype) for t in prompts))  # a cast or move copies


def prompt_stream(task, seeds, n_prompts, *, stream=TRAIN_STREAM, dtype=torch.float64, device="cpu"):
    """An endless iterator of prompt batches; seed ``s`` draws from ``replicate_rng(s, stream)`` alone.

    Parameters
    ----------
    task : Task
    seeds : sequence of int
        ``S`` seeds (>= 0).
    n_prompts : int
        ``B``, prompts per seed and batch.
    stream : int
        1 (default) is what :func:`train` draws from, its ``t``-th batch being step ``t``'s
        prompts; 2 is the held-out stream of :func:`sample_prompts`; 0 initialises
        :func:`init_params`; any other integer is a fresh stream.
    dtype : float32 or float64
    device : str or torch.device

    Returns
    -------
    iterator of Prompts
        ``x_context (S, B, k, d)``, ``y_context (S, B, k)``, ``x_query (S, B, d)``,
        ``y_query (S, B)``, drawn on the CPU (float32 normals; ``f``, ``y`` in float64),
        then cast and moved: the same numbers on every device.

    Examples
    --------
    >>> batches = prompt_stream(Task(x_dim=3, n_context=5), seeds=[0, 1], n_prompts=4)
    >>> first, second = next(batches), next(batches)
    >>> tuple(first.x_context.shape), bool(torch.equal(first.x_query, second.x_query))
    ((2, 4, 5, 3), False)
    >>> alone = next(prompt_stream(Task(x_dim=3, n_context=5), seeds=[1], n_prompts=4))
    >>> bool(torch.equal(alone.x_query[0], first.x_query[1]))
    True
    """
    if not isinstance(task, Task):
        raise TypeError(f"task must be a Task; got {type(task).__name__}")
    seeds, n_prompts = _check_seeds(seeds), check_int(n_prompts, "n_prompts")
    stream, dtype, device = check_int(stream, "stream", minimum=0), check_float_dtype(dtype), check_device(device)
    generators = [torch_generator(replicate_rng(s, stream)) for s in seeds]

    def batches():
        while True:
            yield _to(_draw(task, generators, n_prompts), dtype, device)

    return batches()


def sample_prompts(task, seeds, n_prompts, *, stream=TEST_STREAM, dtype=torch.float64, device="cpu") -> Prompts:
    """Held-out prompts: the first batch of :func:`prompt_stream` on stream 2 (by default).

    >>> p = sample_prompts(Task(x_dim=3, n_context=5), seeds=[0, 1], n_prompts=4)
    >>> tuple(p.x_context.shape), tuple(p.y_query.shape)
    ((2, 4, 5, 3), (2, 4))
    """
    return next(prompt_stream(task, seeds, n_prompts, stream=stream, dtype=dtype, device=device))


def init_params(config, seeds, *, dtype=torch.float64, device="cpu") -> AttentionParams:
    """Initial parameters of one model per seed, from ``replicate_rng(seed, 0)``.

    Every matrix has ``N(0, 1 / fan_in)`` entries (fan-in ``d + 2`` for the embedding,
    ``d_model`` otherwise), drawn in float64 on the CPU, then cast and moved.

    Returns
    -------
    AttentionParams
        Shapes in :class:`AttentionParams`, with ``S = len(seeds)``; plain tensors (no grad).

    Examples
    --------
    >>> p = init_params(TrainConfig(Task(x_dim=2), d_model=4, n_heads=2), [5, 6])
    >>> tuple(p.embed.shape), tuple(p.w_key.shape), tuple(p.w_out.shape)
    ((2, 4, 4), (2, 2, 4, 2), (2, 2, 2, 4))
    """
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig; got {type(config).__name__}")
    seeds = _check_seeds(seeds)
    dtype, device = check_float_dtype(dtype), check_device(device)
    d_in, d_model, n_heads, d_head = config.task.x_dim + 2, config.d_model, config.n_heads, config.d_head
    shapes = [(d_in, d_model), *[(n_heads, d_model, d_head)] * 3, (n_heads, d_head, d_model), (d_model,)]
    fan_in = [d_in] + [d_model] * 5
    per_seed = []
    for s in seeds:
        gen = torch_generator(replicate_rng(s, INIT_STREAM))
        per_seed.append([torch.randn(shape, generator=gen, dtype=torch.float64) / math.sqrt(f)
                         for shape, f in zip(shapes, fan_in)])
    return AttentionParams(*(torch.stack(ts).to(device=device, dtype=dtype) for ts in zip(*per_seed)))


def _heads(params: AttentionParams, prompts: Prompts) -> torch.Tensor:
    """Each head's output at the query token, (S, H, B, d_head)."""
    d = prompts.x_context.shape[-1]
    embed = params.embed  # (S, d+2, D): rows x | y | flag
    context = (torch.einsum("sbkd,sdm->sbkm", prompts.x_context, embed[:, :d])
               + prompts.y_context[..., None] * embed[:, None, None, d])  # (S, B, k, D); flag 0
    query = torch.einsum("sbd,sdm->sbm", prompts.x_query, embed[:, :d]) + embed[:, None, d + 1]  # (S, B, D); y 0, flag 1
    queries = torch.einsum("sbm,shmj->shbj", query, params.w_query)  # (S, H, B, d_head)
    keys = torch.einsum("sbkm,shmj->shbkj", context, params.w_key)  # (S, H, B, k, d_head)
    values = torch.einsum("sbkm,shmj->shbkj", context, params.w_value)  # (S, H, B, k, d_head)
    logits = torch.einsum("shbj,shbkj->shbk", queries, keys) / math.sqrt(queries.shape[-1])  # (S, H, B, k)
    weights = torch.softmax(logits, dim=-1)  # (S, H, B, k)
    return torch.einsum("shbk,shbkj->shbj", weights, values)  # (S, H, B, d_head)


def _folded(params: AttentionParams):
    """The layer folded into token space, per seed and head (the same function as :func:`_heads`).

    A context token ``z_i = (x_i, y_i, 0)`` and the query token ``z_q = (x_q, 0, 1)`` give
    ``logit_hi = z_iᵀ A_h z_q`` with ``A_h = embed w_key[h] w_query[h]ᵀ embedᵀ / sqrt(d_head)``
    and value read-out ``u_hi = z_i · u_h`` with ``u_h = embed w_value[h] w_out[h] readout``.
    Rows of ``A`` and ``u`` for the flag (0 on context tokens) are dropped.
    """
    d = params.embed.shape[1] - 2
    embed = params.embed  # (S, d+2, D)
    keys = torch.einsum("stm,shmj->shtj", embed[:, : d + 1], params.w_key)  # (S, H, d+1, d_head)
    queries = torch.einsum("stm,shmj->shtj", embed, params.w_query)  # (S, H, d+2, d_head)
    forms = torch.einsum("shtj,shuj->shtu", keys, queries) / math.sqrt(queries.shape[-1])  # (S, H, d+1, d+2)
    read = torch.einsum("shjm,sm->shj", params.w_out, params.readout)  # (S, H, d_head)
    values = torch.einsum("stm,shmj->shtj", embed[:, : d + 1], params.w_value)  # (S, H, d+1, d_head)
    return forms, torch.einsum("shtj,shj->sht", values, read)  # (S, H, d+1, d+2), (S, H, d+1)


def _attention(params: AttentionParams, prompts: Prompts):
    """Each head's weights over the context and scalar values, (S, H, B, k) each, in token space."""
    d = prompts.x_context.shape[-1]
    forms, read = _folded(params)  # (S, H, d+1, d+2), (S, H, d+1)
    tokens = torch.cat([prompts.x_context, prompts.y_context[..., None]], dim=-1)  # (S, B, k, d+1), flag dropped
    query = torch.einsum("shtu,sbu->shbt", forms[..., :d], prompts.x_query) + forms[:, :, None, :, d + 1]  # (S, H, B, d+1)
    logits = torch.einsum("sbkt,shbt->shbk", tokens, query)  # (S, H, B, k)
    values = torch.einsum("sbkt,sht->shbk", tokens, read)  # (S, H, B, k)
    return torch.softmax(logits, dim=-1), values


def _contributions(params: AttentionParams, prompts: Prompts) -> torch.Tensor:
    """Each head's scalar share of the prediction, (S, H, B); the sum over H is the prediction.

    Evaluated in token space (:func:`_folded`): about ``d_model² / ((d+1) H)`` times fewer
    operations (28 at the book's sizes) than projecting every context token to ``d_model``
    and then to each head (:func:`_heads`), for the same function.
    """
    weights, values = _attention(params, prompts)  # (S, H, B, k) each
    return (weights * values).sum(-1)  # (S, H, B)


def attention_weights(params, prompts) -> torch.Tensor:
    """Each head's NW weights: the query token's softmax weights over the ``k`` context tokens.

    Parameters
    ----------
    params : AttentionParams
    prompts : Prompts

    Returns
    -------
    torch.Tensor of shape (S, H, B, k)
        Non-negative, summing to 1 over ``k``; :func:`head_outputs` is
        ``Σ_i weights_hi u_hi`` with these weights (claim C0).

    Examples
    --------
    >>> config = TrainConfig(Task(x_dim=2, n_context=3), d_model=4, n_heads=2)
    >>> w = attention_weights(init_params(config, [0]), sample_prompts(config.task, [0], 5))
    >>> tuple(w.shape), bool(torch.allclose(w.sum(-1), torch.ones(1, 2, 5, dtype=w.dtype)))
    ((1, 2, 5, 3), True)
    """
    _check_model_inputs(params, prompts)
    return _attention(params, prompts)[0]


def _predict(params: AttentionParams, prompts: Prompts) -> torch.Tensor:
    return _contributions(params, prompts).sum(1)  # (S, B)


def _check_model_inputs(params, prompts=None):
    """Types, shapes, dtype and device of ``params`` (and ``prompts``) agree, else raise."""
    if not isinstance(params, AttentionParams) or not all(isinstance(t, torch.Tensor) for t in params):
        raise TypeError(f"params must be an AttentionParams of torch tensors; got {type(params).__name__}")
    if params.embed.ndim != 3 or params.w_query.ndim != 4:
        raise ValueError(f"params.embed and params.w_query must have shapes (S, d+2, d_model) and (S, H, d_model, "
                         f"d_head); got {tuple(params.embed.shape)} and {tuple(params.w_query.shape)}")
    (n_seeds, d_in, d_model), (n_heads, d_head) = params.embed.shape, params.w_query.shape[1::2]
    block = (n_seeds, n_heads, d_model, d_head)
    expected = [(n_seeds, d_in, d_model), block, block, block, (n_seeds, n_heads, d_head, d_model), (n_seeds, d_model)]
    for name, t, shape in zip(AttentionParams._fields, params, expected):
        if tuple(t.shape) != shape:
            raise ValueError(f"params.{name} must have shape {shape} (see AttentionParams); got {tuple(t.shape)}")
    tensors = list(params)
    if prompts is not None:
        _check_prompts(prompts)
        if prompts.x_context.shape[0] != n_seeds or prompts.x_context.shape[-1] != d_in - 2:
            raise ValueError(f"prompts must have S = {n_seeds} seeds and x_dim = {d_in - 2} (from params); got "
                             f"x_context of shape {tuple(prompts.x_context.shape)}")
        tensors += list(prompts)
    kinds = {(t.dtype, t.device) for t in tensors}
    if len(kinds) > 1 or not tensors[0].is_floating_point():
        raise ValueError(f"params and prompts must share one floating dtype and device; got {sorted(map(str, kinds))}")


def _check_prompts(prompts) -> None:
    if not isinstance(prompts, Prompts) or not all(isinstance(t, torch.Tensor) for t in prompts):
        raise TypeError(f"prompts must be a Prompts of torch tensors; got {type(prompts).__name__}")
    xc = prompts.x_context
    if xc.ndim != 4:
        raise ValueError(f"prompts.x_context must have shape (S, B, k, d); got {tuple(xc.shape)}")
    n_seeds, n_prompts, k, d = xc.shape
    expected = {"y_context": (n_seeds, n_prompts, k), "x_query": (n_seeds, n_prompts, d), "y_query": (n_seeds, n_prompts)}
    for name, shape in expected.items():
        if tuple(getattr(prompts, name).shape) != shape:
            raise ValueError(f"prompts.{name} must have shape {shape}; got {tuple(getattr(prompts, name).shape)}")


def predict(params, prompts) -> torch.Tensor:
    """Predictions of ``y_query``, one model per seed, on that seed's prompts.

    Parameters
    ----------
    params : AttentionParams
        ``S`` models (shapes in :class:`AttentionParams`).
    prompts : Prompts
        ``x_context (S, B, k, d)`` etc., same dtype and device as ``params``.

    Returns
    -------
    torch.Tensor of shape (S, B)
        Differentiable in ``params`` and ``prompts``.

    Examples
    --------
    >>> config = TrainConfig(Task(x_dim=2, n_context=3), d_model=4, n_heads=2)
    >>> predict(init_params(config, [0]), sample_prompts(config.task, [0], 5)).shape
    torch.Size([1, 5])
    """
    _check_model_inputs(params, prompts)
    return _predict(params, prompts)


def head_outputs(params, prompts, *, vector=False) -> torch.Tensor:
    """Each head's output at the query token on ``prompts``.

    Parameters
    ----------
    params : AttentionParams
    prompts : Prompts
    vector : bool
        ``False``: each head's scalar contribution ``c_h`` to the prediction (its output
        through ``w_out[h]`` and the readout), an NW estimate with values ``u_hi``
        (module docstring); ``True``: the head's ``d_head``-vector output
        ``Σ_i weights_hi · e_i w_value[h]``.

    Returns
    -------
    torch.Tensor of shape (S, H, B), or (S, H, B, d_head) with ``vector=True``
        The scalar contributions sum over ``H`` to :func:`predict`.

    Examples
    --------
    >>> config = TrainConfig(Task(x_dim=2, n_context=3), d_model=4, n_heads=2)
    >>> params, prompts = init_params(config, [0]), sample_prompts(config.task, [0], 5)
    >>> c = head_outputs(params, prompts)
    >>> tuple(c.shape), bool(torch.allclose(c.sum(1), predict(params, prompts)))
    ((1, 2, 5), True)
    """
    _check_model_inputs(params, prompts)
    if not isinstance(vector, (bool, np.bool_)):
        raise TypeError(f"vector must be a bool; got {type(vector).__name__} {vector!r}")
    return _heads(params, prompts) if vector else _contributions(params, prompts)


def projections(params) -> tuple[np.ndarray, np.ndarray]:
    """Per-head query and key projections, as :func:`mhacore.diversity.head_diversity_index` takes them.

    Returns
    -------
    w_query, w_key : numpy.ndarray of shape (S, H, d_model, d_head)
        float64; ``w_key[s]`` is seed ``s``'s ``(H, p, d_head)`` with ``p = d_model`` (the
        space of the embeddings; ``params.embed[s] @ w_key[s]`` maps raw tokens instead).
        :func:`mhacore.diversity.head_diversity_indices` takes all seeds at once.

    Examples
    --------
    >>> from mhacore.diversity import head_diversity_index
    >>> params = init_params(TrainConfig(Task(x_dim=2), d_model=4, n_heads=2), [0])
    >>> w_query, w_key = projections(params)
    >>> w_key.shape, 0 <= head_diversity_index(w_key[0]) <= 1
    ((1, 2, 4, 2), True)
    """
    _check_model_inputs(params)
    return tuple(t.detach().to(device="cpu", dtype=torch.float64).numpy().copy() for t in (params.w_query, params.w_key))


def token_keys(params: AttentionParams) -> torch.Tensor:
    """Each head's key map from raw tokens ``(x, y)``: ``embed[:d+1] @ w_key[h]``.

    The logits read a context token's key only through this map (:func:`_folded`); the
    columns of ``w_key[h]`` outside the span of the embedding's rows never meet a token.

    Returns
    -------
    torch.Tensor of shape (S, H, d + 1, d_head)
        Differentiable (the penalty on ``"tokens"`` uses it).

    Examples
    --------
    >>> params = init_params(TrainConfig(Task(x_dim=2), d_model=8, n_heads=4), [0, 1])
    >>> tuple(token_keys(params).shape)
    (2, 4, 3, 2)
    """
    d = params.embed.shape[1] - 2
    return torch.einsum("stm,shmj->shtj", params.embed[:, : d + 1], params.w_key)  # (S, H, d+1, d_head)


def diversity_penalty(w_key) -> torch.Tensor:
    """Disagreement penalty ``P`` of key subspaces (after Li et al., 2018), differentiable.

    ``P = Σ_{h≠h'} ‖U_hᵀ U_h'‖_F² / (H (H−1) d_head)``, ``U_h`` the QR basis of
    ``col(w_key[..., h, :, :])``: the mean squared cosine of the principal angles between
    heads, ``1 − HDI`` (claim C3). 0 for mutually orthogonal heads, 1 for identical ones.

    Parameters
    ----------
    w_key : torch.Tensor of shape (..., H, d_model, d_head)
        ``H >= 2``, ``d_head <= d_model``, each head of full column rank.

    Returns
    -------
    torch.Tensor of shape (...)

    Examples
    --------
    >>> import numpy as np
    >>> from mhacore.diversity import head_diversity_index
    >>> w = torch.randn(3, 4, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    >>> bool(abs(diversity_penalty(w) - (1 - head_diversity_index(w))) < 1e-12)
    True
    """
    if not isinstance(w_key, torch.Tensor) or not w_key.is_floating_point():
        raise TypeError(f"w_key must be a floating torch tensor; got {type(w_key).__name__}")
    if w_key.ndim < 3 or w_key.shape[-3] < 2 or w_key.shape[-1] > w_key.shape[-2]:
        raise ValueError(f"w_key must have shape (..., H, d_model, d_head) with H >= 2 and d_head <= d_model; "
                         f"got {tuple(w_key.shape)}")
    n_heads, d_head = w_key.shape[-3], w_key.shape[-1]
    bases = torch.linalg.qr(w_key).Q  # (..., H, d_model, d_head)
    gram = torch.einsum("...hpi,...gpj->...hgij", bases, bases)  # (..., H, H, d_head, d_head)
    off = 1 - torch.eye(n_heads, dtype=w_key.dtype, device=w_key.device)  # (H, H)
    squared = (gram**2).sum((-1, -2)) * off  # (..., H, H): ‖G_hg‖_F², h ≠ g
    return squared.sum((-1, -2)) / (n_heads * (n_heads - 1) * d_head)


def test_risk(params, prompts) -> np.ndarray:
    """Mean squared error ``mean_b (ŷ − y_query)²`` of each seed's model on its prompts.

    Returns
    -------
    numpy.ndarray of shape (S,)
        float64.

    Examples
    --------
    >>> config = TrainConfig(Task(x_dim=2, n_context=3), d_model=4, n_heads=2)
    >>> test_risk(init_params(config, [0, 1]), sample_prompts(config.task, [0, 1], 8)).shape
    (2,)
    """
    _check_model_inputs(params, prompts)
    with torch.no_grad():
        errors = (_predict(params, prompts) - prompts.y_query) ** 2  # (S, B)
    return errors.mean(-1).to(device="cpu", dtype=torch.float64).numpy()


test_risk.__test__ = False  # not a pytest test


def _snapshot(params: AttentionParams) -> AttentionParams:
    return AttentionParams(*(t.detach().clone() for t in params))


def train(config, seeds, *, dtype=torch.float32, device="cpu", checkpoints=(0,)) -> TrainResult:
    """Train one model per seed on fresh prompts, all seeds in one tensor program.

    At each step every seed draws ``config.batch_size`` new prompts from its stream
    ``replicate_rng(seed, 1)``; the objective is ``Σ_s (MSE_s + λ·P_s)`` (``P``:
    :func:`diversity_penalty` of the keys, ``λ = config.penalty``), minimised by
    ``torch.optim.Adam`` over the batched parameters. Seed ``s`` follows the same path
    trained alone or with others (up to the rounding of batched matrix products).

    Parameters
    ----------
    config : TrainConfig
    seeds : sequence of int
        ``S`` seeds (>= 0).
    dtype : float32 or float64
    device : str or torch.device
    checkpoints : sequence of int
        Steps (in ``[0, steps]``) after which the parameters are kept; ``0`` is the
        initialisation; the final step is always kept.

    Returns
    -------
    TrainResult
        ``losses`` and ``penalties`` of shape ``(S, steps)``, ``checkpoints``.

    Examples
    --------
    >>> config = TrainConfig(Task(x_dim=2, n_context=4), d_model=4, n_heads=2, batch_size=8, steps=3)
    >>> result = train(config, [0, 1], dtype=torch.float64)
    >>> result.losses.shape, sorted(result.checkpoints)
    ((2, 3), [0, 3])
    """
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig; got {type(config).__name__}")
    seeds = _check_seeds(seeds)
    dtype, device = check_float_dtype(dtype), check_device(device)
    if isinstance(checkpoints, (str, bytes, numbers.Number)) or not hasattr(checkpoints, "__iter__"):
        raise TypeError(f"checkpoints must be a sequence of integers; got {type(checkpoints).__name__} {checkpoints!r}")
    keep = {check_int(t, "checkpoints", minimum=0) for t in checkpoints} | {config.steps}
    if max(keep) > config.steps:
        raise ValueError(f"checkpoints must lie in [0, steps = {config.steps}]; got {max(keep)}")
    params = AttentionParams(*(t.requires_grad_() for t in init_params(config, seeds, dtype=dtype, device=device)))
    optimizer = torch.optim.Adam(params, lr=config.lr)
    batches = prompt_stream(config.task, seeds, config.batch_size, stream=TRAIN_STREAM, dtype=dtype, device=device)
    losses, penalties, saved = [], [], {}
    for step in range(config.steps):
        if step in keep:
            saved[step] = _snapshot(params)
        prompts = next(batches)  # (S, B, ...): fresh prompts, each seed from its own stream
        mse = ((_predict(params, prompts) - prompts.y_query) ** 2).mean(-1)  # (S,)
        with torch.set_grad_enabled(config.penalty > 0):  # otherwise only recorded
            keys = params.w_key if config.penalty_space == "keys" else token_keys(params)
            penalty = diversity_penalty(keys) if config.n_heads > 1 else torch.full_like(mse, math.nan)  # (S,)
        objective = mse.sum() + (config.penalty * penalty.sum() if config.penalty > 0 else 0)  # each seed's gradient is its own
        optimizer.zero_grad(set_to_none=True)
        objective.backward()
        optimizer.step()
        losses.append(mse.detach())
        penalties.append(penalty.detach())
    saved[config.steps] = _snapshot(params)
    history = lambda xs: (torch.stack(xs, 1).to("cpu", torch.float64).numpy() if xs  # noqa: E731
                          else np.empty((len(seeds), 0)))  # (S, steps)
    return TrainResult(config, seeds, history(losses), history(penalties), dict(sorted(saved.items())))


def baseline_predictions(prompts, *, bandwidths=None) -> dict:
    """Predictions of three classical estimators on the same prompts, in float64.

    * ``"least_squares"``: ``x_query · w`` with ``w = pinv(X) y`` on the context, the
      minimum-norm least-squares fit (the interpolating minimum-norm solution when k < d);
    * ``"nw"``: Gaussian NW smoother (:func:`mhacore.nw_estimate`) whose bandwidth is
      chosen per prompt by leave-one-out squared error on its context over ``bandwidths``;
    * ``"constant"``: the mean of the context responses.

    Parameters
    ----------
    prompts : Prompts
    bandwidths : sequence of float, optional
        Default ``sqrt(d) · 2^j`` for ``j = -3, -2.5, ..., 3``.

    Returns
    -------
    dict of str to torch.Tensor of shape (S, B)
        float64, on the prompts' device.

    Examples
    --------
    >>> p = sample_prompts(Task(x_dim=2, n_context=6), [0], 3)
    >>> pred = baseline_predictions(p)
    >>> bool(torch.allclose(pred["least_squares"], p.y_query))  # noiseless linear, k > d
    True
    """
    _check_prompts(prompts)
    xc, yc, xq, _ = (t.detach().to(torch.float64) for t in prompts)
    d = xc.shape[-1]
    grid = math.sqrt(d) * 2.0 ** np.arange(-3, 3.01, 0.5) if bandwidths is None else bandwidths
    if isinstance(grid, (str, bytes)) or not hasattr(grid, "__len__") or len(grid) == 0:
        raise TypeError(f"bandwidths must be a non-empty sequence of numbers > 0; got {bandwidths!r}")
    grid = [check_positive(h, "bandwidths") for h in grid]
    w = torch.linalg.pinv(xc) @ yc[..., None]  # (S, B, d, 1): minimum-norm least squares
    out = {"least_squares": (xq[..., None, :] @ w)[..., 0, 0], "constant": yc.mean(-1)}  # (S, B) each
    loo, at_query = [], []
    for h in grid:
        weights = nw_weights(xc, xc, kernel="gaussian", bandwidth=h)  # (S, B, k, k)
        off = weights * (1 - torch.eye(xc.shape[-2], dtype=xc.dtype, device=xc.device))  # leave point i out
        mass = off.sum(-1)  # (S, B, k)
        fitted = (off @ yc[..., None])[..., 0] / mass  # (S, B, k): leave-one-out estimates
        error = ((fitted - yc) ** 2).mean(-1)  # (S, B)
        loo.append(torch.where((mass > 0).all(-1), error, torch.inf))  # every neighbour underflowed: unusable
        at_query.append(nw_estimate(xq[..., None, :], xc, yc, kernel="gaussian", bandwidth=h)[..., 0])  # (S, B)
    best = torch.stack(loo).argmin(0)  # (S, B): index into the grid
    out["nw"] = torch.stack(at_query).gather(0, best[None])[0]  # (S, B)
    return {name: out[name] for name in ("least_squares", "nw", "constant")}


def baseline_risks(prompts, *, bandwidths=None) -> dict:
    """Risk ``mean_b (ŷ − y_query)²`` of each baseline of :func:`baseline_predictions`.

    Returns
    -------
    dict of str to numpy.ndarray of shape (S,)
        Keys ``"least_squares"``, ``"nw"``, ``"constant"``; float64.

    Examples
    --------
    >>> p = sample_prompts(Task(x_dim=2, n_context=6), [0, 1], 50)
    >>> risks = baseline_risks(p)
    >>> bool((risks["least_squares"] < 1e-20).all()), bool((risks["constant"] > 0.1).all())
    (True, True)
    """
    y = prompts.y_query.detach().to(torch.float64) if isinstance(prompts, Prompts) else None
    return {name: ((pred - y) ** 2).mean(-1).cpu().numpy()
            for name, pred in baseline_predictions(prompts, bandwidths=bandwidths).items()}


def training_seeds(seed, count):
    """The training seeds of sweep seeds ``0 .. count - 1``: a function of ``(seed, j)`` alone.

    Seed ``j`` is the first 32-bit word of ``SeedSequence(seed, spawn_key=(j,))``, the seed that
    :func:`train` takes; sweeps with different ``seed`` share no model.

    >>> training_seeds(0, 3) == training_seeds(0, 5)[:3]
    True
    """
    seed, count = check_int(seed, "seed", minimum=0), check_int(count, "count")
    return [int(np.random.SeedSequence(seed, spawn_key=(j,)).generate_state(1)[0]) for j in range(count)]
