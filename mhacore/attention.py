"""Multi-head attention as an ensemble of Nadaraya–Watson heads (claim C1 of ``MATH.md``).

Head ``h`` projects queries and keys with ``w_query[h], w_key[h]`` of shape
``(p, d_head)`` and is a softmax NW smoother in the projected space (claim C0). Standard
multi-head attention concatenates heads and applies an output map; it is a convex ensemble
``f̂ = Σ_h α_h f̂_h`` only when each head's value/output path reduces to a scalar multiple
``α_h`` of one read-out of the responses, with ``α`` in the simplex. :class:`MultiHeadNW` is
that restricted model; :meth:`MultiHeadNW.from_torch` and :meth:`MultiHeadNW.to_torch`
convert to and from ``torch.nn.MultiheadAttention`` with the restricted value/output path.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from ._validation import as_tensors, check_float_dtype, check_positive, check_simplex, concrete, restore
from .nw import _fused_width, nw_estimate, nw_weights

__all__ = ["MultiHeadNW"]


class MultiHeadNW:
    """An ensemble of ``H`` softmax NW heads with mixing weights ``alpha`` (claim C1).

    Parameters
    ----------
    w_query, w_key : array_like of shape (H, p, d_head)
        Query and key projections of every head (torch tensors are stored as given; other
        input is copied to float64; cast to the data's device and dtype at each call).
    alpha : array_like of shape (H,), optional
        Mixing weights in the simplex (the sum may miss 1 by 1e-8 or by the rounding of
        alpha's own dtype, whichever is larger); default uniform ``1/H``. A torch tensor is
        kept as given, so gradients reach it through :meth:`__call__`, and is checked again
        at each call (it may have changed in place since).
    temperature : float, optional
        Softmax temperature > 0; default ``sqrt(d_head)`` (standard attention). A tensor
        that requires grad is refused: gradients do not flow to the temperature.

    Attributes
    ----------
    n_heads, p, d_head : int
    alpha : numpy.ndarray or torch.Tensor of shape (H,)
        Float64 numpy, or the torch tensor given.
    temperature : float

    Notes
    -----
    Autograd: with torch data, gradients flow to the queries, keys and values, to torch
    ``w_query``/``w_key`` and to a torch ``alpha``, on every computation path of
    :func:`mhacore.nw_estimate`. With numpy data the result is numpy, so a parameter that
    requires grad is refused (``TypeError``) rather than silently cut from the graph.

    Raises
    ------
    ValueError
        ``w_query`` and ``w_key`` not 3-D, of different shapes, empty or non-finite;
        ``alpha`` outside the simplex or not of length ``H``; bad temperature.

    Examples
    --------
    Two identical heads give the single-head estimate; here the query sits midway between
    two keys, so every head returns the mean of the two values:

    >>> import numpy as np
    >>> w = np.ones((2, 1, 1))
    >>> model = MultiHeadNW(w, w)
    >>> model(np.array([[0.0]]), np.array([[-1.0], [1.0]]), np.array([2.0, 4.0]))
    array([3.])
    """

    def __init__(self, w_query, w_key, *, alpha=None, temperature=None):
        (wq, wk), is_torch = as_tensors({"w_query": w_query, "w_key": w_key}, {"w_query": 3, "w_key": 3})
        for name, w in (("w_query", wq), ("w_key", wk)):
            if w.ndim != 3:
                raise ValueError(f"{name} must have shape (n_heads, p, d_head); got {tuple(w.shape)}")
        if wq.shape != wk.shape:
            raise ValueError(
                f"w_query and w_key must have the same shape (n_heads, p, d_head); got {tuple(wq.shape)} and {tuple(wk.shape)}"
            )
        # a torch tensor is kept as given (gradients reach it); anything else is copied, so
        # later changes to the caller's array cannot change the model behind its checks
        self.w_query = wq if isinstance(w_query, torch.Tensor) else wq.to(torch.float64, copy=True)
        self.w_key = wk if isinstance(w_key, torch.Tensor) else wk.to(torch.float64, copy=True)
        self.n_heads, self.p, self.d_head = wq.shape  # (H, p, d_head)
        checked = check_simplex(alpha, self.n_heads)  # float64 numpy; a tensor is kept as given
        self.alpha = alpha if isinstance(alpha, torch.Tensor) else np.array(checked, dtype=np.float64)
        temperature = check_positive(temperature, "temperature", allow_none=True)
        self.temperature = math.sqrt(self.d_head) if temperature is None else temperature

    def __repr__(self):
        return f"MultiHeadNW(n_heads={self.n_heads}, p={self.p}, d_head={self.d_head}, temperature={self.temperature:g})"

    def _validate(self, queries, keys, values=None):
        """Check the data and convert it to torch: queries (..., m, p), keys (..., n, p)."""
        arrays = {"queries": queries, "keys": keys}
        if values is not None:
            arrays["values"] = values
        tensors, is_torch = as_tensors(arrays, {"queries": 2, "keys": 2, "values": 1})
        if not is_torch:
            for name in ("w_query", "w_key", "alpha"):
                param = getattr(self, name)
                if isinstance(param, torch.Tensor) and param.requires_grad:
                    raise TypeError(f"{name} requires grad, so queries, keys and values must be torch tensors "
                                    "for gradients to flow (numpy data give a numpy result); got numpy data")
        for name, x in zip(("queries", "keys"), tensors):
            if x.shape[-1] != self.p:
                raise ValueError(f"{name} must have p = {self.p} features (last dimension); got {x.shape[-1]}")
        return (*tensors, None)[:3], is_torch

    def _project(self, x, weights, width=None):
        """Per-head projections ``(..., L, p) -> (..., H, L, width)`` of queries or keys.

        ``width`` (default ``d_head``) larger than ``d_head`` appends zero columns to the
        weights (dot products unchanged): the width at which SDPA's fused kernel takes its
        inputs, so the projected keys need no padded copy later.
        """
        w = weights.to(device=x.device, dtype=x.dtype)  # (H, p, d_head)
        if width is not None and width > self.d_head:
            w = F.pad(w, (0, width - self.d_head))  # (H, p, width)
        projected = torch.einsum("...lp,hpk->...hlk", x, w)  # (..., H, L, width)
        seen = concrete(projected).detach()  # under torch.func.vmap: the values underneath
        if not math.isfinite(float(seen.sum())) and not bool(torch.isfinite(seen).all()):
            # finite data and weights (checked) whose products overflow: say so, not "non-finite data"
            which, name = ("queries", "w_query") if weights is self.w_query else ("keys", "w_key")
            dtype = str(x.dtype).removeprefix("torch.")
            raise ValueError(f"{which} projected by {name} overflow {dtype}: finite entries whose products exceed "
                             f"{float(torch.finfo(x.dtype).max):.3g} (largest |entry| "
                             f"{float(x.detach().abs().max()):.3g} in {which}, {float(w.detach().abs().max()):.3g} "
                             f"in {name}); rescale the data or the projections")
        return projected

    def weights(self, queries, keys):
        """Per-head NW weights.

        Parameters
        ----------
        queries : array_like of shape (..., m, p)
        keys : array_like of shape (..., n, p)

        Returns
        -------
        weights : array of shape (..., H, m, n)
            Rows sum to 1; kind, device and dtype follow ``queries``.
        """
        (queries, keys, _), is_torch = self._validate(queries, keys)
        q, k = self._project(queries, self.w_query), self._project(keys, self.w_key)  # (..., H, ., d_head)
        return restore(nw_weights(q, k, temperature=self.temperature), is_torch)

    def head_estimates(self, queries, keys, values, *, chunk_size=None, higher_order=False):
        """Every head's NW estimate (claim C0 per head).

        Parameters
        ----------
        queries : array_like of shape (..., m, p)
        keys : array_like of shape (..., n, p)
        values : array_like of shape (..., n)
            Scalar responses; leading dimensions (e.g. Monte Carlo replicates) broadcast
            with those of ``queries`` and ``keys`` (shared keys ``(n, p)`` with values
            ``(R, n)`` give ``(R, H, m)``).
        chunk_size : int, optional
            Passed to :func:`mhacore.nw_estimate`.
        higher_order : bool
            Passed to :func:`mhacore.nw_estimate`: paths that torch differentiates to every
            order (ask for it before a second derivative; on by itself in ``torch.func``).

        Returns
        -------
        head_estimates : array of shape (..., H, m)
        """
        (queries, keys, values), is_torch = self._validate(queries, keys, values)
        if values.shape[-1] != keys.shape[-2]:
            raise ValueError(f"values must have one entry per key (n = {keys.shape[-2]}); got {values.shape[-1]}")
        try:
            batch = torch.broadcast_shapes(queries.shape[:-2], keys.shape[:-2], values.shape[:-1])
        except RuntimeError:
            raise ValueError(
                f"leading (batch) dimensions must broadcast; got queries {tuple(queries.shape[:-2])}, "
                f"keys {tuple(keys.shape[:-2])}, values {tuple(values.shape[:-1])}"
            ) from None
        if queries.ndim == 2 and keys.ndim == 2 and values.ndim > 1:
            # Queries and keys shared by every replicate (a fixed design): the weights are the
            # same for all of them, so the replicates ride along as value columns and each
            # head's kernel is evaluated once instead of once per replicate.
            q, k = self._project(queries, self.w_query), self._project(keys, self.w_key)  # (H, ., d_head)
            columns = values.reshape(-1, values.shape[-1]).transpose(0, 1)  # (n, B)
            estimates = nw_estimate(q, k, columns.unsqueeze(0), temperature=self.temperature,
                                    chunk_size=chunk_size, higher_order=higher_order)  # (H, m, B)
            estimates = estimates.permute(2, 0, 1).reshape(*batch, *estimates.shape[:2])  # (..., H, m)
            return restore(estimates, is_torch)
        width = _fused_width(self.d_head, queries.device, queries.dtype) if chunk_size is None else None
        q = self._project(queries, self.w_query, width)  # (..., H, m, width)
        k = self._project(keys, self.w_key, width)  # (..., H, n, width)
        q = q.expand(*batch, *q.shape[-3:])  # (*batch, H, m, width): stride-0 views, no copies
        k = k.expand(*batch, *k.shape[-3:])  # (*batch, H, n, width)
        values = values.expand(*batch, values.shape[-1]).unsqueeze(-2)  # (*batch, 1, n): shared by the heads
        estimates = nw_estimate(q, k, values, temperature=self.temperature, chunk_size=chunk_size,
                                higher_order=higher_order)
        return restore(estimates, is_torch)  # (..., H, m)

    def __call__(self, queries, keys, values, *, chunk_size=None, higher_order=False):
        """The ensemble ``Σ_h α_h f̂_h``: array of shape (..., m) (claim C1).

        ``chunk_size`` and ``higher_order`` as in :meth:`head_estimates`.
        """
        if isinstance(self.alpha, torch.Tensor):  # kept as given: it may have changed in place
            check_simplex(self.alpha.detach(), self.n_heads)
        heads = self.head_estimates(queries, keys, values, chunk_size=chunk_size,
                                    higher_order=higher_order)  # (..., H, m)
        if isinstance(heads, np.ndarray):
            alpha = self.alpha.detach().to("cpu", torch.float64).numpy() if isinstance(self.alpha, torch.Tensor) \
                else self.alpha  # via float64: numpy has no bfloat16
            return np.einsum("h,...hm->...m", alpha.astype(heads.dtype), heads)
        alpha = torch.as_tensor(self.alpha).to(dtype=heads.dtype, device=heads.device)  # keeps alpha's graph
        return torch.einsum("h,...hm->...m", alpha, heads)  # (..., m)

    @classmethod
    def from_torch(cls, mha: torch.nn.MultiheadAttention, *, alpha=None):
        """Read the query/key projections of a ``torch.nn.MultiheadAttention``.

        The torch module is a convex NW ensemble only under claim C1's restriction: its
        value/output path must map the responses to ``Σ_h α_h · head_h`` (e.g. the value
        projection copies the response into one channel per head and the output projection
        mixes those channels with weights ``α``; see :meth:`to_torch`). Only the
        query/key part is read here; ``alpha`` is given separately.

        Parameters
        ----------
        mha : torch.nn.MultiheadAttention
            With ``kdim == embed_dim`` and zero (or no) input-projection biases, so that
            every head is a pure softmax NW smoother with temperature ``sqrt(d_head)``.
        alpha : array_like of shape (H,), optional

        Returns
        -------
        MultiHeadNW
            Float64 numpy projections of shape ``(H, embed_dim, d_head)``.

        Raises
        ------
        TypeError
            If ``mha`` is not a ``torch.nn.MultiheadAttention``.
        ValueError
            Separate key dimension or non-zero query/key biases.
        """
        if not isinstance(mha, torch.nn.MultiheadAttention):
            raise TypeError(f"mha must be a torch.nn.MultiheadAttention; got {type(mha).__name__}")
        if not mha._qkv_same_embed_dim:
            raise ValueError(f"mha must have kdim == vdim == embed_dim = {mha.embed_dim}; got kdim={mha.kdim}")
        n_heads, d_head, p = mha.num_heads, mha.head_dim, mha.embed_dim
        weight = mha.in_proj_weight.detach().double().cpu()  # (3 p, p): rows q | k | v
        bias = mha.in_proj_bias
        query_key_bias = None if bias is None else bias.detach()[: 2 * p]  # (2 p,)
        if query_key_bias is not None and not bool(torch.isfinite(query_key_bias).all()):
            bad = int((~torch.isfinite(query_key_bias)).sum())
            raise ValueError("mha must have finite, zero query/key biases (in_proj_bias[:2*embed_dim]); "
                             f"got {bad} NaN/inf entries")
        if query_key_bias is not None and bool((query_key_bias != 0).any()):
            raise ValueError("mha must have zero query/key biases (in_proj_bias[:2*embed_dim]); got non-zero entries")
        w_query = weight[:p].reshape(n_heads, d_head, p).transpose(1, 2)  # (H, p, d_head)
        w_key = weight[p : 2 * p].reshape(n_heads, d_head, p).transpose(1, 2)  # (H, p, d_head)
        return cls(w_query.numpy(), w_key.numpy(), alpha=alpha)

    def to_torch(self, dtype=torch.float64) -> torch.nn.MultiheadAttention:
        """Build the restricted ``torch.nn.MultiheadAttention`` of claim C1.

        Queries and keys go through this model's projections; the value projection copies
        channel 0 of the value input (the response) into channel 0 of every head; the output
        projection writes ``Σ_h α_h · head_h`` to output channel 0 (other channels are 0).
        So ``mha(queries, keys, V)[0][..., 0]`` equals ``self(queries, keys, y)`` when
        ``V[..., 0] = y``. Requires ``p == n_heads * d_head`` (torch's ``embed_dim``) and the
        default temperature ``sqrt(d_head)``.

        Examples
        --------
        >>> import numpy as np, torch
        >>> rng = np.random.default_rng(0)
        >>> model = MultiHeadNW(rng.normal(size=(2, 4, 2)), rng.normal(size=(2, 4, 2)))
        >>> x, y = rng.normal(size=(5, 4)), rng.normal(size=5)
        >>> values = np.zeros((5, 4)); values[:, 0] = y
        >>> t = lambda a: torch.tensor(a)[None]  # (1, len, p), batch_first
        >>> out = model.to_torch()(t(x[:3]), t(x), t(values), need_weights=False)[0][0, :, 0]
        >>> bool(np.allclose(out.detach().numpy(), model(x[:3], x, y)))
        True
        """
        dtype = check_float_dtype(dtype)
        p, n_heads, d_head = self.p, self.n_heads, self.d_head
        if p != n_heads * d_head:
            raise ValueError(f"to_torch needs p == n_heads * d_head = {n_heads * d_head}; got p = {p}")
        if not math.isclose(self.temperature, math.sqrt(d_head)):
            raise ValueError(f"to_torch needs temperature = sqrt(d_head) = {math.sqrt(d_head):g}; got {self.temperature:g}")
        mha = torch.nn.MultiheadAttention(p, n_heads, bias=True, batch_first=True, dtype=dtype)
        with torch.no_grad():
            w_value = torch.zeros(n_heads, d_head, p, dtype=dtype)  # (H, d_head, p)
            w_value[:, 0, 0] = 1.0
            w_out = torch.zeros(p, n_heads, d_head, dtype=dtype)  # (p, H, d_head)
            w_out[0, :, 0] = torch.as_tensor(self.alpha).detach().to(dtype=dtype, device="cpu")
            wq = self.w_query.detach().to(dtype).cpu().transpose(1, 2).reshape(p, p)  # (H d_head, p)
            wk = self.w_key.detach().to(dtype).cpu().transpose(1, 2).reshape(p, p)  # (H d_head, p)
            mha.in_proj_weight.copy_(torch.cat([wq, wk, w_value.reshape(p, p)]))
            mha.in_proj_bias.zero_()
            mha.out_proj.weight.copy_(w_out.reshape(p, p))
            mha.out_proj.bias.zero_()
        return mha

