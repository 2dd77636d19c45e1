"""Head diversity: principal angles, cross-Gram blocks and the Head Diversity Index (C3).

``MATH.md`` claim C3: with ``U_h`` an orthonormal basis of ``col(w_key[h])``, the singular
values of ``G_{hh'} = U_hᵀ U_h'`` are the cosines of the principal angles between the key
subspaces of heads ``h`` and ``h'``, and

    HDI = 1 − (1 / (H (H−1) d_head)) Σ_{h≠h'} ‖G_{hh'}‖_F²  ∈ [0, 1],

0 when all subspaces coincide and 1 when they are mutually orthogonal. The seed paper's
normalisation ``(W_K^h)ᵀ W_K^{h'} / d_head`` on raw matrices does not keep HDI in [0, 1];
the orthonormal form is used here. Frame-potential bound:
``HDI ≤ 1 − max(0, H d_head / p − 1) / (H − 1)``.

Everything here works on small matrices, in float64 numpy (torch inputs are converted),
except :func:`head_diversity_indices` and :func:`random_subspace_hdis`, which batch many
configurations into torch calls on any device.
"""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits
import torch

from ._validation import as_tensors, check_device, check_int

__all__ = ["principal_angles", "cross_gram", "head_diversity_index", "max_feasible_hdi",
           "head_diversity_indices", "random_subspace_hdis", "rotation_family"]


def _float64(arrays: dict, ndims: dict):
    """Validate named arrays and return float64 numpy copies plus whether torch came in."""
    tensors, is_torch = as_tensors(arrays, ndims)
    return [t.detach().cpu().double().numpy() for t in tensors], is_torch


def _orthonormal_basis(matrix: np.ndarray, name: str) -> np.ndarray:
    """Gram–Schmidt basis (p, k) of the columns of a full-column-rank (p, k) matrix (QR).

    Signs are fixed so that ``R`` has a positive diagonal: the basis is unique.
    """
    q, r = np.linalg.qr(matrix)  # (p, k), (k, k)
    s = np.linalg.svd(r, compute_uv=False)  # singular values of ``matrix``
    tol = max(matrix.shape) * np.finfo(np.float64).eps * s[0]
    if s[0] == 0 or s[-1] <= tol:
        raise ValueError(
            f"{name} must have full column rank {matrix.shape[1]}; got singular values down to {s[-1]:.3g} "
            f"(tolerance {tol:.3g})"
        )
    signs = np.where(np.diag(r) < 0, -1.0, 1.0)
    return q * signs  # (p, k)


def principal_angles(a, b):
    """Principal angles between the column spaces of ``a`` and ``b``, ascending (claim C3).

    Cosines come from the SVD of ``U_aᵀ U_b``; angles whose cosine² ≥ 1/2 are recomputed
    from sines (the SVD of the component of one basis orthogonal to the other), SciPy's
    ``subspace_angles`` branch, so nearly aligned subspaces keep full relative accuracy
    (a plain ``arccos`` cannot resolve angles below ~1e-8).

    Parameters
    ----------
    a : array_like of shape (p, k1)
    b : array_like of shape (p, k2)
        Both of full column rank.

    Returns
    -------
    angles : array of shape (min(k1, k2),)
        Radians in [0, π/2], ascending; float64 numpy (torch in gives a float64 CPU tensor).

    Raises
    ------
    ValueError
        Not 2-D, different numbers of rows, NaN/inf or empty entries, rank deficiency.
    TypeError
        A tensor that requires grad while grad mode is on: the angles are computed in
        float64 NumPy and carry no gradient, so they would silently be cut from the graph
        (pass ``a.detach()``, or call under ``torch.no_grad()``).

    Examples
    --------
    >>> import numpy as np
    >>> principal_angles(np.eye(3)[:, :2], np.array([[1.0], [1.0], [0.0]])) / np.pi
    array([0.])
    >>> np.round(principal_angles(np.eye(2)[:, :1], np.array([[1.0], [1.0]])) / np.pi, 12)
    array([0.25])
    """
    for name, x in (("a", a), ("b", b)):
        if isinstance(x, torch.Tensor) and x.requires_grad and torch.is_grad_enabled():
            raise TypeError(f"{name} requires grad, but principal_angles returns no gradient (it computes in "
                            f"float64 NumPy); pass {name}.detach() or call it under torch.no_grad()")
    (a, b), is_torch = _float64({"a": a, "b": b}, {"a": 2, "b": 2})
    for name, x in (("a", a), ("b", b)):
        if x.ndim != 2:
            raise ValueError(f"{name} must have shape (p, k); got {x.shape}")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"a and b must have the same number of rows p; got {a.shape[0]} and {b.shape[0]}")
    for name, x in (("a", a), ("b", b)):
        if x.shape[1] > x.shape[0]:  # more columns than rows: never of full column rank
            raise ValueError(f"{name} must have full column rank, so at most p = {x.shape[0]} columns; "
                             f"got shape {x.shape}")
    basis_a, basis_b = _orthonormal_basis(a, "a"), _orthonormal_basis(b, "b")
    if basis_a.shape[1] < basis_b.shape[1]:
        basis_a, basis_b = basis_b, basis_a  # basis_b is now the narrower one
    gram = basis_a.T @ basis_b  # (k_wide, k_narrow)
    cosines = np.linalg.svd(gram, compute_uv=False)  # descending, min(k1, k2)
    residual = basis_b - basis_a @ gram  # (p, k_narrow): part of b orthogonal to col(a)
    sines = np.linalg.svd(residual, compute_uv=False)[::-1]  # ascending
    angles = np.where(
        cosines**2 >= 0.5,
        np.arcsin(np.clip(sines, 0.0, 1.0)),
        np.arccos(np.clip(cosines, 0.0, 1.0)),
    )
    angles = np.sort(angles)
    if is_torch:
        return torch.from_numpy(angles)
    return angles


