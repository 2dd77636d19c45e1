"""Self-checking exercises: say right or wrong without revealing the answer.

Each computational or derivation exercise of the book is registered here with the
precision it asks for. A student calls :func:`check` with a label and an answer; the reply
says whether the answer is right and, when it is not, gives a hint, never the answer: the
hint for a common mistake when the answer is that mistake, a general hint otherwise.

The package holds no answer in readable form. Each exercise is *sealed*
(:func:`seal_exercise`): it keeps salted PBKDF2 hashes of the answer rounded to the
precision asked (a number to its significant figures, a vector entry by entry, an integer
exactly), of the answer one figure short (for "Close"), and of each common mistake; a
formula is kept as the hash of its values at a few fixed points. :func:`check` rounds or
evaluates the student's answer the same way and compares hashes. The book's exercises are
read from ``exercise_seals.json`` beside this module, which ``tools/exercise_answers.py``
writes from the answers in the clear (kept in the repository, not in the package).

What the seal does not stop: a number asked to 3 significant figures is one of about
2,000 candidates per power of ten, and each hash takes a few hundredths of a second; the
"Close" reply (right to one figure fewer) narrows the search further, to about a hundred
checks. So a student who writes a loop recovers a number in seconds to minutes: the seal
keeps answers from being *read*, not from being searched for. A formula cannot be
searched for that way.

Every reply is in the language the package speaks (:mod:`mhacore.i18n`): English unless
``mhacore.set_language("zh_CN")`` (or ``MHACORE_LANG``) says otherwise. The book's prompts
and hints, read from the seals, are translated by the same catalog.

Answers given as strings (``"2.718"``, ``"sigma**2/n"``) are parsed by
:func:`mhacore._parse.parse_answer`, which checks the syntax tree against a whitelist
before SymPy sees it: a string is never evaluated, so an answer cannot run code.

The reference answers are tested in ``tests/test_exercises.py`` against independent
computations (closed forms, SymPy, or ``mhacore`` itself).
"""

from __future__ import annotations

import cmath
import contextlib
import hashlib
import json
import math
import re
import numbers
import signal
import threading
import time
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from mhacore._parse import UnsafeAnswer, parse_answer
from mhacore.i18n import N_, gettext as _, translate_rendered

KINDS = ("number", "vector", "expression")


SEALS = Path(__file__).with_name("exercise_seals.json")
ITERATIONS = 50_000  # PBKDF2-SHA256 rounds per hash: about 0.05 s on one core


