"""Self-checking exercises: right, wrong, not yet, bad input; reference answers recomputed."""

import numpy as np
import pytest
import sympy as sp
import torch

from mhacore import exercises
from mhacore.exercises import EXERCISES, Exercise, check, register_exercise


@pytest.fixture
def toy(monkeypatch):
    registry = dict(EXERCISES)
    monkeypatch.setattr(exercises, "EXERCISES", registry)
    register_exercise(Exercise("ex-t-num", "t", "number", "a number", "think", 2.0, rtol=1e-3))
    register_exercise(Exercise("ex-t-vec", "t", "vector", "a vector", "think", [1.0, 2.0],
                               atol=1e-6))
    register_exercise(Exercise("ex-t-expr", "t", "expression", "an expression", "think",
                               "sigma**2/n", symbols=("sigma", "n")))
    return registry


def test_numbers_within_tolerance(toy):
    assert check("ex-t-num", 2.001).correct
    assert check("ex-t-num", np.float32(2.0)).correct
    assert check("ex-t-num", torch.tensor(2.0)).correct
    assert check("ex-t-num", np.array(2.0)).correct
    assert check("ex-t-num", 2.01).correct is False


def test_vectors_and_their_shape(toy):
    assert check("ex-t-vec", [1.0, 2.0]).correct
    assert check("ex-t-vec", torch.tensor([1.0, 2.0])).correct
    assert check("ex-t-vec", [1.0, 2.1]).correct is False
    with pytest.raises(ValueError, match=r"must have shape \(2,\); got \(3,\)"):
        check("ex-t-vec", [1.0, 2.0, 3.0])


def test_expressions_by_sympy_equivalence(toy):
    sigma, n = sp.symbols("sigma n")
    assert check("ex-t-expr", sigma**2 / n).correct
    assert check("ex-t-expr", "sigma**2 * n**-1").correct
    assert check("ex-t-expr", (sigma**2 + sigma**2) / (2 * n)).correct
    assert check("ex-t-expr", sigma / n).correct is False
    with pytest.raises(TypeError, match="must be a SymPy expression"):
        check("ex-t-expr", "sigma**")


def test_no_answer_means_your_turn_not_failure(toy):
    reply = check("ex-t-num", None)
    assert reply.correct is None and "Your turn" in repr(reply)
    assert check("ex-t-num", ...).correct is None


def test_feedback_never_reveals_the_reference(toy):
    for label, wrong in [("ex-t-num", 3.0), ("ex-t-vec", [0.0, 0.0]), ("ex-t-expr", "n")]:
        text = check(label, wrong).message + check(label, None).message
        assert "2.0" not in text and "sigma**2/n" not in text
    assert "2.0" not in repr(toy["ex-t-num"])  # the dataclass repr hides the reference


@pytest.mark.parametrize("label, answer, error, match", [
    ("ex-nope", 1.0, ValueError, "label must be one of"),
    ("ex-t-num", "two", TypeError, "must be a real number; got str"),
    ("ex-t-num", True, TypeError, "must be a real number; got bool"),
    ("ex-t-num", float("nan"), ValueError, "must be finite"),
])
def test_bad_input(toy, label, answer, error, match):
    with pytest.raises(error, match=match):
        check(label, answer)


def test_registration_is_validated(toy):
    with pytest.raises(ValueError, match="registered twice"):
        register_exercise(Exercise("ex-t-num", "t", "number", "", "", 1.0))
    with pytest.raises(ValueError, match="kind must be one of"):
        register_exercise(Exercise("ex-t-new", "t", "matrix", "", "", 1.0))


def test_every_book_exercise_names_a_label_in_its_chapter():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for label, ex in EXERCISES.items():
        if ex.chapter == "index":
            continue
        text = (root / "book" / f"{ex.chapter}.md").read_text(encoding="utf-8")
        assert f":label: {label}" in text, label
        assert f'check("{label}"' in text, f"{label} has no self-check cell in its chapter"
