"""Chapter 6 checks: head width under a fixed budget (claim C5)."""

import math

import numpy as np

from mhacore import theorems
import pytest

from mhacore.theorems import ch06_heads_width as ch06


def test_variance_factor_closed_form_values():
    assert ch06.variance_factor(4, scale=1.0) == pytest.approx(4.0)  # (1 - 1/2)^-2
    assert ch06.variance_factor(6, scale=1.0) == pytest.approx(27 / 8)  # (2/3)^-3
    assert ch06.variance_factor(2, scale=1.0) == math.inf  # 2c^4/d_k = 1
    # decreasing in the width towards exp(c^4)
    widths = np.array([3.0, 6.0, 12.0, 1e6])
    values = ch06.variance_factor(widths, scale=1.0)
    assert np.all(np.diff(values) < 0) and values[-1] == pytest.approx(math.e, rel=1e-5)


def test_variance_factor_against_direct_gaussian_expectation():
    # independent oracle: n E||w||^2 -> E_q exp(|a|^2), a = c^2 P^T q / sqrt(d_k); quadrature-free MC
    # over q only (no keys), |P^T q|^2 ~ chi^2_{d_k}
    rng = np.random.default_rng(0)
    d_head, c = 6, 0.9
    chi2 = rng.chisquare(d_head, size=400_000)
    mc = np.exp(c**4 * chi2 / d_head)
    assert abs(mc.mean() - ch06.variance_factor(d_head, scale=c)) < 4 * mc.std() / np.sqrt(mc.size)


def test_block_heads_are_orthogonal_blocks():
    rotation = np.linalg.qr(np.random.default_rng(1).standard_normal((12, 12)))[0]
    mha = ch06.block_heads(rotation, 3, scale=2.0)
    w = mha.w_key.numpy()  # (3, 12, 4)
    assert w.shape == (3, 12, 4) and mha.temperature == pytest.approx(2.0)
    gram = np.einsum("hpk,gpl->hgkl", w, w) / 4.0
    assert np.allclose(gram[0, 0], np.eye(4)) and np.allclose(gram[0, 1], 0.0, atol=1e-12)
    with pytest.raises(ValueError, match="n_heads must divide D = 12; got 5"):
        ch06.block_heads(rotation, 5)
    part = ch06.block_heads(rotation, 2, scale=1.0, budget=4).w_key.numpy()  # (2, 12, 2)
    assert part.shape == (2, 12, 2) and np.allclose(part.transpose(1, 0, 2).reshape(12, 4), rotation[:, :4])
    with pytest.raises(ValueError, match=r"budget must be an integer in \[1, p = 12\]; got 13"):
        ch06.block_heads(rotation, 1, budget=13)


def test_limit_bias_matches_large_n_nw():
    # the n -> infinity head is E f(a + Z); a very large sample approaches it
    rng = np.random.default_rng(2)
    rotation = np.linalg.qr(rng.standard_normal((12, 12)))[0]
    mha = ch06.block_heads(rotation, 1, scale=0.9)
    queries = rng.standard_normal((5, 12))
    keys = rng.standard_normal((200_000, 12))
    values = ch06.signal(keys)  # (n,)
    estimate = mha(queries, keys, values)  # (5,)
    limit = 2 * np.exp(-0.5) * np.sin(np.einsum("hpk,hqk,mq->hmp", mha.w_key.numpy(), mha.w_key.numpy(), queries)[0]
                                      @ (np.ones(12) / np.sqrt(12)) / mha.temperature)
    # delta-method SE of the self-normalised (ratio) estimate sum_i w_i f(x_i), per query
    weights = np.asarray(mha.weights(queries, keys))[0]  # (5, n)
    se = np.sqrt((weights**2 * (values[None] - estimate[:, None]) ** 2).sum(-1))  # (5,)
    assert np.all(np.abs(estimate - limit) <= 4 * se)
    assert ch06.limit_bias_sq(mha, queries) == pytest.approx(float(((limit - ch06.signal(queries)) ** 2).mean()))


def test_width_grid_shapes_and_identity():
    g = ch06.width_grid([50, 100], rng=3, designs=2, m=5)
    assert list(g["d_head"]) == [1, 2, 3, 4, 6, 12]
    assert g["bias_sq"].shape == g["spread"].shape == (2, 6, 2) and g["limit_bias_sq"].shape == (6, 2)
    assert np.all(g["spread"] > 0)
    # the spread is sigma^2 |w_bar|^2 >= sigma^2 / n
    assert np.all(g["spread"][0] >= 1 / 50 - 1e-12) and np.all(g["spread"][1] >= 1 / 100 - 1e-12)


