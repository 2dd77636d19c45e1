"""Self-checking exercises: say right or wrong without revealing the answer.

Each computational or derivation exercise of the book is registered here with its
reference answer and the precision it asks for. A student calls :func:`check` with a label
and an answer; the reply says whether the answer is right (agreeing with the reference to
the stated number of significant figures, or equal as a SymPy expression) and, when it is
not, gives a hint, never the reference value: the hint for a common mistake when the answer
is that mistake, a general hint otherwise.

Answers given as strings (``"1.041"``, ``"sigma**2/n"``) are parsed by
:func:`mhacore._parse.parse_answer`, which checks the syntax tree against a whitelist
before SymPy sees it: a string is never evaluated, so an answer cannot run code.

The reference answers are tested in ``tests/test_exercises.py`` against independent
computations (closed forms, SymPy, or ``mhacore`` itself).
"""

from __future__ import annotations

import cmath
import contextlib
import math
import re
import numbers
import signal
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from mhacore._parse import UnsafeAnswer, parse_answer

KINDS = ("number", "vector", "expression")


@dataclass(frozen=True)
class Exercise:
    """One exercise with a checkable answer.

    Parameters
    ----------
    label : str
        The label of the ``{exercise}`` in the book, e.g. ``"ex-3-2"``.
    chapter : str
        The chapter file stem, e.g. ``"03-bias-variance-covariance"``.
    kind : {"number", "vector", "expression"}
        A real number, a vector of real numbers, or a SymPy expression.
    prompt : str
        What ``answer`` must be, in a few words (shown when the answer is missing).
    hint : str
        A nudge shown after a wrong answer that matches no listed mistake.
    reference : float, list of float or str
        The answer (a SymPy string for expressions); never shown.
    sig_figs : int or None
        For numbers and vectors: an answer is right when it agrees with the reference to
        this many significant figures, i.e. within half a unit of the last one. ``None``
        means exact (an integer answer).
    mistakes : tuple of (answer, hint) pairs
        Common wrong answers (judged like an answer, at the same precision) and the hint
        each deserves.
    symbols : tuple of str
        For expressions: the names of the symbols the answer may use, as SymPy prints them
        (``"B^2"``, ``"rho_0"``). The reference refers to each by the name with everything
        but letters, digits and underscores removed (``B2``, ``rho_0``).
    """

    label: str
    chapter: str
    kind: str
    prompt: str
    hint: str
    reference: object = field(repr=False)
    sig_figs: int | None = 3
    mistakes: tuple = field(default=(), repr=False)
    symbols: tuple = ()

    @property
    def precision(self) -> str:
        """The precision asked for, in words ("to 3 significant figures")."""
        if self.kind == "expression":
            return "exactly, as an expression"
        if self.sig_figs is None:
            return "exactly (an integer)"
        return f"to {self.sig_figs} significant figures"


@dataclass(frozen=True)
class Feedback:
    """The verdict on an answer: ``correct`` is True, False, or None when none was given."""

    label: str
    correct: bool | None
    message: str

    def __repr__(self) -> str:
        return self.message

    def _repr_markdown_(self) -> str:
        return self.message


EXERCISES: dict[str, Exercise] = {}


def register_exercise(exercise: Exercise) -> Exercise:
    """Add ``exercise`` to :data:`EXERCISES` (labels are unique)."""
    if exercise.kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {exercise.kind!r}")
    if exercise.label in EXERCISES:
        raise ValueError(f"label must be unique; {exercise.label!r} is registered twice")
    if exercise.sig_figs is not None and not (isinstance(exercise.sig_figs, int)
                                              and exercise.sig_figs >= 1):
        raise ValueError(f"sig_figs must be an integer >= 1 or None; got {exercise.sig_figs!r}")
    EXERCISES[exercise.label] = exercise
    return exercise


