"""The trained-heads sweep (mhacore.trained_heads): its bookkeeping and its summary.

Provenance of the expected values (DESIGN.md, rule 8): the per-unit numbers are compared
with :func:`mhacore.training.train` run directly and with the same sweep cut into other
blocks or run by two ranks under torchrun; the summary's best H, z and slopes with numbers
computed here by hand from a hand-made report (closed forms: a paired z is
``mean(d) / (sd(d) / sqrt(N))``; an exactly linear relation has that slope in every
bootstrap resample).
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from mhacore import sweeps
from mhacore import trained_heads as th
from mhacore.__main__ import main
from mhacore.training import (Task, TrainConfig, attention_weights, head_outputs, init_params, sample_prompts, test_risk,
                              train)

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "reports" / "sweep-trained-heads.json"
PER_SEED = ("risk", "hdi_keys", "hdi_queries", "head_corr", "weight_overlap", "loss_curve")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny tensors: one thread is faster, and steady on a shared machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny") / "trained.json"
    report = th.run_sweep("tiny", out=out, log=None)
    return report, out


def per_seed(report):
    """Every unit's per-seed numbers, by (family, H, k, λ, sweep seed index)."""
    s = report["settings"]
    rows = {}
    for unit in th.plan_units(s):
        result = report["units"][th.unit_key(unit)]
        for i, j in enumerate(result["seed_index"]):
            rows[unit[:4] + (j,)] = {m: np.array(result[m][i] if result[m] is not None else np.nan, dtype=float)
                                     for m in PER_SEED}
            rows[unit[:4] + (j,)]["seed"] = result["seeds"][i]
            for name, values in result.get("baselines", {}).items():
                rows[unit[:4] + (j,)][name] = values[i]
    return rows


def test_tiny_sweep_is_reproducible_and_records_its_run(tiny):
    report, out = tiny
    assert json.loads(out.read_text()) == json.loads(json.dumps(report))  # what rank 0 wrote
    again = th.run_sweep("tiny", log=None)
    strip = lambda r: {k: {f: v for f, v in u.items() if f != "seconds"} for k, u in r["units"].items()}  # noqa: E731
    assert strip(again) == strip(report)  # the same numbers, bit for bit
    assert json.dumps(again["summary"]) == json.dumps(report["summary"])
    s = report["settings"]
    assert s["heads"] == [1, 2] and s["prompt_lengths"] == [4, 8] and s["seeds"] == 2
    run = report["runs"][0]
    assert run["distributed"]["world_size"] == 1 and run["distributed"]["rank_devices"] == ["cpu"]
    assert run["wall_s"] > 0 and run["units_run"] == len(th.plan_units(s)) == 10
    assert "provenance" in run


def test_a_unit_is_what_train_gives_for_its_seeds(tiny):
    report, _ = tiny
    s = report["settings"]
    unit = ("smooth", 2, 8, 0.0, 1)
    result = report["units"][th.unit_key(unit)]
    seeds = th.training_seeds(s["seed"], s["seeds"])[1:2]
    assert result["seeds"] == seeds and result["seed_index"] == [1]
    task = Task("smooth", x_dim=s["x_dim"], n_context=8, noise=s["noise"])
    config = TrainConfig(task, d_model=s["d_model"], n_heads=2, batch_size=s["batch_size"], steps=s["steps"],
                         lr=s["lr"])
    trained = train(config, seeds, dtype=torch.float64)
    prompts = sample_prompts(task, seeds, s["n_test"])
    assert result["risk"][0][0] == test_risk(trained.checkpoints[0], prompts)[0]
    assert result["risk"][0][-1] == test_risk(trained.params, prompts)[0]
    assert s["checkpoints"][0] == 0 and s["checkpoints"][-1] == s["steps"]


