"""Self-checking exercises: right, wrong, not yet, bad input; reference answers recomputed."""

import sys
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
import torch

from mhacore import exercises
from mhacore.exercises import EXERCISES, Exercise, check, register_exercise, seal_exercise

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from exercise_answers import BY_LABEL, sealed_text  # noqa: E402  (the answers, in clear)

FAST = 10  # PBKDF2 rounds of the toy exercises: their checks need not be slow


@pytest.fixture
def toy(monkeypatch):
    registry = dict(EXERCISES)
    monkeypatch.setattr(exercises, "EXERCISES", registry)
    register_exercise(seal_exercise("ex-t-num", "t", "number", "a number", "think", 2.0,
                                    mistakes=((4.0, "halve it"),), iterations=FAST))
    register_exercise(seal_exercise("ex-t-vec", "t", "vector", "a vector", "think",
                                    [1.0, 2.0], iterations=FAST))
    register_exercise(seal_exercise("ex-t-expr", "t", "expression", "an expression", "think",
                                    "sigma**2/n", symbols=("sigma", "n"), iterations=FAST))
    return registry


def test_numbers_to_the_stated_precision(toy):
    assert check("ex-t-num", 2.001).correct
    assert check("ex-t-num", 2.004).correct and check("ex-t-num", "2.00").correct
    assert "to 3 significant figures" in check("ex-t-num", 2.0).message
    assert check("ex-t-num", np.float32(2.0)).correct
    assert check("ex-t-num", torch.tensor(2.0)).correct
    assert check("ex-t-num", np.array(2.0)).correct
    assert check("ex-t-num", sp.Integer(2)).correct  # exact SymPy numbers are numbers too
    assert check("ex-t-num", sp.sqrt(4)).correct
    reply = check("ex-t-num", 2.01)  # agrees to 2 figures only: asks for more precision
    assert reply.correct is False and "agrees to 2 significant figures" in reply.message
    assert "asks for 3" in reply.message and reply.message.startswith("Close")
    # "Close" only one figure short: 2.1 shares only the first figure with 2.00
    assert check("ex-t-num", 2.1).message.startswith("Not yet")
    assert check("ex-t-num", 4.0).message.endswith("Hint: halve it")  # the known mistake
    assert check("ex-t-num", 7.0).message.endswith("Hint: think")  # otherwise the general one


def test_a_string_that_parses_as_a_number_is_a_number(toy):
    assert check("ex-t-num", "2").correct and check("ex-t-num", " 4/2 ").correct
    assert check("ex-t-num", "sqrt(4)").correct and check("ex-t-num", "2e0").correct
    assert check("ex-t-vec", ["1.0", "2"]).correct
    assert "too large" in check("ex-t-num", "1e999").message  # inf: refused, not evaluated


def test_an_answer_is_right_when_it_rounds_like_the_reference():
    assert exercises._figures(1.0408377994018, 3) == "1.04e+00"
    assert exercises._figures(-0.0, 3) == exercises._figures(0.0, 3) == "0"
    assert exercises._figures(24.0, None) == "24" and exercises._figures(24.5, None) != "24"
    # a reference on a rounding boundary accepts both sides; any other, one
    assert exercises._reference_forms(1.045, 3) == {"1.04e+00", "1.05e+00"}
    assert exercises._reference_forms(1.0408, 3) == {"1.04e+00"}
    assert exercises._reference_forms([0.0010004, 100.0], 3) == {"1.00e-03|1.00e+02"}


def test_a_sealed_exercise_holds_no_answer():
    ex = seal_exercise("ex-s", "s", "number", "p", "h", 1.0408377994018,
                       mistakes=((1.2222222, "no"),), iterations=FAST)
    text = repr(ex.to_json())
    assert "1.04" not in text and "1.22" not in text
    formula = seal_exercise("ex-f", "s", "expression", "p", "h", "p**2/K",
                            mistakes=(("p/K", "no"),), symbols=("p", "K"), iterations=FAST)
    assert "p**2" not in repr(formula.to_json()) and "p/K" not in repr(formula.to_json())
    with pytest.raises(ValueError, match="iterations must be an integer >= 1; got 0"):
        seal_exercise("ex-s", "s", "number", "p", "h", 1.0, iterations=0)
    with pytest.raises(ValueError, match="finite values at most points"):
        seal_exercise("ex-f", "s", "expression", "p", "h", "1/(p - p)", symbols=("p",),
                      iterations=FAST)