@dataclass(frozen=True)
class Exercise:
    """One exercise with a checkable answer, sealed (see :func:`seal_exercise`).

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
    sig_figs : int or None
        For numbers and vectors: an answer is right when, rounded to this many
        significant figures, it is the answer rounded the same way. ``None`` means exact
        (an integer answer).
    symbols : tuple of str
        For expressions: the names of the symbols the answer may use, as SymPy prints them
        (``"B^2"``, ``"rho_0"``). An answer may spell each without the characters that are
        not letters, digits or underscores (``B2``, ``rho_0``).
    size : int or None
        For vectors: how many entries the answer has.
    salt, iterations : str, int
        The hashes' salt and PBKDF2 rounds.
    answer, close : tuple of str
        Hashes of the answer at the precision asked, and one significant figure short.
    mistakes : tuple of (tuple of str, str)
        Hashes of each common wrong answer, with the hint it deserves.
    points : tuple of dict
        For expressions: the points (symbol name to a rational, as a string) at which an
        answer's values are hashed.
    """

    label: str
    chapter: str
    kind: str
    prompt: str
    hint: str
    sig_figs: int | None = 3
    symbols: tuple = ()
    size: int | None = None
    salt: str = ""
    iterations: int = ITERATIONS
    answer: tuple = field(default=(), repr=False)
    close: tuple = field(default=(), repr=False)
    mistakes: tuple = field(default=(), repr=False)
    points: tuple = field(default=(), repr=False)

    def to_json(self) -> dict:
        """The exercise as plain JSON values (``exercise_seals.json`` holds a list)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Exercise":
        data = dict(data)
        for key in ("symbols", "answer", "close", "points"):
            data[key] = tuple(data.get(key, ()))
        data["mistakes"] = tuple((tuple(hashes), hint) for hashes, hint in data["mistakes"])
        return cls(**data)

    @property
    def precision(self) -> str:
        """The precision asked for, in words ("to 3 significant figures")."""
        if self.kind == "expression":
            return _("exactly, as an expression")
        if self.sig_figs is None:
            return _("exactly (an integer)")
        return _("to {sig_figs} significant figures").format(sig_figs=self.sig_figs)


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


# --- sealing: what the package keeps of an answer ----------------------------------------

def _digest(salt: str, iterations: int, text: str) -> str:
    return hashlib.pbkdf2_hmac("sha256", text.encode(), salt.encode(), iterations).hex()


def _figures(x: float, sig_figs: int | None) -> str:
    """``x`` rounded to ``sig_figs`` significant figures, as text; with ``None``, the
    integer ``x`` is (a non-integer has no such form).

    Examples
    --------
    >>> _figures(2.7182818, 3), _figures(-0.0, 3), _figures(7.0, None)
    ('2.72e+00', '0', '7')
    """
    if sig_figs is None:
        return str(int(x)) if float(x).is_integer() else "not an integer"
    text = f"{x:.{sig_figs - 1}e}"
    return "0" if float(text) == 0 else text


def _answer_form(values, sig_figs: int | None) -> str:
    """A number's or a vector's form at ``sig_figs``: its entries rounded, joined."""
    return "|".join(_figures(float(v), sig_figs) for v in np.ravel(values))


def _reference_forms(values, sig_figs: int | None) -> set[str]:
    """Every form an answer may take to agree with ``values`` at ``sig_figs``: the
    rounding of each entry and, for an entry within 1e-9 (relative) of a rounding
    boundary, the rounding on the other side too."""
    import itertools

    options = []
    for x in np.ravel(np.asarray(values, dtype=float)):
        nudge = 1e-9 * abs(float(x))
        near = {float(x)} if sig_figs is None else {x - nudge, float(x), x + nudge}
        options.append(sorted({_figures(v, sig_figs) for v in near}))
    return {"|".join(combo) for combo in itertools.product(*options)}


def _symbol_names(symbols) -> tuple[dict, dict]:
    """The exercise's symbols by printed name, and by every spelling an answer may use."""
    import sympy as sp

    by_name = {name: sp.Symbol(name, positive=True) for name in symbols}
    spellings = {}
    for name, symbol in by_name.items():
        spellings[_identifier(name)] = symbol
        spellings[_identifier(name).replace("_", "")] = symbol  # rho0 for rho_0
    return by_name, spellings


def _value_text(expression, point: dict) -> str:
    """The value of ``expression`` at ``point`` to 10 significant figures (real and
    imaginary parts), or ``nan`` where it has no finite value."""
    try:
        value = complex(expression.evalf(30, subs=point))
    except (OverflowError, TypeError, ValueError, ZeroDivisionError):
        return "nan"
    if not cmath.isfinite(value):
        return "nan"

    def part(x):
        return "0" if abs(x) < 1e-20 * max(1.0, abs(value)) else f"{x:.9e}"
    return f"{part(value.real)},{part(value.imag)}"


def _expression_form(expression, points, symbols) -> str:
    """An expression's form: its values at ``points`` (name to rational), joined."""
    import sympy as sp

    by_name = _symbol_names(symbols)[0]
    return "|".join(_value_text(expression, {by_name[n]: sp.Rational(v)
                                             for n, v in point.items()})
                    for point in points)


def _draw_points(salt: str, symbols) -> list[dict]:
    """Points at which formulas are compared, drawn from the salt: ten where the book's
    formulas live (each symbol uniform in [0.5, 2]) and six far from it (two below 0.4,
    two above 3, two log-uniform in [0.01, 100]), so that a term made to vanish on the
    usual range is seen. Values are rationals, so every evaluation is exact to 30 digits.

    The points are fixed per exercise, as its hashed values must be: an answer built to
    equal the reference at these points (the reference plus a term vanishing there) would
    pass, but building it takes the reference."""
    seed = int.from_bytes(hashlib.sha256(salt.encode()).digest()[:8], "little")
    rng = np.random.default_rng(seed)
    draws = [lambda: rng.uniform(0.5, 2.0)] * 10 + [
        lambda: 10 ** rng.uniform(-1.7, -0.4), lambda: 10 ** rng.uniform(0.5, 1.7)] * 2 + [
        lambda: 10 ** rng.uniform(-2, 2)] * 2
    return [{name: str(Fraction(draw()).limit_denominator(10**6)) for name in symbols}
            for draw in draws]