def agreeing_figures(answer, reference, sig_figs: int | None) -> int:
    """How many significant figures (up to ``sig_figs``) ``answer`` shares with
    ``reference``, entry by entry (the smallest over entries); ``sig_figs`` when equal.

    An answer agrees to k figures when it lies within half a unit of the reference's k-th
    significant figure. With ``sig_figs=None`` only exact equality counts (returns 1 or 0).

    Examples
    --------
    >>> agreeing_figures(1.041, 1.0408377994, 3), agreeing_figures(1.1, 1.0408377994, 3)
    (3, 1)
    """
    answer, reference = np.asarray(answer, float), np.asarray(reference, float)
    if sig_figs is None:
        return int(np.array_equal(answer, reference))
    for k in range(sig_figs, 0, -1):
        scale = 10.0 ** (np.floor(np.log10(np.where(reference == 0, 1.0, np.abs(reference))))
                         - k + 1)
        # the 1e-12 allows for the binary rounding of decimal answers such as 3.37
        if np.all(np.abs(answer - reference) <= 0.5 * scale * (1 + 1e-12)):
            return k
    return 0


class _Unreadable(ValueError):
    """An answer of the wrong form (a list for a number, NaN, ...): the message says why."""


def _tensor_values(tensor):
    """A torch tensor's values as a float64 NumPy array (bfloat16 and float16 included);
    a tensor without values (device ``meta``), or with complex or boolean values, is
    refused."""
    import torch

    if tensor.device.type == "meta":
        raise _Unreadable("a tensor on the 'meta' device holds no values")
    if tensor.is_complex():
        raise _Unreadable("this exercise expects real numbers, not a complex tensor")
    if tensor.dtype == torch.bool:
        raise _Unreadable("this exercise expects numbers, not a tensor of booleans")
    return tensor.detach().cpu().double().numpy()


def _as_number(answer, label):
    if isinstance(answer, str):
        answer = parse_answer(answer)
        if not (answer.is_number and answer.is_real):
            raise UnsafeAnswer("it is not a real number")
    if isinstance(answer, bool):
        raise _Unreadable(f"{answer} is not a number")
    if hasattr(answer, "detach"):  # a torch tensor
        answer = _tensor_values(answer)
    if getattr(answer, "is_number", False) and getattr(answer, "is_real", False):
        answer = float(answer)  # an exact SymPy number (Integer, Rational, Float, sqrt(2), ...)
    if isinstance(answer, np.ma.MaskedArray) or answer is np.ma.masked:
        if np.ma.getmaskarray(answer).any():
            raise _Unreadable("a masked value is not a number")
        answer = np.ma.getdata(answer)
    if isinstance(answer, np.bool_):
        raise _Unreadable(f"{answer} is not a number")
    if isinstance(answer, numbers.Number) and not isinstance(answer, (float, complex)) \
            or type(answer).__module__.startswith("mpmath"):
        try:  # an int of any size, Fraction, Decimal, mpmath's mpf
            answer = float(answer)
        except OverflowError:
            raise _Unreadable("it is too large for a float") from None
    if isinstance(answer, (list, tuple)) or np.ndim(answer) > 0:
        raise _Unreadable("this exercise expects one number, not a list or array; write "
                          "it as a plain number (e.g. answer = 0.5)")
    value = np.asarray(answer)
    if value.dtype.kind not in "iuf":
        raise _Unreadable(f"this exercise expects one number; got {type(answer).__name__}")
    value = float(value.reshape(()))
    if not math.isfinite(value):
        raise _Unreadable(f"{value} is not a finite number")
    return value


def _as_vector(answer, label, shape):
    wanted = f"a list of {shape[0]} numbers, e.g. [{', '.join(['0.5'] * shape[0])}]"
    if isinstance(answer, str):
        raise _Unreadable(f"this exercise expects {wanted}, not a string")
    if isinstance(answer, (dict, set, frozenset)) or (
            hasattr(answer, "__next__") and not hasattr(answer, "__len__")):
        raise _Unreadable(f"this exercise expects {wanted}; give a list, not a "
                          f"{type(answer).__name__}")
    if hasattr(answer, "detach"):
        answer = _tensor_values(answer)
    if not isinstance(answer, (list, tuple)) and np.ndim(answer) == 0:
        raise _Unreadable(f"this exercise expects {wanted}, not a single value")
    entries = list(answer)
    if any(np.ndim(a) > 0 for a in entries):
        raise _Unreadable(f"this exercise expects {wanted}, not a nested list")
    if len(entries) != shape[0]:
        raise _Unreadable(f"this exercise expects {wanted}; your list has {len(entries)}")
    return np.asarray([_as_number(a, label) for a in entries], dtype=float)