def test_the_numbers_do_not_depend_on_how_seeds_are_blocked(tiny):
    report, _ = tiny  # block_size 1: two blocks of one seed
    together = th.run_sweep("tiny", overrides={"block_size": 2}, log=None)  # one block of two
    assert len(together["units"]) == len(report["units"]) // 2
    a, b = per_seed(report), per_seed(together)
    assert a.keys() == b.keys()
    for key in a:
        assert a[key]["seed"] == b[key]["seed"]
        for metric in PER_SEED:
            # float64; batched products may round differently with the batch (mhacore.training.train)
            np.testing.assert_allclose(b[key][metric], a[key][metric], rtol=1e-9, atol=1e-12)
        for name in th.BASELINES:
            if name in a[key]:
                assert b[key][name] == pytest.approx(a[key][name], rel=1e-12)
    assert [(x["k"], x["best_H"]) for x in together["summary"]["best"]] == \
        [(x["k"], x["best_H"]) for x in report["summary"]["best"]]


def test_resume_keeps_finished_units_and_runs_the_rest(tiny, tmp_path, monkeypatch):
    report, out = tiny
    partial = json.loads(out.read_text())
    dropped = sorted(partial["units"])[:3]
    for key in dropped:
        del partial["units"][key]
    path = tmp_path / "partial.json"
    path.write_text(json.dumps(partial))
    ran = []
    real = th.run_unit
    monkeypatch.setattr(th, "run_unit", lambda u, s, ctx: ran.append(th.unit_key(u)) or real(u, s, ctx))
    resumed = th.run_sweep("tiny", out=path, resume=True, log=None)
    assert sorted(ran) == dropped
    assert resumed["units"] == json.loads(path.read_text())["units"]
    for key in report["units"]:  # kept units untouched (their seconds too), the rest recomputed alike
        if key not in dropped:
            assert resumed["units"][key] == report["units"][key]
        else:
            assert resumed["units"][key]["risk"] == report["units"][key]["risk"]
    assert [r["units_run"] for r in resumed["runs"]] == [10, 3]
    assert all({"provenance", "distributed", "wall_s"} <= set(r) for r in resumed["runs"])


def test_resume_refuses_another_sweep_or_other_settings(tiny, tmp_path):
    _, out = tiny
    before = out.read_bytes()
    with pytest.raises(sweeps.ResumeRefused, match=r"made with --steps 6 .* this run has --steps 3"):
        th.run_sweep("tiny", out=out, resume=True, overrides={"steps": 3}, log=None)
    with pytest.raises(sweeps.ResumeRefused, match=r"made with --seed 20260521 .* --seed 1"):
        th.run_sweep("tiny", seed=1, out=out, resume=True, log=None)
    with pytest.raises(sweeps.ResumeRefused, match=r"its --size was tiny"):
        th.run_sweep("small", out=out, resume=True, log=None)
    assert out.read_bytes() == before
    other = tmp_path / "fixed.json"
    other.write_text(json.dumps({"settings": {"sweep": "heads-width", "size": "tiny"}, "units": {}}))
    with pytest.raises(sweeps.ResumeRefused, match=r"report of the sweep heads-width and this run is the sweep "
                                                   r"trained-heads"):
        th.run_sweep("tiny", out=other, resume=True, log=None)


@pytest.mark.parametrize("spoil, pattern", [
    (lambda u: u["risk"][0].__setitem__(0, float("nan")), r"risk holds a value that is not finite"),
    (lambda u: u["hdi_keys"][0].__setitem__(0, 1.5), r"hdi_keys holds a value above 1.0"),
    (lambda u: u.pop("baselines"), r"no baselines"),
    (lambda u: u.__setitem__("seed_index", [1]), r"its seeds are not block 0's"),
])
def test_resume_refuses_a_kept_unit_it_cannot_summarise(tiny, tmp_path, spoil, pattern):
    report, _ = tiny
    spoiled = json.loads(json.dumps(report))
    key = th.unit_key(("smooth", 1, 4, 0.0, 0)) if "baselines" in pattern else th.unit_key(("smooth", 2, 4, 0.0, 0))
    spoil(spoiled["units"][key])
    path = tmp_path / "spoiled.json"
    path.write_text(json.dumps(spoiled))
    before = path.read_bytes()
    with pytest.raises(sweeps.ResumeRefused, match=pattern):
        th.run_sweep("tiny", out=path, resume=True, log=None)
    assert path.read_bytes() == before


