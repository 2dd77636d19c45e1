"""House hunting by *Temnothorax albipennis*: a colony that decides (claim C7, part b).

``MATH.md`` claim C7 asks what a colony *decides* when its scouts assess candidate nest sites
independently, recruit nestmates by tandem runs and switch to transport at a quorum
(Pratt, Mallon, Sumpter & Franks 2002; Pratt, Sumpter, Mallon & Franks 2005; Sumpter & Pratt
2009). This module is a stochastic agent-based model of one emigration, in one-minute steps,
vectorised over independent replicate colonies, for chapter 8's colony that decides
(``book/08-three-ensembles.md``); it replaces nothing in :mod:`mhacore.colony`, whose
recruits copy a leader's error.

The rules (every scout, every minute; all draws independent given the state):

* The colony has ``colony_size`` ants; ``n_active = round(active_fraction · colony_size)``
  are active (scouts), the rest passive. When the old nest is destroyed every scout
  searches.
* **Discovery.** A searching scout finds each site with rate ``discovery_rate`` per minute.
* **Independent assessment.** Every scout that arrives at a site, by discovery or as the
  follower of a tandem run, draws her own assessment ``q̂ = q + assessment_sd · Z``
  (``Z ~ N(0, 1)``, fresh for every visit and every ant) and accepts the site when
  ``q̂ ≥ θ``, her own acceptance threshold, drawn once per ant: ``high_threshold`` with
  probability ``high_threshold_fraction``, else ``low_threshold`` (the two threshold types
  of Masuda et al. 2015). So the probability of accepting rises with the site's quality.
  A scout who rejects goes back to searching.
* **Latency.** An accepted scout starts recruiting at a rate that rises with *her own*
  assessment ``q̂``: the straight line through ``recruit_rate_mediocre`` at ``q̂ = 0.5``
  and ``recruit_rate_good`` at ``q̂ = 1`` (floored at 0). The quality scale is defined by
  these anchors: 1 is the good site and 0.5 the poor ("mediocre") site of the parameter
  set of Pratt et al.'s 2002 model, which has one latency rate for each.
* **Re-search.** An accepted scout that is not yet transporting gives up and searches
  again at rate ``research_rate``, whatever the site (so no site is favoured by label).
* **Tandem runs.** A recruiter leads tandem runs at rate ``tandem_rate`` while her site's
  population is below ``quorum``; the follower is a searching scout drawn at random, and
  she assesses the site herself (she may reject it).
* **Quorum and transport.** The population a recruiter senses at her site counts the
  scouts recruiting or transporting for it (``quorum_counts="recruiters"``, the default, as
  in the 2002 model, whose quorum compares the recruiters of a site with the threshold) or
  also those still in their latency (``"committed"``), plus the passive ants carried there.
  A recruiter who finds it at or above ``quorum`` switches to transport for good, and
  carries passive ants from the old nest at rate ``transport_rate``.
* **Outputs.** The *decision* is the first site to reach the quorum (decision time: that
  minute); the emigration is *complete* when no passive ant is left in the old nest
  (completion time). The colony *split* when passive ants were carried to more than one
  site. Brood is not modelled separately (it would be more passive items).

Nothing in these rules names the better site: the colony's preference for it can only come
from the individual assessments (acceptance and latency), amplified or diluted by
recruitment and the quorum. Rates are per minute; see ``reports/house-hunting-sources.md``
for where every default comes from and which values could be read.

Randomness: one :class:`numpy.random.Generator` drives a vectorised batch of colonies;
sweeps give each setting its own child from :func:`mhacore._rng.spawn`.
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass

import numpy as np

from ._rng import as_generator, spawn
from ._validation import check_int, check_nonnegative, check_probability, check_real

__all__ = [
    "PARAMETER_SOURCES",
    "Emigrations",
    "HouseHuntingParams",
    "accuracy_by_colony_size",
    "assessment_correlation",
    "commitment_correlation",
    "commitment_correlation_sweep",
    "compare_with_published",
    "simulate_emigrations",
    "speed_accuracy_tradeoff",
    "summarize",
]

SEARCH, WAIT, TANDEM, TRANSPORT = 0, 1, 2, 3  # scout states (int8)
_QUORUM_COUNTS = ("recruiters", "committed")  # who counts towards a site's population

# name -> (where the default comes from, whether its number was read offline); the full
# account, with the reasoning for values that could not be read, is the sources report.
PARAMETER_SOURCES = {
    "colony_size": (
        ("Pratt et al. 2002 model parameters (mean 208, SD 99), as coded in a public "
        "reimplementation (JamesCollerton/MSc_Thesis, pratt_var_parameters.py)"), "secondary"),
    "active_fraction": (
        ("Pratt et al. 2002 model parameters (0.25, SD 0.1), same reimplementation; the 2002 "
        "abstract says one-third of workers ever recruit"), "secondary"),
    "quorum": ("modelling choice (10 recruiters); no published threshold read offline", "no"),
    "discovery_rate": (
        "Pratt et al. 2002 model parameters (mu = 0.013 /min, SD 0.006), same reimplementation",
        "secondary"),
    "tandem_rate": (
        "Pratt et al. 2002 model parameters (lambda = 0.033 /min, SD 0.016), same reimplementation",
        "secondary"),
    "transport_rate": (
        ("Pratt et al. 2002 model parameters (phi = 0.099 /min, SD 0.02), same reimplementation; "
        "phi/lambda = 3 matches the 2002 abstract"), "secondary"),
    "recruit_rate_mediocre": (
        ("Pratt et al. 2002 model parameters (k = 0.015 /min at the poor site), same "
        "reimplementation"), "secondary"),
    "recruit_rate_good": (
        ("Pratt et al. 2002 model parameters (k = 0.02 /min at the good site), same "
        "reimplementation"), "secondary"),
    "research_rate": (
        ("Pratt et al. 2002 model parameters (switching rate 0.008 /min, poor to good site), same "
        "reimplementation; reinterpreted here as a symmetric re-search rate"),
        "secondary, reinterpreted"),
    "assessment_sd": (
        ("modelling choice (0.2 = 0.4 x the quality gap, the noise/gap ratio of a public AH-HA "
        "parameter file); not a published measurement"), "no"),
    "high_threshold_fraction": (
        "Masuda et al. 2015, the authors' code (naokimas/ant-hetero-threshold): H = 0.2",
        "yes (authors' code)"),
    "low_threshold": (
        "modelling choice placing Masuda et al.'s low-threshold type below the poor site (0.25)",
        "no"),
    "high_threshold": (
        "modelling choice placing Masuda et al.'s high-threshold type between the sites (0.75)",
        "no"),
    "max_minutes": ("simulation horizon (24 h)", "not a biological parameter"),
    "quorum_counts": (
        ("structure of the 2002 model as coded in the reimplementation: the quorum compares a "
        "site's recruiters with the threshold"), "secondary"),
}


# --- parameters ---------------------------------------------------------------------------

@dataclass(frozen=True)
class HouseHuntingParams:
    """The parameters of one emigration (rates per minute; quality on the module's scale).

    Defaults: ``reports/house-hunting-sources.md`` (and :data:`PARAMETER_SOURCES`).

    Parameters
    ----------
    colony_size : int >= 2
        Workers in the colony (active plus passive).
    active_fraction : float in (0, 1]
        Share of workers that are active scouts; ``n_active = round(active_fraction ·
        colony_size)`` must be between 1 and ``colony_size``.
    quorum : int >= 1
        Site population at which recruiters switch from tandem runs to transport; at most
        ``n_active`` (only scouts can bring a site to its quorum).
    discovery_rate, tandem_rate, transport_rate, research_rate : float >= 0
        Per searching scout and site; per tandem recruiter; per transporter; per
        committed, non-transporting scout.
    recruit_rate_mediocre, recruit_rate_good : float >= 0
        Latency rates (accepted → recruiting) at perceived quality 0.5 and 1.
    assessment_sd : float >= 0
        Standard deviation of one assessment's error.
    high_threshold_fraction : float in [0, 1]
        Share of scouts with the high acceptance threshold.
    low_threshold, high_threshold : float
        The two acceptance thresholds (finite).
    max_minutes : int >= 1
        Horizon: a colony not done by then is reported undecided or incomplete.
    quorum_counts : {"recruiters", "committed"}
        Who counts towards the population a recruiter senses (besides carried ants):
        scouts past their latency, or every scout that accepted the site.

    Raises
    ------
    TypeError, ValueError
        A parameter of the wrong type or outside its range, naming it.

    Examples
    --------
    >>> p = HouseHuntingParams()
    >>> p.n_active, p.n_passive, p.quorum
    (52, 156, 10)
    >>> p.replace(quorum=20).quorum
    20
    >>> HouseHuntingParams(quorum=60)
    Traceback (most recent call last):
    ...
    ValueError: quorum must be an integer in [1, n_active = 52]; got 60
    """

    colony_size: int = 208
    active_fraction: float = 0.25
    quorum: int = 10
    discovery_rate: float = 0.013
    tandem_rate: float = 0.033
    transport_rate: float = 0.099
    recruit_rate_mediocre: float = 0.015
    recruit_rate_good: float = 0.020
    research_rate: float = 0.008
    assessment_sd: float = 0.2
    high_threshold_fraction: float = 0.2
    low_threshold: float = 0.25
    high_threshold: float = 0.75
    max_minutes: int = 1440
    quorum_counts: str = "recruiters"

    def __post_init__(self):
        put = object.__setattr__
        put(self, "colony_size", check_int(self.colony_size, "colony_size", minimum=2))
        fraction = check_probability(self.active_fraction, "active_fraction")
        if fraction == 0.0:
            raise ValueError(f"active_fraction must be a number in (0, 1]; got {fraction!r}")
        put(self, "active_fraction", fraction)
        n_active = round(fraction * self.colony_size)
        if n_active < 1:
            raise ValueError(f"active_fraction * colony_size must round to at least 1 scout; got "
                             f"active_fraction={fraction!r}, colony_size={self.colony_size}")
        quorum = check_int(self.quorum, "quorum", minimum=1)
        if quorum > n_active:
            raise ValueError(f"quorum must be an integer in [1, n_active = {n_active}]; got {quorum}")
        put(self, "quorum", quorum)
        for name in ("discovery_rate", "tandem_rate", "transport_rate", "recruit_rate_mediocre",
                     "recruit_rate_good", "research_rate", "assessment_sd"):
            put(self, name, check_nonnegative(getattr(self, name), name))
        put(self, "high_threshold_fraction",
            check_probability(self.high_threshold_fraction, "high_threshold_fraction"))
        put(self, "low_threshold", check_real(self.low_threshold, "low_threshold"))
        put(self, "high_threshold", check_real(self.high_threshold, "high_threshold"))
        put(self, "max_minutes", check_int(self.max_minutes, "max_minutes", minimum=1))
        if not isinstance(self.quorum_counts, str):
            raise TypeError(f"quorum_counts must be one of {', '.join(map(repr, _QUORUM_COUNTS))}; "
                            f"got {type(self.quorum_counts).__name__} {self.quorum_counts!r}")
        if self.quorum_counts not in _QUORUM_COUNTS:
            raise ValueError(f"quorum_counts must be one of {', '.join(map(repr, _QUORUM_COUNTS))}; "
                             f"got {self.quorum_counts!r}")

    @property
    def n_active(self) -> int:
        """Active scouts: ``round(active_fraction · colony_size)``."""
        return round(self.active_fraction * self.colony_size)

    @property
    def n_passive(self) -> int:
        """Passive workers, carried by transporters."""
        return self.colony_size - self.n_active

    def replace(self, **changes) -> HouseHuntingParams:
        """A validated copy with ``changes`` (``TypeError`` for an unknown name)."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise TypeError(f"unknown HouseHuntingParams field(s): {', '.join(unknown)}")
        return dataclasses.replace(self, **changes)


def _check_minutes(minutes) -> tuple:
    if isinstance(minutes, (str, bytes)) or not hasattr(minutes, "__iter__"):
        raise TypeError(f"snapshot_minutes must be a sequence of integers >= 0; got "
                        f"{type(minutes).__name__} {minutes!r}")
    minutes = [check_int(m, "snapshot_minutes entry", minimum=0) for m in minutes]
    return tuple(dict.fromkeys(minutes))  # in order, once each


def _check_params(params) -> HouseHuntingParams:
    if params is None:
        return HouseHuntingParams()
    if not isinstance(params, HouseHuntingParams):
        raise TypeError(f"params must be None or a HouseHuntingParams; got {type(params).__name__}")
    return params


def _check_qualities(qualities) -> np.ndarray:
    if isinstance(qualities, (str, bytes)) or not hasattr(qualities, "__len__"):
        raise TypeError(f"qualities must be a sequence of at least 2 finite numbers; got "
                        f"{type(qualities).__name__} {qualities!r}")
    values = list(np.asarray(qualities, dtype=object).ravel()) if np.ndim(qualities) else []
    if np.ndim(qualities) != 1 or len(values) < 2:
        raise ValueError(f"qualities must be a sequence of at least 2 finite numbers; got {qualities!r}")
    for v in values:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
            raise TypeError(f"qualities must be a sequence of at least 2 finite numbers; got an entry "
                            f"{type(v).__name__} {v!r}")
    out = np.asarray([float(v) for v in values])
    if not np.isfinite(out).all():
        raise ValueError(f"qualities must be a sequence of at least 2 finite numbers; got {qualities!r}")
    if len(out) > 127:
        raise ValueError(f"qualities must have at most 127 sites; got {len(out)}")
    return out


# --- the simulation -----------------------------------------------------------------------

@dataclass(frozen=True)
class Emigrations:
    """What ``R`` simulated emigrations produced (one entry per colony; ``K`` sites).

    Attributes
    ----------
    qualities : ndarray (K,)
    params : HouseHuntingParams
    chosen_site : ndarray (R,) int
        First site to reach the quorum (the decision); -1 if none by ``max_minutes``.
    final_site : ndarray (R,) int
        Site holding most of the colony at the end (committed scouts plus carried ants).
    best : ndarray (R,) bool
        ``chosen_site == argmax(qualities)`` (the first best site when several tie).
    decision_time, completion_time : ndarray (R,) float
        Minutes to the first quorum and to the last passive ant leaving; NaN if not reached.
    split : ndarray (R,) bool
        Passive ants were carried to more than one site.
    minority_share : ndarray (R,) float
        Share of the carried ants outside the site that received most (0 without transport).
    commitment_at_decision, commitment_at_end : ndarray (R, n_active) int8
        The site each scout is committed to (accepted, recruiting or transporting), -1 for a
        searching scout; at the decision (all -1 if none) and at the end.
    first_assessment : ndarray (R, n_active, K)
        Each scout's first assessment of each site; NaN where she never assessed it.
    ever_recruited : ndarray (R, n_active) bool
        The scout led at least one tandem run or carried at least one nestmate.
    final_population : ndarray (R, K + 1) int
        Ants in the old nest (column 0: searching scouts and passive ants) and at each site.
    tandem_runs, transports : ndarray (R,) int
        Completed tandem runs and transports.
    first_tandem_time, first_transport_time : ndarray (R,) float
        Minute of the first tandem run and of the first transport; NaN if none.
    tandem_runs_before_transport : ndarray (R,) int
        Tandem runs completed before the colony's first transport.
    snapshot_minutes : tuple of int
        The minutes asked for in ``snapshot_minutes``.
    commitment_snapshots : ndarray (R, len(snapshot_minutes), n_active) int8
        ``commitment_at_end``'s coding at each of those minutes (a colony already done is
        frozen at its end).
    populations : ndarray (R, T + 1, K + 1) int or None
        With ``record_populations=True``, the columns of ``final_population`` at every minute.
    """

    qualities: np.ndarray
    params: HouseHuntingParams
    chosen_site: np.ndarray
    final_site: np.ndarray
    best: np.ndarray
    decision_time: np.ndarray
    completion_time: np.ndarray
    split: np.ndarray
    minority_share: np.ndarray
    commitment_at_decision: np.ndarray
    commitment_at_end: np.ndarray
    first_assessment: np.ndarray
    ever_recruited: np.ndarray
    final_population: np.ndarray
    tandem_runs: np.ndarray
    transports: np.ndarray
    first_tandem_time: np.ndarray
    first_transport_time: np.ndarray
    tandem_runs_before_transport: np.ndarray
    snapshot_minutes: tuple = ()
    commitment_snapshots: np.ndarray | None = None
    populations: np.ndarray | None = None

    @property
    def n_colonies(self) -> int:
        return len(self.chosen_site)

    @property
    def best_site(self) -> int:
        return int(np.argmax(self.qualities))


def _rate_to_prob(rate):
    """Probability of at least one event in one minute at ``rate`` per minute."""
    return -np.expm1(-np.asarray(rate, dtype=float))


def _inverse_rank(keys: np.ndarray) -> np.ndarray:
    """Rank of each entry of ``keys`` within its row (0 = smallest). (R, n) -> (R, n)."""
    order = np.argsort(keys, axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(keys.shape[1]), keys.shape), axis=1)
    return rank