def _identifier(name: str) -> str:
    return re.sub(r"\W", "", name)


def _names(ex: Exercise) -> tuple[dict, dict]:
    """The exercise's symbols by printed name, and by every spelling an answer may use."""
    import sympy as sp

    by_name = {name: sp.Symbol(name, positive=True) for name in ex.symbols}
    spellings = {}
    for name, symbol in by_name.items():
        spellings[_identifier(name)] = symbol
        spellings[_identifier(name).replace("_", "")] = symbol  # rho0 for rho_0
    return by_name, spellings


def _as_expression(answer, ex: Exercise):
    import sympy as sp

    by_name, spellings = _names(ex)
    if isinstance(answer, str):
        given = parse_answer(answer, spellings)
    elif isinstance(answer, (sp.Basic, sp.MatrixBase, int, float)):
        given = sp.sympify(answer)  # already a SymPy object or a number: no string is parsed
    else:
        raise _Unreadable(f"this exercise expects a SymPy expression or a formula in quotes; "
                          f"got {type(answer).__name__}")
    if isinstance(given, sp.MatrixBase):
        if given.shape != (1, 1):
            raise _Unreadable(f"this exercise expects one expression, not a "
                              f"{given.shape[0]}x{given.shape[1]} matrix")
        given = given[0, 0]  # a 1x1 matrix, as u.T * v gives
    if not isinstance(given, sp.Expr) or isinstance(answer, bool):
        raise _Unreadable(f"this exercise expects a SymPy expression; "
                          f"got {type(answer).__name__}")
    # the student's symbols may carry other assumptions: match them by name
    return given.subs({s: by_name[s.name] for s in given.free_symbols if s.name in by_name})


N_POINTS = 24  # random points at which two expressions must agree
N_WIDE = 8  # of them drawn log-uniformly in [0.01, 100], far beyond the book's range
JUDGE_SECONDS = 2.0  # the longest a judgement may take (enforced in the main thread)


class _TooSlow(Exception):
    """A judgement ran past :data:`JUDGE_SECONDS`."""


@contextlib.contextmanager
def _time_limit(seconds: float):
    """Raise :class:`_TooSlow` inside the block once ``seconds`` have passed.

    A POSIX interval timer interrupts SymPy wherever it is. A timer the caller set (for
    example a test runner's) keeps running: it is given back, less the time spent here,
    and fires in the caller's handler if it is due first. Signals reach only the main
    thread, where notebooks, nbgrader's tests and scripts run ``check``; in another thread,
    or without ``setitimer`` (Windows), the block runs unlimited, its work still bounded
    by the parser's limits.
    """
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise _TooSlow

    previous = signal.signal(signal.SIGALRM, expire)
    start = time.monotonic()
    outer, interval = signal.setitimer(signal.ITIMER_REAL, seconds)  # the caller's timer
    if 0 < outer < seconds:  # the caller's alarm comes first: keep its time
        signal.setitimer(signal.ITIMER_REAL, outer)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer > 0:  # give the caller's timer back, less the time spent here
            left = outer - (time.monotonic() - start)
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-6), interval)