def test_vectors_and_their_shape(toy):
    assert check("ex-t-vec", [1.0, 2.0]).correct
    assert check("ex-t-vec", torch.tensor([1.0, 2.0])).correct
    assert check("ex-t-vec", [1.0, 2.1]).correct is False
    assert _unread("ex-t-vec", [1.0, 2.0, 3.0], "expects a list of 2 numbers, e.g. "
                   "[0.5, 0.5]; your list has 3")


def test_expressions_by_sympy_equivalence(toy):
    sigma, n = sp.symbols("sigma n")
    assert check("ex-t-expr", sigma**2 / n).correct
    assert check("ex-t-expr", "sigma**2 * n**-1").correct
    assert check("ex-t-expr", (sigma**2 + sigma**2) / (2 * n)).correct
    assert check("ex-t-expr", sigma / n).correct is False
    reply = check("ex-t-expr", "sigma**")
    assert reply.correct is False and "Cannot read your answer" in reply.message
    assert check("ex-t-expr", "sigma^2/n").correct  # ^ is a power
    assert _unread("ex-t-expr", object(), "expects a SymPy expression or a formula in "
                   "quotes; got object")
    assert check("ex-t-expr", sp.Matrix([[sigma**2 / n]])).correct  # u.T * v is 1x1
    assert _unread("ex-t-expr", sp.Matrix([sigma, n]), "not a 2x1 matrix")
    assert _unread("ex-t-expr", sp.Eq(sigma, n), "expects a SymPy expression; got Equality")


def test_no_answer_means_your_turn_not_failure(toy):
    reply = check("ex-t-num", None)
    assert reply.correct is None and "Your turn" in repr(reply)
    assert check("ex-t-num", ...).correct is None


def test_feedback_never_reveals_the_reference(toy):
    for label, wrong in [("ex-t-num", 3.0), ("ex-t-vec", [0.0, 0.0]), ("ex-t-expr", "n")]:
        text = check(label, wrong).message + check(label, None).message
        assert "2.0" not in text and "sigma**2/n" not in text
    assert "2.0" not in repr(toy["ex-t-num"])  # the dataclass repr hides the reference


def _unread(label, answer, words):
    """``check`` replies (never raises) that it cannot read ``answer``, saying ``words``."""
    reply = check(label, answer)
    assert reply.correct is False and reply.message.startswith(
        f"Cannot read your answer to {label}: "), reply.message
    assert words in reply.message, reply.message
    return True


def test_an_unknown_label_is_an_error():
    with pytest.raises(ValueError, match="label must be one of"):
        check("ex-nope", 1.0)


@pytest.mark.parametrize("label, answer, words", [
    ("ex-t-num", {"two": 2}, "expects one number; got dict"),
    ("ex-t-num", True, "True is not a number"),
    ("ex-t-num", float("nan"), "nan is not a finite number"),
    ("ex-t-num", ["2.00"], "expects one number, not a list"),
    ("ex-t-num", [2.0], "expects one number, not a list"),  # not a free point in a list
    ("ex-t-num", [[2.0]], "expects one number, not a list"),
    ("ex-t-num", np.array([2.0]), "expects one number, not a list or array"),
    ("ex-t-num", "2,00", "write decimals with a decimal point, e.g. 2.5, not 2,5"),
    ("ex-t-num", "2,5", "write decimals with a decimal point"),  # parses as a pair
    ("ex-t-num", "E**-1000", "a constant exponent must lie between -100 and 100"),
    ("ex-t-vec", "1, 2", "expects a list of 2 numbers, e.g. [0.5, 0.5], not a string"),
    ("ex-t-vec", [1.0, float("nan")], "nan is not a finite number"),
    ("ex-t-vec", [[1.0, 2.0]], "not a nested list"),
    ("ex-t-vec", 1.0, "not a single value"),
    ("ex-t-expr", True, "expects a SymPy expression; got bool"),
])
def test_every_input_gets_feedback_not_a_traceback(toy, label, answer, words):
    assert _unread(label, answer, words)


