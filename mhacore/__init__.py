"""mhacore: multi-head attention as an ensemble of Nadaraya–Watson estimators.

The companion package of the book; notation and claims (C0–C7) follow ``MATH.md``. It has
two wings. The science, in this folder, is what the chapters import; data flows one way:
``nw`` (C0) → ``attention`` (C1) → ``diversity`` (C3) and ``decomposition`` (C2) →
``montecarlo`` → the theorem-specific models ``optimize``, ``weighting`` (C6) and ``colony``
(C7) → ``theorems`` (the registered checks) → ``sweeps``. The editions, in
:mod:`mhacore.editions`, turn the book into reader, student, instructor and nbgrader
notebooks, an answer key and slides; they import the science, never the other way round.
The package's messages (the self-checks' replies, the checks' texts) speak the reader's
language: ``mhacore.set_language("zh_CN")`` (:mod:`mhacore.i18n`).
"""

import importlib

from ._version import __version__

# The public names and the module that defines each. They are imported on first use, so
# ``python -m mhacore doctor`` can run, and report a missing torch or numpy, in an
# environment where importing them would fail.
_EXPORTS = {
    "nw_weights": "nw",
    "nw_estimate": "nw",
    "MultiHeadNW": "attention",
    "principal_angles": "diversity",
    "cross_gram": "diversity",
    "head_diversity_index": "diversity",
    "max_feasible_hdi": "diversity",
    "BiasVarianceCovariance": "decomposition",
    "bias_variance_covariance": "decomposition",
    "design_covariance": "decomposition",
    "design_decomposition": "decomposition",
    "DataModel": "montecarlo",
    "simulate_heads": "montecarlo",
    "simulate_decomposition": "montecarlo",
    "uniform_weights": "weighting",
    "geometric_weights": "weighting",
    "fibonacci_weights": "weighting",
    "sum_of_squares": "weighting",
    "effective_heads": "weighting",
    "error_second_moment": "weighting",
    "ensemble_mse": "weighting",
    "optimal_weights": "weighting",
    "scout_moments": "colony",
    "colony_variance": "colony",
    "simulate_assessments": "colony",
    "set_language": "i18n",
    "get_language": "i18n",
}


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = [  # noqa: F822 (defined lazily by __getattr__)
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
    "uniform_weights",
    "geometric_weights",
    "fibonacci_weights",
    "sum_of_squares",
    "effective_heads",
    "error_second_moment",
    "ensemble_mse",
    "optimal_weights",
    "scout_moments",
    "colony_variance",
    "simulate_assessments",
    "set_language",
    "get_language",
]