def test_budget_grid_one_generator_per_budget():
    grids = ch06.budget_grid([40], (2, 4), rng=4, p=6, designs=2, m=3)
    assert list(grids) == [2, 4] and list(grids[4]["d_head"]) == [1, 2, 4]
    assert grids[2]["bias_sq"].shape == (1, 2, 2)
    # adding a budget leaves the others' numbers unchanged (spawned children)
    more = ch06.budget_grid([40], (2, 4, 6), rng=4, p=6, designs=2, m=3)
    assert np.array_equal(more[4]["spread"], grids[4]["spread"])
    assert np.all(grids[4]["spread"] >= 1 / 40 - 1e-12)  # sigma^2 |w_bar|^2 >= sigma^2 / n


def test_variance_factors_reproducible():
    a = ch06.variance_factors(100, (6, 12), rng=5, designs=2, m=3)
    b = ch06.variance_factors(100, (6, 12), rng=5, designs=2, m=3)
    assert a.shape == (2, 2) and np.array_equal(a, b) and np.all(a >= 1.0)  # n|w|^2 >= 1 by Cauchy-Schwarz


def test_exercise_references():
    import sympy as sp

    from exercise_answers import BY_LABEL
    from mhacore.exercises import check

    B, n, V, k = sp.symbols("B n V d_k", positive=True)
    solution = sp.solve(sp.diff(B / k**2 + V * k / n, k), k)  # d = 2: d_k^{d/2} = d_k
    assert len(solution) == 1 and check("ex-6-1", solution[0]).correct
    assert not check("ex-6-1", (B * n / V) ** sp.Rational(1, 3)).correct
    assert BY_LABEL["ex-6-2"].reference == pytest.approx(ch06.variance_factor(6, scale=1.0))
    assert check("ex-6-2", 3.375).correct and not check("ex-6-2", math.e).correct


def test_exercise_6_2_simulation_approaches_the_limit_from_below():
    # the numbers quoted in the solution of ex-6-2
    factors = [ch06.variance_factors(n, (6,), 0, designs=20, m=40, scale=1.0)[0] for n in (250, 1000, 4000)]
    means = [f.mean() for f in factors]
    ses = [f.std(ddof=1) / np.sqrt(len(f)) for f in factors]
    assert [round(v, 2) for v in means] == [2.82, 3.12, 3.42]
    assert means[0] < means[1] < means[2]
    assert means[0] + 4 * ses[0] < 27 / 8  # clearly below the limit at n = 250
    assert abs(means[2] - 27 / 8) < ses[2]  # above it at n = 4000, by less than one SE (heavy tail)


def test_design_se_bound_from_the_closed_form_moments():
    # E e^{2A} - (E e^{A})^2 with A = (c^4/d) chi2_d, by quadrature over the chi-square law
    from scipy import integrate, stats

    for d in (6, 12):
        a = ch06.SCALE**4 / d
        moment = [integrate.quad(lambda x: np.exp(k * a * x + stats.chi2.logpdf(x, d)), 0, np.inf)[0]
                  for k in (1, 2)]
        assert ch06.limit_moment(d, 2) == pytest.approx(moment[1], rel=1e-8)
        assert ch06.variance_factor(d) == pytest.approx(moment[0], rel=1e-8)
    assert ch06.limit_moment(4, 4) == np.inf  # no fourth moment at d_k = 4 < 8c^4


@pytest.mark.parametrize("perturbation", [dict(scale_error=1.05), dict(scale_error=0.95), dict(key_df=8)])
def test_variance_ratio_fails_when_its_premise_is_violated(perturbation):
    from mhacore.theorems.ch06_heads_width import _check_variance_ratio

    m = _check_variance_ratio("book", "cpu", theorems.DEFAULT_SEED, **perturbation)
    off = abs(m.estimate - m.prediction) > 4 * m.standard_error
    assert off or not all(m.conditions.values())
    if "key_df" in perturbation:  # heavy tails: the SE itself exceeds the design's bound
        assert m.conditions == {"SE <= the design's bound": False}