def test_slow_expressions_are_judged_quickly():
    """Answers whose expansion is huge are judged by evaluation, not expansion: each must
    get a verdict. A hard cap (a subprocess killed after 20 s) fails only on a hang; there
    is no timing assertion."""
    import subprocess
    import sys

    code = ("from mhacore.exercises import check\n"
            "for answer in ['(a+u+v)**100', '(((a+1)**9)**9)**9', '(a+u+v)**99*(a-u)**99',"
            " 'exp((a+u+v)**100)', '((a+1)**100)**100']:\n"
            "    print(check('ex-3-1', answer).message.split(' (')[0])\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=20, cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:5] == ["Not yet"] * 5, proc.stdout


def test_an_empty_string_is_an_empty_answer(toy):
    for label in ("ex-t-num", "ex-t-vec", "ex-t-expr"):
        reply = check(label, "  ")
        assert reply.correct is False and reply.message.startswith(f"Empty answer ({label})")
        assert "syntax" not in reply.message


def test_registration_is_validated(toy):
    with pytest.raises(ValueError, match="registered twice"):
        register_exercise(Exercise("ex-t-num", "t", "number", "", ""))
    with pytest.raises(ValueError, match="kind must be one of"):
        register_exercise(Exercise("ex-t-new", "t", "matrix", "", ""))
    with pytest.raises(ValueError, match="sig_figs must be an integer >= 1 or None; got 0"):
        register_exercise(Exercise("ex-t-new", "t", "number", "", "", sig_figs=0))
    with pytest.raises(ValueError, match="kind must be one of"):
        seal_exercise("ex-t-new", "t", "matrix", "", "", 1.0)


ROOT = Path(__file__).resolve().parents[1]


def _exercise_text(label, chapter):
    """The body of the ``{exercise}`` directive ``label`` in its chapter."""
    text = (ROOT / "book" / f"{chapter}.md").read_text(encoding="utf-8")
    start = text.index(f":label: {label}\n")
    return text[start:text.index("\n```", start)]


def test_every_book_exercise_names_a_label_in_its_chapter():
    for label, ex in EXERCISES.items():
        if ex.chapter == "index":
            continue
        text = (ROOT / "book" / f"{ex.chapter}.md").read_text(encoding="utf-8")
        assert f":label: {label}" in text, label
        assert f'check("{label}"' in text, f"{label} has no self-check cell in its chapter"


@pytest.mark.parametrize("label", [k for k, e in EXERCISES.items()
                                   if e.kind != "expression" and e.chapter != "index"])
def test_numeric_exercises_state_their_precision(label):
    ex = EXERCISES[label]
    stated = " ".join(_exercise_text(label, ex.chapter).split())
    wanted = (f"to {ex.sig_figs} significant figures" if ex.sig_figs
              else "an integer")
    assert wanted in stated, f"{label}'s text must say {wanted!r}"
    assert wanted in check(label, None).message


# --- every exercise: reference, rounded, a common mistake, a malicious string ------------

MALICIOUS = [
    "__import__('os').system('touch {marker}')",
    "(lambda: __import__('os').system('touch {marker}'))()",
    "().__class__.__base__.__subclasses__()",
    "exec('open(\"{marker}\", \"w\")')",
    "open('{marker}', 'w')",
    "__builtins__",
    "sqrt.__globals__",
    "[x for x in ().__class__.__mro__]",
    "Symbol('x').__class__",
    "exp(x=1)",
    "'1.0'",
    "9**9**9**9",
    "2**1000000",
    "exp(exp(exp(100)))",  # would hang SymPy's evaluation
    "9" * 400,
]


def _rounded(reference, sig_figs):
    """The reference as a student would round it to the stated precision."""
    digits = f".{sig_figs}g" if sig_figs else ".0f"
    return [float(f"{r:{digits}}") for r in np.ravel(reference)]


CHECKED = [k for k, e in EXERCISES.items() if e.chapter != "index"]


def test_every_checked_exercise_lists_a_common_mistake():
    assert all(EXERCISES[label].mistakes for label in CHECKED)


def test_the_seals_are_the_answers_sealed():
    """The package's seals are what ``tools/exercise_answers.py`` makes of the answers:
    run it after changing an answer."""
    assert exercises.SEALS.read_text(encoding="utf-8") == sealed_text()
    assert sorted(EXERCISES) == sorted(BY_LABEL)


@pytest.mark.parametrize("label", CHECKED)
def test_reference_rounded_and_mistaken_answers(label):
    ex = BY_LABEL[label]
    if ex.kind == "expression":
        assert check(label, ex.reference).correct
        assert check(label, f"({ex.reference}) * 1").correct
    else:
        rounded = _rounded(ex.reference, ex.sig_figs)
        assert check(label, ex.reference).correct
        answer = rounded[0] if ex.kind == "number" else rounded
        assert check(label, answer).correct, answer
        if ex.kind == "number":
            assert check(label, repr(answer)).correct  # the same number as a string
    for wrong, hint in ex.mistakes:
        reply = check(label, wrong)
        assert reply.correct is False and reply.message.endswith(hint)


@pytest.mark.parametrize("label", CHECKED)
@pytest.mark.parametrize("attack", MALICIOUS)
def test_a_malicious_string_never_runs(label, attack, tmp_path):
    marker = tmp_path / "pwned"
    answer = attack.format(marker=marker)
    if EXERCISES[label].kind == "vector":
        answer = [answer] * EXERCISES[label].size
    reply = check(label, answer)
    assert reply.correct is False and "Cannot read your answer" in reply.message
    assert "Nothing in it was run" in reply.message
    assert not marker.exists()


# --- the book's reference answers, each recomputed another way -----------------------------

def _ok(label, answer):
    return check(label, answer).correct


def test_ex_1_1_kernel_efficiency_by_quadrature():
    from scipy.integrate import quad

    epa = lambda u: 0.75 * (1 - u * u)
    mu2 = quad(lambda u: u * u * epa(u), -1, 1)[0]
    roughness = quad(lambda u: epa(u) ** 2, -1, 1)[0]
    gauss_r = quad(lambda u: np.exp(-u * u) / (2 * np.pi), -np.inf, np.inf)[0]
    assert _ok("ex-1-1", (gauss_r**4 / (mu2**2 * roughness**4)) ** 0.2)


def test_ex_1_2_recorded_with_the_script_that_made_it():
    from mhacore.theorems import ch01_nw

    bw = np.geomspace(0.015, 0.06, 13)
    curves = ch01_nw.mse_curves(3200, bw, replicates=100, rng=1)
    assert _ok("ex-1-2", np.exp(ch01_nw.argmin_log_bandwidth(np.log(bw), curves.mean(axis=0))))


def test_ex_2_1_factorisation_of_the_weight_ratio():
    q, k1, k2 = (sp.Matrix(sp.symbols(f"{s}1:3", real=True)) for s in "qab")
    tau = sp.Symbol("tau", positive=True)
    ratio = sp.exp(q.dot(k1 - k2) / tau)
    first = sp.exp(((q - k2).dot(q - k2) - (q - k1).dot(q - k1)) / (2 * tau))
    second = ratio / first
    n1, n2 = k1.dot(k1), k2.dot(k2)
    assert sp.simplify(second - sp.exp((n1 - n2) / (2 * tau))) == 0
    assert _ok("ex-2-1", "exp(n1/(2*tau)) * exp(-n2/(2*tau))")


def test_ex_2_2_bandwidth_matches_the_default_temperature_head():
    from mhacore import MultiHeadNW, nw_estimate

    rng = np.random.default_rng(0)
    keys = rng.standard_normal((100, 3))
    keys /= np.linalg.norm(keys, axis=1, keepdims=True)
    values, queries = rng.standard_normal(100), rng.standard_normal((5, 3))
    head = MultiHeadNW(np.eye(3)[None], np.eye(3)[None])(queries, keys, values)
    bandwidth = BY_LABEL["ex-2-2"].reference
    gauss = nw_estimate(queries, keys, values, kernel="gaussian", bandwidth=bandwidth)
    np.testing.assert_allclose(head, gauss, rtol=1e-10)


def test_ex_3_1_spread_term_numerically():
    rng = np.random.default_rng(1)
    for a, u, v in rng.uniform(0, 1, (5, 3)):
        w1, w2 = np.array([u, 1 - u]), np.array([v, 1 - v])
        w_bar = a * w1 + (1 - a) * w2
        spread = a * np.sum((w1 - w_bar) ** 2) + (1 - a) * np.sum((w2 - w_bar) ** 2)
        assert spread == pytest.approx(2 * a * (1 - a) * (u - v) ** 2, rel=1e-12)


def test_ex_4_1_against_scipy_subspace_angles():
    from scipy.linalg import subspace_angles

    a, b = 0.3, 1.1
    u1 = np.eye(4)[:, :2]
    u2 = np.array([[np.cos(a), 0], [0, np.cos(b)], [np.sin(a), 0], [0, np.sin(b)]])
    hdi = 1 - np.mean(np.cos(subspace_angles(u1, u2)) ** 2)
    ref = sp.sympify(BY_LABEL["ex-4-1"].reference).subs({"a": a, "b": b})
    assert float(ref) == pytest.approx(hdi, rel=1e-12)


def test_ex_4_2_union_of_orthonormal_bases_attains_the_reference():
    from mhacore import head_diversity_index

    rng = np.random.default_rng(2)
    reached = []
    for n_heads in (2, 4, 8, 16):
        n_bases = max(1, n_heads * 16 // 64)
        bases = [np.linalg.qr(rng.standard_normal((64, 64)))[0] for _ in range(n_bases)]
        columns = np.concatenate(bases, axis=1)[:, : n_heads * 16]  # (64, H*16)
        w_key = columns.reshape(64, n_heads, 16).transpose(1, 0, 2)  # (H, 64, 16)
        reached.append(head_diversity_index(w_key))
    assert _ok("ex-4-2", reached)


def test_ex_5_1_overlap_model_at_full_diversity():
    b2, v, rho0, h = sp.symbols("B^2 V rho_0 H", positive=True)
    rho_bar = rho0 + (1 - rho0) * (1 - 1)  # the overlap model at HDI = 1
    assert _ok("ex-5-1", b2 + v * (rho_bar + (1 - rho_bar) / h))


def test_ex_5_2_is_the_frame_potential_bound():
    from mhacore import max_feasible_hdi

    assert _ok("ex-5-2", max_feasible_hdi(7, 2, 8))
    # the chapter states the bound for H = 6 (0.9): the exercise must not be that case
    assert not _ok("ex-5-2", max_feasible_hdi(6, 2, 8))
    assert "H = 7, d_k = 2, p = 8" in EXERCISES["ex-5-2"].prompt


# --- answers that could stall the checker (issue: a five-character answer) ---------------

@pytest.mark.parametrize("answer, words", [
    ("9^9^9", "a power of a constant power is not allowed"),  # SymPy: 9**(9**9)
    ("2^2^30", "a power of a constant power is not allowed"),
    ("2^3^2", "a power of a constant power is not allowed"),  # 2**9 for SymPy, not 64
    ("n^n^n^n", "a tower of more than 2 powers"),
    ("exp(exp(exp(exp(exp(n)))))", "functions are nested more than 3 deep"),
    ("sqrt()", "sqrt takes 1 argument(s); got 0"),
    ("Rational(1, 2, 3)", "Rational takes 2 argument(s); got 3"),
    ("pi(2)", "pi takes 0 argument(s); got 1"),
    ("-" * 150 + "n", "nested more than 100 levels deep"),
])
def test_answers_that_would_stall_sympy_are_refused_before_it_sees_them(toy, answer, words):
    """The whitelist reads ^ as SymPy does (right-associative power), and bounds towers,
    nesting and calls, so no answer reaches SymPy that it cannot judge quickly."""
    assert _unread("ex-t-expr", answer, words)


def test_caret_means_what_sympy_means():
    from mhacore._parse import parse_answer

    n = sp.Symbol("n")
    assert parse_answer("2^n^2", {"n": n}) == 2 ** (n ** 2)
    assert parse_answer("-n^2", {"n": n}) == -(n ** 2)


def test_a_judgement_that_runs_too_long_is_stopped(toy, monkeypatch):
    """Whatever an answer costs, check answers within its time limit (here a judge that
    never returns), and says so instead of hanging a notebook or the autograder."""
    monkeypatch.setattr(exercises, "JUDGE_SECONDS", 0.2)

    def forever(ex, given):
        while True:
            pass

    monkeypatch.setattr(exercises, "_judge", forever)
    feedback = check("ex-t-num", 2.0)
    assert feedback.correct is False and "within 0.2 s" in feedback.message
    assert check("ex-t-num", 2.0).correct is False  # the timer is reset, not left running
    import signal

    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_judgement_off_the_main_thread_is_bounded_too(toy, monkeypatch):
    """A web app or grading service may call check from a worker thread, where no
    signal reaches: the caller still has its verdict within the limit (issue 27)."""
    import threading
    import time

    monkeypatch.setattr(exercises, "JUDGE_SECONDS", 0.2)
    judge = exercises._judge
    monkeypatch.setattr(exercises, "_judge", lambda ex, given: time.sleep(1.5))
    replies = []
    start = time.monotonic()
    caller = threading.Thread(target=lambda: replies.append(check("ex-t-num", 2.0)))
    caller.start()
    caller.join(5)
    assert time.monotonic() - start < 1.0
    assert replies and replies[0].correct is False and "within 0.2 s" in replies[0].message
    monkeypatch.setattr(exercises, "_judge", judge)  # from a thread: errors and verdicts come back
    caller = threading.Thread(target=lambda: replies.append((check("ex-t-num", "1/0"), check("ex-t-num", 2.0))))
    caller.start()
    caller.join(5)
    unreadable, judged = replies[1]
    assert unreadable.correct is False and "Cannot read" in unreadable.message
    assert judged.correct in (True, False)


def test_a_formula_built_to_vanish_at_the_old_fixed_points_is_wrong(toy):
    """The points used to be drawn from seed 0, visible in the source; a wrong answer
    that vanishes there (the reference plus a product that is 0 at each of them) was
    judged correct. The points are drawn afresh at each call now."""
    old = np.random.default_rng(0)
    first = [old.uniform(0.5, 2.0) for _ in range(2 * 8)][::2]  # n, then sigma, per point
    n = sp.Symbol("n", positive=True)
    trap = sp.Mul(*[n - sp.Float(a) for a in first])
    answer = str(sp.Symbol("sigma", positive=True) ** 2 / n + trap)
    assert not check("ex-t-expr", answer).correct


@pytest.mark.parametrize("tensor, words", [
    (torch.empty((), device="meta"), "on the 'meta' device holds no values"),
    (torch.tensor(2.0 + 1j), "not a complex tensor"),
])
def test_tensors_without_real_values_are_refused_with_a_message(toy, tensor, words):
    assert _unread("ex-t-num", tensor, words)


def test_low_precision_tensors_are_read(toy):
    assert check("ex-t-num", torch.tensor(2.0, dtype=torch.bfloat16)).correct
    assert check("ex-t-vec", torch.tensor([1.0, 2.0], dtype=torch.float16)).correct


# --- from a second adversarial review ----------------------------------------------------

def test_a_str_subclass_cannot_run_code_through_its_methods(toy):
    class Sneaky(str):
        def strip(self, *args):
            raise RuntimeError("ran")

    assert check("ex-t-num", Sneaky("2.00")).correct


def test_the_callers_own_timer_survives_a_check(toy):
    import signal

    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30.0)
        check("ex-t-num", 2.0)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 25.0 < left <= 30.0  # still running, less the time check took
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert fired == []


def test_full_width_letters_are_the_same_symbols(toy):
    assert check("ex-t-expr", "ｓｉｇｍａ^2/ｎ").correct
    assert check("ex-t-num", "ｓｑｒｔ(4)").correct


def test_a_term_that_vanishes_only_on_the_usual_range_is_seen(toy):
    """The added term is 0 exactly for n in [0.5, 2], where points used to be drawn; it
    escapes all eight wide points with probability 0.15**8, about 3e-7."""
    trap = "(Abs(n - 2) - (2 - n)) + (Abs(n - 0.5) - (n - 0.5))"
    assert not check("ex-t-expr", f"sigma**2/n + {trap}").correct


@pytest.mark.parametrize("answer, words", [
    (np.ma.masked, "a masked value is not a number"),
    (torch.tensor(True), "not a tensor of booleans"),
    (np.bool_(True), "is not a number"),
    (10**400, "too large"),
])
def test_values_that_are_not_numbers_are_refused(toy, answer, words):
    assert _unread("ex-t-num", answer, words)


def test_exact_numbers_of_other_libraries_are_read(toy):
    import decimal
    import fractions

    import mpmath

    for answer in (fractions.Fraction(2, 1), decimal.Decimal("2.00"), mpmath.mpf("2")):
        assert check("ex-t-num", answer).correct, answer


@pytest.mark.parametrize("answer", [{1.0: 2.0}, {1.0, 2.0}, (x for x in (1.0, 2.0))])
def test_a_vector_given_as_another_container_asks_for_a_list(toy, answer):
    assert _unread("ex-t-vec", answer, "give a list")


# --- no answer in the package ---------------------------------------------------------------

def _answer_texts(value) -> set[str]:
    """The ways an answer could be written down: a formula as given; a number in full, and
    rounded to 3 to 6 significant figures (shorter forms such as "0.8" occur anywhere)."""
    if isinstance(value, str):
        return {value, value.replace(" ", "")}
    texts = set()
    for x in np.ravel(np.asarray(value, dtype=float)):
        texts |= {repr(float(x))} | {f"{x:.{k}g}" for k in range(3, 7)}
    return {t for t in texts if len(t.strip("-0.")) >= 3 and t not in ("100", "1e+02")}


def test_no_answer_or_mistake_can_be_read_from_the_package_or_the_registry():
    """Every reference answer and every listed mistake, in every usual spelling, is absent
    from each file of the installed package and from every attribute of the registry."""
    wanted = {}
    for label, answer in BY_LABEL.items():
        for value in [answer.reference] + [wrong for wrong, _ in answer.mistakes]:
            for text in _answer_texts(value):
                wanted[text] = label
    assert len(wanted) > 50
    package = Path(exercises.__file__).parent
    files = [p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert any(p.name == "exercise_seals.json" for p in files)
    found = [(text, label, p.relative_to(package).as_posix()) for p in files
             for text in [p.read_bytes().decode("utf-8", "replace")]
             for text_, label in wanted.items() if text_ in text
             for text in [text_]]
    assert not found, found[:10]
    registry = repr([ex.to_json() for ex in EXERCISES.values()] + list(EXERCISES.values()))
    assert not [text for text in wanted if text in registry]


def test_the_search_finds_an_answer_left_in_a_file(tmp_path):
    """The search above would see an answer written into the package."""
    texts = _answer_texts(BY_LABEL["ex-1-1"].reference)
    assert "1.0408377994018" in texts and "1.04" in texts and "1.041" in texts
    assert "p**2/K" in _answer_texts(BY_LABEL["ex-8-1"].reference)


def test_ex_9_1_token_space_hdi_by_monte_carlo():
    from mhacore.diversity import random_subspace_hdis

    draws = random_subspace_hdis(4000, 16, 2, 5, rng=np.random.default_rng(9))  # (4000,)
    se = draws.std(ddof=1) / np.sqrt(len(draws))
    assert abs(draws.mean() - (1 - 2 / 5)) <= 4 * se  # the sealed formula at d_k = 2, q = 5
    assert _ok("ex-9-1", "1 - d_k/q") and not _ok("ex-9-1", "1 - d_k/32")


def test_ex_9_2_from_the_committed_sweep_report():
    from mhacore import trained_heads

    best = trained_heads.load_report()["summary"]["best"]
    b = next(b for b in best if b["family"] == "smooth" and b["k"] == 32)
    assert _ok("ex-9-2", b["best_risk"]["mean"] / b["nw"]["mean"])


def test_ex_8_4_from_the_committed_forest_report():
    """Refit the line through the two fit points by hand from s_p(m); the held-out m furthest
    above it (in SE) is the sealed answer, and agrees with the report's own z."""
    from mhacore import ensemble_rho

    rep = ensemble_rho.load_report()["forests"]["diabetes"]
    p = rep["n_features"]
    by_m = {r["max_features"]: r for r in rep["rows"]}
    (m0, m1) = sorted(r["max_features"] for r in rep["rows"] if r["role"] == "fit")
    s = {m: ensemble_rho.split_share_probability(m, p) for m in by_m}
    slope = (by_m[m1]["rho"] - by_m[m0]["rho"]) / (s[m1] - s[m0])
    line = {m: by_m[m0]["rho"] + slope * (s[m] - s[m0]) for m in by_m}
    held = [m for m, r in by_m.items() if r["role"] == "held-out"]
    above = {m: (by_m[m]["rho"] - line[m]) / by_m[m]["rho_se"] for m in held}
    best = max(above, key=above.get)
    assert best == max(held, key=lambda m: by_m[m]["z"])  # the report's z picks the same m
    assert _ok("ex-8-4", best) and _ok("ex-8-4", float(best))
    assert not _ok("ex-8-4", 10)