# --- the summary on a hand-made report ------------------------------------------------

def hand_made(risks, hdi=None, penalty_risk=None, penalty_hdi=None):
    """A report of three seeds in one block, two checkpoints, heads (1, 2, 4), one k.

    ``risks[H]``: final risks (3,); the initial risk is 1 + final. ``hdi[H]``: (init, final)
    pairs of (3,) arrays; ``penalty_*[λ]``: final risk and HDI at H = 2 under λ.
    """
    s = th.settings("tiny", overrides={"heads": [1, 2, 4], "prompt_lengths": [8], "seeds": 3, "block_size": 3,
                                       "steps": 1, "penalty_heads": 2, "penalty_length": 8,
                                       "penalties": sorted(penalty_risk or [0.0])})
    assert s["checkpoints"] == [0, 1]

    def unit(final_risk, hdi_pair, n_heads):
        both = lambda a, b: np.stack([a, b], 1).tolist()  # noqa: E731  (3, 2)
        init, final = hdi_pair if hdi_pair is not None else (np.full(3, 0.5), np.full(3, 0.5))
        multi = n_heads > 1
        return {"seeds": [0, 1, 2], "seed_index": [0, 1, 2], "risk": both(1 + np.asarray(final_risk), final_risk),
                "hdi_keys": both(init, final) if multi else None, "hdi_queries": both(init, init) if multi else None,
                "head_corr": both(init - 0.5, final - 0.5) if multi else None, "corr_matrix": None,
                "weight_overlap": both(1 - init, 1 - final) if multi else None,
                "loss_curve": [[1.0]] * 3}

    units = {}
    for h in (1, 2, 4):
        units[th.unit_key(("smooth", h, 8, 0.0, 0))] = unit(risks[h], (hdi or {}).get(h), h)
    units[th.unit_key(("smooth", 1, 8, 0.0, 0))]["baselines"] = {
        "least_squares": [2.0, 2.0, 2.0], "nw": [0.5, 0.55, 0.6], "constant": [1.0, 1.0, 1.0]}
    for lam in (penalty_risk or {}):
        if lam > 0:
            units[th.unit_key(("smooth", 2, 8, lam, 0))] = unit(penalty_risk[lam], (np.zeros(3), penalty_hdi[lam]), 2)
    report = {"settings": s, "units": units}
    for key, u in units.items():
        assert th.unit_problem(next(x for x in th.plan_units(s) if th.unit_key(x) == key), u, s) is None
    return report


def test_summary_finds_the_best_heads_and_its_paired_z():
    risks = {1: np.array([1.0, 1.1, 1.2]), 2: np.array([0.5, 0.7, 0.6]), 4: np.array([0.6, 0.75, 0.8])}
    summary = th.summarise(hand_made(risks))
    (best,) = summary["best"]
    diff = risks[4] - risks[2]  # runner-up minus best, paired over seeds
    z = diff.mean() / (diff.std(ddof=1) / math.sqrt(3))
    assert (best["k"], best["best_H"], best["runner_up"]) == (8, 2, 4)
    assert best["runner_up_z"] == pytest.approx(z, abs=1e-3) and z == pytest.approx(2.6458, abs=1e-4)
    assert best["risk"] == [1.1, 0.6, 0.71667]
    nw = np.array([0.5, 0.55, 0.6]) - risks[2]  # positive z: the trained layer is better
    assert best["nw_z"] == pytest.approx(nw.mean() / (nw.std(ddof=1) / math.sqrt(3)), abs=1e-3)
    assert best["constant"] == {"mean": 1.0, "se": 0.0} and best["constant_z"] == pytest.approx(
        0.4 / (0.1 / math.sqrt(3)), abs=1e-3)
    cell = next(c for c in summary["cells"] if c["H"] == 2)
    assert cell["risk"]["mean"] == pytest.approx(0.6) and cell["risk"]["se"] == pytest.approx(0.1 / math.sqrt(3), abs=1e-5)
    assert cell["last_gain"]["mean"] == pytest.approx(1.0) and cell["last_gain"]["z"] is None  # no spread: no z
    assert "hdi_keys" not in next(c for c in summary["cells"] if c["H"] == 1)


