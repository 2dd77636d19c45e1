"""mhacore.sweeps: the heads-and-width sweep of claim C5 (single process)."""

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from mhacore import sweeps
from mhacore.decomposition import design_decomposition
from mhacore.theorems.ch06_heads_width import block_heads, signal

REPORT = Path(__file__).resolve().parents[1] / "reports" / "sweep-heads-width-fixed.json"


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
    fewer = sweeps.run_sweep("tiny", out=out, resume=True, overrides={"blocks": 1},
                             log=None)  # a smaller grid: nothing run, nothing lost
    assert fewer["runs"][-1]["units_run"] == 0 and fewer["units"] == more["units"]
    assert json.loads(out.read_text())["units"] == more["units"]
    before = out.read_bytes()
    with pytest.raises(sweeps.ResumeRefused, match=r"--seed 20260521 .* --seed 3"):
        sweeps.run_sweep("tiny", out=out, resume=True, seed=3, log=None)
    assert out.read_bytes() == before


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
    (lambda: sweeps.run_sweep("tiny", overrides={"blocks": 0}), ValueError,
     r"blocks must be an integer >= 1; got 0"),
    (lambda: sweeps.run_sweep("tiny", overrides={"block_size": 0}), ValueError,
     r"block_size must be an integer >= 1; got 0"),
    (lambda: sweeps.run_sweep("tiny", overrides={"m": 0}), ValueError,
     r"m must be an integer >= 1; got 0"),
    (lambda: sweeps.run_sweep("tiny", overrides={"n_values": [1]}), ValueError,
     r"n_values must be an integer >= 2; got 1"),
    (lambda: sweeps.run_sweep("tiny", overrides={"budgets": [1]}), ValueError,
     r"budgets must be an integer >= 2; got 1"),
    (lambda: sweeps.run_sweep("tiny", overrides={"budgets": []}), ValueError,
     r"budgets must be a non-empty list"),
    (lambda: sweeps.settings("tiny", overrides={"p": 0}), ValueError,
     r"p must be an integer >= 1; got 0"),
    (lambda: sweeps.settings("tiny", overrides={"budgets": [8, 4, 8]}), ValueError,
     r"budgets must not repeat a value .*; got 8 more than once in \[8, 4, 8\]"),
    (lambda: sweeps.settings("tiny", overrides={"n_values": [20, 20]}), ValueError,
     r"n_values must not repeat a value"),
    (lambda: sweeps.run_sweep("tiny", out="/nonexistent-mhacore/dir/s.json"), ValueError,
     r"out must be a writable report file; .*folder /nonexistent-mhacore/dir does not"),
])
def test_validation(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_grid_sizes_are_sorted():
    s = sweeps.settings("tiny", overrides={"budgets": [8, 4], "n_values": [200, 20]})
    assert s["budgets"] == [4, 8] and s["n_values"] == [20, 200]


def test_sweep_command_refuses_a_repeated_budget(capsys):
    from mhacore.__main__ import main

    with pytest.raises(SystemExit) as exc:
        main(["sweep", "heads-width-fixed", "--size", "tiny", "--budgets", "4", "4"])
    assert exc.value.code == 2 and "budgets must not repeat a value" in capsys.readouterr().err


def test_sweep_command_alone(tmp_path, capsys):
    from mhacore.__main__ import main

    out = tmp_path / "s.json"
    assert main(["sweep", "heads-width-fixed", "--size", "tiny", "--budgets", "4",
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


# ---- the command line -----------------------------------------------------------------

ONE_UNIT = ["sweep", "heads-width-fixed", "--size", "tiny", "--budgets", "4", "--n-values", "20",
            "--blocks", "1"]


def _sweep_exit(argv):
    from mhacore.__main__ import main

    with pytest.raises(SystemExit) as info:
        main(argv)
    return info.value.code


@pytest.fixture
def one_unit(tmp_path):
    """A finished one-unit sweep report; returns its path."""
    from mhacore.__main__ import main

    out = tmp_path / "g.json"
    assert main([*ONE_UNIT, "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("change, pattern", [
    (["--seed", "1"], r"--seed 20260521 and this run has --seed 1"),
    (["--p", "64"], r"--p 8 and this run has --p 64"),
    (["--queries", "3"], r"--queries 8 and this run has --queries 3"),
    (["--block-size", "3"], r"--block-size 2 and this run has --block-size 3"),
    (["--size", "small", "--p", "8"], (r"--queries 8 \(its --size was tiny\) and this "
                                      r"run has --queries 16")),
])
def test_resume_with_other_settings_refuses_and_leaves_the_file(one_unit, capsys, change,
                                                                 pattern):
    from mhacore.__main__ import main

    before = one_unit.read_bytes()
    assert main([*ONE_UNIT, "--out", str(one_unit), "--resume", *change]) == 1
    err = capsys.readouterr().err
    assert re.search(pattern, err), err
    assert one_unit.read_bytes() == before


@pytest.mark.parametrize("content", ['{"results": [], "scale": "book", "seed": 1}',
                                     "not json", "[1, 2]"])
def test_resume_refuses_a_file_that_is_not_a_sweep_report(tmp_path, capsys, content):
    from mhacore.__main__ import main

    out = tmp_path / "check.json"
    out.write_text(content)
    assert main([*ONE_UNIT, "--out", str(out), "--resume"]) == 1
    assert "is not a sweep report" in capsys.readouterr().err
    assert out.read_text() == content


def test_resume_grows_the_grid_and_keeps_the_units(one_unit):
    from mhacore.__main__ import main

    first = json.loads(one_unit.read_text())["units"]
    assert main([*ONE_UNIT, "--out", str(one_unit), "--resume", "--blocks", "2",
                 "--n-values", "20", "30"]) == 0
    grown = json.loads(one_unit.read_text())
    assert len(grown["units"]) == 4 and grown["runs"][-1]["units_run"] == 3
    assert all(grown["units"][k] == v for k, v in first.items())


@pytest.mark.parametrize("argv, pattern", [
    (["--blocks", "0"], r"argument --blocks: must be an integer >= 1; got 0"),
    (["--block-size", "0"], r"argument --block-size: must be an integer >= 1; got 0"),
    (["--queries", "0"], r"argument --queries: must be an integer >= 1; got 0"),
    (["--n-values", "0"], r"argument --n-values: must be an integer >= 2; got 0"),
    (["--n-values", "1"], r"argument --n-values: must be an integer >= 2; got 1"),
    (["--budgets", "0"], r"argument --budgets: must be an integer >= 2; got 0"),
    (["--budgets", "1"], r"argument --budgets: must be an integer >= 2; got 1"),
    (["--p", "4", "--budgets", "8"], r"--p must be at least every budget D.*p = 4 and D = 8"),
    (["--m", "4"], r"unrecognized arguments: --m"),
    (["--resume"], r"--resume needs --out"),
])
def test_bad_sweep_options_are_one_line_usage_errors(capsys, argv, pattern):
    assert _sweep_exit(["sweep", "heads-width-fixed", "--size", "tiny", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert re.search(pattern, err[-1]), err
    assert err[-1].startswith("python -m mhacore sweep: error:")


def test_no_sweep_option_is_a_prefix_of_a_torchrun_option():
    """torchrun's parser sees the script's options too: a prefix of one of its own
    (``--m`` of ``--master-addr``...) is ambiguous there and the job never starts."""
    import inspect

    from torch.distributed.run import get_args_parser

    import mhacore.__main__ as cli

    theirs = {o for a in get_args_parser()._actions for o in a.option_strings}
    ours = {o for source in (cli.sweep, cli.check)
            for o in re.findall(r'add_argument\("(--[a-z-]+)"', inspect.getsource(source))}
    assert {"--queries", "--seed", "--out", "--theorem"} <= ours
    clashes = {(o, t) for o in ours for t in theirs if t.startswith(o)}
    assert clashes == set()


def test_sweep_help_shows_every_size_and_the_default(capsys):
    assert _sweep_exit(["sweep", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "default: small" in out and all(f"{s}: D" in out for s in sweeps.SIZES)


def test_summary_puts_the_interval_beside_the_interpolated_width():
    line = sweeps.format_summary({"points": [{
        "D": 8, "n": 200, "d_k_star": 4, "d_k_star_interpolated": 2.97,
        "d_k_star_interval": [1.0, 3.2], "second_best": 2, "paired_z": 0.3,
        "edge": None}], "transition": {}, "n0_slope": {}})
    assert "d_k* =    4 on the grid" in line
    assert "interpolated 2.97, 95 % [1, 3.2]" in line


def test_ctrl_c_of_a_sweep_says_what_is_saved(monkeypatch, tmp_path, capsys):
    from mhacore.__main__ import main

    calls = []
    real = sweeps._unit

    def unit(*a):
        if calls:
            raise KeyboardInterrupt
        calls.append(1)
        return real(*a)
    monkeypatch.setattr(sweeps, "_unit", unit)
    out = tmp_path / "s.json"
    assert main([*ONE_UNIT, "--blocks", "3", "--out", str(out)]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [(f"interrupted: 1 finished unit(s) are saved in {out}; rerun with "
                    "--resume to continue")]
    assert len(json.loads(out.read_text())["units"]) == 1


def test_sigterm_of_a_plain_sweep_ends_like_ctrl_c(monkeypatch, tmp_path, capsys):
    import os
    import signal

    from mhacore.__main__ import main

    monkeypatch.setattr(sweeps, "_unit",
                        lambda *a: os.kill(os.getpid(), signal.SIGTERM))
    previous = signal.getsignal(signal.SIGTERM)
    assert main([*ONE_UNIT, "--out", str(tmp_path / "s.json")]) == 130
    assert "interrupted: 0 finished unit(s)" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is previous


def test_reports_get_the_usual_permissions(tmp_path):
    import os

    from mhacore._report import write_json_atomic

    mask = os.umask(0o027)
    try:
        write_json_atomic(tmp_path / "r.json", {"a": 1})
    finally:
        os.umask(mask)
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize("spoil, pattern", [
    (lambda u: u["spread"][0].__setitem__(0, float("nan")), r"spread holds a value that is not finite"),
    (lambda u: u["bias_sq"].pop(), r"bias_sq has shape \(2, 2\), expected \(3, 2\)"),
    (lambda u: u["bias_sq"][1].__setitem__(1, -1e308), r"bias_sq holds a value below 0.0"),
])
def test_resume_refuses_a_kept_unit_it_cannot_summarise(refuses_spoiled_unit, spoil,
                                                        pattern):
    grid = {"budgets": [4], "n_values": [20], "blocks": 1}
    refuses_spoiled_unit(lambda **kw: sweeps.run_sweep("tiny", overrides=grid, **kw),
                         sweeps.unit_key((4, 20, 0)), spoil, pattern)