def _expression_equal(given, reference) -> bool:
    """Whether two expressions agree at :data:`N_POINTS` random positive points.

    Two different expressions of the book's kind (rational functions, powers, exp, log,
    trigonometric functions of positive symbols) agree at random real points only on a set
    of measure zero, so agreement at 24 independent points to 1e-9 stands for identity:
    16 in [0.5, 2], where the book's formulas live, and 8 log-uniform in [0.01, 100], so
    that a term built to vanish on the usual range is seen (a wide point where the
    reference has no finite value is skipped). The points are drawn afresh at each call, from the operating system's
    entropy, so an answer cannot be built to vanish at points read from the source.
    Numerical evaluation takes time that grows with the size of the expression tree, not
    with its expansion: ``(a+u+v)**100`` is judged as fast as ``a``, where
    ``sympy.simplify`` would expand it for minutes.
    """
    import sympy as sp

    rng = np.random.default_rng()  # fresh points each call (not from a seed in the source)
    free = sorted(reference.free_symbols | given.free_symbols, key=lambda s: s.name)
    for k in range(N_POINTS):
        # most points where the book's formulas live, some far from it (log-uniform in
        # [0.01, 100]), so a term that vanishes only near [0.5, 2] is seen
        wide = k >= N_POINTS - N_WIDE
        draw = (lambda: 10 ** rng.uniform(-2, 2)) if wide else (lambda: rng.uniform(0.5, 2.0))
        point = {s: sp.Float(draw()) for s in free}
        try:
            b = complex(reference.evalf(subs=point))
        except (OverflowError, TypeError, ValueError):
            b = complex("nan")
        if not cmath.isfinite(b):
            if wide:
                continue  # the reference has no finite value this far out: no evidence
            return False
        try:
            a = complex(given.evalf(subs=point))
        except (OverflowError, TypeError, ValueError):  # no finite complex value there
            return False
        if not abs(a - b) <= 1e-9 * max(1.0, abs(b)):
            return False
    return True


def _judge(ex: Exercise, answer) -> Feedback:
    """The verdict on an answer already read as a float, an array or a SymPy expression."""
    label = ex.label
    if ex.kind == "expression":
        spellings = _names(ex)[1]
        if _expression_equal(answer, parse_answer(ex.reference, spellings)):
            return Feedback(label, True, f"Correct ({label}).")
        for wrong, hint in ex.mistakes:
            if _expression_equal(answer, parse_answer(wrong, spellings)):
                return Feedback(label, False, f"Not yet ({label}). Hint: {hint}")
        return Feedback(label, False, f"Not yet ({label}). Hint: {ex.hint}")
    wanted = ex.sig_figs
    figures = agreeing_figures(answer, ex.reference, wanted)
    if figures == (wanted or 1):
        agrees = f": it agrees {ex.precision}" if wanted else ""
        return Feedback(label, True, f"Correct ({label}){agrees}.")
    for wrong, hint in ex.mistakes:
        if agreeing_figures(answer, wrong, wanted) == (wanted or 1):
            return Feedback(label, False, f"Not yet ({label}). Hint: {hint}")
    if wanted is not None and wanted >= 2 and figures == wanted - 1:
        return Feedback(label, False, (
            f"Close ({label}): your answer agrees to {figures} significant "
            f"figure{'s' if figures > 1 else ''}, but the exercise asks for {wanted}. "
            "Give one more figure (or check the last one)."))
    return Feedback(label, False, f"Not yet ({label}). Hint: {ex.hint}")