def _grant(actors, actor_site, capacity, n_sites, rng):
    """Cap the actors of each colony at ``capacity`` successes, chosen uniformly at random.

    ``actors`` (R, n) bool, ``actor_site`` (R, n) site of each actor, ``capacity`` (R,).
    Returns ``granted`` (R, K) successes per site and ``success`` (R, n) bool.
    """
    counts = np.stack([(actors & (actor_site == j)).sum(axis=1) for j in range(n_sites)], axis=1)
    total = counts.sum(axis=1)  # (R,)
    if (total <= capacity).all():
        return counts, actors
    left = np.minimum(capacity, total)
    rest = total.copy()
    granted = np.zeros_like(counts)
    for j in range(n_sites):  # a multivariate hypergeometric draw, one site at a time
        rest -= counts[:, j]
        granted[:, j] = rng.hypergeometric(counts[:, j], rest, left)
        left -= granted[:, j]
    keys = np.where(actors, actor_site + rng.random(actors.shape), n_sites + 1.0)  # by site, then random
    rank = _inverse_rank(keys)
    offset = np.cumsum(counts, axis=1) - counts  # (R, K): actors of the earlier sites
    site = np.clip(actor_site, 0, n_sites - 1).astype(np.intp)
    within = rank - np.take_along_axis(offset, site, axis=1)
    success = actors & (within < np.take_along_axis(granted, site, axis=1))
    return granted, success


