"""mhacore.distributed: one process, and 1, 2 or 3 ranks under torchrun (gloo, CPU).

The torchrun tests launch ``python -m torch.distributed.run --standalone`` in a
subprocess (each launch costs a few seconds of start-up per rank) and compare what rank 0
wrote with a single-process run in this process.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mhacore import distributed, sweeps, theorems
from mhacore.montecarlo import DataModel, simulate_heads
from mhacore.attention import MultiHeadNW

ROOT = Path(__file__).resolve().parents[1]
WORKER = str(ROOT / "tests" / "dist_worker.py")
# sharded through simulate_heads, through per-data-set streams, and through fixed blocks of
# replicates (replicate_rng(seed, b) or (seed, i, b)); mha-convex-ensemble is not sharded
CHECKS = ("bvc-design-variance", "bvc-identity", "head-is-nw", "hdi-monotone-model",
          "equicorrelated-weighted-variance", "colony-breiman-variance", "mha-convex-ensemble")


def torchrun(nproc, *args, timeout=120):
    """Run ``torchrun --standalone --nproc-per-node nproc ARGS``; return the process."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1",
               MHACORE_DIST_TIMEOUT_S="30")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={nproc}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=ROOT)


# ---- single process ------------------------------------------------------------------

def test_alone_nothing_is_started():
    ctx = distributed.setup("cpu")
    assert (ctx.rank, ctx.world_size, ctx.backend) == (0, 1, None)
    assert not distributed.active() and distributed.rank() == 0
    assert distributed.all_gather("x") == ["x"] and distributed.broadcast(5) == 5
    distributed.barrier()  # returns at once


def test_shards_partition_the_range():
    for world in (1, 2, 3, 5):
        parts = [list(distributed.shard(11, r, world)) for r in range(world)]
        assert sorted(sum(parts, [])) == list(range(11))
        assert max(map(len, parts)) - min(map(len, parts)) <= 1


def test_replicate_streams_depend_on_the_index_alone():
    children = np.random.SeedSequence(9).spawn(5)
    for r in (0, 4):
        assert (distributed.replicate_rng(9, r).random(3)
                == np.random.default_rng(children[r]).random(3)).all()
    nested = np.random.default_rng(children[2].spawn(4)[3]).random(2)
    assert (distributed.replicate_rng(9, 2, 3).random(2) == nested).all()
    got = distributed.map_replicates(lambda r, g: g.standard_normal(2), 4, seed=9)
    assert all((a == distributed.replicate_rng(9, r).standard_normal(2)).all()
               for r, a in enumerate(got))


def test_blocks_depend_on_the_block_index_alone():
    assert distributed.block_sizes(7, 3) == [3, 3, 1] and distributed.block_sizes(0, 3) == []
    got = distributed.map_blocks(lambda size, g: (g.standard_normal((size, 2)), np.full(size, size)),
                                 7, 3, 9, 4)
    expected = np.concatenate([distributed.replicate_rng(9, 4, b).standard_normal((s, 2))
                               for b, s in enumerate([3, 3, 1])])  # (7, 2)
    assert (got[0] == expected).all() and got[1].tolist() == [3, 3, 3, 3, 3, 3, 1]
    groups = distributed.map_group_blocks(lambda i, size, g: g.standard_normal(size) + 10 * i,
                                          3, 5, 2, 9)
    assert [len(a) for a in groups] == [5, 5, 5]
    assert groups[2][4] == 20 + distributed.replicate_rng(9, 2, 2).standard_normal(1)[0]


def test_docstring_lists_exactly_the_sharded_checks():
    import re

    doc = distributed.__doc__
    listed = set(re.findall(r"``([a-z0-9-]+)``", doc[doc.index("Which checks are sharded"):
                                                      doc.index("The other twelve")]))
    marked = {i for i, t in theorems.REGISTRY.items() if getattr(t.check, "sharded", False)}
    assert listed == marked and len(marked) == len(theorems.REGISTRY) - 12


def test_map_items_alone_raises_the_original_exception():
    def fail(i):
        raise KeyError(i)
    with pytest.raises(KeyError):
        distributed.map_items(fail, 2)
    assert distributed.map_items(lambda i: -i, 3) == [0, -1, -2]


def test_solo_hides_the_world():
    with distributed.solo():
        assert distributed.world_size() == 1 and not distributed.active()


