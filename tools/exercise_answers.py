"""The reference answers of the book's self-checked exercises, and the command that seals
them into the package.

The package a student installs holds no answer in readable form: ``mhacore.exercises``
reads sealed exercises from ``mhacore/exercise_seals.json``, which keeps salted, slow
hashes of each answer (rounded to the precision asked), of each common mistake, and, for
formulas, of their values at fixed points (:func:`mhacore.exercises.seal_exercise`). The
plain answers live here, in the repository with the solutions, and nowhere in the
package. After adding or changing an exercise, seal again::

    python tools/exercise_answers.py     # rewrites mhacore/exercise_seals.json

``tests/test_exercises.py`` recomputes every answer another way and fails when the seals
are not the ones these answers give.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a clone: the package beside this folder

from mhacore.exercises import SEALS, seal_exercise  # noqa: E402


@dataclass(frozen=True)
class Answer:
    """One exercise as the book states it, with its reference answer in the clear.

    The fields are those of :func:`mhacore.exercises.seal_exercise`."""

    label: str
    chapter: str
    kind: str
    prompt: str
    hint: str
    reference: object
    sig_figs: int | None = 3
    mistakes: tuple = ()
    symbols: tuple = ()

    def seal(self):
        return seal_exercise(self.label, self.chapter, self.kind, self.prompt, self.hint,
                             self.reference, sig_figs=self.sig_figs, mistakes=self.mistakes,
                             symbols=self.symbols)


ANSWERS: list[Answer] = []
BY_LABEL: dict[str, Answer] = {}


# --- the book's exercises -----------------------------------------------------------------
# A warm-up used by the docstring example and the tests: the variance of the mean of four
# independent unit-variance draws.
ANSWERS.append(Answer(
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
    Answer("ex-1-1", _CH1, "number",
           prompt="the ratio of the Gaussian's optimal AMSE to the Epanechnikov's (a float)",
           hint="mu_2 and R of the Epanechnikov kernel are simple rationals; the Gaussian "
                "has mu_2 = 1 and R = 1/(2 sqrt(pi)). Take the ratio of (mu_2^2 R^4)^(1/5).",
           reference=_GAUSS_EPA_RATIO,
           mistakes=((_GAUSS_EPA_RATIO**5, "Mind the power 1/5: the AMSE is proportional "
                                           "to (mu_2^2 R^4)^(1/5), not to mu_2^2 R^4."),
                     (1 / _GAUSS_EPA_RATIO, "That is the Epanechnikov's AMSE over the "
                                            "Gaussian's; the exercise asks for the "
                                            "Gaussian's over the Epanechnikov's."))),
    Answer("ex-1-2", _CH1, "number",
           prompt="the measured h* at n = 3200 (a float)",
           hint="Average the MSE curves over replicates before locating the minimum, and "
                "locate it on the log-bandwidth scale; use rng=1 as the exercise says.",
           reference=0.029178714613983,
           mistakes=(((0.25 / (2 * math.pi**0.5) / (3200 * 8 * math.pi**4)) ** 0.2,
                      "That is the SymPy prediction h_star_model at n = 3200; the "
                      "exercise asks for the minimiser measured by Monte Carlo."),)),
    Answer("ex-2-1", _CH2, "expression",
           prompt="the second factor as a SymPy expression in n1, n2 (the squared key "
                  "norms) and tau",
           hint="Expand both squared distances: the query norm cancels in the difference, "
                "the key norms do not.",
           reference="exp((n1 - n2)/(2*tau))", symbols=("n1", "n2", "tau"),
           mistakes=(("exp((n2 - n1)/(2*tau))", "Check the sign: which key norm does the "
                                                "second factor reward?"),)),
    Answer("ex-2-2", _CH2, "number",
           prompt="the Gaussian bandwidth that MultiHeadNW's default temperature matches "
                  "for d_k = 3 (a float)",
           hint="The default temperature is sqrt(d_k), and the bandwidth is the square root "
                "of the temperature.",
           reference=3 ** 0.25,
           mistakes=((3 ** 0.5, "That is the default temperature sqrt(d_k) itself; the "
                                "bandwidth is its square root."),)),
    Answer("ex-3-1", _CH3, "expression",
           prompt="the spread term sum_h alpha_h ||w^h - w_bar||^2 as a SymPy expression "
                  "in a, u, v",
           hint="For two heads, w^1 - w_bar = (1 - a)(w^1 - w^2).",
           reference="2*a*(1 - a)*(u - v)**2", symbols=("a", "u", "v"),
           mistakes=(("a*(1 - a)*(u - v)**2", "Each w^h has two coordinates, and both "
                                              "differ by the same amount: count both."),)),
    Answer("ex-4-1", _CH4, "expression",
           prompt="the HDI of the two heads as a SymPy expression in the angles a and b",
           hint="The cross-Gram matrix is diagonal with the cosines of the angles.",
           reference="(sin(a)**2 + sin(b)**2)/2", symbols=("a", "b"),
           mistakes=(("(cos(a)**2 + cos(b)**2)/2", "That is the mean squared cosine, the "
                                                   "overlap; the HDI is one minus it."),)),
    Answer("ex-4-2", _CH4, "vector",
           prompt="the largest feasible HDI for H = 2, 4, 8, 16 (a list of four floats)",
           hint="The bound is 1 - max(0, H d_k / p - 1) / (H - 1).",
           reference=[1.0, 1.0, 6 / 7, 0.8],
           mistakes=(([1.0, 1.0, 1.0, 1.0], "Once H d_k > p the heads cannot all be "
                                            "orthogonal: use the frame-potential bound."),)),
    Answer("ex-5-1", _CH5, "expression",
           prompt="the MSE at HDI = 1 as a SymPy expression in B^2 (written B2), V, rho_0 "
                  "and H",
           hint="At HDI = 1 the mean correlation of the overlap model is rho_0.",
           reference="B2 + V*rho_0 + V*(1 - rho_0)/H", symbols=("B^2", "V", "rho_0", "H"),
           mistakes=(("B2 + V/H", "Orthogonal heads still share responses: the "
                                  "correlation floor rho_0 remains."),)),
    Answer("ex-5-2", _CH5, "number",
           prompt=f"the final HDI of the overlap-model optimisation with H = {_EX52_H}, "
                  f"d_k = {_EX52_DK}, p = {_EX52_P}",
           hint="Hd_k > p here: the optimum is the frame-potential bound, not 1.",
           reference=1 - (_EX52_H * _EX52_DK / _EX52_P - 1) / (_EX52_H - 1),
           mistakes=((1.0, "With H d_k > p the heads cannot be orthogonal: the HDI stops "
                           "at the frame-potential bound."),)),
]:
    ANSWERS.append(_exercise)

# --- chapter 06 exercises ---
# Reference answers recomputed independently in tests/test_theorems_ch06.py.
for _exercise in [
    Answer("ex-6-1", "06-heads-and-width", "expression",
           prompt="the optimal head width d_k* of the classical law for data dimension d = 2, "
                  "as a SymPy expression in B, n and V",
           hint="Set the derivative of B/d_k^2 + V d_k^(d/2)/n to zero with d = 2 and solve for d_k.",
           reference="(2*B*n/V)**(1/3)", symbols=("B", "n", "V"),
           mistakes=(("(B*n/V)**(1/3)", "Differentiate B/d_k^2 carefully: it gives "
                                        "-2B/d_k^3."),)),
    Answer("ex-6-2", "06-heads-and-width", "number",
           prompt="the limit of n E||w||^2 for one softmax head with d_k = 6 and projection scale c = 1 "
                  "(a float)",
           hint="Each projected coordinate contributes E exp(c^4 z^2 / d_k) = (1 - 2c^4/d_k)^(-1/2).",
           reference=27 / 8,
           mistakes=((1.5 ** 0.5, "That is one coordinate's factor; the head has d_k = 6 "
                                  "coordinates, and their factors multiply."),)),
]:
    ANSWERS.append(_exercise)

# --- chapter 07 exercises ---
for _exercise in [
    Answer("ex-7-1", "07-structured-weights", "expression",
           prompt="sum_h alpha_h^2 of the weights (1, r, r^2)/(1 + r + r^2) as a SymPy "
                  "expression in r",
           hint="Square each weight and add; the denominator is (1 + r + r^2)^2.",
           reference="(1 + r**2 + r**4)/(1 + r + r**2)**2", symbols=("r",),
           mistakes=(("(1 + r**2 + r**4)/(1 + r + r**2)", "Square the normalising "
                                                          "denominator as well."),)),
    Answer("ex-7-2", "07-structured-weights", "number",
           prompt="the ratio Var(Fibonacci)/Var(uniform) for H = 16 equicorrelated heads "
                  "with rho = 0.2 (a float)",
           hint="Variance / V = rho + (1 - rho) * sum alpha^2; sum alpha^2 is 1/H for "
                "uniform weights and F_H F_{H+1}/(F_{H+2} - 1)^2 for Fibonacci weights.",
           reference=(0.2 + 0.8 * 987 * 1597 / (2584 - 1) ** 2) / (0.2 + 0.8 / 16),
           mistakes=(((0.2 + 0.8 / 16) / (0.2 + 0.8 * 987 * 1597 / (2584 - 1) ** 2),
                      "That is uniform over Fibonacci; the exercise asks for Fibonacci "
                      "over uniform."),)),
]:
    ANSWERS.append(_exercise)

# --- chapter 08 exercises ---
for _exercise in [
    Answer("ex-8-1", "08-three-ensembles", "expression",
           prompt="the correlation of two scouts as a SymPy expression in p and K",
           hint="Two scouts share an error only if both were recruited and follow the same "
                "leader; each scout's error still has variance s^2.",
           reference="p**2/K", symbols=("p", "K"),
           mistakes=(("p/K", "Both scouts must be recruited, each with probability p."),)),
    Answer("ex-8-2", "08-three-ensembles", "number",
           prompt="the smallest number of scouts N within 10 % of the floor (an integer)",
           hint="Solve (1 - rho) sigma^2 / N <= 0.1 rho sigma^2 for N, with rho and sigma^2 "
                "from scout_moments(0.6, 1.0, 0.5), and round up.",
           reference=25.0, sig_figs=None,
           mistakes=((24.0, "With N = 24 the variance is still above 1.1 rho sigma^2: "
                            "round N up, not down."),)),
    Answer("ex-8-4", "08-three-ensembles", "number",
           prompt="the held-out max_features whose rho lies furthest above the line (an integer)",
           hint="Keep the held-out rows of the diabetes forest in the committed report and take "
                "the one with the largest z (measured minus predicted, over its SE), not the "
                "largest |z|.",
           reference=4.0, sig_figs=None,
           mistakes=((10.0, "m = 10 is a fit point: the line passes through it by construction; "
                            "look at the held-out settings only."),)),
]:
    ANSWERS.append(_exercise)

# --- chapter 09 exercises ---
# Exercise 9.2 reads the committed sweep report: the smooth family at k = 32, best trained
# layer (mean risk 0.36322) over the cross-validated smoother (0.27779).
for _exercise in [
    Answer("ex-9-1", "09-trained-attention", "expression",
           prompt="the expected token-space HDI as a SymPy expression in d_k and q",
           hint="The column space of a product of Gaussian matrices is uniformly distributed; "
                "use E HDI = 1 - d_k/p with the dimension of the space the columns live in.",
           reference="1 - d_k/q", symbols=("d_k", "q"),
           mistakes=(("d_k/q", "That is the mean squared overlap of two heads; the HDI is one "
                               "minus it."),)),
    Answer("ex-9-2", "09-trained-attention", "number",
           prompt="the trained layer's risk over the smoother's at k = 32 (smooth family)",
           hint="Take best_risk and nw of the summary's 'best' entry for the smooth family at "
                "k = 32, and divide the first mean by the second.",
           reference=0.36322 / 0.27779,
           mistakes=((0.27779 / 0.36322, "That is the smoother's risk over the layer's; the "
                                         "exercise asks for the layer's over the smoother's."),)),
]:
    ANSWERS.append(_exercise)


BY_LABEL.update({a.label: a for a in ANSWERS})


def sealed_text() -> str:
    """The JSON text of every exercise sealed, as ``mhacore/exercise_seals.json`` holds it."""
    return json.dumps([answer.seal().to_json() for answer in ANSWERS], indent=1,
                   ensure_ascii=False) + "\n"


def main() -> int:
    SEALS.write_text(sealed_text(), encoding="utf-8")
    print(f"sealed {len(ANSWERS)} exercises into {SEALS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
