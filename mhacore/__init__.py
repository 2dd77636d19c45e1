"""mhacore: multi-head attention as an ensemble of Nadaraya–Watson estimators.

The companion package of the book; notation and claims (C0–C7) follow ``MATH.md``.
Data flow: ``nw`` (C0) → ``attention`` (C1) → ``diversity`` (C3) and ``decomposition`` (C2)
→ ``montecarlo``.
"""

__version__ = "0.1.0"

from .nw import nw_estimate, nw_weights
from .attention import MultiHeadNW
from .diversity import cross_gram, head_diversity_index, max_feasible_hdi, principal_angles
from .decomposition import (
    BiasVarianceCovariance,
    bias_variance_covariance,
    design_covariance,
    design_decomposition,
)
from .montecarlo import DataModel, simulate_decomposition, simulate_heads

__all__ = [
    "__version__",
    "nw_weights",
    "nw_estimate",
    "MultiHeadNW",
    "principal_angles",
    "cross_gram",
    "head_diversity_index",
    "max_feasible_hdi",
    "BiasVarianceCovariance",
    "bias_variance_covariance",
    "design_covariance",
    "design_decomposition",
    "DataModel",
    "simulate_heads",
    "simulate_decomposition",
]
