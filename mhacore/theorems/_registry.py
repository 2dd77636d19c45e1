"""The theorem registry: one registered numerical check per theorem of the book.

Each chapter module in :mod:`mhacore.theorems` registers its checks with
:func:`register`.  A check is a function ``check(scale, device, seed) -> Measurement``;
the registry times it, applies its tolerance rule and returns a :class:`CheckResult`.
Chapters display and assert these results, the test suite runs every check at book
scale, and the theorem ledger appendix tabulates them.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np

from .._rng import DEFAULT_SEED  # noqa: F401  (the book's seed, with the seed streams)
from .._stats import standard_error  # noqa: F401  (the checks import it from here)
from ..i18n import N_, gettext as _

SCALES = ("book", "large")
RULES = ("4se", "atol")
#: How a 4-SE rule reads the gap. ``"both"``: the estimate agrees with a point prediction,
#: ``|estimate - prediction| <= 4 SE``. ``"greater"`` (``"less"``): a directional claim
#: holds when the data show it, ``estimate - prediction > 4 SE`` (``prediction - estimate >
#: 4 SE``); an effect too small to see at 4 SE, or one of the wrong sign, fails it.
SIDES = ("both", "greater", "less")
#: What a chapter reports of its check: ``"holds"``, or ``"fails"`` where the data do not
#: support the paper's claim (a result; the claim table of the ledger says why).
FINDINGS = ("holds", "fails")
#: What a check's agreement can show. ``identity``: algebra or an implementation, equal
#: to rounding (it can fail only through a bug). ``model``: a simulation of an assumed
#: model against that model's own closed form (it tests the derivation and the sampler,
#: not whether the model describes attention, forests or colonies). ``empirical``: a claim
#: tested on something not built to satisfy it (another library's trained model, real
#: data, a model from another field's literature); only this kind can support a claim
#: about real attention heads, forests or colonies.
KINDS = (N_("identity"), N_("model"), N_("empirical"))
#: The paper's claims, as ``MATH.md`` states them (arXiv:2605.20271).
CLAIMS = ("C0", "C1", "C2", "C3", "C4", "C5", "C6", "C7")


@dataclass(frozen=True)
class Measurement:
    """What a check measured, before the registry judges it.

    Parameters
    ----------
    estimate : float
        The measured value (a Monte Carlo mean, a fitted slope, a computed quantity).
    prediction : float
        What the theorem predicts for it.
    standard_error : float
        Standard error of ``estimate`` (0 for a deterministic computation).
    rule : {"4se", "atol"}
        ``"4se"``: pass when ``|estimate - prediction| <= 4 * standard_error``.
        ``"atol"``: pass when ``|estimate - prediction| <= atol`` (exact identities,
        where the only error is rounding).
    atol : float, optional
        The absolute tolerance of rule ``"atol"``; required for that rule.
    side : {"both", "greater", "less"}
        For rule ``"4se"``: a point prediction (``"both"``) or a directional claim that
        holds only when the data show it beyond 4 SE (:data:`SIDES`).
    details : dict
        Further numbers worth showing (JSON-serialisable scalars, lists, strings).
    conditions : dict of str to bool
        Further named tests that must all hold for the check to pass (for example a
        lack-of-fit test beside a slope); recorded in the result's ``details``.
    """

    estimate: float
    prediction: float
    standard_error: float = 0.0
    rule: str = "4se"
    atol: float | None = None
    details: dict = field(default_factory=dict)
    conditions: dict = field(default_factory=dict)
    side: str = "both"

    def __post_init__(self):
        if not all(isinstance(k, str) and isinstance(v, bool) for k, v in self.conditions.items()):
            raise TypeError(f"conditions must map names (str) to bool; got {self.conditions!r}")
        if self.rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}; got {self.rule!r}")
        if self.side not in SIDES or (self.side != "both" and self.rule != "4se"):
            raise ValueError(f"side must be one of {SIDES}, and 'both' with rule 'atol'; "
                             f"got {self.side!r} with rule {self.rule!r}")
        if self.rule == "atol" and (self.atol is None or not self.atol >= 0):
            raise ValueError(f"atol must be a number >= 0 with rule 'atol'; got {self.atol!r}")
        if self.rule == "4se" and not (self.standard_error > 0 and math.isfinite(self.standard_error)):
            raise ValueError(
                "standard_error must be a finite number > 0 with rule '4se'; "
                f"got {self.standard_error!r}"
            )


@dataclass(frozen=True)
class Theorem:
    """A registered theorem: where it lives in the book and how it is checked."""

    id: str
    title: str
    chapter: str
    claim: str
    symbolic: str
    caveat: str
    check: Callable[[str, str, int], Measurement]
    power: str = ""
    kind: str = "model"
    claim_id: str = ""
    finding: str = "holds"


@dataclass(frozen=True)
class CheckResult:
    """A judged measurement, with what is needed to reproduce it."""

    theorem_id: str
    title: str
    chapter: str
    claim: str
    estimate: float
    prediction: float
    standard_error: float
    tolerance: float
    tolerance_rule: str
    passed: bool
    scale: str
    device: str
    seed: int
    wall_time_s: float
    details: dict
    kind: str = ""  # reports written before checks declared their kind have none
    claim_id: str = ""
    rule: str = ""  # "4se" or "atol"; older reports have only tolerance_rule
    finding: str = "holds"  # what the chapter reports: "holds", or "fails" (FINDINGS)

    @property
    def by_standard_error(self) -> bool:
        """Whether the check is judged at 4 SE (else by a tolerance)."""
        return judged_by_standard_error(self.rule, self.tolerance_rule)

    @property
    def as_reported(self) -> bool:
        """Whether the check came out as its chapter reports (:data:`FINDINGS`)."""
        return self.passed == (self.finding != "fails")

    @property
    def verdict(self) -> str:
        """``"holds"``; ``"not supported"`` for a failure its chapter reports (the data do
        not support the paper's claim); ``"FAILS"`` for any other failure. In the language
        the package speaks."""
        if self.passed:
            return _("holds")
        return _("not supported") if self.finding == "fails" else _("FAILS")

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        """The theorem's id, then (indented) the estimate ± SE against the prediction and
        the verdict; for a tolerance rule a third line gives the gap
        ``|estimate - prediction|`` beside the tolerance (the estimate and prediction
        alone, rounded, can look equal when the gap fails), and a failed further
        condition is named on a line of its own. Every line fits in 80 columns for ids up
        to 79 characters. The words are in the language the package speaks
        (:mod:`mhacore.i18n`)."""
        gap = abs(self.estimate - self.prediction)
        failed = [name for name, ok in self.details.get("conditions", {}).items() if not ok]
        if self.by_standard_error:
            lines = [_("estimate {estimate} ± {standard_error} (SE), prediction {prediction} "
                       "-> {verdict}").format(
                estimate=f"{self.estimate:.6g}", standard_error=f"{self.standard_error:.3g}",
                prediction=f"{self.prediction:.6g}", verdict=self.verdict)]
        else:
            relation = "<=" if gap <= self.tolerance else ">"
            lines = [_("estimate {estimate}, prediction {prediction}").format(
                         estimate=f"{self.estimate:.6g}", prediction=f"{self.prediction:.6g}"),
                     _("gap {gap} {relation} tolerance {tolerance} -> {verdict}").format(
                         gap=f"{gap:.2g}", relation=relation, tolerance=f"{self.tolerance:.1e}",
                         verdict=self.verdict)]
        side = side_of(self.tolerance_rule)
        if side != "both" and self.standard_error > 0:
            z = (self.estimate - self.prediction) / self.standard_error
            lines.append(_("z = {z}; the claim needs z {relation} {bound}").format(
                z=f"{z:+.2f}", relation=">" if side == "greater" else "<",
                bound="4" if side == "greater" else "-4"))
        lines = [f"    {line}" for line in lines]
        lines += [("    " + _("condition failed: {name}").format(name=name))[:80]
                  for name in failed]
        return "\n".join([f"{self.theorem_id}:", *lines])


def holds(estimate: float, prediction: float, tolerance: float, conditions: dict,
          side: str = "both") -> bool:
    """Whether a check holds: a finite gap ``|estimate - prediction|`` within the tolerance
    (for ``side="greater"``, ``estimate - prediction`` above it; for ``"less"``,
    ``prediction - estimate`` above it) and every further condition met (what :func:`run`
    records as ``passed``, and what ``check --resume`` recomputes for a kept result).

    >>> holds(1.0, 1.05, 0.1, {}), holds(1.0, 1.05, 0.1, {"ordered": False})
    (True, False)
    >>> holds(0.5, 0.0, 0.4, {}, side="greater"), holds(-0.5, 0.0, 0.4, {}, side="greater")
    (True, False)
    """
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}; got {side!r}")
    shown = {"both": tolerance - abs(estimate - prediction), "greater": estimate - prediction - tolerance,
             "less": prediction - estimate - tolerance}[side]
    ok = shown >= 0 if side == "both" else shown > 0
    return bool(math.isfinite(shown) and ok and all(conditions.values()))


#: The tolerance rule's text for each side of a 4-SE check (the report records it).
SIDE_RULES = {"both": "|estimate - prediction| <= 4 SE", "greater": "estimate - prediction > 4 SE",
              "less": "prediction - estimate > 4 SE"}


def side_of(tolerance_rule: str) -> str:
    """The side of a recorded tolerance rule (``"both"`` for any two-sided rule).

    >>> side_of("estimate - prediction > 4 SE and ordered")
    'greater'
    """
    first = tolerance_rule.split(" and ")[0]
    return next((side for side, text in SIDE_RULES.items() if side != "both" and first == text), "both")


def judged_by_standard_error(rule: str, tolerance_rule: str) -> bool:
    """Whether a result with this ``rule`` ("4se", "atol", or "" in reports older than
    the field) and ``tolerance_rule`` text is judged at 4 SE; condition names appended to
    the text do not confuse it.

    >>> judged_by_standard_error("", "|estimate - prediction| <= atol and SE below a bound")
    False
    """
    if rule:
        return rule == "4se"
    return "SE" in tolerance_rule.split(" and ")[0]


def interior_argmin(grid, values, name="grid"):
    """Index of the smallest of ``values``, which must not sit on either end of ``grid``.

    A grid search whose optimum lands on the edge has not located the optimum, only a
    bound on it; the checks call this instead of ``argmin`` so that such a search fails.

    Parameters
    ----------
    grid, values : array_like of shape (J,)
        The searched points (for the message) and the criterion at each, ``J >= 3``.
    name : str
        What the grid is, for the message.

    Returns
    -------
    int
        ``argmin(values)``, in ``1 .. J − 2``.

    Raises
    ------
    ValueError
        If the minimum is at index 0 or ``J − 1``.

    Examples
    --------
    >>> interior_argmin([1, 2, 3], [2.0, 1.0, 3.0])
    1
    """
    grid, values = np.asarray(grid), np.asarray(values)
    if values.ndim != 1 or len(values) < 3 or grid.shape != values.shape:
        raise ValueError(f"values must be 1-D with the grid's shape and at least 3 points; "
                         f"got shapes {grid.shape} and {values.shape}")
    j = int(np.argmin(values))
    grid = grid.tolist()
    if j in (0, len(values) - 1):
        side = "lower" if j == 0 else "upper"
        raise ValueError(f"the minimum over the {name} must be interior; it sits on the {side} edge "
                         f"{grid[j]!r} of [{grid[0]!r}, {grid[-1]!r}]: widen the {name}")
    return j


REGISTRY: dict[str, Theorem] = {}


def register(theorem_id: str, *, title: str, chapter: str, claim: str, kind: str,
             claim_id: str, symbolic: str = "", caveat: str = "", power: str = "",
             finding: str = "holds"):
    """Decorator registering ``check(scale, device, seed) -> Measurement`` under an id.

    ``kind`` is what the check's agreement can show (one of :data:`KINDS`), ``claim_id``
    the paper's claim it bears on (one of :data:`CLAIMS`); both go into every report.
    ``power`` is the check's power line: the smallest perturbation of its model that it
    detects at book scale, as measured (the theorem ledger shows it). ``finding`` is what
    the chapter reports: ``"fails"`` for a claim of the paper its data do not support
    (one of :data:`FINDINGS`); the tests and ``check`` compare every run with it.

    ``claim``, ``symbolic``, ``caveat`` and ``power`` are messages of the package's catalog
    (:mod:`mhacore.i18n`): written in English here, shown in the reader's language by the
    ledger (:func:`~mhacore.theorems.ledger_notes`); ``tests/test_i18n.py`` asks a
    translation of each.
    """
    if not isinstance(theorem_id, str) or not theorem_id:
        raise ValueError(f"theorem_id must be a non-empty string; got {theorem_id!r}")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
    if claim_id not in CLAIMS:
        raise ValueError(f"claim_id must be one of {CLAIMS}; got {claim_id!r}")
    if finding not in FINDINGS:
        raise ValueError(f"finding must be one of {FINDINGS}; got {finding!r}")

    def decorate(check):
        if theorem_id in REGISTRY:
            raise ValueError(f"theorem_id must be unique; {theorem_id!r} is registered twice")
        REGISTRY[theorem_id] = Theorem(theorem_id, title, chapter, claim, symbolic, caveat, check,
                                       power, kind, claim_id, finding)
        return check

    return decorate


def run(theorem_id: str, *, scale: str = "book", device: str = "cpu",
        seed: int = DEFAULT_SEED) -> CheckResult:
    """Run one registered check and judge it by its tolerance rule.

    Parameters
    ----------
    theorem_id : str
        A key of :data:`REGISTRY`.
    scale : {"book", "large"}
        ``"book"`` runs in seconds on a CPU; ``"large"`` is for the command line or a GPU.
    device : str
        A torch device string, ``"cpu"`` or ``"cuda"``.
    seed : int
        Seed of every random draw of the check.

    Returns
    -------
    CheckResult
    """
    if theorem_id not in REGISTRY:
        raise ValueError(f"theorem_id must be one of {sorted(REGISTRY)}; got {theorem_id!r}")
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}; got {scale!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise TypeError(f"seed must be an int >= 0; got {seed!r}")
    theorem = REGISTRY[theorem_id]
    start = time.perf_counter()
    m = theorem.check(scale, device, seed)
    wall = time.perf_counter() - start
    if not isinstance(m, Measurement):
        raise TypeError(f"check {theorem_id!r} must return a Measurement; got {type(m).__name__}")
    if m.rule == "4se":
        tolerance, rule = 4.0 * m.standard_error, SIDE_RULES[m.side]
    else:
        tolerance, rule = float(m.atol), "|estimate - prediction| <= atol"
    passed = holds(m.estimate, m.prediction, tolerance, m.conditions, m.side)
    details = dict(m.details)
    if m.conditions:
        rule += " and " + " and ".join(m.conditions)
        details["conditions"] = dict(m.conditions)
    return CheckResult(theorem_id, theorem.title, theorem.chapter, theorem.claim,
                       float(m.estimate), float(m.prediction), float(m.standard_error),
                       float(tolerance), rule, passed, scale, str(device), seed,
                       round(wall, 3), details, theorem.kind, theorem.claim_id, m.rule,
                       theorem.finding)


def run_checks(theorem_ids=None, *, scale: str = "book", device: str = "cpu",
               seed: int = DEFAULT_SEED) -> list[CheckResult]:
    """Run several checks (all registered ones when ``theorem_ids`` is None), in order."""
    ids = list(REGISTRY) if theorem_ids is None else list(theorem_ids)
    return [run(i, scale=scale, device=device, seed=seed) for i in ids]
