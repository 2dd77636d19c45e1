"""Self-checking exercises: say right or wrong without revealing the answer.

Each computational or derivation exercise of the book is registered here with its
reference answer and a tolerance. A student calls :func:`check` with a label and an
answer; the reply says whether the answer is right (within the tolerance, or equal as a
SymPy expression) and, when it is not, gives a hint, never the reference value.

The reference answers are tested in ``tests/test_exercises.py`` against independent
computations (closed forms, SymPy, or ``mhacore`` itself).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

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
        A nudge shown after a wrong answer.
    rtol, atol : float
        A number (or each entry of a vector) is right when
        ``|answer - reference| <= atol + rtol * |reference|``.
    symbols : tuple of str
        For expressions: the symbol names the answer may use (positive reals).
    """

    label: str
    chapter: str
    kind: str
    prompt: str
    hint: str
    reference: object = field(repr=False)
    rtol: float = 1e-6
    atol: float = 0.0
    symbols: tuple = ()


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
    EXERCISES[exercise.label] = exercise
    return exercise


def _close(answer: np.ndarray, reference: np.ndarray, ex: Exercise) -> bool:
    return bool(np.all(np.abs(answer - reference) <= ex.atol + ex.rtol * np.abs(reference)))


def _as_number(answer, label):
    if hasattr(answer, "detach"):  # a torch tensor
        answer = answer.detach().cpu().numpy()
    value = np.asarray(answer)
    if isinstance(answer, bool) or value.dtype.kind not in "iuf" or value.size != 1:
        raise TypeError(f"answer to {label} must be a real number; got {type(answer).__name__}")
    value = float(value.reshape(()))
    if not math.isfinite(value):
        raise ValueError(f"answer to {label} must be finite; got {value}")
    return value


def _expression_equal(answer, ex: Exercise) -> bool:
    import sympy as sp

    names = {s: sp.Symbol(s, positive=True) for s in ex.symbols}
    try:
        given = sp.sympify(answer, locals=names) if isinstance(answer, str) else sp.sympify(answer)
    except (sp.SympifyError, TypeError, SyntaxError) as exc:
        raise TypeError(f"answer to {ex.label} must be a SymPy expression or a string "
                        f"SymPy can parse; got {answer!r}") from exc
    # the student's symbols may lack the positivity assumption: match them by name
    given = given.subs({s: names[s.name] for s in given.free_symbols if s.name in names})
    reference = sp.sympify(ex.reference, locals=names)
    if sp.simplify(given - reference) == 0:
        return True
    # simplify can miss an identity: compare at a few positive points as well
    rng = np.random.default_rng(0)
    free = sorted(reference.free_symbols | given.free_symbols, key=lambda s: s.name)
    for _ in range(5):
        point = {s: sp.Float(rng.uniform(0.5, 2.0)) for s in free}
        a, b = complex(given.evalf(subs=point)), complex(reference.evalf(subs=point))
        if not abs(a - b) <= 1e-9 * max(1.0, abs(b)):
            return False
    return True


def check(label: str, answer) -> Feedback:
    """Say whether ``answer`` to exercise ``label`` is right, without revealing it.

    Parameters
    ----------
    label : str
        An exercise label of the book, e.g. ``"ex-3-2"`` (see :data:`EXERCISES`).
    answer : float, array_like, sympy expression or str, or None
        Your answer. ``None`` (or ``...``) means "not answered yet": the reply says what
        is asked instead of failing, so a notebook with open exercises still runs.

    Returns
    -------
    Feedback
        ``correct`` is True or False (None when no answer was given), and ``message`` says
        so in words; in a notebook it displays as that message.

    Raises
    ------
    ValueError
        If ``label`` is not a registered exercise, or a number is not finite.
    TypeError
        If ``answer`` is not of the kind the exercise asks for.

    Examples
    --------
    >>> from mhacore.exercises import check
    >>> check("ex-0-1", 0.25).correct
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
                                     "then run this cell again.")
    if ex.kind == "number":
        correct = _close(np.asarray(_as_number(answer, label)), np.asarray(ex.reference), ex)
    elif ex.kind == "vector":
        given = np.asarray(answer.detach().cpu() if hasattr(answer, "detach") else answer,
                           dtype=float)
        reference = np.asarray(ex.reference, dtype=float)
        if given.shape != reference.shape:
            raise ValueError(f"answer to {label} must have shape {reference.shape}; "
                             f"got {given.shape}")
        correct = _close(given, reference, ex)
    else:
        correct = _expression_equal(answer, ex)
    if correct:
        return Feedback(label, True, f"Correct ({label}).")
    return Feedback(label, False, f"Not yet ({label}). Hint: {ex.hint}")


# --- the book's exercises -----------------------------------------------------------------
# A warm-up used by the docstring example and the tests: the variance of the mean of four
# independent unit-variance draws.
register_exercise(Exercise(
    "ex-0-1", "index", "number", prompt="the variance of the mean of 4 unit-variance draws",
    hint="Var(mean of n iid) = sigma^2 / n.", reference=0.25, rtol=1e-9))