@pytest.mark.parametrize("call, error, message", [
    (lambda: distributed.shard(-1), ValueError, r"n must be an integer >= 0; got -1"),
    (lambda: distributed.shard(4, 3, 2), ValueError, r"rank_ must be < world = 2; got 3"),
    (lambda: distributed.replicate_rng(-2), ValueError, r"seed must be an integer >= 0"),
    (lambda: distributed.map_items(3, 2), TypeError, r"fn must be callable; got int"),
    (lambda: distributed.map_blocks(len, 4, 0, 1), ValueError, r"block_size must be an integer >= 1"),
    (lambda: distributed.map_blocks(len, 0, 2, 1), ValueError, r"n_replicates must be an integer >= 1"),
    (lambda: distributed.setup(0), TypeError, r"device must be a str"),
    (lambda: distributed.setup("cpu", timeout_s=0), ValueError, r"timeout_s must be"),
])
def test_validation(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_simulate_heads_is_unchanged_by_chunking():
    model = DataModel(f=lambda x: x.sum(-1), p=2, sigma=1.0)
    w = np.random.default_rng(0).standard_normal((3, 2, 1))
    args = (model, MultiHeadNW(w, w), 20, np.zeros((4, 2)), 7, 3)
    whole = simulate_heads(*args, chunk_size=7)  # (7, 3, 4)
    assert (simulate_heads(*args, chunk_size=2) == whole).all()


# ---- several ranks under torchrun ----------------------------------------------------

@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Checks and the tiny sweep in this process, without torchrun."""
    checks = {i: theorems.run(i) for i in CHECKS}
    report = sweeps.run_sweep("tiny", log=None)
    return checks, report


def same_summary(a, b):
    """Sweep summaries agree: the same optima and edges, numbers to 1e-9 relative."""
    assert [(p["D"], p["n"], p["d_k_star"], p["edge"]) for p in a["points"]] == \
        [(p["D"], p["n"], p["d_k_star"], p["edge"]) for p in b["points"]]
    numbers = lambda s: [(p["d_k_star_interpolated"], *p["d_k_star_interval"],  # noqa: E731
                          p["paired_z"]) for p in s["points"]]
    np.testing.assert_allclose(numbers(a), numbers(b), rtol=1e-9)
    sizes = lambda s: [(t[k]["value"], *t[k]["interval"])  # noqa: E731
                       for t in s["transition"].values() for k in sorted(t)]
    assert [[v is None for v in row] for row in sizes(a)] == \
        [[v is None for v in row] for row in sizes(b)]  # the same censored ends
    np.testing.assert_allclose(np.array(sizes(a), dtype=float), np.array(sizes(b), dtype=float),
                               rtol=1e-9)  # None -> nan on both sides
    return True


def _estimates(result):
    return np.array([result["estimate"], result["prediction"], result["standard_error"]])


@pytest.mark.parametrize("nproc", [1, 2, 3])
def test_any_world_size_gives_the_same_report(nproc, reference, tmp_path):
    checks, sweep = reference
    out = tmp_path / "check.json"
    args = sum((["--theorem", i] for i in CHECKS), [])
    proc = torchrun(nproc, "-m", "mhacore", "check", *args, "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert [r["theorem_id"] for r in report["results"]] == list(CHECKS)
    assert report["distributed"]["world_size"] == nproc
    assert report["distributed"]["rank_devices"] == ["cpu"] * nproc
    for result in report["results"]:
        ours = _estimates(checks[result["theorem_id"]].to_dict())
        # 1e-12 relative; measured at most 2.2e-16 (see mhacore.distributed)
        np.testing.assert_allclose(_estimates(result), ours, rtol=1e-12, atol=0)
    chi2 = [r["details"]["lack_of_fit_chi2"] for r in report["results"]
            if r["theorem_id"] == "hdi-monotone-model"]
    assert chi2 == pytest.approx([checks["hdi-monotone-model"].details["lack_of_fit_chi2"]],
                                 rel=1e-12)
    out = tmp_path / "sweep.json"
    # --queries 8 is tiny's own value: the option must pass torchrun's parser
    proc = torchrun(nproc, "-m", "mhacore", "sweep", "heads-width-fixed", "--size", "tiny",
                    "--queries", "8", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["runs"][0]["distributed"]["backend"] == (None if nproc == 1 else "gloo")
    assert got["units"].keys() == sweep["units"].keys()
    for key, unit in sweep["units"].items():
        for part in ("bias_sq", "spread"):
            np.testing.assert_allclose(got["units"][key][part], unit[part],
                                       rtol=1e-12, atol=0)
    assert same_summary(got["summary"], sweep["summary"])


def test_forest_replicates_shared_by_ranks(tmp_path):
    sys.path.insert(0, str(ROOT / "tests"))
    from dist_worker import forest_replicates

    trees, forest = forest_replicates()  # alone: (6, 4, 4), (6, 4)
    proc = torchrun(2, WORKER, "forest", str(tmp_path / "forest.npz"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = np.load(tmp_path / "forest.npz")
    np.testing.assert_allclose(got["trees"], trees, rtol=1e-12, atol=0)
    np.testing.assert_allclose(got["forest"], forest, rtol=1e-12, atol=0)


def test_a_killed_rank_loses_only_the_units_in_flight(reference, tmp_path):
    _, sweep = reference
    out = tmp_path / "sweep.json"
    proc = torchrun(2, WORKER, "die-in-sweep", str(out))
    assert proc.returncode != 0
    partial = json.loads(out.read_text())
    kept = set(partial["units"])
    assert 0 < len(kept) < len(sweep["units"]) and "summary" not in partial
    proc = torchrun(2, "-m", "mhacore", "sweep", "heads-width-fixed", "--size", "tiny",
                    "--out", str(out), "--resume")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"{len(kept)} units kept" in proc.stdout
    done = json.loads(out.read_text())
    first, second = done["runs"]
    assert first["units_run"] == len(kept)  # the saved rounds, nothing in flight
    assert second["units_run"] == len(sweep["units"]) - len(kept)  # no unit twice
    assert done["units"].keys() == sweep["units"].keys()
    for key, unit in sweep["units"].items():
        for part in ("bias_sq", "spread"):
            np.testing.assert_allclose(done["units"][key][part], unit[part],
                                       rtol=1e-12, atol=0)
    assert same_summary(done["summary"], sweep["summary"])


def test_an_exception_in_a_rank_ends_every_rank_with_its_message():
    proc = torchrun(2, WORKER, "raise-in-map", timeout=90)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "RankError: rank 1 failed on item 3: ValueError('boom on item 3')" in text
    assert text.count("rank 1 failed on item 3") >= 2  # raised on both ranks


def test_a_rank_dying_outside_a_collective_does_not_hang_the_job():
    proc = torchrun(2, WORKER, "raise-outside", timeout=90)
    assert proc.returncode != 0
    assert "rank one gives up before the gather" in proc.stdout + proc.stderr

