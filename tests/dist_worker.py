"""Scenarios for tests/test_distributed.py, each run by every rank under torchrun.

``python -m torch.distributed.run --standalone --nproc-per-node N tests/dist_worker.py
SCENARIO [ARGS]``:

- ``raise-in-map``: rank 1 raises ValueError inside ``map_items`` (item 3).
- ``raise-outside``: rank 1 raises before any collective; rank 0 waits in one.
- ``forest OUT``: chapter 8's forest replicates shared by the ranks; rank 0 saves them.
- ``die-in-sweep OUT``: the tiny sweep; rank 1 kills itself (SIGKILL) when it starts its
  third unit, so some rounds are saved and one is in flight.
"""

import os
import signal
import sys
import time

from mhacore import distributed, sweeps


def forest_replicates():
    """Six small forests of chapter 8 (a few seconds)."""
    import numpy as np

    from mhacore.theorems.ch08_ensembles import forest_model, forest_tree_predictions

    model = forest_model(3)
    queries = np.random.default_rng(0).standard_normal((4, 3))
    return forest_tree_predictions(model, 50, queries, 6, 1, n_trees=4)


def main(scenario, *args):
    ctx = distributed.setup("cpu")
    if scenario == "raise-in-map":
        def item(i):
            if i == 3:
                raise ValueError(f"boom on item {i}")
            return i
        distributed.map_items(item, 8)
    elif scenario == "raise-outside":
        if ctx.rank == 1:
            raise RuntimeError("rank one gives up before the gather")
        distributed.all_gather("waiting")
    elif scenario == "forest":
        import numpy as np

        trees, forest = forest_replicates()
        if ctx.rank == 0:
            np.savez(args[0], trees=trees, forest=forest)
    elif scenario == "die-in-sweep":
        unit, started = sweeps._unit, []

        def dying_unit(u, settings, context):
            started.append(u)
            if context.rank == 1 and len(started) == 3:
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(0.2)  # rank 0 is inside the round when rank 1 dies
            return unit(u, settings, context)

        sweeps._unit = dying_unit
        sweeps.run_sweep("tiny", out=args[0], log=None)
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
    distributed.teardown()


if __name__ == "__main__":
    main(*sys.argv[1:])