def check(label: str, answer) -> Feedback:
    """Say whether ``answer`` to exercise ``label`` is right, without revealing it.

    Parameters
    ----------
    label : str
        An exercise label of the book, e.g. ``"ex-3-2"`` (see :data:`EXERCISES`).
    answer : float, array_like, sympy expression or str, or None
        Your answer. A string is read as a number or formula (``"1.041"``, ``"27/8"``,
        ``"sigma**2/n"``) without being evaluated: only numbers, the exercise's names, the
        arithmetic operators and a few functions (``sqrt``, ``exp``, ``log``, ...) are
        accepted. ``None`` (or ``...``) means "not answered yet": the reply says what is
        asked instead of failing, so a notebook with open exercises still runs.

    Returns
    -------
    Feedback
        ``correct`` is True or False (None when no answer was given), and ``message`` says
        so in words; in a notebook it displays as that message. Any other answer (a string
        that is not a plain formula, a list where one number is asked, NaN, an empty
        string) gets ``correct=False`` and a message saying what is wrong: ``check`` never
        fails on an answer.

    Raises
    ------
    ValueError
        If ``label`` is not a registered exercise.

    Examples
    --------
    >>> from mhacore.exercises import check
    >>> check("ex-0-1", 0.25).correct
    True
    >>> check("ex-0-1", "1/4").correct
    True
    >>> check("ex-0-1", 0.3).correct
    False
    >>> check("ex-0-1", None).correct is None
    True
    """
    if not isinstance(label, str) or label not in EXERCISES:
        raise ValueError(f"label must be one of {sorted(EXERCISES)}; got {label!r}")
    ex = EXERCISES[label]
    if answer is None or answer is Ellipsis:
        return Feedback(label, None, f"Your turn ({label}): set `answer` to {ex.prompt}, "
                                     f"{ex.precision}, then run this cell again.")
    if isinstance(answer, str):  # a plain str: a subclass's own methods are never called
        answer = str.__getitem__(answer, slice(None))
        if not answer.strip():
            return Feedback(label, False, f"Empty answer ({label}): set `answer` to "
                                          f"{ex.prompt}, {ex.precision}, then run this cell "
                                          "again.")
    import sympy  # noqa: F401  (imported before the clock starts: it takes about a second)

    try:
        with _time_limit(JUDGE_SECONDS):
            if ex.kind == "number":
                given = _as_number(answer, label)
            elif ex.kind == "vector":
                given = _as_vector(answer, label, np.shape(ex.reference))
            else:
                given = _as_expression(answer, ex)
            return _judge(ex, given)
    except UnsafeAnswer as exc:
        return Feedback(label, False, f"Cannot read your answer to {label}: {exc}. Nothing "
                                      "in it was run; write a plain number or formula.")
    except _Unreadable as exc:
        return Feedback(label, False, f"Cannot read your answer to {label}: {exc}.")
    except _TooSlow:
        return Feedback(label, False, (
            f"Cannot judge your answer to {label} within {JUDGE_SECONDS:g} s: give a "
            "smaller answer (a simpler formula, fewer numbers) and run this cell again."))
    except Exception as exc:  # check never fails on an answer; say what could not be read
        return Feedback(label, False, f"Cannot read your answer to {label}: "
                                      f"{type(exc).__name__} while reading it.")


# --- the book's exercises -----------------------------------------------------------------
# A warm-up used by the docstring example and the tests: the variance of the mean of four
# independent unit-variance draws.
register_exercise(Exercise(
    "ex-0-1", "index", "number", prompt="the variance of the mean of 4 unit-variance draws",
    hint="Var(mean of n iid) = sigma^2 / n.", reference=0.25))