def _site_counts(mask, site, n_sites):
    """(R, n) mask and site -> (R, K) counts per site."""
    return np.stack([(mask & (site == j)).sum(axis=1) for j in range(n_sites)], axis=1)


def simulate_emigrations(n_colonies, qualities=(1.0, 0.5), params=None, *, rng=None,
                         record_populations=False, snapshot_minutes=()) -> Emigrations:
    """Simulate ``R`` independent emigrations of one colony type to ``K`` candidate sites.

    Defined in chapter 8 (claim C7 b); the rules are in the module docstring. Colonies that
    have finished are dropped from the working arrays, so a long tail costs little.

    Parameters
    ----------
    n_colonies : int >= 1
        ``R``, independent replicate colonies (simulated together, vectorised).
    qualities : sequence of K >= 2 finite floats
        True site qualities (1 = the good site, 0.5 = the mediocre site of the scale).
    params : HouseHuntingParams or None
        ``None`` for the defaults.
    rng : None, int or numpy.random.Generator
        Source of every draw.
    record_populations : bool
        Also return the population of the old nest and of every site at every minute.
    snapshot_minutes : sequence of int >= 0
        Minutes at which to record every scout's commitment (``commitment_snapshots``).

    Returns
    -------
    Emigrations

    Raises
    ------
    TypeError, ValueError
        Bad ``n_colonies``, ``qualities``, ``params``, ``rng``, ``record_populations`` or
        ``snapshot_minutes``.

    Examples
    --------
    Ants are never created or lost, and a colony decides for one of the sites:

    >>> sim = simulate_emigrations(20, (1.0, 0.5), rng=1)
    >>> bool((sim.final_population.sum(axis=1) == 208).all())
    True
    >>> bool(np.isin(sim.chosen_site, [0, 1]).all())
    True
    """
    n_colonies = check_int(n_colonies, "n_colonies")
    q = _check_qualities(qualities)
    p = _check_params(params)
    if not isinstance(record_populations, (bool, np.bool_)):
        raise TypeError(f"record_populations must be a bool; got {type(record_populations).__name__} "
                        f"{record_populations!r}")
    snaps = _check_minutes(snapshot_minutes)
    rng = as_generator(rng)
    R, n, K = n_colonies, p.n_active, len(q)
    p_find = float(_rate_to_prob(K * p.discovery_rate))  # any site, per searching scout
    p_tandem = float(_rate_to_prob(p.tandem_rate))
    p_transport = float(_rate_to_prob(p.transport_rate))
    p_research = float(_rate_to_prob(p.research_rate))
    slope = (p.recruit_rate_good - p.recruit_rate_mediocre) / 0.5
    counted = TANDEM if p.quorum_counts == "recruiters" else WAIT

    # per-colony outputs, indexed by colony
    nan = np.full(R, np.nan)
    out = {"chosen": np.full(R, -1, np.int64), "t_decision": nan.copy(), "t_complete": nan.copy(),
           "at_decision": np.full((R, n), -1, np.int8), "at_end": np.full((R, n), -1, np.int8),
           "first": np.full((R, n, K), np.nan), "ever": np.zeros((R, n), bool),
           "located": np.zeros((R, K + 1), np.int64), "carried": np.zeros((R, K), np.int64),
           "tandem_runs": np.zeros(R, np.int64), "transports": np.zeros(R, np.int64),
           "t_first_tandem": nan.copy(), "t_first_transport": nan.copy(),
           "tandem_before": np.zeros(R, np.int64),
           "snapshots": np.full((R, len(snaps), n), -1, np.int8)}
    # the working set: one row per colony still running; w["gid"] is its colony index
    w = {"gid": np.arange(R),
         "threshold": np.where(rng.random((R, n)) < p.high_threshold_fraction,
                               p.high_threshold, p.low_threshold),  # (R, n), fixed per ant
         "state": np.zeros((R, n), np.int8),  # every scout searches
         "site": np.full((R, n), -1, np.int8),
         "recruit_prob": np.zeros((R, n)),  # per-minute latency probability, from each ant's q̂
         "first": out["first"].copy(), "ever": np.zeros((R, n), bool),
         "passive_home": np.full(R, p.n_passive, np.int64), "carried": np.zeros((R, K), np.int64),
         "decided": np.zeros(R, bool), "done": np.zeros(R, bool),
         "tandem_runs": np.zeros(R, np.int64), "transports": np.zeros(R, np.int64),
         "t_first_tandem": nan.copy(), "t_first_transport": nan.copy(),
         "tandem_before": np.zeros(R, np.int64)}

    def located(w):  # (rows, K + 1): old nest (searching scouts, passive ants), then each site
        at_sites = _site_counts(w["state"] >= WAIT, w["site"], K) + w["carried"]
        return np.column_stack([(w["state"] == SEARCH).sum(1) + w["passive_home"], at_sites])

    def quorum_population(w):  # (rows, K): what a scout senses at each site
        return _site_counts(w["state"] >= counted, w["site"], K) + w["carried"]

    def record_end(w, rows):  # copy the final state of the working rows ``rows`` out
        g = w["gid"][rows]
        state, site = w["state"][rows], w["site"][rows]
        out["at_end"][g] = np.where(state >= WAIT, site, -1)
        for k, at in enumerate(snaps):
            if at > minute:  # a colony done is frozen at its end
                out["snapshots"][g, k] = out["at_end"][g]
        out["located"][g] = located({k: v[rows] for k, v in w.items()})
        for key in ("first", "ever", "carried", "tandem_runs", "transports", "t_first_tandem",
                    "t_first_transport", "tandem_before"):
            out[key][g] = w[key][rows]

    last = located(w)
    trace = [last.copy()] if record_populations else None
    minute = 0
    while minute < p.max_minutes and len(w["gid"]):
        minute += 1
        rows = len(w["gid"])
        state, site, carried = w["state"], w["site"], w["carried"]
        live = ~w["done"][:, None]  # (rows, 1): finished colonies are frozen until dropped
        quorate = quorum_population(w) >= p.quorum  # (rows, K) at the start of the minute
        at_quorate = np.take_along_axis(quorate, np.clip(site, 0, K - 1).astype(np.intp), axis=1)

        # quorum sensing: recruiters at a quorate site switch to transport for good
        state[live & (state == TANDEM) & at_quorate] = TRANSPORT

        searching = live & (state == SEARCH)
        waiting = live & (state == WAIT)
        tandem = live & (state == TANDEM)
        transporting = live & (state == TRANSPORT)
        u = rng.random((rows, n))

        # tandem runs: each follower is a searching scout drawn at random, one per run
        leaders = tandem & (u < p_tandem)
        follow_counts, led = _grant(leaders, site, searching.sum(axis=1), K, rng)
        rank = _inverse_rank(np.where(searching, rng.random((rows, n)), 2.0))
        bounds = np.cumsum(follow_counts, axis=1)  # (rows, K)
        target = np.full((rows, n), -1, np.int64)  # the site a scout arrives at this minute
        for j in range(K - 1, -1, -1):
            target[searching & (rank < bounds[:, j:j + 1])] = j
        n_runs = follow_counts.sum(axis=1)
        w["tandem_runs"] += n_runs
        w["tandem_before"] += np.where(np.isnan(w["t_first_transport"]), n_runs, 0)
        w["t_first_tandem"][np.isnan(w["t_first_tandem"]) & (n_runs > 0)] = minute
        w["ever"] |= led

        # transports: passive ants leave the old nest
        carriers = transporting & (u < p_transport)
        moved, carried_one = _grant(carriers, site, w["passive_home"], K, rng)
        n_moved = moved.sum(axis=1)
        w["passive_home"] -= n_moved
        carried += moved
        w["transports"] += n_moved
        w["t_first_transport"][np.isnan(w["t_first_transport"]) & (n_moved > 0)] = minute
        w["ever"] |= carried_one

        # latency and re-search of accepted scouts (start-of-minute states)
        give_up = (waiting | tandem) & (rng.random((rows, n)) < p_research)
        start = waiting & ~give_up & (rng.random((rows, n)) < w["recruit_prob"])

        # discovery by the searching scouts who were not led anywhere
        v = rng.random((rows, n))
        finds = searching & (target < 0) & (v < p_find)
        target[finds] = np.minimum((v[finds] / p_find * K).astype(np.int64), K - 1)

        # every arrival assesses the site herself, with her own error and threshold
        arriving = target >= 0
        tq = np.clip(target, 0, K - 1)
        assessment = q[tq] + p.assessment_sd * rng.standard_normal((rows, n))  # (rows, n)
        seen = np.take_along_axis(w["first"], tq[:, :, None], axis=2)[:, :, 0]
        seen = np.where(arriving & np.isnan(seen), assessment, seen)
        np.put_along_axis(w["first"], tq[:, :, None], seen[:, :, None], axis=2)
        accept = arriving & (assessment >= w["threshold"])

        state[give_up] = SEARCH
        site[give_up] = -1
        state[start] = TANDEM
        state[accept] = WAIT
        site[accept] = target[accept].astype(np.int8)
        rate = np.maximum(p.recruit_rate_mediocre + slope * (assessment[accept] - 0.5), 0.0)
        w["recruit_prob"][accept] = _rate_to_prob(rate)

        # the decision: the first site at its quorum (ties: larger population, then at random)
        pop = quorum_population(w)
        quorate = pop >= p.quorum
        new = ~w["decided"] & ~w["done"] & quorate.any(axis=1)
        if new.any():
            score = np.where(quorate, pop + 0.5 * rng.random((rows, K)), -1.0)
            g = w["gid"][new]
            out["chosen"][g] = np.argmax(score, axis=1)[new]
            out["t_decision"][g] = minute
            out["at_decision"][g] = np.where(state[new] >= WAIT, site[new], -1)
            w["decided"] |= new
        finished = w["decided"] & ~w["done"] & (w["passive_home"] == 0)
        if finished.any():
            out["t_complete"][w["gid"][finished]] = minute
            record_end(w, finished)
            w["done"] |= finished
        if record_populations:
            last[w["gid"]] = located(w)
            trace.append(last.copy())
        if minute in snaps:
            out["snapshots"][w["gid"], snaps.index(minute)] = np.where(state >= WAIT, site, -1)
        if w["done"].sum() * 4 >= rows:  # drop the finished colonies
            w = {k: v[~w["done"]] for k, v in w.items()}

    record_end(w, ~w["done"])  # colonies still running at the horizon
    carried = out["carried"]
    total_carried = carried.sum(axis=1)
    minority = np.where(total_carried > 0, 1.0 - carried.max(axis=1) / np.maximum(total_carried, 1), 0.0)
    return Emigrations(
        qualities=q, params=p, chosen_site=out["chosen"],
        final_site=np.argmax(out["located"][:, 1:], axis=1), best=out["chosen"] == int(np.argmax(q)),
        decision_time=out["t_decision"], completion_time=out["t_complete"],
        split=(carried > 0).sum(axis=1) > 1, minority_share=minority,
        commitment_at_decision=out["at_decision"], commitment_at_end=out["at_end"],
        first_assessment=out["first"], ever_recruited=out["ever"], final_population=out["located"],
        tandem_runs=out["tandem_runs"], transports=out["transports"],
        first_tandem_time=out["t_first_tandem"], first_transport_time=out["t_first_transport"],
        tandem_runs_before_transport=out["tandem_before"],
        snapshot_minutes=snaps, commitment_snapshots=out["snapshots"],
        populations=np.stack(trace, axis=1) if record_populations else None,  # (R, T + 1, K + 1)
    )