def seal_exercise(label: str, chapter: str, kind: str, prompt: str, hint: str,
                  reference, *, sig_figs: int | None = 3, mistakes=(), symbols=(),
                  iterations: int = ITERATIONS) -> Exercise:
    """An :class:`Exercise` that judges answers against ``reference`` without holding it.

    Parameters
    ----------
    label, chapter, kind, prompt, hint
        As in :class:`Exercise`.
    reference : float, list of float or str
        The answer: a number, a vector, or a formula in SymPy's syntax (with the names of
        ``symbols``).
    sig_figs : int or None
        The precision asked, for numbers and vectors (``None``: an exact integer).
    mistakes : sequence of (answer, hint)
        Common wrong answers, in the form of ``reference``, and the hint each deserves.
    symbols : sequence of str
        For formulas: the symbols an answer may use.
    iterations : int
        PBKDF2 rounds per hash; fewer make checks faster and searching easier.

    Returns
    -------
    Exercise
        Holding hashes only: no attribute holds the reference or a mistake.

    Raises
    ------
    ValueError
        If ``kind``, ``sig_figs``, ``iterations`` or a formula is not valid.

    Examples
    --------
    >>> ex = seal_exercise("ex-x", "x", "number", "a half", "halve one", 0.5,
    ...                    iterations=10)
    >>> "0.5" in repr(ex.to_json())
    False
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
    if sig_figs is not None and not (isinstance(sig_figs, int) and sig_figs >= 1):
        raise ValueError(f"sig_figs must be an integer >= 1 or None; got {sig_figs!r}")
    if not (isinstance(iterations, int) and iterations >= 1):
        raise ValueError(f"iterations must be an integer >= 1; got {iterations!r}")
    salt = f"mhacore-exercise:{label}"

    def hashes(forms):
        return tuple(sorted(_digest(salt, iterations, form) for form in forms))

    if kind == "expression":
        spellings = _symbol_names(symbols)[1]
        target = parse_answer(reference, spellings)
        points = [pt for pt in _draw_points(salt, symbols)
                  if _expression_form(target, [pt], symbols) != "nan"]
        if len(points) < 10:
            raise ValueError(f"reference must have finite values at most points; "
                             f"{reference!r} has them at {len(points)} of 16")
        return Exercise(
            label, chapter, kind, prompt, hint, sig_figs=None, symbols=tuple(symbols),
            salt=salt, iterations=iterations, points=tuple(points),
            answer=hashes([_expression_form(target, points, symbols)]),
            mistakes=tuple((hashes([_expression_form(parse_answer(wrong, spellings),
                                                     points, symbols)]), text)
                           for wrong, text in mistakes))
    size = int(np.size(reference)) if kind == "vector" else None
    close = (hashes(_reference_forms(reference, sig_figs - 1))
             if sig_figs is not None and sig_figs >= 2 else ())
    return Exercise(
        label, chapter, kind, prompt, hint, sig_figs=sig_figs, size=size, salt=salt,
        iterations=iterations, answer=hashes(_reference_forms(reference, sig_figs)),
        close=close, mistakes=tuple((hashes(_reference_forms(wrong, sig_figs)), text)
                                    for wrong, text in mistakes))


def load_seals(path: Path = SEALS) -> list[Exercise]:
    """The sealed exercises of a ``exercise_seals.json`` file."""
    return [Exercise.from_json(data) for data in json.loads(path.read_text("utf-8"))]


class _Unreadable(ValueError):
    """An answer of the wrong form (a list for a number, NaN, ...): the message says why."""


def _tensor_values(tensor):
    """A torch tensor's values as a float64 NumPy array (bfloat16 and float16 included);
    a tensor without values (device ``meta``), or with complex or boolean values, is
    refused."""
    import torch

    if tensor.device.type == "meta":
        raise _Unreadable(_("a tensor on the 'meta' device holds no values"))
    if tensor.is_complex():
        raise _Unreadable(_("this exercise expects real numbers, not a complex tensor"))
    if tensor.dtype == torch.bool:
        raise _Unreadable(_("this exercise expects numbers, not a tensor of booleans"))
    return tensor.detach().cpu().double().numpy()


def _as_number(answer, label):
    if isinstance(answer, str):
        answer = parse_answer(answer)
        if not (answer.is_number and answer.is_real):
            raise UnsafeAnswer(_("it is not a real number"))
    if isinstance(answer, bool):
        raise _Unreadable(_("{value} is not a number").format(value=answer))
    if hasattr(answer, "detach"):  # a torch tensor
        answer = _tensor_values(answer)
    if getattr(answer, "is_number", False) and getattr(answer, "is_real", False):
        answer = float(answer)  # an exact SymPy number (Integer, Rational, Float, sqrt(2), ...)
    if isinstance(answer, np.ma.MaskedArray) or answer is np.ma.masked:
        if np.ma.getmaskarray(answer).any():
            raise _Unreadable(_("a masked value is not a number"))
        answer = np.ma.getdata(answer)
    if isinstance(answer, np.bool_):
        raise _Unreadable(_("{value} is not a number").format(value=answer))
    if isinstance(answer, numbers.Number) and not isinstance(answer, (float, complex)) \
            or type(answer).__module__.startswith("mpmath"):
        try:  # an int of any size, Fraction, Decimal, mpmath's mpf
            answer = float(answer)
        except OverflowError:
            raise _Unreadable(_("it is too large for a float")) from None
    if isinstance(answer, (list, tuple)) or np.ndim(answer) > 0:
        raise _Unreadable(_("this exercise expects one number, not a list or array; write "
                            "it as a plain number (e.g. answer = 0.5)"))
    value = np.asarray(answer)
    if value.dtype.kind not in "iuf":
        raise _Unreadable(_("this exercise expects one number; got {type}").format(
            type=type(answer).__name__))
    value = float(value.reshape(()))
    if not math.isfinite(value):
        raise _Unreadable(_("{value} is not a finite number").format(value=value))
    return value


def _as_vector(answer, label, shape):
    wanted = _("a list of {count} numbers, e.g. {example}").format(
        count=shape[0], example=f"[{', '.join(['0.5'] * shape[0])}]")
    if isinstance(answer, str):
        raise _Unreadable(_("this exercise expects {wanted}, not a string").format(
            wanted=wanted))
    if isinstance(answer, (dict, set, frozenset)) or (
            hasattr(answer, "__next__") and not hasattr(answer, "__len__")):
        raise _Unreadable(_("this exercise expects {wanted}; give a list, not a {type}").format(
            wanted=wanted, type=type(answer).__name__))
    if hasattr(answer, "detach"):
        answer = _tensor_values(answer)
    if not isinstance(answer, (list, tuple)) and np.ndim(answer) == 0:
        raise _Unreadable(_("this exercise expects {wanted}, not a single value").format(
            wanted=wanted))
    entries = list(answer)
    if any(np.ndim(a) > 0 for a in entries):
        raise _Unreadable(_("this exercise expects {wanted}, not a nested list").format(
            wanted=wanted))
    if len(entries) != shape[0]:
        raise _Unreadable(_("this exercise expects {wanted}; your list has {count}").format(
            wanted=wanted, count=len(entries)))
    return np.asarray([_as_number(a, label) for a in entries], dtype=float)


def _identifier(name: str) -> str:
    return re.sub(r"\W", "", name)


def _as_expression(answer, ex: Exercise):
    import sympy as sp

    by_name, spellings = _symbol_names(ex.symbols)
    if isinstance(answer, str):
        given = parse_answer(answer, spellings)
    elif isinstance(answer, (sp.Basic, sp.MatrixBase, int, float)):
        given = sp.sympify(answer)  # already a SymPy object or a number: no string is parsed
    else:
        raise _Unreadable(_("this exercise expects a SymPy expression or a formula in "
                            "quotes; got {type}").format(type=type(answer).__name__))
    if isinstance(given, sp.MatrixBase):
        if given.shape != (1, 1):
            raise _Unreadable(_("this exercise expects one expression, not a {rows}x{columns} "
                                "matrix").format(rows=given.shape[0], columns=given.shape[1]))
        given = given[0, 0]  # a 1x1 matrix, as u.T * v gives
    if not isinstance(given, sp.Expr) or isinstance(answer, bool):
        raise _Unreadable(_("this exercise expects a SymPy expression; got {type}").format(
            type=type(answer).__name__))
    # the student's symbols may carry other assumptions: match them by name
    return given.subs({s: by_name[s.name] for s in given.free_symbols if s.name in by_name})


JUDGE_SECONDS = 2.0  # the longest a judgement may take (enforced in every thread)


class _TooSlow(Exception):
    """A judgement ran past :data:`JUDGE_SECONDS`."""


@contextlib.contextmanager
def _time_limit(seconds: float):
    """Raise :class:`_TooSlow` inside the block once ``seconds`` have passed.

    A POSIX interval timer interrupts SymPy wherever it is. A timer the caller set (for
    example a test runner's) keeps running: it is given back, less the time spent here,
    and fires in the caller's handler if it is due first. Signals reach only the main
    thread, where notebooks, nbgrader's tests and scripts run ``check``; elsewhere
    :func:`_within` runs the judgement in a worker thread instead.
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


def _within(seconds: float, call):
    """``call()``, or :class:`_TooSlow` once ``seconds`` have passed, in any thread.

    In the main thread (with ``setitimer``) the timer of :func:`_time_limit` interrupts
    the work. Elsewhere (a thread of a web app or a grading service, or Windows) signals
    cannot reach it: ``call`` runs in a daemon worker thread and the caller waits at most
    ``seconds``. A worker past its time is left to finish its work, which the parser's
    size limits bound, and its result is dropped.
    """
    if hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
        with _time_limit(seconds):
            return call()
    outcome = {}

    def work():
        try:
            outcome["value"] = call()
        except BaseException as exc:  # handed to the caller below
            outcome["error"] = exc

    worker = threading.Thread(target=work, name="mhacore-judge", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise _TooSlow
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _judge(ex: Exercise, answer) -> Feedback:
    """The verdict on an answer already read as a float, an array or a SymPy expression:
    its form (rounded, or its values at the exercise's points) is hashed and compared
    with the seal."""
    label = ex.label

    def seen(form):
        return _digest(ex.salt, ex.iterations, form)

    if ex.kind == "expression":
        given = seen(_expression_form(answer, ex.points, ex.symbols))
    else:
        given = seen(_answer_form(answer, ex.sig_figs))
    if given in ex.answer:
        if ex.kind != "expression" and ex.sig_figs:
            return Feedback(label, True, _("Correct ({label}): it agrees {precision}.").format(
                label=label, precision=ex.precision))
        return Feedback(label, True, _("Correct ({label}).").format(label=label))
    for hashes, hint in ex.mistakes:
        if given in hashes:
            return Feedback(label, False, _not_yet(label, hint))
    if ex.close and seen(_answer_form(answer, ex.sig_figs - 1)) in ex.close:
        figures = ex.sig_figs - 1
        close = (_("Close ({label}): your answer agrees to {figures} significant figures, but "
                   "the exercise asks for {sig_figs}. Give one more figure (or check the last "
                   "one).") if figures > 1 else
                 _("Close ({label}): your answer agrees to {figures} significant figure, but "
                   "the exercise asks for {sig_figs}. Give one more figure (or check the last "
                   "one)."))
        return Feedback(label, False, close.format(label=label, figures=figures,
                                                   sig_figs=ex.sig_figs))
    return Feedback(label, False, _not_yet(label, ex.hint))


def _not_yet(label: str, hint: str) -> str:
    """The reply to a wrong answer, with ``hint`` (a seal's text) in the current language."""
    return _("Not yet ({label}). Hint: {hint}").format(label=label, hint=_(hint))


#: The reasons :func:`mhacore._parse.parse_answer` gives for refusing an answer, as
#: templates: a reply translates the reason through them (:func:`_reason`).
PARSER_REASONS = (
    N_("a number in it is too large"),
    N_("only numbers are allowed as literals; got {value}"),
    N_("unknown name {name} (names allowed: {names}; functions: {functions})"),
    N_("a constant exponent must lie between -{limit} and {limit}"),
    N_("a power of a constant power is not allowed; simplify it"),
    N_("only the functions {functions} can be called"),
    N_("function calls take plain arguments only"),
    N_("{function} takes {counts} argument(s); got {count}"),
    N_("{node} expressions are not allowed; use {allowed}"),
    N_("it is nested more than {limit} levels deep; simplify it"),
    N_("functions are nested more than {limit} deep (as in exp(exp(exp(exp(x))))); "
       "simplify it"),
    N_("a tower of more than {limit} powers (as in x^y^z^w) is not allowed; simplify it"),
    N_("it has a comma between digits ({digits}); write decimals with a decimal point, "
       "e.g. 2.5, not 2,5"),
    N_("the answer is longer than {limit} characters"),
    N_("the answer is empty"),
    N_("it is not a formula ({reason}); use {allowed}"),
    N_("it is nested too deeply; use {allowed}"),
    N_("it cannot be read as a formula ({error}); check the arguments of its functions"),
    N_("numbers, the operators + - * / ** ^ and parentheses"),  # _parse.ALLOWED
    N_("none"),  # no name is allowed
)


def _reason(exc: Exception) -> str:
    """The parser's reason for refusing an answer, in the current language."""
    return translate_rendered(str(exc))


def check(label: str, answer) -> Feedback:
    """Say whether ``answer`` to exercise ``label`` is right, without revealing it.

    Parameters
    ----------
    label : str
        An exercise label of the book, e.g. ``"ex-3-2"`` (see :data:`EXERCISES`).
    answer : float, array_like, sympy expression or str, or None
        Your answer. A string is read as a number or formula (``"2.718"``, ``"7/4"``,
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
        return Feedback(label, None, _(
            "Your turn ({label}): set `answer` to {prompt}, {precision}, then run this cell "
            "again.").format(label=label, prompt=_(ex.prompt), precision=ex.precision))
    if isinstance(answer, str):  # a plain str: a subclass's own methods are never called
        answer = str.__getitem__(answer, slice(None))
        if not answer.strip():
            return Feedback(label, False, _(
                "Empty answer ({label}): set `answer` to {prompt}, {precision}, then run this "
                "cell again.").format(label=label, prompt=_(ex.prompt), precision=ex.precision))
    import sympy  # noqa: F401  (imported before the clock starts: it takes about a second)

    def read_and_judge():
        if ex.kind == "number":
            given = _as_number(answer, label)
        elif ex.kind == "vector":
            given = _as_vector(answer, label, (ex.size,))
        else:
            given = _as_expression(answer, ex)
        return _judge(ex, given)

    try:
        return _within(JUDGE_SECONDS, read_and_judge)
    except UnsafeAnswer as exc:
        return Feedback(label, False, _(
            "Cannot read your answer to {label}: {reason}. Nothing in it was run; write a "
            "plain number or formula.").format(label=label, reason=_reason(exc)))
    except _Unreadable as exc:
        return Feedback(label, False, _("Cannot read your answer to {label}: {reason}.").format(
            label=label, reason=exc))
    except _TooSlow:
        return Feedback(label, False, _(
            "Cannot judge your answer to {label} within {seconds} s: give a smaller answer (a "
            "simpler formula, fewer numbers) and run this cell again.").format(
                label=label, seconds=f"{JUDGE_SECONDS:g}"))
    except Exception as exc:  # check never fails on an answer; say what could not be read
        return Feedback(label, False, _(
            "Cannot read your answer to {label}: {error} while reading it.").format(
                label=label, error=type(exc).__name__))


# --- the book's exercises, sealed by tools/exercise_answers.py ---------------------------
if SEALS.is_file():
    for _exercise in load_seals():
        register_exercise(_exercise)