def test_summary_reports_the_change_of_diversity():
    init, final = np.array([0.70, 0.72, 0.74]), np.array([0.80, 0.90, 0.85])
    risks = {h: np.full(3, 1.0) + [0.0, 0.01, 0.03] for h in (1, 2, 4)}
    summary = th.summarise(hand_made(risks, hdi={2: (init, final), 4: (init, init)}))
    cell = next(c for c in summary["cells"] if c["H"] == 2)
    diff = final - init
    assert cell["hdi_keys"]["init"]["mean"] == pytest.approx(0.72)
    assert cell["hdi_keys"]["trained"]["mean"] == pytest.approx(0.85)
    assert cell["hdi_keys"]["change"]["mean"] == pytest.approx(diff.mean(), abs=1e-5)
    assert cell["hdi_keys"]["change"]["z"] == pytest.approx(diff.mean() / (diff.std(ddof=1) / math.sqrt(3)), abs=1e-3)
    assert cell["hdi_queries"]["change"]["mean"] == 0.0
    by_h = {e["H"]: e for e in summary["hdi_change"]}
    assert by_h[2]["hdi_keys"]["mean"] == pytest.approx(diff.mean(), abs=1e-5) and by_h[4]["hdi_keys"]["mean"] == 0.0


def test_regression_recovers_an_exact_slope_within_seeds():
    # risk = seed effect - 2 HDI exactly: the within-seed slope is -2 in every resample
    seed_effect = np.array([2.3, 2.5, 2.4])
    hdi = {0.0: np.array([0.75, 0.7, 0.72]), 0.1: np.array([0.8, 0.85, 0.79]), 1.0: np.array([0.95, 0.99, 0.97])}
    risk = {lam: seed_effect - 2 * h for lam, h in hdi.items()}
    risks = {1: np.ones(3), 2: risk[0.0], 4: np.ones(3)}
    report = hand_made(risks, hdi={2: (np.full(3, 0.7), hdi[0.0])}, penalty_risk=risk, penalty_hdi=hdi)
    summary = th.summarise(report)
    (reg,) = [r for r in summary["regressions"] if r["design"] == "penalty" and r["x"] == "hdi_keys"]
    assert reg["slope"] == pytest.approx(-2.0, abs=1e-9) and reg["ci"] == pytest.approx([-2.0, -2.0], abs=1e-9)
    assert (reg["n_obs"], reg["n_clusters"]) == (9, 3)
    table = [p for p in summary["penalty"]]
    assert [p["penalty"] for p in table] == [0.0, 0.1, 1.0]
    assert table[2]["hdi_keys"]["mean"] == pytest.approx(hdi[1.0].mean(), abs=1e-5)
    d = hdi[1.0] - hdi[0.0]
    assert table[2]["hdi_keys"]["vs_zero_z"] == pytest.approx(d.mean() / (d.std(ddof=1) / math.sqrt(3)), abs=1e-3)


def test_cluster_regression_against_numpy_least_squares():
    rng = np.random.default_rng(3)
    x, cluster = rng.normal(size=40), np.repeat(np.arange(8), 5)
    group = cluster.copy()
    y = 0.7 * x + rng.normal(size=8)[cluster] + 0.1 * rng.normal(size=40)
    design = np.column_stack([x, np.eye(8)[group]])  # slope and one intercept per group
    expected = np.linalg.lstsq(design, y, rcond=None)[0][0]
    out = th.cluster_regression(x, y, cluster, group)
    assert out["slope"] == pytest.approx(expected, rel=1e-10)
    assert out["ci"][0] < expected < out["ci"][1] and out["se"] > 0