def cross_gram(w_key):
    """Cross-Gram blocks ``G_{hh'} = U_hᵀ U_h'`` of orthonormalised key bases (claim C3).

    Parameters
    ----------
    w_key : array_like of shape (H, p, d_head)
        Key projections, each of full column rank ``d_head ≤ p``.

    Returns
    -------
    gram : numpy.ndarray of shape (H, H, d_head, d_head)
        ``gram[h, h]`` is the identity; singular values of ``gram[h, g]`` are the cosines
        of the principal angles between heads ``h`` and ``g``.

    Raises
    ------
    ValueError
        Not 3-D, ``d_head > p``, NaN/inf or empty entries, a rank-deficient head.

    Examples
    --------
    >>> import numpy as np
    >>> w = np.stack([np.eye(2)[:, :1], np.eye(2)[:, 1:]])  # (2, 2, 1): orthogonal heads
    >>> cross_gram(w)[:, :, 0, 0]
    array([[1., 0.],
           [0., 1.]])
    """
    (w_key,), _ = _float64({"w_key": w_key}, {"w_key": 3})
    if w_key.ndim != 3:
        raise ValueError(f"w_key must have shape (n_heads, p, d_head); got {w_key.shape}")
    n_heads, p, d_head = w_key.shape
    if d_head > p:
        raise ValueError(f"w_key must have d_head <= p (a d_head-dimensional subspace of R^p); got d_head={d_head}, p={p}")
    # many small factorisations: a multithreaded BLAS only adds contention (10x slower on a busy machine)
    with threadpool_limits(1, user_api="blas"):
        bases = np.stack([_orthonormal_basis(w, f"w_key[{h}]") for h, w in enumerate(w_key)])  # (H, p, d_head)
    return np.einsum("hpi,gpj->hgij", bases, bases)  # (H, H, d_head, d_head)


def head_diversity_index(w_key) -> float:
    """Head Diversity Index of key subspaces (claim C3): 0 identical, 1 mutually orthogonal.

    ``HDI = 1 − Σ_{h≠h'} ‖G_{hh'}‖_F² / (H (H−1) d_head)``, i.e. one minus the mean squared
    cosine of the principal angles over ordered head pairs. Invariant to a change of basis
    within each head (``w_key[h] @ R`` for invertible ``R``).

    Parameters
    ----------
    w_key : array_like of shape (H, p, d_head)
        Key projections, ``H ≥ 2``, each of full column rank.

    Returns
    -------
    float
        In [0, 1] (clipped against rounding).

    Raises
    ------
    ValueError
        ``H < 2`` and everything :func:`cross_gram` rejects.

    Examples
    --------
    >>> import numpy as np
    >>> head_diversity_index(np.stack([np.eye(4)[:, :2], np.eye(4)[:, 2:]]))  # orthogonal planes
    1.0
    >>> head_diversity_index(np.stack([np.eye(3)[:, :2]] * 3))  # identical heads
    0.0
    """
    gram = cross_gram(w_key)  # (H, H, d_head, d_head)
    n_heads, _, d_head, _ = gram.shape
    if n_heads < 2:
        raise ValueError(f"w_key must hold n_heads >= 2 heads for a diversity index; got {n_heads}")
    squared = np.einsum("hgij,hgij->hg", gram, gram)  # (H, H): ‖G_hg‖_F²
    off_diagonal = squared.sum() - np.trace(squared)
    hdi = 1.0 - off_diagonal / (n_heads * (n_heads - 1) * d_head)
    return float(np.clip(hdi, 0.0, 1.0))


