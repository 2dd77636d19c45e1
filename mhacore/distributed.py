"""Running alone or as one rank of many: everything ``torch.distributed`` in one place.

Monte Carlo work is split by replicate index, never by rank. Replicate ``r``'s generator
comes from the seed and ``r`` alone (:func:`replicate_rng`, the ``r``-th child of
``SeedSequence(seed).spawn``), each rank computes the items of its shard of
``range(n)``, and :func:`map_items` gathers the per-item results back in index order on
every rank. Every reduction (mean, standard error, argmin) then runs on the same full
array in the same order, so one process, two ranks or a cluster give the same report.
Where can it differ? Not in the reductions: they would differ only if a caller summed
per-rank partial sums, and nothing in :mod:`mhacore` does. Only inside an item: a BLAS
kernel may round the last bit differently in another process (memory alignment, thread
count). Measured on two checks and a sweep with 1, 2 and 3 ranks: at most 2.2e-16
relative; the tests allow 1e-12.

Where replicates number 1e4 to 1e6 (colonies, equicorrelated errors, the overlap model's
head errors), one ``SeedSequence`` per replicate would cost more than the replicate
itself, so :func:`map_blocks` draws them in fixed-size blocks: block ``b`` is one batched
array from ``replicate_rng(seed, b)`` (or ``replicate_rng(seed, i, b)`` at grid point
``i``, :func:`map_group_blocks`). The block size is a constant of each check, never derived from the world size, so
a replicate's stream depends on its block index alone and the report is again the same
for any number of ranks.

Which checks are sharded (``@sharded``; what each rank shares):

- ``nw-bandwidth-rate``: blocks of 250 replicates per sample size (the bootstrap, cheap,
  runs on every rank from its own stream);
- ``head-is-nw``, ``gaussian-equal-norms``: the random data sets, one stream each;
- ``hdi-monotone-model``: blocks of 1000 replicates per grid angle;
- ``random-subspace-hdi``: blocks of 10 random configurations (one batched QR each);
- ``bvc-identity``, ``bvc-design-variance``, ``bvc-design-covariance``,
  ``structured-weights-heterogeneous``: replicate chunks of :func:`mhacore.montecarlo.simulate_heads`
  (one stream per replicate);
- ``heads-width-variance-ratio``: the random designs, one stream each;
- ``equicorrelated-weighted-variance``: blocks of 5000 replicates;
- ``forest-breiman-variance``: the forests, one stream per replicate;
- ``colony-breiman-variance``: blocks of 10 000 colonies.

The other twelve are not sharded: ``hdi-rotation-closed-form``,
``structured-weights-closed-forms`` and ``mha-convex-ensemble`` are exact identities on
fixed or single draws; ``principal-angles-small`` is a loop over twelve angles of one
rotation; ``decorrelation-optimum`` is one sequential optimisation; ``hdi-frame-bound``
computes one tight fusion frame and one batch of 20 random configurations (under a
second on a CPU at large scale); the cross-system predictions of chapter 8
(``forest-rho-max-features``, ``heads-rho-hdi-overlap``, ``heads-rho-weight-overlap``,
``colony-rho-discovery``) fit and test a mechanism on one measurement each; and the two
checks of chapter 9 (``trained-heads-frame-bound``, ``trained-heads-diversity-risk``)
train all their seeds in one tensor program. Under ``torchrun`` they run side by side,
one rank each.

Only torchrun's variables are read. A process that SLURM started as one of several tasks
(``srun -n 4 python -m mhacore ...``, no ``RANK``) refuses to run
(:func:`launch_problem`), so that copies never race on one report; under SLURM, start one
``torchrun`` per node with ``srun``.

Without a launcher (no ``WORLD_SIZE`` > 1 in the environment) every function here runs
the single-process path: :func:`setup` starts nothing, :func:`map_items` is a loop, and
:func:`barrier` returns at once. Under ``torchrun`` (or a launcher that sets
``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` as torchrun does), :func:`setup` starts the
process group: gloo on CPU, nccl on CUDA with one GPU per rank (``LOCAL_RANK``).
Collectives time out after ``MHACORE_DIST_TIMEOUT_S`` seconds (default 1800), so a rank
that died outside a collective ends the job instead of hanging it; an exception inside
:func:`map_items` is sent to every rank, which all raise :class:`RankError` with the
failing rank's message.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import math
import os
import threading
import traceback
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import torch.distributed as dist

from ._rng import replicate_rng  # the seed streams live in _rng; named here for the checks
from ._validation import check_int

__all__ = ["Context", "RankError", "setup", "teardown", "rank", "world_size", "active",
           "solo", "sharded", "shard", "replicate_rng", "map_items", "map_replicates",
           "block_sizes", "map_blocks", "map_group_blocks", "all_gather", "broadcast", "barrier", "describe",
           "launch_problem"]

TIMEOUT_ENV = "MHACORE_DIST_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 1800.0


class RankError(RuntimeError):
    """A rank failed inside :func:`map_items`; raised on every rank with its message."""


@dataclass(frozen=True)
class Context:
    """Where this process sits: its rank, the world size, the backend and its device."""

    rank: int
    world_size: int
    backend: str | None
    device: str


def launch_problem(environ=None) -> str | None:
    """Why this process must not run alone (None when it may): SLURM started several
    copies of it without a ``torchrun`` (``srun`` sets ``SLURM_STEP_NUM_TASKS`` or
    ``SLURM_NTASKS`` above 1, and no ``RANK``). Each copy would run the whole job and
    all of them would write the same ``--out``; :mod:`mhacore` reads only torchrun's
    ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``.

    >>> launch_problem({"SLURM_NTASKS": "4"}).split(";")[0]
    'SLURM started 4 tasks of this command without torchrun'
    >>> launch_problem({"SLURM_NTASKS": "4", "RANK": "0"}) is None
    True
    """
    env = os.environ if environ is None else environ
    problem = _launch_variable_problem(env)
    if problem:
        return problem
    if "RANK" in env:
        return None
    raw = env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS") or "1"
    try:
        tasks = int(raw.split("(")[0])
    except ValueError:
        return None
    if tasks <= 1:
        return None
    return (f"SLURM started {tasks} tasks of this command without torchrun; each "
            "would run the whole job and write the same --out. Launch one torchrun per "
            "node instead (srun --ntasks-per-node 1 torchrun --nnodes $SLURM_NNODES "
            "...), or run one task (srun --ntasks 1)")


def _launch_variable_problem(env) -> str | None:
    """What is wrong with torchrun's variables or ``MHACORE_DIST_TIMEOUT_S`` (None if nothing).

    >>> _launch_variable_problem({"RANK": "abc", "WORLD_SIZE": "2"})
    "RANK must be an integer >= 0 (torchrun sets it); got 'abc'"
    >>> _launch_variable_problem({"RANK": "2", "WORLD_SIZE": "2"})
    'RANK must be below WORLD_SIZE = 2 (ranks count from 0); got 2'
    >>> _launch_variable_problem({"MHACORE_DIST_TIMEOUT_S": "0"})
    "MHACORE_DIST_TIMEOUT_S must be a finite number of seconds > 0; got '0'"
    >>> _launch_variable_problem({"RANK": "1", "WORLD_SIZE": "2"}).split(":")[0]
    'WORLD_SIZE = 2 asks for 2 ranks, but MASTER_ADDR and MASTER_PORT are not set'
    """
    values = {}
    for name, minimum in (("RANK", 0), ("LOCAL_RANK", 0), ("WORLD_SIZE", 1)):
        raw = env.get(name)
        if raw is None:
            continue
        try:
            values[name] = int(raw.strip())
        except ValueError:
            values[name] = None
        if values[name] is None or values[name] < minimum:
            return f"{name} must be an integer >= {minimum} (torchrun sets it); got {raw!r}"
    world = values.get("WORLD_SIZE", 1)
    for name in ("RANK", "LOCAL_RANK"):
        if values.get(name, 0) >= world:
            return (f"{name} must be below WORLD_SIZE = {world} (ranks count from 0); "
                    f"got {values[name]}")
    if world > 1:  # torch's env:// rendezvous needs all of them; torchrun sets them
        missing = [name for name in ("RANK", "MASTER_ADDR", "MASTER_PORT")
                   if not env.get(name, "").strip()]
        if missing:
            names = " and ".join([", ".join(missing[:-1]), missing[-1]] if len(missing) > 1
                                 else missing)
            return (f"WORLD_SIZE = {world} asks for {world} ranks, but {names} "
                    f"{'is' if len(missing) == 1 else 'are'} not set: start the ranks with "
                    f"torchrun (torchrun --nproc-per-node {world} -m mhacore ...), which sets "
                    "RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, or unset WORLD_SIZE to run "
                    "alone")
        port = env["MASTER_PORT"].strip()
        if not (port.isdigit() and 0 < int(port) < 65536):
            return (f"MASTER_PORT must be a TCP port from 1 to 65535 (torchrun sets it); "
                    f"got {env['MASTER_PORT']!r}")
    raw = env.get(TIMEOUT_ENV)
    if raw is not None:
        try:
            seconds = float(raw)
        except ValueError:
            seconds = math.nan
        if not (math.isfinite(seconds) and seconds > 0):
            return f"{TIMEOUT_ENV} must be a finite number of seconds > 0; got {raw!r}"
    return None


def _launched_world() -> int:
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


_SOLO = threading.local()


def active() -> bool:
    """True when a process group with more than one rank is running (outside solo)."""
    if getattr(_SOLO, "depth", 0):
        return False
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


@contextlib.contextmanager
def solo():
    """Inside, this rank works alone: :func:`map_items` loops, no collective runs.

    For work one rank does by itself (a check that is not sharded), so that helpers
    it calls which would otherwise share their items do not wait for the other ranks.

    >>> with solo():
    ...     world_size()
    1
    """
    _SOLO.depth = getattr(_SOLO, "depth", 0) + 1
    try:
        yield
    finally:
        _SOLO.depth -= 1


def rank() -> int:
    """This process's rank (0 when alone)."""
    return dist.get_rank() if active() else 0