# --- what a chapter measures ----------------------------------------------------------------

def _mean_se(values) -> tuple[float, float, int]:
    """Mean, standard error and count of the finite entries of ``values``."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return float("nan"), float("nan"), 0
    se = float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")
    return float(x.mean()), se, len(x)


def _check_result(result) -> Emigrations:
    if not isinstance(result, Emigrations):
        raise TypeError(f"result must be an Emigrations (from simulate_emigrations); got "
                        f"{type(result).__name__}")
    return result


def summarize(result) -> dict:
    """Accuracy and times of a batch of emigrations, each with its Monte Carlo standard error.

    Parameters
    ----------
    result : Emigrations

    Returns
    -------
    dict
        ``accuracy`` (share of colonies whose first quorum was at the best site; undecided
        colonies count as wrong) and ``accuracy_se`` = sqrt(a(1 − a)/R);
        ``final_accuracy`` (share ending mostly at the best site) and its SE;
        ``decision_time``/``completion_time`` means over the colonies that got there, with
        SEs; ``split_rate`` and SE; ``undecided`` and ``incomplete`` counts; ``n_colonies``.

    Examples
    --------
    >>> s = summarize(simulate_emigrations(50, rng=2))
    >>> 0.0 <= s["accuracy"] <= 1.0 and s["n_colonies"] == 50
    True
    """
    r = _check_result(result)
    R = r.n_colonies
    out = {"n_colonies": R}
    for name, hits in (("accuracy", r.best), ("final_accuracy", r.final_site == r.best_site),
                       ("split_rate", r.split)):
        a = float(np.mean(hits))
        out[name], out[f"{name}_se"] = a, float(np.sqrt(a * (1.0 - a) / R))
    for name, times in (("decision_time", r.decision_time), ("completion_time", r.completion_time)):
        out[name], out[f"{name}_se"], _ = _mean_se(times)
    out["undecided"] = int(np.sum(r.chosen_site < 0))
    out["incomplete"] = int(np.sum(np.isnan(r.completion_time)))
    return out


def _check_values(values, name, kind):
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a non-empty sequence; got {type(values).__name__} {values!r}")
    values = list(values)
    if not values:
        raise ValueError(f"{name} must be a non-empty sequence; got {values!r}")
    return [kind(v) for v in values]


def speed_accuracy_tradeoff(quorums, n_colonies=1000, qualities=(1.0, 0.5), params=None, *,
                            rng=None) -> list[dict]:
    """Accuracy and decision time as the quorum varies (the speed–accuracy trade-off).

    Each quorum value gets its own child generator (:func:`mhacore._rng.spawn`), so the rows
    are independent and a difference between two rows has SE sqrt(se₁² + se₂²).

    Parameters
    ----------
    quorums : sequence of int
        Quorum thresholds, each in [1, n_active].
    n_colonies : int >= 1
        Colonies per quorum value.
    qualities, params, rng
        As in :func:`simulate_emigrations` (``params.quorum`` is replaced).

    Returns
    -------
    list of dict
        One row per quorum: ``{"quorum": Q, **summarize(...)}``.

    Examples
    --------
    >>> rows = speed_accuracy_tradeoff([2, 20], n_colonies=100, rng=0)
    >>> [row["quorum"] for row in rows]
    [2, 20]
    >>> rows[1]["decision_time"] > rows[0]["decision_time"]
    True
    """
    p = _check_params(params)
    quorums = _check_values(quorums, "quorums", lambda v: check_int(v, "quorum"))
    n_colonies = check_int(n_colonies, "n_colonies")
    rows = []
    for quorum, child in zip(quorums, spawn(rng, len(quorums))):
        sim = simulate_emigrations(n_colonies, qualities, p.replace(quorum=quorum), rng=child)
        rows.append({"quorum": quorum, **summarize(sim)})
    return rows


def accuracy_by_colony_size(colony_sizes, n_colonies=1000, qualities=(1.0, 0.5), params=None, *,
                            quorum_fraction=None, rng=None) -> list[dict]:
    """Accuracy and decision time as the colony (and so its number of scouts) grows.

    The share of active scouts stays ``params.active_fraction``; the quorum stays
    ``params.quorum``, or with ``quorum_fraction`` scales as ``max(1, round(quorum_fraction ·
    n_active))`` (large colonies use larger quorums: Franks et al. 2006, abstract).

    Parameters
    ----------
    colony_sizes : sequence of int >= 2
    n_colonies : int >= 1
    qualities, params, rng
        As in :func:`simulate_emigrations`.
    quorum_fraction : float in (0, 1] or None

    Returns
    -------
    list of dict
        One row per size: ``colony_size``, ``n_active``, ``quorum`` and :func:`summarize`.

    Examples
    --------
    >>> rows = accuracy_by_colony_size([100, 200], n_colonies=50, quorum_fraction=0.2, rng=0)
    >>> [(row["n_active"], row["quorum"]) for row in rows]
    [(25, 5), (50, 10)]
    """
    p = _check_params(params)
    sizes = _check_values(colony_sizes, "colony_sizes", lambda v: check_int(v, "colony_size", minimum=2))
    n_colonies = check_int(n_colonies, "n_colonies")
    if quorum_fraction is not None:
        quorum_fraction = check_probability(quorum_fraction, "quorum_fraction")
        if quorum_fraction == 0.0:
            raise ValueError(f"quorum_fraction must be None or a number in (0, 1]; got {quorum_fraction!r}")
    rows = []
    for size, child in zip(sizes, spawn(rng, len(sizes))):
        n_active = round(p.active_fraction * size)
        quorum = p.quorum if quorum_fraction is None else max(1, round(quorum_fraction * n_active))
        sized = p.replace(colony_size=size, quorum=quorum)
        sim = simulate_emigrations(n_colonies, qualities, sized, rng=child)
        rows.append({"colony_size": size, "n_active": sized.n_active, "quorum": quorum, **summarize(sim)})
    return rows


def _check_site(site, result):
    if site is None:
        return result.best_site
    site = check_int(site, "site", minimum=0)
    if site >= len(result.qualities):
        raise ValueError(f"site must be an integer in [0, {len(result.qualities) - 1}]; got {site}")
    return site


def assessment_correlation(result, site=None) -> dict:
    """Correlation of two scouts' assessment errors of one site, within a colony.

    Independent by construction: every visit draws a fresh error for that ant alone. The
    estimate pairs, in each colony, the first two scouts (by index) who assessed ``site``,
    and correlates their first assessment errors across colonies.

    Parameters
    ----------
    result : Emigrations
    site : int or None
        Site index (default: the best site).

    Returns
    -------
    dict
        ``rho`` (Pearson correlation across colonies; NaN with noiseless assessment),
        ``rho_se`` ≈ (1 − ρ²)/sqrt(m − 1), ``n_pairs`` = m.

    Examples
    --------
    >>> c = assessment_correlation(simulate_emigrations(400, rng=3))
    >>> abs(c["rho"]) <= 4 * c["rho_se"]
    True
    """
    r = _check_result(result)
    j = _check_site(site, r)
    errors = r.first_assessment[:, :, j] - r.qualities[j]  # (R, n); NaN: never assessed
    seen = np.isfinite(errors)
    keep = seen.sum(axis=1) >= 2
    order = np.argsort(~seen[keep], axis=1, kind="stable")[:, :2]  # the first two who assessed
    pairs = np.take_along_axis(errors[keep], order, axis=1)  # (m, 2)
    m = len(pairs)
    if m < 3 or np.ptp(pairs[:, 0]) == 0.0 or np.ptp(pairs[:, 1]) == 0.0:
        return {"rho": float("nan"), "rho_se": float("nan"), "n_pairs": m}
    rho = float(np.corrcoef(pairs.T)[0, 1])
    return {"rho": rho, "rho_se": float((1.0 - rho * rho) / np.sqrt(m - 1)), "n_pairs": m}


def commitment_correlation(result, when="end", site=None) -> dict:
    """Correlation of scouts' commitments within a colony, against the colony-to-colony spread.

    For scout ``i`` let ``X_i = 1`` if she is committed to ``site`` (accepted it, recruits
    or transports for it) and 0 otherwise (committed elsewhere, or still searching). The
    pooled pairwise correlation ρ of ``X_i, X_k`` (i ≠ k, same colony) is estimated from
    the colonies' counts ``S = Σ X_i`` of ``n`` scouts:
    ρ̂ = (mean S(S − 1)/(n(n − 1)) − p̂²) / (p̂(1 − p̂)), p̂ = mean S / n.
    Assessments are independent (:func:`assessment_correlation`); ρ is what recruitment
    and the colony's shared course add. At ``"decision"`` and ``"end"`` the stopping rule
    itself (a quorum, the last transport) ties scouts together even without recruitment;
    at a fixed minute (``snapshot_minutes``) it does not, so ρ = 0 there when
    ``tandem_rate = 0`` (up to transporters, who never give up, and colonies already done,
    which are frozen at their end).

    Parameters
    ----------
    result : Emigrations
    when : "end", "decision" or int
        At the end of the run, at the decision (colonies that decided only), or at a minute
        listed in ``result.snapshot_minutes``.
    site : int or None
        Default: the best site.

    Returns
    -------
    dict
        ``rho`` and ``rho_se`` (jackknife over colonies); ``share`` p̂; ``uncommitted``
        (mean share of scouts still searching); ``between_var`` (variance across colonies of
        the colony's share ``S/n``); ``independent_var`` = p̂(1 − p̂)/n (independent scouts);
        ``design_effect`` = ``between_var / independent_var``, which equals
        1 + (n − 1)ρ̂ exactly (C7's ``ρσ² + (1 − ρ)σ²/n`` over ``σ²/n``); ``n_scouts`` n;
        ``n_colonies``.

    Examples
    --------
    >>> c = commitment_correlation(simulate_emigrations(300, rng=4))
    >>> bool(abs(c["design_effect"] - (1 + (c["n_scouts"] - 1) * c["rho"])) < 1e-9)
    True
    """
    r = _check_result(result)
    j = _check_site(site, r)
    if isinstance(when, str) and when == "end":
        commitments = r.commitment_at_end
    elif isinstance(when, str) and when == "decision":
        commitments = r.commitment_at_decision[r.chosen_site >= 0]
    elif (isinstance(when, numbers.Integral) and not isinstance(when, (bool, np.bool_))
          and int(when) in r.snapshot_minutes):
        commitments = r.commitment_snapshots[:, r.snapshot_minutes.index(int(when))]
    else:
        raise ValueError(f"when must be 'end', 'decision' or a minute in snapshot_minutes "
                         f"{r.snapshot_minutes}; got {when!r}")
    R, n = commitments.shape
    nan = float("nan")
    out = {"rho": nan, "rho_se": nan, "share": nan, "uncommitted": nan, "between_var": nan,
           "independent_var": nan, "design_effect": nan, "n_scouts": n, "n_colonies": R}
    if R < 2 or n < 2:
        return out
    counts = (commitments == j).sum(axis=1).astype(float)  # (R,)
    pair = counts * (counts - 1.0) / (n * (n - 1.0))  # (R,): share of a colony's pairs both at site

    def rho_of(share, both):
        var = share * (1.0 - share)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(var > 0, (both - share * share) / np.where(var > 0, var, 1.0), np.nan)

    share = counts.mean() / n
    rho = float(rho_of(share, pair.mean()))
    loo = rho_of((counts.sum() - counts) / (R - 1) / n, (pair.sum() - pair) / (R - 1))  # jackknife
    rho_se = float(np.sqrt((R - 1) / R * np.sum((loo - loo.mean()) ** 2))) if np.isfinite(loo).all() else nan
    between = float(np.mean((counts / n) ** 2) - share * share)
    independent = share * (1.0 - share) / n
    out.update(rho=rho, rho_se=rho_se, share=float(share), uncommitted=float(np.mean(commitments < 0)),
               between_var=between, independent_var=float(independent),
               design_effect=between / independent if independent > 0 else nan)
    return out


_SWEEPABLE = ("tandem_rate", "quorum", "discovery_rate", "research_rate", "assessment_sd",
              "colony_size", "active_fraction", "high_threshold_fraction")


def commitment_correlation_sweep(parameter, values, n_colonies=1000, qualities=(1.0, 0.5),
                                 params=None, *, when="end", rng=None) -> list[dict]:
    """Scout-commitment correlation (and accuracy) as one parameter varies.

    Parameters
    ----------
    parameter : str
        A field of :class:`HouseHuntingParams`: one of ``tandem_rate`` (the recruitment
        rate), ``quorum``, ``discovery_rate``, ``research_rate``, ``assessment_sd``,
        ``colony_size``, ``active_fraction``, ``high_threshold_fraction``.
    values : sequence
        Values of that parameter (validated by :class:`HouseHuntingParams`).
    n_colonies, qualities, params, rng
        As in :func:`speed_accuracy_tradeoff` (one child generator per value).
    when : "end", "decision" or int
        As in :func:`commitment_correlation`; a minute is recorded for the purpose.

    Returns
    -------
    list of dict
        Per value: ``parameter``, ``value``, the :func:`commitment_correlation` fields and
        ``accuracy``, ``accuracy_se``, ``decision_time``, ``decision_time_se``.

    Examples
    --------
    >>> rows = commitment_correlation_sweep("tandem_rate", [0.0, 0.2], n_colonies=100, rng=0)
    >>> [row["value"] for row in rows]
    [0.0, 0.2]
    """
    if parameter not in _SWEEPABLE:
        raise ValueError(f"parameter must be one of {', '.join(_SWEEPABLE)}; got {parameter!r}")
    p = _check_params(params)
    values = _check_values(values, "values", lambda v: v)
    n_colonies = check_int(n_colonies, "n_colonies")
    if isinstance(when, str) and when in ("end", "decision"):
        snaps = ()
    elif isinstance(when, numbers.Integral) and not isinstance(when, (bool, np.bool_)) and when >= 0:
        snaps = (int(when),)
    else:
        raise ValueError(f"when must be 'end', 'decision' or an integer minute >= 0; got {when!r}")
    rows = []
    for value, child in zip(values, spawn(rng, len(values))):
        sim = simulate_emigrations(n_colonies, qualities, p.replace(**{parameter: value}), rng=child,
                                   snapshot_minutes=snaps)
        s = summarize(sim)
        rows.append({"parameter": parameter, "value": value, **commitment_correlation(sim, when),
                     **{k: s[k] for k in ("accuracy", "accuracy_se", "decision_time", "decision_time_se")}})
    return rows


def compare_with_published(n_colonies=1000, params=None, *, rng=None) -> list[dict]:
    """The model's numbers beside the published ones that could be read offline.

    A good (quality 1) versus mediocre (0.5) binary choice with the default parameters.
    Published numbers are quoted only where their text was read (the abstract of Pratt et
    al. 2002); where a number could not be read, ``published`` is ``None`` — nothing is
    filled in from memory. See ``reports/house-hunting-sources.md``.

    Parameters
    ----------
    n_colonies : int >= 1
    params : HouseHuntingParams or None
    rng : None, int or numpy.random.Generator

    Returns
    -------
    list of dict
        Rows with ``quantity``, ``simulated``, ``simulated_se``, ``published``, ``source``,
        ``note``.

    Examples
    --------
    >>> rows = compare_with_published(100, rng=0)
    >>> [row["published"] for row in rows][:2]
    [0.3333333333333333, 3.0]
    """
    p = _check_params(params)
    n_colonies = check_int(n_colonies, "n_colonies")
    sim = simulate_emigrations(n_colonies, (1.0, 0.5), p, rng=rng)
    share, share_se, _ = _mean_se(sim.ever_recruited.sum(axis=1) / p.colony_size)
    with np.errstate(divide="ignore", invalid="ignore"):
        tandem_pace = sim.tandem_runs_before_transport / (sim.first_transport_time - sim.first_tandem_time)
        transport_pace = sim.transports / (sim.completion_time - sim.first_transport_time)
        ratio = np.where((sim.tandem_runs_before_transport > 0) & (tandem_pace > 0),
                         transport_pace / tandem_pace, np.nan)
    ratio_mean, ratio_se, n_ratio = _mean_se(ratio)
    s = summarize(sim)
    abstract = "Pratt et al. 2002, Behav. Ecol. Sociobiol. 52:117-127, abstract (read offline)"
    return [
        {"quantity": "share of the colony's workers that ever recruit", "simulated": share,
         "simulated_se": share_se, "published": 1.0 / 3.0, "source": abstract,
         "note": "'only one-third of the colony's workers ever recruit'; the model's active "
                 "fraction (0.25, from the 2002 model parameters) bounds this share from above"},
        {"quantity": "colony transport rate / colony tandem-run rate", "simulated": ratio_mean,
         "simulated_se": ratio_se, "published": 3.0, "source": abstract,
         "note": f"'transport ... proceeds at a rate 3 times greater than that of tandem runs'; "
                 f"simulated as transports per minute (first transport to completion) over tandem "
                 f"runs per minute (first tandem run to first transport), in the {n_ratio} colonies "
                 f"with both; the per-ant rates are inputs in the ratio 3 (0.099/0.033)"},
        {"quantity": "accuracy (share choosing the good site)", "simulated": s["accuracy"],
         "simulated_se": s["accuracy_se"], "published": None,
         "source": "Pratt et al. 2002 / 2005 binary-choice experiments",
         "note": "number not readable offline; not filled in"},
        {"quantity": "decision time (min)", "simulated": s["decision_time"],
         "simulated_se": s["decision_time_se"], "published": None,
         "source": "Pratt et al. 2002 / 2005", "note": "number not readable offline; not filled in"},
        {"quantity": "emigration (completion) time (min)", "simulated": s["completion_time"],
         "simulated_se": s["completion_time_se"], "published": None,
         "source": "Pratt et al. 2002 / 2005", "note": "number not readable offline; not filled in"},
    ]
