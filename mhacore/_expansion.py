"""How accurate Gaussian logits are when expanded as a dot product.

``‖q̃ − k̃‖² = ‖q̃‖² − 2⟨q̃,k̃⟩ + ‖k̃‖²`` is the form the fused kernels (SDPA on the CPU,
:mod:`mhacore.nw_triton` on CUDA) can compute, but it loses accuracy when the norms are
large against the distances. Both :mod:`mhacore.nw` and :mod:`mhacore.nw_triton` ask
:func:`_expansion_is_accurate` before they take that path, so it lives below both.
"""

from __future__ import annotations

import torch

__all__ = ["GAUSSIAN_LOGIT_TOL", "GAUSSIAN_LOGIT_TOL32"]

GAUSSIAN_LOGIT_TOL = 1e-8  # largest tolerated rounding error of a Gaussian logit (float64 expansion)
# float32 expansion (CUDA): a logit error δ moves an estimate by at most (e^{2δ} − 1)·max|v|, so
# δ ≤ 2e-6 keeps it within 4e-6 relative, inside float32's 1e-5 target with room for the rest
GAUSSIAN_LOGIT_TOL32 = 2e-6


def _expansion_is_accurate(max_q_sq, max_k_sq, scale: float, d: int, dtype=torch.float64) -> bool:
    """Whether logits from ``‖q̃‖² − 2⟨q̃,k̃⟩ + ‖k̃‖²`` computed in ``dtype`` are accurate enough.

    Rounding of a length-``d`` dot product and of the sums around it: at most about
    ``(2d + 16)·eps·scale·(max‖q̃‖² + max‖k̃‖²)`` with ``eps`` of ``dtype``; tolerated up to
    GAUSSIAN_LOGIT_TOL in float64 and GAUSSIAN_LOGIT_TOL32 in float32 (a worst-case bound:
    typical errors are far smaller, so it refuses some inputs the expansion would handle).
    """
    tolerance = GAUSSIAN_LOGIT_TOL32 if dtype == torch.float32 else GAUSSIAN_LOGIT_TOL
    eps = float(torch.finfo(dtype).eps)
    return (2 * d + 16) * eps * scale * float(torch.as_tensor(max_q_sq + max_k_sq).detach()) <= tolerance