def world_size() -> int:
    """Number of ranks (1 when alone)."""
    return dist.get_world_size() if active() else 1


def _timeout_s(timeout_s) -> float:
    if timeout_s is None:
        timeout_s = float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S))
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be a number > 0; got {timeout_s!r}")
    return float(timeout_s)


class LaunchError(RuntimeError):
    """The process group could not start: no peer joined in time, or the rendezvous
    address cannot be reached (one line, for the command line)."""


def setup(device: str = "cpu", *, timeout_s: float | None = None) -> Context:
    """Start the process group when launched with several ranks; return the context.

    Parameters
    ----------
    device : str
        ``"cpu"`` (backend gloo) or ``"cuda"`` (backend nccl, device
        ``cuda:LOCAL_RANK``). Alone, ``device`` is returned unchanged.
    timeout_s : float, optional
        Timeout of every collective; default ``$MHACORE_DIST_TIMEOUT_S`` or 1800 s.

    Returns
    -------
    Context

    Raises
    ------
    LaunchError
        The process group did not start (a rank that never joined, an address that
        cannot be reached): one line naming the rendezvous.

    Examples
    --------
    >>> setup("cpu").world_size  # no launcher here
    1
    """
    if not isinstance(device, str):
        raise TypeError(f"device must be a str such as 'cpu' or 'cuda'; got {device!r}")
    timeout = _timeout_s(timeout_s)
    problem = launch_problem()
    if problem:
        raise RuntimeError(problem)
    if _launched_world() <= 1:
        return Context(0, 1, None, device)
    cuda = device.startswith("cuda")
    if cuda:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    if not dist.is_initialized():
        try:
            dist.init_process_group("nccl" if cuda else "gloo",
                                    timeout=_dt.timedelta(seconds=timeout))
        except (dist.DistError, RuntimeError, ValueError) as exc:  # DistStoreError, DistNetworkError
            where = f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise LaunchError(
                f"rank {os.environ.get('RANK')} of {_launched_world()} could not join the process "
                f"group at {where} ({type(exc).__name__}: {first[:200]}); start every rank with "
                "torchrun, or raise MHACORE_DIST_TIMEOUT_S if the ranks start far apart") from None
    return Context(dist.get_rank(), dist.get_world_size(), dist.get_backend(), device)