# Reference answers: each is recomputed independently in tests/test_exercises.py. Every
# number is asked to 3 significant figures (the chapter's exercise text says so), except
# the integer of exercise 8.2.
_CH1, _CH2, _CH3 = "01-nadaraya-watson", "02-one-head-is-nw", "03-bias-variance-covariance"
_CH4, _CH5 = "04-head-diversity", "05-decorrelation"
_GAUSS_EPA_RATIO = 1.0408377994018
# Exercise 5.2: H heads of width d_k in R^p with H d_k > p (the chapter's own check uses
# H = 6, so the exercise takes another shape); the answer is the frame-potential bound
# 1 - (H d_k / p - 1) / (H - 1) of chapter 4, which the overlap-model descent reaches.
_EX52_H, _EX52_DK, _EX52_P = 7, 2, 8
for _exercise in [
    Exercise("ex-1-1", _CH1, "number",
             prompt="the ratio of the Gaussian's optimal AMSE to the Epanechnikov's (a float)",
             hint="mu_2 and R of the Epanechnikov kernel are simple rationals; the Gaussian "
                  "has mu_2 = 1 and R = 1/(2 sqrt(pi)). Take the ratio of (mu_2^2 R^4)^(1/5).",
             reference=_GAUSS_EPA_RATIO,
             mistakes=((_GAUSS_EPA_RATIO**5, "Mind the power 1/5: the AMSE is proportional "
                                             "to (mu_2^2 R^4)^(1/5), not to mu_2^2 R^4."),
                       (1 / _GAUSS_EPA_RATIO, "That is the Epanechnikov's AMSE over the "
                                              "Gaussian's; the exercise asks for the "
                                              "Gaussian's over the Epanechnikov's."))),
    Exercise("ex-1-2", _CH1, "number",
             prompt="the measured h* at n = 3200 (a float)",
             hint="Average the MSE curves over replicates before locating the minimum, and "
                  "locate it on the log-bandwidth scale; use rng=1 as the exercise says.",
             reference=0.029178714613983,
             mistakes=(((0.25 / (2 * math.pi**0.5) / (3200 * 8 * math.pi**4)) ** 0.2,
                        "That is the SymPy prediction h_star_model at n = 3200; the "
                        "exercise asks for the minimiser measured by Monte Carlo."),)),
    Exercise("ex-2-1", _CH2, "expression",
             prompt="the second factor as a SymPy expression in n1, n2 (the squared key "
                    "norms) and tau",
             hint="Expand both squared distances: the query norm cancels in the difference, "
                  "the key norms do not.",
             reference="exp((n1 - n2)/(2*tau))", symbols=("n1", "n2", "tau"),
             mistakes=(("exp((n2 - n1)/(2*tau))", "Check the sign: which key norm does the "
                                                  "second factor reward?"),)),
    Exercise("ex-2-2", _CH2, "number",
             prompt="the Gaussian bandwidth that MultiHeadNW's default temperature matches "
                    "for d_k = 3 (a float)",
             hint="The default temperature is sqrt(d_k), and the bandwidth is the square root "
                  "of the temperature.",
             reference=3 ** 0.25,
             mistakes=((3 ** 0.5, "That is the default temperature sqrt(d_k) itself; the "
                                  "bandwidth is its square root."),)),
    Exercise("ex-3-1", _CH3, "expression",
             prompt="the spread term sum_h alpha_h ||w^h - w_bar||^2 as a SymPy expression "
                    "in a, u, v",
             hint="For two heads, w^1 - w_bar = (1 - a)(w^1 - w^2).",
             reference="2*a*(1 - a)*(u - v)**2", symbols=("a", "u", "v"),
             mistakes=(("a*(1 - a)*(u - v)**2", "Each w^h has two coordinates, and both "
                                                "differ by the same amount: count both."),)),
    Exercise("ex-4-1", _CH4, "expression",
             prompt="the HDI of the two heads as a SymPy expression in the angles a and b",
             hint="The cross-Gram matrix is diagonal with the cosines of the angles.",
             reference="(sin(a)**2 + sin(b)**2)/2", symbols=("a", "b"),
             mistakes=(("(cos(a)**2 + cos(b)**2)/2", "That is the mean squared cosine, the "
                                                     "overlap; the HDI is one minus it."),)),
    Exercise("ex-4-2", _CH4, "vector",
             prompt="the largest feasible HDI for H = 2, 4, 8, 16 (a list of four floats)",
             hint="The bound is 1 - max(0, H d_k / p - 1) / (H - 1).",
             reference=[1.0, 1.0, 6 / 7, 0.8],
             mistakes=(([1.0, 1.0, 1.0, 1.0], "Once H d_k > p the heads cannot all be "
                                              "orthogonal: use the frame-potential bound."),)),
    Exercise("ex-5-1", _CH5, "expression",
             prompt="the MSE at HDI = 1 as a SymPy expression in B^2 (written B2), V, rho_0 "
                    "and H",
             hint="At HDI = 1 the mean correlation of the overlap model is rho_0.",
             reference="B2 + V*rho_0 + V*(1 - rho_0)/H", symbols=("B^2", "V", "rho_0", "H"),
             mistakes=(("B2 + V/H", "Orthogonal heads still share responses: the "
                                    "correlation floor rho_0 remains."),)),
    Exercise("ex-5-2", _CH5, "number",
             prompt=f"the final HDI of the overlap-model optimisation with H = {_EX52_H}, "
                    f"d_k = {_EX52_DK}, p = {_EX52_P}",
             hint="Hd_k > p here: the optimum is the frame-potential bound, not 1.",
             reference=1 - (_EX52_H * _EX52_DK / _EX52_P - 1) / (_EX52_H - 1),
             mistakes=((1.0, "With H d_k > p the heads cannot be orthogonal: the HDI stops "
                             "at the frame-potential bound."),)),
]:
    register_exercise(_exercise)

