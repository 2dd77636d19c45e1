"""mhacore.sweeps: the heads-and-width sweep of claim C5 (single process)."""

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from mhacore import sweeps
from mhacore.decomposition import design_decomposition
from mhacore.theorems.ch06_heads_width import block_heads, signal

REPORT = Path(__file__).resolve().parents[1] / "reports" / "sweep-heads-width.json"


def test_block_risks_match_chapter_6_heads_and_the_decomposition():
    """Oracle: ch06.block_heads + mhacore.design_decomposition, split by split, with the
    data in R^p, p larger than the budget (as in ch06.budget_grid)."""
    budget, n, m, p = 8, 150, 6, 12
    bias_sq, spread = sweeps.block_risks(budget, n, [2, 5], seed=11, m=m, p=p, scale=1.3,
                                         sigma=2.0)  # (4, 2)
    for j, r in enumerate([2, 5]):
        rotation, queries, keys = sweeps._design(11, r, n, m, p)  # (p, p), (m, p), (n, p)
        for i, d_head in enumerate(sweeps.splits(budget)):
            mha = block_heads(rotation, budget // d_head, 1.3, budget)
            d = design_decomposition(mha.weights(queries, keys), signal(keys),
                                     signal(queries), 2.0)
            assert bias_sq[i, j] == pytest.approx(d.bias_sq, rel=1e-12)
            assert spread[i, j] == pytest.approx(d.variance + d.covariance, rel=1e-12)


def test_budgets_share_their_designs():
    """Only the budget changes: the width-D split of budget D equals the one-head split of
    budget D computed alone, and the data (hence the squared-bias target) do not depend
    on D."""
    small = sweeps.block_risks(4, 60, [1], seed=3, m=5, p=8)
    large = sweeps.block_risks(8, 60, [1], seed=3, m=5, p=8)
    r4, q4, k4 = sweeps._design(3, 1, 60, 5, 8)
    assert small[0].shape == (3, 1) and large[0].shape == (4, 1)
    assert (r4.shape, q4.shape, k4.shape) == ((8, 8), (5, 8), (60, 8))
    assert not np.allclose(small[0][-1], large[0][-1])  # different budgets, same data


def test_a_design_does_not_depend_on_its_block():
    alone = sweeps.block_risks(4, 40, [3], seed=1, m=4)
    among = sweeps.block_risks(4, 40, [1, 2, 3], seed=1, m=4)
    assert all((a[:, 0] == b[:, 2]).all() for a, b in zip(alone, among))


def test_splits_and_plan():
    assert sweeps.splits(8).tolist() == [1, 2, 4, 8]
    units = sweeps.plan_units((4, 8), (10, 100), 2)
    assert len(units) == len(set(units)) == 8 and units[0][:2] == (8, 100)
    assert sweeps.unit_key((8, 30, 1)) == "D=8,n=30,block=1"


def test_best_width_interpolates_a_parabola_in_log_width():
    widths = np.array([1, 2, 4, 8, 16])
    x = np.log(widths)
    risk = (x - np.log(3.0)) ** 2 + 1  # minimum at d_k = 3
    best = sweeps.best_width(widths, risk)
    assert best["discrete"] == 4 and best["edge"] is None
    assert best["interpolated"] == pytest.approx(3.0, rel=1e-12)
    assert sweeps.best_width(widths, -x)["edge"] == "high"
    assert sweeps.best_width(widths, x) == {"discrete": 1, "interpolated": 1.0,
                                            "edge": "low"}
    assert sweeps.best_width([1, 2], [2.0, 1.0])["edge"] == "high"


def test_transition_sizes_on_known_curves():
    n = np.array([10, 100, 1000, 10000.0])
    t = sweeps.transition(n, [1, 2, 8, 16], 16)  # crosses sqrt(16) = 4 half-way 100..1000
    assert t["n_half"] == pytest.approx(10**2.5) and t["n_first_full"] == 10000
    assert t["n_last_one"] == 10
    # censored: never above sqrt(D); above from the first size; batched over rows
    rows = sweeps.transition(n, [[1, 1, 1, 2], [8, 16, 16, 16]], 16)
    assert rows["n_half"].tolist() == [np.inf, 0.0]
    assert rows["n_first_full"].tolist() == [np.inf, 100.0]
    assert rows["n_last_one"].tolist() == [1000.0, 0.0]


def test_paired_gap_ranks_by_mean_and_gives_the_paired_z():
    gen = np.random.default_rng(0)
    table = gen.standard_normal((3, 4, 50)) * 0.1 + np.array([2.0, 1.0, 1.5, 3.0])[:, None]
    best, second, z = sweeps.paired_gap(table)
    assert best.tolist() == [1, 1, 1] and second.tolist() == [2, 2, 2]
    diff = table[:, 2] - table[:, 1]  # (3, 50)
    expected = diff.mean(-1) / (diff.std(-1, ddof=1) / np.sqrt(50))
    np.testing.assert_allclose(z, expected, rtol=1e-12)
    with warnings.catch_warnings():  # one block: no standard error, and no warning
        warnings.simplefilter("error")
        best, second, z = sweeps.paired_gap(table[..., :1])
    assert best.shape == second.shape == (3,) and np.isnan(z).all()


def test_best_width_batched_matches_one_curve_at_a_time():
    gen = np.random.default_rng(1)
    widths = np.array([1, 2, 3, 4, 6, 12])
    risks = gen.random((20, 6))
    j, value = sweeps._best(widths, risks)
    for row, jj, v in zip(risks, j, value):
        one = sweeps.best_width(widths, row)
        assert one["discrete"] == widths[jj] and one["interpolated"] == pytest.approx(v)


def test_law_exponents_against_sympy():
    """The predicted exponents are those of the risk models' minimisers (d = 1).

    With ``d_k = t²`` the risks are rational in ``t`` and SymPy solves them at once.
    """
    t, n, budget, B, V = sp.symbols("t n D B V", positive=True)
    single = B / t**4 + V * t / n  # B/d_k² + V d_k^(1/2) / n
    ensemble = B / t**4 + V * t**3 / (n * budget)  # B/d_k² + V d_k^(3/2) / (n D)
    laws = sweeps.law_predictions(10, 100)
    for risk, wrt, law, key in ((single, n, "single-head (a)", "n"),
                                (ensemble, n, "ensemble, rho = 0", "n"),
                                (ensemble, budget, "ensemble, rho = 0", "D")):
        (t_star,) = sp.solve(sp.diff(risk, t), t)
        exponent = sp.simplify(sp.diff(sp.log(t_star**2), wrt) * wrt)
        assert float(exponent) == pytest.approx(laws[law][key])
    assert laws["single-head (a)"]["D"] == laws["logarithmic (b)"]["D"] == 0
    log_law = sweeps.law_predictions(100, 10000)["logarithmic (b)"]["n"]
    assert log_law == pytest.approx(np.log(np.log(1e4) / np.log(1e2)) / np.log(100))


def test_resume_keeps_units_and_extends_the_grid(tmp_path):
    out = tmp_path / "s.json"
    first = sweeps.run_sweep("tiny", out=out, log=None)
    again = sweeps.run_sweep("tiny", out=out, resume=True, log=None)
    assert again["runs"][-1]["units_run"] == 0 and again["units"] == first["units"]
    more = sweeps.run_sweep("tiny", out=out, resume=True, overrides={"blocks": 4},
                            log=None)
    assert more["runs"][-1]["units_run"] == 4  # one new block at 2 budgets x 2 sizes
    assert all(more["units"][k] == v for k, v in first["units"].items())
    other = sweeps.run_sweep("tiny", out=out, resume=True, seed=3, log=None)
    assert other["runs"][-1]["units_run"] == 12 and len(other["runs"]) == 1


@pytest.mark.parametrize("call, error, message", [
    (lambda: sweeps.run_sweep("huge"), ValueError, r"size must be one of"),
    (lambda: sweeps.run_sweep("tiny", resume=True), ValueError, r"resume=True needs out"),
    (lambda: sweeps.run_sweep("tiny", sigma=0), ValueError,
     r"sigma must be a finite number > 0; got 0.0"),
    (lambda: sweeps.block_risks(0, 10, [0], seed=0, m=2), ValueError,
     r"budget must be an integer >= 1; got 0"),
    (lambda: sweeps.best_width([1, 2], [1.0]), ValueError, r"widths and risk must be"),
    (lambda: sweeps.block_risks(8, 10, [0], seed=0, m=2, p=4), ValueError,
     r"budget must be at most p = 4; got 8"),
    (lambda: sweeps.run_sweep("tiny", overrides={"p": 4}), ValueError,
     r"p must be at least every budget D"),
])
def test_validation(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_sweep_command_alone(tmp_path, capsys):
    from mhacore.__main__ import main

    out = tmp_path / "s.json"
    assert main(["sweep", "heads-width", "--size", "tiny", "--budgets", "4",
                 "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["settings"]["budgets"] == [4] and len(report["units"]) == 6
    assert report["runs"][0]["distributed"] == {"world_size": 1, "backend": None,
                                                 "rank_devices": ["cpu"]}
    assert "d_k* > sqrt(D) from n" in capsys.readouterr().out


def test_committed_report_is_complete_and_its_summary_reproducible():
    report = json.loads(REPORT.read_text(encoding="utf-8"))
    s = report["settings"]
    keys = {sweeps.unit_key(u) for u in sweeps.plan_units(s["budgets"], s["n_values"],
                                                          s["blocks"])}
    assert set(report["units"]) == keys
    assert len(s["budgets"]) >= 3 and max(s["n_values"]) / min(s["n_values"]) >= 1000
    assert json.dumps(sweeps.summarise(report)) == json.dumps(report["summary"])