def teardown() -> None:
    """Destroy the process group if :func:`setup` started one."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def shard(n: int, rank_: int | None = None, world: int | None = None) -> range:
    """Indices of ``range(n)`` that rank ``rank_`` of ``world`` computes (strided).

    Examples
    --------
    >>> list(shard(7, 1, 3)), list(shard(7, 0, 1))
    ([1, 4], [0, 1, 2, 3, 4, 5, 6])
    """
    n = check_int(n, "n", minimum=0)
    world = world_size() if world is None else check_int(world, "world")
    rank_ = rank() if rank_ is None else check_int(rank_, "rank_", minimum=0)
    if rank_ >= world:
        raise ValueError(f"rank_ must be < world = {world}; got {rank_}")
    return range(rank_, n, world)


def all_gather(obj) -> list:
    """Every rank's ``obj`` (picklable), in rank order, on every rank."""
    if not active():
        return [obj]
    out = [None] * world_size()
    dist.all_gather_object(out, obj)
    return out


def broadcast(obj, src: int = 0):
    """``obj`` of rank ``src`` on every rank."""
    if not active():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def barrier(timeout_s: float | None = None) -> None:
    """Wait for every rank, at most ``timeout_s`` (gloo names the missing ranks)."""
    if not active():
        return
    if dist.get_backend() == "gloo":
        timeout = _dt.timedelta(seconds=_timeout_s(timeout_s))
        dist.monitored_barrier(timeout=timeout, wait_all_ranks=True)
    else:
        dist.barrier()