# --- chapter 06 exercises ---
# Reference answers recomputed independently in tests/test_theorems_ch06.py.
for _exercise in [
    Exercise("ex-6-1", "06-heads-and-width", "expression",
             prompt="the optimal head width d_k* of the classical law for data dimension d = 2, "
                    "as a SymPy expression in B, n and V",
             hint="Set the derivative of B/d_k^2 + V d_k^(d/2)/n to zero with d = 2 and solve for d_k.",
             reference="(2*B*n/V)**(1/3)", symbols=("B", "n", "V"),
             mistakes=(("(B*n/V)**(1/3)", "Differentiate B/d_k^2 carefully: it gives "
                                          "-2B/d_k^3."),)),
    Exercise("ex-6-2", "06-heads-and-width", "number",
             prompt="the limit of n E||w||^2 for one softmax head with d_k = 6 and projection scale c = 1 "
                    "(a float)",
             hint="Each projected coordinate contributes E exp(c^4 z^2 / d_k) = (1 - 2c^4/d_k)^(-1/2).",
             reference=27 / 8,
             mistakes=((1.5 ** 0.5, "That is one coordinate's factor; the head has d_k = 6 "
                                    "coordinates, and their factors multiply."),)),
]:
    register_exercise(_exercise)

# --- chapter 07 exercises ---
for _exercise in [
    Exercise("ex-7-1", "07-structured-weights", "expression",
             prompt="sum_h alpha_h^2 of the weights (1, r, r^2)/(1 + r + r^2) as a SymPy "
                    "expression in r",
             hint="Square each weight and add; the denominator is (1 + r + r^2)^2.",
             reference="(1 + r**2 + r**4)/(1 + r + r**2)**2", symbols=("r",),
             mistakes=(("(1 + r**2 + r**4)/(1 + r + r**2)", "Square the normalising "
                                                            "denominator as well."),)),
    Exercise("ex-7-2", "07-structured-weights", "number",
             prompt="the ratio Var(Fibonacci)/Var(uniform) for H = 16 equicorrelated heads "
                    "with rho = 0.2 (a float)",
             hint="Variance / V = rho + (1 - rho) * sum alpha^2; sum alpha^2 is 1/H for "
                  "uniform weights and F_H F_{H+1}/(F_{H+2} - 1)^2 for Fibonacci weights.",
             reference=(0.2 + 0.8 * 987 * 1597 / (2584 - 1) ** 2) / (0.2 + 0.8 / 16),
             mistakes=(((0.2 + 0.8 / 16) / (0.2 + 0.8 * 987 * 1597 / (2584 - 1) ** 2),
                        "That is uniform over Fibonacci; the exercise asks for Fibonacci "
                        "over uniform."),)),
]:
    register_exercise(_exercise)

# --- chapter 08 exercises ---
for _exercise in [
    Exercise("ex-8-1", "08-three-ensembles", "expression",
             prompt="the correlation of two scouts as a SymPy expression in p and K",
             hint="Two scouts share an error only if both were recruited and follow the same "
                  "leader; each scout's error still has variance s^2.",
             reference="p**2/K", symbols=("p", "K"),
             mistakes=(("p/K", "Both scouts must be recruited, each with probability p."),)),
    Exercise("ex-8-2", "08-three-ensembles", "number",
             prompt="the smallest number of scouts N within 10 % of the floor (an integer)",
             hint="Solve (1 - rho) sigma^2 / N <= 0.1 rho sigma^2 for N, with rho and sigma^2 "
                  "from scout_moments(0.6, 1.0, 0.5), and round up.",
             reference=25.0, sig_figs=None,
             mistakes=((24.0, "With N = 24 the variance is still above 1.1 rho sigma^2: "
                              "round N up, not down."),)),
]:
    register_exercise(_exercise)