def test_head_correlation_equals_numpy():
    c = np.random.default_rng(0).normal(size=(2, 3, 50))
    corr, mean_off = th.head_correlation(c)
    for s in range(2):
        np.testing.assert_allclose(corr[s], np.corrcoef(c[s]), rtol=1e-12, atol=1e-14)
        assert mean_off[s] == pytest.approx(np.corrcoef(c[s])[~np.eye(3, dtype=bool)].mean(), rel=1e-12)
    c[1, 0] = 1.0  # a head that does not vary: no correlation, the others still count
    corr, mean_off = th.head_correlation(c)
    assert np.isnan(corr[1, 0, 1]) and mean_off[1] == pytest.approx(np.corrcoef(c[1, 1:])[0, 1], rel=1e-12)


def test_attention_weights_give_the_heads_vector_outputs():
    # the weights come from the folded token-space path; head_outputs(vector=True) projects
    # every token to d_model and each head (mhacore.training._heads): two computations
    config = TrainConfig(Task("smooth", x_dim=3, n_context=5), d_model=8, n_heads=2)
    params = init_params(config, [0, 1])
    prompts = sample_prompts(config.task, [0, 1], 7)
    weights = attention_weights(params, prompts)  # (S, H, B, k)
    d = 3
    context = (torch.einsum("sbkd,sdm->sbkm", prompts.x_context, params.embed[:, :d])
               + prompts.y_context[..., None] * params.embed[:, None, None, d])  # (S, B, k, D)
    values = torch.einsum("sbkm,shmj->shbkj", context, params.w_value)  # (S, H, B, k, d_head)
    torch.testing.assert_close(torch.einsum("shbk,shbkj->shbj", weights, values),
                               head_outputs(params, prompts, vector=True), rtol=1e-12, atol=1e-13)


def test_weight_overlap_equals_a_loop_over_prompts_and_pairs():
    w = torch.softmax(torch.randn(2, 3, 4, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64), -1)
    expected = np.zeros(2)
    for s in range(2):
        cosines = [float(w[s, h, b] @ w[s, g, b] / (w[s, h, b].norm() * w[s, g, b].norm()))
                   for h in range(3) for g in range(3) if h != g for b in range(4)]
        expected[s] = np.mean(cosines)
    np.testing.assert_allclose(th.weight_overlap(w), expected, rtol=1e-12)
    assert th.weight_overlap(w[:, [0, 0]]) == pytest.approx([1.0, 1.0], abs=1e-12)  # identical heads
    with pytest.raises(ValueError, match=r"weights must be a tensor of shape \(S, H, B, k\) with H >= 2"):
        th.weight_overlap(w[:, :1])


# --- bad settings and options ----------------------------------------------------------

@pytest.mark.parametrize("size, overrides, error, pattern", [
    ("huge", None, ValueError, r"size must be one of \['large', 'small', 'tiny'\]; got 'huge'"),
    (3, None, TypeError, r"size must be one of .*; got int 3"),
    ("tiny", {"heads": [3]}, ValueError, r"heads must divide d_model = 8 .*; got 3"),
    ("tiny", {"heads": [2, 2]}, ValueError, r"heads must not repeat a value"),
    ("tiny", {"prompt_lengths": [1]}, ValueError, r"prompt_lengths must be an integer >= 2; got 1"),
    ("tiny", {"seeds": 0}, ValueError, r"seeds must be an integer >= 1; got 0"),
    ("tiny", {"penalties": [0.1]}, ValueError, r"penalties must include 0"),
    ("tiny", {"penalties": [0, -1]}, ValueError, r"penalties must be a finite number >= 0"),
    ("tiny", {"penalty_heads": 1}, ValueError, r"penalty_heads must be one of heads = \[1, 2\] and >= 2 .*; got 1"),
    ("tiny", {"penalty_length": 5}, ValueError, r"penalty_length must be one of prompt_lengths = \[4, 8\]; got 5"),
    ("tiny", {"families": ["cubic"]}, ValueError, r"families must be a non-empty list of distinct values"),
    ("tiny", {"dtype": "float16"}, ValueError, r"dtype must be 'float32' or 'float64'; got 'float16'"),
    ("tiny", {"width": 3}, ValueError, r"overrides must name settings of .*; got 'width'"),
    ("tiny", [("seeds", 2)], TypeError, r"overrides must be a dict of settings; got list"),
])
def test_bad_settings_name_the_setting(size, overrides, error, pattern):
    with pytest.raises(error, match=pattern):
        th.settings(size, overrides=overrides)


