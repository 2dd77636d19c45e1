"""Calibration: how each registered check behaves over many seeds.

A check judged by ``|estimate − prediction| ≤ 4 SE`` should give ``z = (estimate −
prediction)/SE`` close to standard normal over seeds (mean ≈ 0, sd ≈ 1) and fail about
once in 16 000 runs; an sd far from 1 means its SE is wrong, a mean far from 0 a bias.
A tolerance check should keep ``gap/tolerance`` below 1 at every seed.
``python -m mhacore check --seeds A-B`` writes :func:`calibration` into its report.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ._registry import judged_by_standard_error, side_of

__all__ = ["CALIBRATION_REPORT", "calibration", "calibration_table", "load_calibration"]

#: The committed calibration at book scale (``check --seeds 1-20``).
CALIBRATION_REPORT = Path(__file__).resolve().parents[2] / "reports" / "calibration-book.json"


def load_calibration(path=None) -> dict:
    """The calibration report at ``path``; default the committed :data:`CALIBRATION_REPORT`."""
    path = CALIBRATION_REPORT if path is None else Path(path)
    if not path.is_file():
        raise ValueError(f"path must be an existing calibration report; got {str(path)!r}")
    report = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(report, dict) or "calibration" not in report:
        raise ValueError(f"path must be a calibration report (made by check --seeds); got {str(path)!r}")
    return report


def _stat(values, how):
    return None if not values else float(how(np.asarray(values, dtype=np.float64)))


def calibration(results) -> dict:
    """Per check, over the seeds in ``results``: pass count and the spread of its statistic.

    Parameters
    ----------
    results : iterable of dict
        :meth:`CheckResult.to_dict` outputs (any number of seeds per check).

    Returns
    -------
    dict
        ``{theorem_id: {"kind", "claim_id", "rule", "seeds", "passed", "failed_seeds",
        "failed_conditions", ...}}`` with ``"z_mean"``, ``"z_sd"``, ``"z_max_abs"`` for a
        4-SE rule (``z_sd`` needs two seeds) and ``"gap_over_tolerance_max"`` for a
        tolerance rule.

    Examples
    --------
    >>> rows = [dict(theorem_id="t", kind="model", claim_id="C0", seed=s, passed=True,
    ...              estimate=e, prediction=0.0, standard_error=1.0, tolerance=4.0,
    ...              tolerance_rule="|estimate - prediction| <= 4 SE", details={})
    ...         for s, e in [(1, -1.0), (2, 1.0)]]
    >>> c = calibration(rows)["t"]
    >>> c["passed"], c["seeds"], c["z_mean"], round(c["z_sd"], 4), c["z_max_abs"]
    (2, 2, 0.0, 1.4142, 1.0)
    """
    grouped: dict[str, list[dict]] = {}
    for r in results:
        grouped.setdefault(r["theorem_id"], []).append(r)
    out = {}
    for theorem_id, rows in grouped.items():
        by_se = judged_by_standard_error(rows[0].get("rule", ""), rows[0]["tolerance_rule"])
        entry = {"kind": rows[0].get("kind", ""), "claim_id": rows[0].get("claim_id", ""),
                 "rule": "4se" if by_se else "atol", "seeds": len(rows),
                 "finding": rows[0].get("finding", "holds"),
                 "side": side_of(rows[0]["tolerance_rule"]) if by_se else "both",
                 "passed": sum(bool(r["passed"]) for r in rows),
                 "failed_seeds": [r["seed"] for r in rows if not r["passed"]]}
        failed_conditions: dict[str, int] = {}
        for r in rows:
            for name, ok in r["details"].get("conditions", {}).items():
                failed_conditions[name] = failed_conditions.get(name, 0) + (not ok)
        entry["failed_conditions"] = failed_conditions
        gaps = [abs(r["estimate"] - r["prediction"]) for r in rows]
        if by_se:
            z = [(r["estimate"] - r["prediction"]) / r["standard_error"] for r in rows
                 if r["standard_error"] > 0 and math.isfinite(r["estimate"])]
            entry.update(z_mean=_stat(z, np.mean),
                         z_sd=_stat(z, lambda a: a.std(ddof=1)) if len(z) > 1 else None,
                         z_max_abs=_stat(z, lambda a: np.abs(a).max()))
        else:
            ratio = [g / r["tolerance"] if r["tolerance"] > 0 else (0.0 if g == 0 else math.inf)
                     for g, r in zip(gaps, rows)]
            entry["gap_over_tolerance_max"] = _stat(ratio, np.max)
        out[theorem_id] = entry
    return out


def calibration_table(cal: dict) -> str:
    """The calibration as a plain-text table (80 columns): one line per check.

    >>> print(calibration_table({"t": dict(kind="model", rule="4se", seeds=20, passed=20,
    ...     z_mean=0.1, z_sd=1.02, z_max_abs=2.5)}))  # doctest: +NORMALIZE_WHITESPACE
    check                              kind      passed  mean z  sd z  max|z|
    t                                  model      20/20    0.10  1.02    2.50
    """
    lines = [f"{'check':34} {'kind':9} {'passed':>6}  {'mean z':>6}  {'sd z':>4}  {'max|z|':>6}"]
    for theorem_id, c in cal.items():
        head = f"{theorem_id[:34]:34} {c['kind'][:9]:9} {c['passed']:>3}/{c['seeds']:<2}"
        if c["rule"] == "4se":
            sd = "   -" if c.get("z_sd") is None else f"{c['z_sd']:4.2f}"
            lines.append(f"{head}  {c['z_mean']:6.2f}  {sd}  {c['z_max_abs']:6.2f}")
        else:
            lines.append(f"{head}  gap/tolerance at most {c['gap_over_tolerance_max']:.2g}")
    return "\n".join(lines)
