"""Chapter 2 checks: one attention head is a Nadaraya–Watson estimator (claim C0).

* ``head-is-nw``: softmax attention with values = responses equals NW with the exponential
  dot-product kernel; mhacore, torch's ``scaled_dot_product_attention``, a one-head
  ``torch.nn.MultiheadAttention`` with the restricted value/output path, and a plain numpy
  formula agree in float64.
* ``gaussian-equal-norms``: when all keys have the same norm, the same head equals Gaussian
  NW with bandwidth ``sqrt(temperature)``; checked against mhacore's Gaussian kernel and
  statsmodels' ``KernelReg`` (local-constant, Gaussian product kernel).

Both are exact identities: the tolerance is float64 rounding (``atol``), not a standard
error. Data set ``r`` is drawn from ``replicate_rng(seed, r)`` (child ``r`` of
``SeedSequence(seed).spawn``, as before the checks were sharded), and under ``torchrun``
the ranks share the data sets.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
import torch.nn.functional as F

from .. import distributed
from ..nw import nw_estimate
from ._registry import Measurement, register

__all__ = ["head_data", "explicit_softmax_nw", "sdpa_head", "torch_mha_head", "kernelreg_head"]

ATOL = 1e-12  # float64 rounding of sums of n <= 1000 terms of size O(1)
SETTINGS = {"book": dict(n=200, m=50, d_head=4, repeats=3), "large": dict(n=1000, m=400, d_head=8, repeats=10)}


def head_data(n, m, d_head, *, equal_norms, rng=None, radius=2.0):
    """Queries (m, d), keys (n, d) and responses (n,) for one head, in float64.

    With ``equal_norms`` every key lies on the sphere of the given radius; otherwise the
    keys are standard normal, each scaled by a uniform factor in [0.5, 1.5], so their norms
    vary widely.
    """
    rng = np.random.default_rng(rng)
    keys = rng.standard_normal((n, d_head))
    if equal_norms:
        keys *= radius / np.linalg.norm(keys, axis=1, keepdims=True)
    else:
        keys *= rng.uniform(0.5, 1.5, size=(n, 1))
    queries = rng.standard_normal((m, d_head))
    values = np.sin(keys @ np.arange(1, d_head + 1) / d_head) + 0.3 * rng.standard_normal(n)
    return queries, keys, values


def explicit_softmax_nw(queries, keys, values, temperature):
    """The NW formula written out in numpy: ``Σ_i exp(⟨q,k_i⟩/τ) y_i / Σ_j exp(⟨q,k_j⟩/τ)``."""
    logits = queries @ keys.T / temperature  # (m, n)
    kernel = np.exp(logits - logits.max(axis=1, keepdims=True))  # (m, n)
    return kernel @ values / kernel.sum(axis=1)


def sdpa_head(queries, keys, values, temperature):
    """torch's scaled_dot_product_attention with values = responses, as (m,) numpy."""
    q, k = (torch.as_tensor(a)[None, None] for a in (queries, keys))  # (1, 1, len, d)
    v = torch.as_tensor(values)[None, None, :, None]  # (1, 1, n, 1)
    return F.scaled_dot_product_attention(q, k, v, scale=1.0 / temperature)[0, 0, :, 0].numpy()


