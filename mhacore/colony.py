"""A stylised model of ant-colony scouting: a colony as an ensemble of scouts (claim C7).

``MATH.md`` claim C7 (one principle, three ensembles).  The model is *inspired by*
nest-site assessment in *Temnothorax albipennis* (scouts find and assess a candidate site,
and recruit nestmates by tandem runs); it is not a faithful model of ant behaviour.

Each colony sends ``N`` scouts to one site of quality ``q``.  One leader, the site's
discoverer, has an assessment error ``L ~ N(0, s²)``.  Scout ``i`` is recruited by the
leader with probability ``π`` (``B_i ~ Bernoulli(π)``) and then adopts the leader's
assessment; otherwise it assesses the site on its own with error ``E_i ~ N(0, s²)``.  Every
scout adds its own re-assessment noise ``δ_i ~ N(0, s_δ²)``:

    A_i = q + B_i L + (1 − B_i) E_i + δ_i,      all draws independent.

The scouts are exchangeable with variance ``σ² = s² + s_δ²`` and pairwise correlation
``ρ = π² s² / (s² + s_δ²)``, so the colony's collective estimate ``mean_i A_i`` has
variance ``ρσ² + (1 − ρ)σ²/N`` (Breiman's form).
"""

from __future__ import annotations

import math

import numpy as np

from ._rng import as_generator
from ._validation import check_int, check_nonnegative, check_positive, check_probability, check_real

__all__ = ["scout_moments", "colony_variance", "simulate_assessments"]


def scout_moments(recruit_prob, assessment_sd=1.0, reassess_sd=0.0):
    """Variance of one scout's assessment and the correlation of two scouts.

    Parameters
    ----------
    recruit_prob : float in [0, 1]
        ``π``, the probability that a scout is recruited by the leader.
    assessment_sd : float > 0
        ``s``, the standard deviation of an assessment error (leader's or independent).
    reassess_sd : float >= 0
        ``s_δ``, the standard deviation of each scout's own re-assessment noise.

    Returns
    -------
    variance, correlation : float
        ``σ² = s² + s_δ²`` and ``ρ = π² s² / (s² + s_δ²)``.

    Raises
    ------
    TypeError, ValueError
        A probability outside [0, 1] or a non-finite / non-positive standard deviation.

    Examples
    --------
    >>> scout_moments(0.5, 1.0, 0.5)
    (1.25, 0.2)
    """
    pi = check_probability(recruit_prob, "recruit_prob")
    s = check_positive(assessment_sd, "assessment_sd")
    s_d = check_nonnegative(reassess_sd, "reassess_sd")
    return _variance(s, s_d), pi * pi * _share(s, s_d)


def _share(s: float, s_d: float) -> float:
    """``s² / (s² + s_δ²)`` from the ratio of the smaller to the larger, which cannot overflow."""
    if s_d <= s:
        return 1.0 / (1.0 + (s_d / s) * (s_d / s))
    ratio = s / s_d  # < 1; its square may underflow to 0, the exact limit
    return ratio * ratio / (1.0 + ratio * ratio)


def _variance(s: float, s_d: float) -> float:
    """``s² + s_δ²``, or a ValueError naming the standard deviations when it overflows."""
    variance = s * s + s_d * s_d  # float products give inf, not OverflowError
    if not math.isfinite(variance):
        raise ValueError(f"assessment_sd and reassess_sd must give a finite variance s² + s_d²; "
                         f"got assessment_sd={s!r}, reassess_sd={s_d!r}, whose variance overflows float64")
    return variance


def colony_variance(recruit_prob, n_scouts, assessment_sd=1.0, reassess_sd=0.0) -> float:
    """Variance of the colony's collective estimate (mean of ``N`` scouts): ``ρσ² + (1 − ρ)σ²/N``.

    Parameters
    ----------
    recruit_prob, assessment_sd, reassess_sd
        As in :func:`scout_moments`.
    n_scouts : int >= 1
        ``N``.

    Returns
    -------
    float

    Examples
    --------
    Independent scouts (``π = 0``) give ``σ²/N``:

    >>> colony_variance(0.0, 4, 2.0)
    1.0
    >>> round(colony_variance(0.5, 10, 1.0, 0.5), 12)
    0.35
    """
    n_scouts = check_int(n_scouts, "n_scouts")
    variance, rho = scout_moments(recruit_prob, assessment_sd, reassess_sd)
    return rho * variance + (1.0 - rho) * variance / n_scouts


def simulate_assessments(n_colonies, n_scouts, recruit_prob, assessment_sd=1.0, reassess_sd=0.0,
                         quality=0.0, rng=None) -> np.ndarray:
    """Draw every scout's assessment in ``R`` independent colonies (vectorised).

    Parameters
    ----------
    n_colonies : int >= 1
        ``R``, independent colonies (replicates).
    n_scouts : int >= 1
        ``N``, scouts per colony.
    recruit_prob, assessment_sd, reassess_sd
        As in :func:`scout_moments`.
    quality : float
        ``q``, the site's true quality (finite).
    rng : None, int or numpy.random.Generator
        Source of every draw.

    Returns
    -------
    numpy.ndarray of shape (R, N)
        ``A[r, i] = q + B_ri L_r + (1 − B_ri) E_ri + δ_ri``.

    Raises
    ------
    TypeError, ValueError
        Bad counts, probability, standard deviations or quality.

    Examples
    --------
    With every scout recruited and no re-assessment noise, all scouts of a colony agree:

    >>> a = simulate_assessments(3, 5, recruit_prob=1.0, quality=2.0, rng=0)
    >>> a.shape, bool(np.allclose(a, a[:, :1]))
    ((3, 5), True)
    """
    n_colonies = check_int(n_colonies, "n_colonies")
    n_scouts = check_int(n_scouts, "n_scouts")
    pi = check_probability(recruit_prob, "recruit_prob")
    s = check_positive(assessment_sd, "assessment_sd")
    s_d = check_nonnegative(reassess_sd, "reassess_sd")
    quality = check_real(quality, "quality")
    rng = as_generator(rng)
    _variance(s, s_d)
    leader = s * rng.standard_normal((n_colonies, 1))  # (R, 1), shared within a colony
    recruited = rng.random((n_colonies, n_scouts)) < pi  # (R, N)
    own = s * rng.standard_normal((n_colonies, n_scouts))  # (R, N)
    noise = s_d * rng.standard_normal((n_colonies, n_scouts))  # (R, N)
    assessments = quality + np.where(recruited, leader, own) + noise  # (R, N)
    if not np.isfinite(assessments).all():
        raise ValueError(f"the assessments overflow float64 for quality={quality!r}, assessment_sd={s!r}, "
                         f"reassess_sd={s_d!r}; use smaller magnitudes")
    return assessments
