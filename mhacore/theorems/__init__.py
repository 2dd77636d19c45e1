"""One registered numerical check per theorem of the book.

Importing this package imports every chapter's module of checks, which register
themselves in :data:`REGISTRY`.  See :func:`run` and :func:`run_checks`.
"""

from ._registry import (CLAIMS, DEFAULT_SEED, KINDS, REGISTRY, SCALES, CheckResult, Measurement,
                        Theorem, register, run, run_checks)
from ._calibration import CALIBRATION_REPORT, calibration, calibration_table, load_calibration
from ._ledger import as_reported_count, calibration_rows, calibration_tally, ledger_notes, ledger_rows, ledger_tally

# Chapter modules register their checks on import; each is added by its chapter.
from . import ch01_nw  # noqa: F401
from . import ch04_diversity  # noqa: F401
from . import ch05_decorrelation  # noqa: F401
from . import ch02_one_head  # noqa: F401
from . import ch03_bvc  # noqa: F401
from . import ch06_heads_width  # noqa: F401
from . import ch07_weights  # noqa: F401
from . import ch08_ensembles  # noqa: F401
from . import ch09_trained  # noqa: F401

__all__ = ["CLAIMS", "DEFAULT_SEED", "KINDS", "REGISTRY", "SCALES", "CheckResult", "Measurement", "Theorem",
           "CALIBRATION_REPORT", "calibration", "calibration_table",
           "load_calibration", "register", "run", "run_checks",
           "as_reported_count", "calibration_rows", "calibration_tally", "ledger_notes", "ledger_rows", "ledger_tally"]
