"""The theorem ledger's tables and notes (``book/ledger.md``), in the reader's language.

The ledger appendix runs every registered check and shows three things built here: a
table of the results (:func:`ledger_rows`, with the tally :func:`ledger_tally`), what each
check asserts (:func:`ledger_notes`), and the calibration over seeds
(:func:`calibration_rows`, :func:`calibration_tally`). Headers, words and the checks'
texts are in the language the package speaks (:mod:`mhacore.i18n`); numbers are formatted
the same in every language.
"""

from __future__ import annotations

from ..i18n import gettext as _
from ._registry import REGISTRY

__all__ = ["as_reported_count", "calibration_rows", "calibration_tally", "ledger_notes", "ledger_rows",
           "ledger_tally"]


def _by_standard_error(result) -> bool:
    return "SE" in result.tolerance_rule


def ledger_rows(results) -> list[dict]:
    """One row per result: check, chapter, estimate, prediction, SE or tolerance, kind,
    verdict and seconds, keyed by the column headers.

    Parameters
    ----------
    results : iterable of CheckResult

    Returns
    -------
    list of dict
        The cells as text, in the order of the columns (a ``pandas.DataFrame`` of them is
        the ledger's table).

    Examples
    --------
    >>> from mhacore.theorems import CheckResult
    >>> r = CheckResult("t", "", "01-x", "", 1.0, 1.0, 0.01, 0.04, "|estimate - prediction|"
    ...                 " <= 4 SE", True, "book", "cpu", 0, 0.5, {}, "model", "C0", "4se")
    >>> ledger_rows([r])[0]["SE or tol."], ledger_rows([r])[0]["verdict"]
    ('± 0.01', 'holds')
    """
    return [{_("check"): r.theorem_id,
             _("ch."): r.chapter.split("-")[0],
             _("estimate"): f"{r.estimate:.4g}",
             _("prediction"): f"{r.prediction:.4g}",
             _("SE or tol."): f"± {r.standard_error:.2g}" if _by_standard_error(r)
             else _("{tolerance} (exact)").format(tolerance=f"{r.tolerance:.0e}"),
             _("kind"): _(r.kind),
             _("verdict"): r.verdict,
             _("s"): f"{r.wall_time_s:.1f}"}
            for r in results]


def ledger_tally(results) -> str:
    """How many checks ran and how many hold: ``"19 checks, 19 hold"``; checks whose
    chapter reports that the data do not support the claim are counted apart
    (``"21 checks, 19 hold, 2 not supported as their chapters report"``)."""
    results = list(results)
    held = sum(r.passed for r in results)
    reported = sum(r.finding == "fails" and not r.passed for r in results)
    if reported:
        return _("{checks} checks, {held} hold, {count} not supported as their chapters "
                 "report").format(checks=len(results), held=held, count=reported)
    return _("{checks} checks, {held} hold").format(checks=len(results), held=held)


def ledger_notes(results) -> str:
    """What each check asserts, as Markdown: per result, the claim (with the check's id
    and chapter), the symbolic check, the caveat and the power, one paragraph each.

    A check judged by a tolerance states that it fails on any deviation above it, then
    its power line if it has one; a Monte Carlo check without a power line says it was
    not measured.
    """
    notes = []
    for r in results:
        t = REGISTRY[r.theorem_id]
        tolerance = f"{r.tolerance:.0e}"
        if _by_standard_error(r):
            power = _(t.power) if t.power else _("not measured")
        elif t.power:
            power = _("fails on any deviation above its tolerance {tolerance}. {power}").format(
                tolerance=tolerance, power=_(t.power))
        else:
            power = _("fails on any deviation above its tolerance {tolerance}.").format(
                tolerance=tolerance) + " "
        notes.append("  \n".join([
            _("**{check}** ({chapter}). {claim}").format(check=t.id, chapter=t.chapter,
                                                         claim=_(t.claim)),
            _("*Symbolic check:* {symbolic}").format(symbolic=_(t.symbolic)),
            _("*Caveat:* {caveat}").format(caveat=_(t.caveat) if t.caveat else _("none")),
            _("*Power:* {power}").format(power=power)]))
    return "\n\n".join(notes)


def calibration_rows(calibration: dict, theorem_ids) -> list[dict]:
    """The calibration table: per check, its kind, the seeds that gave the verdict its
    chapter reports (:func:`as_reported_count`) and the spread of its z (a 4-SE check) or
    its largest gap over the tolerance (a tolerance check).

    Parameters
    ----------
    calibration : dict
        The ``"calibration"`` entry of a report (:func:`~mhacore.theorems.calibration`).
    theorem_ids : iterable of str
        The checks to show, in order.

    Returns
    -------
    list of dict
        Rows keyed by the column headers.
    """
    rows = []
    for theorem_id in theorem_ids:
        c = calibration[theorem_id]
        if c["rule"] == "4se":
            spread = (f"{c['z_mean']:+.2f}", f"{c['z_sd']:.2f}", f"{c['z_max_abs']:.2f}")
        else:
            spread = ("", "", _("gap/tol. ≤ {ratio}").format(
                ratio=f"{c['gap_over_tolerance_max']:.1g}"))
        rows.append({_("check"): theorem_id, _("kind"): _(c["kind"]),
                     _("as reported"): f"{as_reported_count(c)}/{c['seeds']}",
                     _("mean z"): spread[0], _("sd z"): spread[1], _("max |z|"): spread[2]})
    return rows


def calibration_tally(report: dict) -> str:
    """The seeds of a calibration report and how many of its runs give the verdict their
    chapter reports: ``"seeds 1-20: 380 of 380 runs as reported"`` (a check whose chapter
    reports that the data do not support the claim is as reported when it fails)."""
    cal, seeds = report["calibration"], report["seeds"]
    return _("seeds {first}-{last}: {agree} of {runs} runs as reported").format(
        first=seeds[0], last=seeds[-1], agree=sum(as_reported_count(c) for c in cal.values()),
        runs=sum(c["seeds"] for c in cal.values()))


def as_reported_count(entry: dict) -> int:
    """How many seeds of a calibration entry gave the verdict its chapter reports.

    >>> as_reported_count({"seeds": 20, "passed": 0, "finding": "fails"})
    20
    """
    return entry["seeds"] - entry["passed"] if entry.get("finding") == "fails" else entry["passed"]
