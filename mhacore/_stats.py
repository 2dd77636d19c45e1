"""The standard error of a Monte Carlo mean, shared by the registry and the models."""

from __future__ import annotations

import numpy as np

__all__ = ["standard_error"]


def standard_error(terms) -> float:
    """Standard error of the mean of per-replicate terms: ``std(ddof=1) / √R``.

    Examples
    --------
    >>> standard_error([1.0, 3.0])  # std 1.414..., two replicates
    1.0
    """
    terms = np.asarray(terms, dtype=np.float64)  # (R,)
    return float(terms.std(ddof=1) / np.sqrt(len(terms)))