def max_feasible_hdi(n_heads: int, d_head: int, p: int) -> float:
    """Frame-potential upper bound on the HDI (claim C3); not always attained.

    ``Σ_{h≠h'} ‖G_{hh'}‖_F² ≥ (H d_head)²/p − H d_head`` gives
    ``HDI ≤ 1 − max(0, H d_head / p − 1) / (H − 1)``; HDI = 1 needs ``H d_head ≤ p``.
    The bound is an upper bound: for ``H d_head > p`` it is attained iff a tight fusion frame
    with these parameters exists (``Σ_h U_hU_hᵀ = (H d_head/p) I``; e.g. a union of orthonormal
    bases when ``d_head`` divides ``p`` and ``p`` divides ``H d_head``). For ``H = 2``,
    ``d_head = 2``, ``p = 3`` it returns 2/3, but two planes in R³ share a line, so the largest
    achievable HDI is 1/2.

    Parameters
    ----------
    n_heads : int
        ``H ≥ 2``.
    d_head : int
        ``1 ≤ d_head ≤ p``.
    p : int
        Ambient dimension ``≥ 1``.

    Returns
    -------
    float in [0, 1]
        The upper bound (the largest HDI any configuration can have is at most this).

    Examples
    --------
    >>> max_feasible_hdi(4, 2, 8), max_feasible_hdi(12, 32, 384), max_feasible_hdi(3, 2, 4)
    (1.0, 1.0, 0.75)
    """
    n_heads = check_int(n_heads, "n_heads", minimum=2)
    d_head = check_int(d_head, "d_head")
    p = check_int(p, "p")
    if d_head > p:
        raise ValueError(f"d_head must be <= p = {p}; got {d_head}")
    return 1.0 - max(0.0, n_heads * d_head / p - 1.0) / (n_heads - 1)