def torch_mha_head(queries, keys, values):
    """A one-head ``torch.nn.MultiheadAttention`` with identity query/key projections.

    Restricted value/output path (claim C1 with H = 1): the value projection copies input
    channel 0, which carries the response, and the output projection reads channel 0. The
    temperature is torch's own, ``sqrt(embed_dim)``.
    """
    d = queries.shape[1]
    mha = torch.nn.MultiheadAttention(d, 1, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        copy_first = torch.zeros(d, d, dtype=torch.float64)
        copy_first[0, 0] = 1.0
        mha.in_proj_weight.copy_(torch.cat([torch.eye(d, dtype=torch.float64)] * 2 + [copy_first]))
        mha.in_proj_bias.zero_()
        mha.out_proj.weight.copy_(copy_first)
        mha.out_proj.bias.zero_()
    value_input = np.zeros_like(keys)
    value_input[:, 0] = values
    t = lambda a: torch.as_tensor(a)[None]  # noqa: E731  (1, len, d), batch_first
    out, _ = mha(t(queries), t(keys), t(value_input), need_weights=False)
    return out[0, :, 0].detach().numpy()


def kernelreg_head(queries, keys, values, bandwidth):
    """statsmodels' local-constant ``KernelReg`` with a Gaussian kernel of the given bandwidth."""
    from statsmodels.nonparametric.kernel_regression import KernelReg

    d = keys.shape[1]
    with warnings.catch_warnings():  # statsmodels' notice about its future default random state
        warnings.simplefilter("ignore", FutureWarning)
        model = KernelReg(values, keys, var_type="c" * d, reg_type="lc", bw=[bandwidth] * d)
        return model.fit(queries)[0]


def _max_gap(reference, others):
    return max(float(np.max(np.abs(np.asarray(o) - reference))) for o in others)


@register(
    "head-is-nw",
    kind="identity",
    claim_id="C0",
    title="One softmax attention head is a Nadaraya–Watson estimator",
    chapter="02-one-head-is-nw",
    claim="Softmax attention with values = responses is NW with kernel exp(<q,k>/τ): mhacore, torch SDPA, "
          "torch nn.MultiheadAttention (one head, restricted value/output path) and the explicit formula agree.",
    symbolic="SymPy: exp(<q,k>/τ) = exp(-|q-k|²/(2τ))·exp(|q|²/(2τ))·exp(|k|²/(2τ)); the query factor cancels.",
    caveat="Values must be the responses (restricted value/output path); exact identity, float64 rounding.",
)
@distributed.sharded  # its data sets are shared by the ranks
def _check_head(scale, device, seed):
    s = SETTINGS[scale]
    temperature = math.sqrt(s["d_head"])
    def data_set(r):  # data set r from replicate_rng(seed, r), norms equal when r is even
        queries, keys, values = head_data(s["n"], s["m"], s["d_head"], equal_norms=r % 2 == 0,
                                          rng=distributed.replicate_rng(seed, r))
        reference = explicit_softmax_nw(queries, keys, values, temperature)
        t = lambda a: torch.as_tensor(a, device=device)  # noqa: E731
        ours = nw_estimate(t(queries), t(keys), t(values), kernel="softmax", temperature=temperature).cpu().numpy()
        return _max_gap(reference, [ours, sdpa_head(queries, keys, values, temperature),
                                    torch_mha_head(queries, keys, values)])

    gap = max(distributed.map_items(data_set, 2 * s["repeats"]))
    return Measurement(estimate=gap, prediction=0.0, rule="atol", atol=ATOL,
                       details=dict(n=s["n"], m=s["m"], d_head=s["d_head"], temperature=temperature,
                                    data_sets=2 * s["repeats"], compared="mhacore, SDPA, nn.MultiheadAttention"))


@register(
    "gaussian-equal-norms",
    kind="identity",
    claim_id="C0",
    title="With equal key norms a softmax head is Gaussian NW with bandwidth sqrt(τ)",
    chapter="02-one-head-is-nw",
    claim="If all keys have the same norm, softmax NW with temperature τ equals Gaussian NW with bandwidth √τ "
          "(d_k^(1/4) for τ = √d_k); mhacore and statsmodels KernelReg agree.",
    symbolic="SymPy: factorisation of exp(<q,k>/τ), cancellation of the query factor, key factor constant.",
    caveat="Needs equal key norms (normalised keys); with unequal norms each key carries the extra weight "
           "exp(|k|²/(2τ)) and the Gaussian reading fails.",
)
@distributed.sharded  # its data sets are shared by the ranks
def _check_gaussian(scale, device, seed):
    s = SETTINGS[scale]
    temperature = math.sqrt(s["d_head"])
    bandwidth = math.sqrt(temperature)
    def data_set(r):  # data set r from replicate_rng(seed, r)
        queries, keys, values = head_data(s["n"], s["m"], s["d_head"], equal_norms=True,
                                          rng=distributed.replicate_rng(seed, r))
        t = lambda a: torch.as_tensor(a, device=device)  # noqa: E731
        softmax = nw_estimate(t(queries), t(keys), t(values), kernel="softmax", temperature=temperature)
        gaussian = nw_estimate(t(queries), t(keys), t(values), kernel="gaussian", bandwidth=bandwidth)
        reference = softmax.cpu().numpy()
        return _max_gap(reference, [gaussian.cpu().numpy(), kernelreg_head(queries, keys, values, bandwidth)])

    gap = max(distributed.map_items(data_set, s["repeats"]))
    return Measurement(estimate=gap, prediction=0.0, rule="atol", atol=ATOL,
                       details=dict(n=s["n"], m=s["m"], d_head=s["d_head"], temperature=temperature,
                                    bandwidth=bandwidth, data_sets=s["repeats"],
                                    compared="softmax NW vs mhacore Gaussian NW and statsmodels KernelReg"))