@pytest.mark.parametrize("args, pattern", [
    (["--budgets", "4"], r"--budgets is not an option of trained-heads \(it takes --size, --steps"),
    (["--p", "8"], r"--p is not an option of trained-heads"),
    (["--steps", "0"], r"--steps must be an integer >= 1; got 0"),
    (["--size", "medium"], r"invalid choice: 'medium'"),
    (["--resume"], r"--resume needs --out"),
])
def test_command_line_usage_errors(args, pattern, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["sweep", "trained-heads", *args])
    assert exit_.value.code == 2
    assert __import__("re").search(pattern, capsys.readouterr().err)


def test_command_line_runs_and_resume_refuses_another_sweep(tmp_path, capsys):
    out = tmp_path / "th.json"
    assert main(["sweep", "trained-heads", "--size", "tiny", "--steps", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "best H per k" in printed and "slope of risk on diversity" in printed
    report = json.loads(out.read_text())
    assert report["settings"]["sweep"] == "trained-heads" and report["settings"]["steps"] == 2
    assert main(["sweep", "trained-heads", "--size", "tiny", "--steps", "2", "--out", str(out), "--resume"]) == 0
    assert json.loads(out.read_text())["runs"][-1]["units_run"] == 0
    assert main(["sweep", "heads-width-fixed", "--size", "tiny", "--out", str(out), "--resume"]) == 1
    assert "this run is the sweep heads-width-fixed" in capsys.readouterr().err


# --- two ranks under torchrun -----------------------------------------------------------

def test_two_ranks_under_torchrun_give_the_same_report(tiny, tmp_path):
    report, _ = tiny
    out = tmp_path / "ranks.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", MHACORE_DIST_TIMEOUT_S="60")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                           "-m", "mhacore", "sweep", "trained-heads", "--size", "tiny", "--out", str(out)],
                          capture_output=True, text=True, timeout=180, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["runs"][0]["distributed"]["world_size"] == 2
    assert got["runs"][0]["distributed"]["backend"] == "gloo"
    assert got["units"].keys() == report["units"].keys()
    a, b = per_seed(report), per_seed(got)
    for key in a:
        for metric in PER_SEED:  # the same units; only the thread count may differ
            np.testing.assert_allclose(b[key][metric], a[key][metric], rtol=1e-12, atol=1e-14)
    assert [(x["k"], x["best_H"]) for x in got["summary"]["best"]] == \
        [(x["k"], x["best_H"]) for x in report["summary"]["best"]]


# --- the committed report -----------------------------------------------------------------

@pytest.mark.skipif(not REPORT.exists(), reason="the large report is not committed yet")
def test_committed_report_meets_the_minimums_and_its_summary_reproduces():
    report = th.load_report()
    s = report["settings"]
    assert set(report["units"]) == {th.unit_key(u) for u in th.plan_units(s)}
    assert json.dumps(th.summarise(report)) == json.dumps(report["summary"])
    assert s["size"] == "large" and s["heads"] == [1, 2, 4, 8, 16] and s["d_model"] % 16 == 0
    assert len(s["prompt_lengths"]) >= 4 and s["seeds"] >= 8 and len(s["penalties"]) >= 4
    assert "smooth" in s["families"] and all(r["wall_s"] > 0 and "distributed" in r for r in report["runs"])