def head_diversity_indices(w_keys, *, device="cpu", chunk_size=None) -> np.ndarray:
    """HDI of many head configurations at once, by batched QR on a torch device.

    The same number as :func:`head_diversity_index` for each configuration, computed
    without a Python loop: one batched QR gives every head's basis ``U_h``, and the
    off-diagonal sum is ``‖UᵀU‖_F² − H d_head`` with ``U = [U_1 … U_H]`` (or ``‖UUᵀ‖_F²``
    when ``p < H d_head``, the same number), since each ``U_hᵀU_h`` is the identity.

    Parameters
    ----------
    w_keys : array_like of shape (R, H, p, d_head)
        ``R`` configurations of key projections, ``H ≥ 2``, ``d_head ≤ p``, each head
        of full column rank.
    device : str
        Torch device of the computation (float64), e.g. ``"cpu"`` or ``"cuda"``.
    chunk_size : int, optional
        Configurations per batched call; default keeps each call near 2^24 numbers.

    Returns
    -------
    numpy.ndarray of shape (R,)
        In [0, 1] (clipped against rounding).

    Raises
    ------
    ValueError
        Not 4-D, ``H < 2``, ``d_head > p``, NaN/inf, or a rank-deficient head (named by
        its configuration and head index).

    Examples
    --------
    >>> import numpy as np
    >>> planes = np.stack([np.eye(4)[:, :2], np.eye(4)[:, 2:]])  # (2, 4, 2), orthogonal
    >>> head_diversity_indices(np.stack([planes, planes[[0, 0]]]))
    array([1., 0.])
    """
    device = check_device(device)
    (w_keys,), _ = as_tensors({"w_keys": w_keys}, {"w_keys": 4})
    if w_keys.ndim != 4:  # more than 4 dimensions
        raise ValueError(f"w_keys must have shape (R, n_heads, p, d_head); got {tuple(w_keys.shape)}")
    n_conf, n_heads, p, d_head = w_keys.shape
    if n_heads < 2:
        raise ValueError(f"w_keys must hold n_heads >= 2 heads for a diversity index; got {n_heads}")
    if d_head > p:
        raise ValueError(f"w_keys must have d_head <= p; got d_head={d_head}, p={p}")
    width = min(p, n_heads * d_head)
    step = (check_int(chunk_size, "chunk_size") if chunk_size is not None
            else max(1, (1 << 24) // (width * width + n_heads * p * d_head)))
    out = np.empty(n_conf)
    # many small factorisations: on a CPU one thread each is faster on a busy machine
    threads = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(1)
    try:
        _batched_hdi(w_keys, out, step, device)
    finally:
        torch.set_num_threads(threads)
    return out


def _batched_hdi(w_keys, out, step, device):
    """Fill ``out`` (R,) with the HDI of ``w_keys`` (R, H, p, d_head), ``step`` at a time."""
    n_conf, n_heads, p, d_head = w_keys.shape
    for r0 in range(0, n_conf, step):
        w = w_keys[r0:r0 + step].to(device=device, dtype=torch.float64)  # (c, H, p, d)
        q, r = torch.linalg.qr(w)  # (c, H, p, d), (c, H, d, d)
        s = torch.linalg.svdvals(r)  # (c, H, d), descending
        tol = max(p, d_head) * np.finfo(np.float64).eps * s[..., 0]  # (c, H)
        bad = (s[..., 0] == 0) | (s[..., -1] <= tol)
        if bool(bad.any()):
            c, h = (int(i) for i in torch.nonzero(bad)[0])
            raise ValueError(f"w_keys[{r0 + c}, {h}] must have full column rank {d_head}; "
                             f"got singular values down to {float(s[c, h, -1]):.3g}")
        u = q.permute(0, 2, 1, 3).reshape(-1, p, n_heads * d_head)  # (c, p, H d)
        gram = u @ u.transpose(1, 2) if p < n_heads * d_head else u.transpose(1, 2) @ u
        off = (gram**2).sum((1, 2)) - n_heads * d_head  # (c,)
        hdi = 1.0 - off / (n_heads * (n_heads - 1) * d_head)
        out[r0:r0 + len(w)] = hdi.clamp(0.0, 1.0).cpu().numpy()


def random_subspace_hdis(n_draws, n_heads, d_head, p, rng=None, *, device="cpu"):
    """HDI of ``n_draws`` independent Haar-random configurations (claim C3 baseline).

    Draws the Gaussian matrices of :func:`mhacore.optimize.random_subspaces` from ``rng``
    in the same order (``n_draws`` calls give the same numbers), chunk by chunk, and
    hands them to :func:`head_diversity_indices` (the HDI of a configuration depends on
    the spanned subspaces only, so orthonormalising first changes nothing but rounding).

    Examples
    --------
    >>> hdis = random_subspace_hdis(50, 4, 2, 16, rng=0)
    >>> hdis.shape, bool(abs(hdis.mean() - (1 - 2 / 16)) < 0.02)
    ((50,), True)
    """
    from ._rng import as_generator

    n_draws, n_heads = check_int(n_draws, "n_draws"), check_int(n_heads, "n_heads", minimum=2)
    d_head, p = check_int(d_head, "d_head"), check_int(p, "p")
    gen = as_generator(rng)
    step = max(1, (1 << 22) // (n_heads * p * d_head))
    return np.concatenate([
        head_diversity_indices(gen.standard_normal((min(step, n_draws - r0), n_heads, p, d_head)),
                               device=device)
        for r0 in range(0, n_draws, step)])


def rotation_family(theta: float, n_heads: int, d_head: int, p: int, rng=None) -> np.ndarray:
    """``H`` heads ``U_h(θ) = cos θ E_0 + sin θ E_h`` with ``E_0, E_1, …, E_H`` orthonormal blocks.

    At ``θ = 0`` all heads coincide (HDI = 0); at ``θ = π/2`` they are mutually orthogonal
    (HDI = 1); in between ``‖U_hᵀU_h'‖²_F = d_head cos⁴θ``, so ``HDI = 1 − cos⁴θ``. Every
    ``U_h(θ)`` is orthonormal. Needs ``p ≥ (H + 1) d_head``; ``rng`` draws a random rotation
    of the whole configuration (``None``: the coordinate blocks).
    """
    if p < (n_heads + 1) * d_head:
        raise ValueError(f"p must be >= (n_heads + 1) * d_head = {(n_heads + 1) * d_head}; got {p}")
    if rng is None:
        rotation = np.eye(p)
    else:
        rotation, _ = np.linalg.qr(np.random.default_rng(rng).standard_normal((p, p)))
    blocks = [rotation[:, d_head * b: d_head * (b + 1)] for b in range(n_heads + 1)]
    return np.stack([np.cos(theta) * blocks[0] + np.sin(theta) * blocks[h + 1]
                     for h in range(n_heads)])  # (H, p, d_head)