def map_items(fn: Callable[[int], object], n: int) -> list:
    """``[fn(0), ..., fn(n - 1)]`` on every rank, each rank computing its shard.

    ``fn(i)`` must depend on ``i`` alone (draw from :func:`replicate_rng` or from a
    generator list built identically on every rank), never on the rank.

    Raises
    ------
    RankError
        On every rank, when ``fn`` raised on any rank; the message names that rank, the
        item and the original exception (last lines of its traceback).

    Examples
    --------
    >>> map_items(lambda i: i * i, 4)
    [0, 1, 4, 9]
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable; got {type(fn).__name__}")
    n = check_int(n, "n", minimum=0)
    mine, failure = {}, None
    for i in shard(n):
        try:
            mine[i] = fn(i)
        except Exception as exc:  # sent to every rank below, re-raised there
            if not active():
                raise
            tail = "".join(traceback.format_exception(exc)[-3:]).strip()
            failure = f"rank {rank()} failed on item {i}: {exc!r}\n{tail}"
            break
    parts = all_gather((mine, failure))
    failures = [f for _, f in parts if f is not None]
    if failures:
        raise RankError("\n".join(failures))
    merged = {}
    for part, _ in parts:
        merged.update(part)
    return [merged[i] for i in range(n)]


def map_replicates(fn: Callable[[int, np.random.Generator], object], n_replicates: int,
                   seed: int) -> list:
    """``[fn(r, replicate_rng(seed, r)) for r in range(n_replicates)]``, sharded.

    Examples
    --------
    >>> draws = map_replicates(lambda r, g: g.integers(100), 3, seed=1)
    >>> draws == [replicate_rng(1, r).integers(100) for r in range(3)]
    True
    """
    seed = check_int(seed, "seed", minimum=0)
    return map_items(lambda r: fn(r, replicate_rng(seed, r)), n_replicates)


def block_sizes(n_replicates: int, block_size: int) -> list[int]:
    """Sizes of the fixed blocks ``0 .. block_size − 1``, ``block_size ..``, … of ``R`` replicates.

    Examples
    --------
    >>> block_sizes(7, 3)
    [3, 3, 1]
    """
    n_replicates = check_int(n_replicates, "n_replicates", minimum=0)
    block_size = check_int(block_size, "block_size")
    return [min(block_size, n_replicates - start) for start in range(0, n_replicates, block_size)]


def map_blocks(fn: Callable[[int, np.random.Generator], object], n_replicates: int,
               block_size: int, seed: int, *prefix: int):
    """Replicates drawn and computed in fixed blocks, the blocks shared by the ranks.

    Block ``b`` holds replicates ``b·block_size`` to ``(b + 1)·block_size − 1`` (the last
    one may be shorter) and draws them, as one batched array, from
    ``replicate_rng(seed, *prefix, b)``: ``fn(size, generator)`` returns an array (or a
    tuple of arrays) with ``size`` rows. ``block_size`` is a constant of the caller, never
    derived from the world size, so every replicate's stream depends on its block index
    alone. Returns the blocks' arrays concatenated along axis 0, in replicate order.

    Examples
    --------
    >>> x = map_blocks(lambda size, g: g.standard_normal(size), 5, 2, seed=3)
    >>> x.shape, bool(x[4] == replicate_rng(3, 2).standard_normal(1)[0])
    ((5,), True)
    """
    seed = check_int(seed, "seed", minimum=0)
    sizes = block_sizes(check_int(n_replicates, "n_replicates"), block_size)
    parts = map_items(lambda b: fn(sizes[b], replicate_rng(seed, *prefix, b)), len(sizes))
    if parts and isinstance(parts[0], tuple):
        return tuple(np.concatenate(column, axis=0) for column in zip(*parts))
    return np.concatenate(parts, axis=0)


def map_group_blocks(fn: Callable[[int, int, np.random.Generator], np.ndarray], n_groups: int,
                     n_replicates: int, block_size: int, seed: int) -> list[np.ndarray]:
    """:func:`map_blocks` at each of ``n_groups`` grid points, all blocks shared at once.

    Block ``b`` of group ``i`` is ``fn(i, size, replicate_rng(seed, i, b))``, an array with
    ``size`` rows. Returns one array per group, its blocks concatenated along axis 0.

    Examples
    --------
    >>> x = map_group_blocks(lambda i, size, g: g.random(size) + i, 2, 3, 2, seed=1)
    >>> [a.shape for a in x], bool(x[1][2] == 1 + replicate_rng(1, 1, 1).random(1)[0])
    ([(3,), (3,)], True)
    """
    seed = check_int(seed, "seed", minimum=0)
    n_groups = check_int(n_groups, "n_groups")
    sizes = block_sizes(check_int(n_replicates, "n_replicates"), block_size)
    units = [(i, b) for i in range(n_groups) for b in range(len(sizes))]
    parts = map_items(lambda u: fn(units[u][0], sizes[units[u][1]], replicate_rng(seed, *units[u])),
                      len(units))  # group-major: group i's blocks are parts[i*k:(i+1)*k]
    k = len(sizes)
    return [np.concatenate(parts[i * k:(i + 1) * k], axis=0) for i in range(n_groups)]


def sharded(check):
    """Mark a theorem check whose replicates are shared by the ranks (via
    :func:`map_items`): ``check`` runs it on every rank at once; other checks run on
    one rank each, several at a time. Returns ``check`` itself."""
    check.sharded = True
    return check


def describe(ctx: Context) -> dict:
    """Provenance of a run: world size, backend and each rank's device (a collective)."""
    return {"world_size": ctx.world_size, "backend": ctx.backend,
            "rank_devices": all_gather(_device_name(ctx.device))}


def _device_name(device: str) -> str:
    if device.startswith("cuda") and torch.cuda.is_available():
        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return device
