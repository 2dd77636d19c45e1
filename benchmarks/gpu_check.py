"""GPU check for the mhacore core (issues 3 and 15): CUDA vs CPU float64 correctness, then timings.

Run on a GPU machine: ``python benchmarks/gpu_check.py`` (one call, under 5 minutes on an
H200: ``--budget`` seconds, default 220, after which the remaining timed rows are skipped).
Smoke run anywhere: ``python benchmarks/gpu_check.py --device cpu --small`` (add
``TRITON_INTERPRET=1`` to run the Triton rows through the interpreter too).
Exits with status 1 if any result differs from the CPU float64 reference beyond tolerance
(float64 1e-10, float32 1e-4, both relative to max |values|) or raises. TF32 is switched
off, so float32 matrix products are true float32.

Then which SDPA implementation (fused or fallback) each main path reaches, and the timings:
the path table of issue 15 (``gpu_table.py``: exp floor, SDPA float16/bfloat16/float32,
``nw_estimate`` with and without its Triton kernel, SDPA on augmented Gaussian rows, the
Triton kernel in float32 and float64; G pairs/s, implementation reached, error against
float64) at three shapes, the batched Monte Carlo heads vs a Python loop over replicates
and heads, the memory case (peak allocated growth), and a sweep of Triton launch settings.

The trainer of ``mhacore.training`` is checked the same way: loss histories of a short
run of several seeds (float64 and float32, penalty on), held-out predictions and the
baselines' risks on ``device`` against CPU float64; and timed: the batched trainer
against a loop of ``torch.nn.MultiheadAttention`` models (``bench_training.py``) at the
book's configuration, and the batched trainer alone with 256 seeds.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import statistics
import sys
import time

import bench_training  # beside this script
import gpu_table  # beside this script
import numpy as np
import torch

import mhacore
from mhacore import DataModel, MultiHeadNW, nw_estimate, simulate_heads
from mhacore import training

TOLERANCE = {torch.float64: 1e-10, torch.float32: 1e-4}


def sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def timed(candidates: dict, repeats: int, device) -> dict:
    """Median seconds of each callable, interleaved, after one warm-up call each."""
    times = {name: [] for name in candidates}
    for fn in candidates.values():
        fn()
    for _ in range(repeats):
        for name, fn in candidates.items():
            sync(device)
            start = time.perf_counter()
            fn()
            sync(device)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def check(label, got, expected, values_scale, dtype, failures):
    """Compare ``got()`` (called here, so that an exception is a failure, not a crash) with ``expected``."""
    try:
        error = (got().double().cpu() - expected).abs().max().item() / values_scale
    except Exception as exc:  # noqa: BLE001 (report and go on: the run is one call on a lent machine)
        print(f"  FAIL {label:<58} raised {type(exc).__name__}: {str(exc).splitlines()[0][:100] if str(exc) else ''}")
        failures.append(label)
        return
    ok = error <= TOLERANCE[dtype]
    print(f"  {'ok  ' if ok else 'FAIL'} {label:<58} rel. error {error:.1e}")
    if not ok:
        failures.append(label)


def correctness(device, small):
    """All estimators on ``device`` in float32/float64 vs CPU float64; returns failures."""
    failures = []
    g = torch.Generator().manual_seed(0)
    m, n, d = (60, 700, 5) if small else (700, 6000, 12)
    queries, keys, values = torch.randn(3, m, d, generator=g, dtype=torch.float64), torch.randn(3, n, d, generator=g, dtype=torch.float64), torch.randn(3, n, 2, generator=g, dtype=torch.float64)
    scale = values.abs().max().item()
    print(f"correctness on {device} vs CPU float64 (batch 3, m={m}, n={n}, d={d})")
    for kernel, params in (("softmax", {"temperature": 0.7}), ("gaussian", {"bandwidth": 0.8})):
        for chunk in (None, 256):
            expected = nw_estimate(queries, keys, values, kernel=kernel, chunk_size=chunk, **params)
            for dtype in (torch.float64, torch.float32):
                args = [x.to(device, dtype) for x in (queries, keys, values)]
                got = functools.partial(nw_estimate, *args, kernel=kernel, chunk_size=chunk, **params)
                check(f"nw_estimate {kernel} chunk_size={chunk} {dtype}", got, expected, scale, dtype, failures)
    # the Triton kernel's range on CUDA: scalar and 8-wide values, keys broadcast over a batch,
    # and a bandwidth small enough that only direct squared distances stay accurate
    narrow = torch.randn(3, n, 8, generator=g, dtype=torch.float64)
    cases = [("softmax", {"temperature": 0.7}, queries[0], keys[:1], values[:, :, 0]),
             ("softmax", {"temperature": 0.7}, queries, keys, narrow),
             ("gaussian", {"bandwidth": 0.05}, keys[:, : m // 2] + 0.01 * queries[:, : m // 2], keys, narrow[..., :1])]
    for kernel, params, q, k, v in cases:
        expected = nw_estimate(q, k, v, kernel=kernel, **params)
        for dtype in (torch.float64, torch.float32):
            args = [x.to(device, dtype) for x in (q, k, v)]
            got = functools.partial(nw_estimate, *args, kernel=kernel, **params)
            label = f"nw_estimate {kernel} q{tuple(q.shape)} k{tuple(k.shape)} v{tuple(v.shape)} {dtype}"
            check(label.replace("torch.", ""), got, expected, v.abs().max().item(), dtype, failures)
    w = torch.randn(2, 4, d, 2, generator=g, dtype=torch.float64)
    mha = MultiHeadNW(w[0], w[1], alpha=[0.1, 0.2, 0.3, 0.4])
    x, y = torch.randn(8, n // 4, d, generator=g, dtype=torch.float64), torch.randn(8, n // 4, generator=g, dtype=torch.float64)
    expected = mha.head_estimates(queries[0], x, y)
    for dtype in (torch.float64, torch.float32):
        got = functools.partial(mha.head_estimates, *(a.to(device, dtype) for a in (queries[0], x, y)))
        check(f"MultiHeadNW.head_estimates (R=8, H=4) {dtype}", got, expected, y.abs().max().item(), dtype, failures)
    model = DataModel(f=lambda z: np.sin(z).sum(-1), p=d, sigma=0.5)
    cpu = simulate_heads(model, mha, n // 4, queries[0].numpy(), 16, rng=1)
    dev = lambda: torch.from_numpy(simulate_heads(model, mha, n // 4, queries[0].numpy(), 16, rng=1, device=device))
    check("simulate_heads (R=16) float64", dev, torch.from_numpy(cpu), 1.0, torch.float64, failures)
    return failures


def training_config(small, steps=None):
    """The book's configuration (x_dim 8, d_model 32, 4 heads, k = 32, batch 64), or a small one."""
    if small:
        return training.TrainConfig(training.Task("smooth", x_dim=4, n_context=16, noise=0.1), d_model=16, n_heads=4,
                                    batch_size=32, steps=steps or 8, penalty=0.1)
    return training.TrainConfig(training.Task("smooth", x_dim=8, n_context=32, noise=0.1), d_model=32, n_heads=4,
                                batch_size=64, steps=steps or 50, penalty=0.1)


def training_correctness(device, small):
    """mhacore.training on ``device`` (float64, float32) vs CPU float64: losses, predictions, baselines."""
    failures = []
    config, seeds = training_config(small), [0, 1, 2, 3]
    print(f"\ntrainer on {device} vs CPU float64 ({len(seeds)} seeds, {config.steps} steps, smooth tasks, penalty 0.1)")
    reference = training.train(config, seeds, dtype=torch.float64)
    held_out = training.sample_prompts(config.task, seeds, 64)
    expected = training.predict(reference.params, held_out).detach()  # (S, B)
    losses = torch.from_numpy(reference.losses)
    for dtype in (torch.float64, torch.float32):
        result = {}

        def run():
            result["run"] = training.train(config, seeds, dtype=dtype, device=device)
            return torch.from_numpy(result["run"].losses)

        check(f"train: loss histories {dtype}", run, losses, losses.abs().max().item(), dtype, failures)
        if "run" in result:
            params = result["run"].params
            got = lambda: training.predict(params, training.sample_prompts(config.task, seeds, 64, dtype=dtype, device=device)).detach()  # noqa: E731
            check(f"train: held-out predictions of the trained models {dtype}", got, expected,
                  held_out.y_query.abs().max().item(), dtype, failures)
    risks = torch.from_numpy(np.stack(list(training.baseline_risks(held_out).values())))  # (3, S)
    got = lambda: torch.from_numpy(np.stack(list(training.baseline_risks(  # noqa: E731
        training.sample_prompts(config.task, seeds, 64, device=device)).values())))
    check("baseline risks (least squares, NW, constant) float64", got, risks, risks.abs().max().item(), torch.float64, failures)
    return failures


def kernels(device, small):
    """Which SDPA implementation (and, on CUDA, which kernel) each main path reaches on ``device`` (printed, not judged).

    On CUDA a path whose fused kernels refuse its inputs (dtype, alignment, stride-0
    broadcast views) falls back to the chunked loop: correct but slower. This shows which.
    """
    g = torch.Generator(device=device).manual_seed(3)
    m, n, d = (64, 512, 8) if small else (512, 4096, 8)
    R, H, p = 4, 4, 16
    mha = MultiHeadNW(torch.randn(H, p, d, device=device, generator=g), torch.randn(H, p, d, device=device, generator=g))
    print(f"\nimplementations reached on {device} (the Triton kernel shows as _nw_kernel)")
    for dtype in (torch.float32, torch.float64):
        q, k, v = (torch.randn(*shape, device=device, generator=g).to(dtype) for shape in ((m, d), (n, d), (n,)))
        x, y = torch.randn(R, n, p, device=device, generator=g).to(dtype), torch.randn(R, n, device=device, generator=g).to(dtype)
        cases = {
            "nw_estimate softmax": lambda: nw_estimate(q, k, v),
            "nw_estimate gaussian": lambda: nw_estimate(q, k, v, kernel="gaussian", bandwidth=1.0),
            "MultiHeadNW batched (stride-0 views)": lambda: mha.head_estimates(x[0, :m], x, y),
        }
        for label, fn in cases.items():
            print(f"  {label:<38} {dtype!s:<14} {gpu_table.implementation(fn, device)}")


def timings(device, small, repeats, budget):
    """The path table (gpu_table.py), the batched Monte Carlo heads vs a loop, the memory case, the Triton sweep."""
    gpu_table.table(device, small, budget)
    if gpu_table.out_of_time(budget):
        print(f"\nMonte Carlo, memory and the Triton sweep skipped: past the {budget:.0f} s budget")
        return
    factor = 0.1 if small else 1.0  # --small: a tenth of the sizes (for a CPU smoke run)
    size = lambda k: max(8, int(k * factor))
    g = torch.Generator(device=device).manual_seed(1)
    print(f"\nMonte Carlo and memory on {device}, float32, 10x bench_nw.py sizes{' (x0.1: --small)' if small else ''}")
    R, H, n, m, d_head = size(640), 8, 2000, 256, 8
    p = H * d_head
    w = torch.randn(2, H, p, d_head, device=device, generator=g) / p**0.5
    mha = MultiHeadNW(w[0], w[1])
    queries, keys, values = torch.randn(m, p, device=device, generator=g), torch.randn(R, n, p, device=device, generator=g), torch.randn(R, n, device=device, generator=g)

    def loop():
        for r in range(R):
            for h in range(H):
                nw_estimate(queries @ w[0, h], keys[r] @ w[1, h], values[r])

    t = timed({"batched": lambda: mha.head_estimates(queries, keys, values), "loop": loop}, max(1, repeats // 2), device)
    print(f"  Monte Carlo R={R}, H={H}, n={n}, m={m}: batched {t['batched']:.3f}s  loop {t['loop']:.3f}s  speed-up {t['loop'] / t['batched']:.1f}x")
    memory(device, size(10_000_000), size(20_000))
    training_timings(device, small, repeats, budget)
    gpu_table.sweep(device, small, budget)


def training_timings(device, small, repeats, budget):
    """The batched trainer vs a loop of torch.nn.MultiheadAttention models, then the trainer alone at 256 seeds."""
    if gpu_table.out_of_time(budget):
        print(f"\ntrainer timings skipped: past the {budget:.0f} s budget")
        return
    config = training_config(small, steps=10 if small else 50)
    seeds = list(range(4 if small else 16))
    print(f"\ntrainer on {device}, float32: {len(seeds)} seeds, {config.steps} steps, batch {config.batch_size}, "
          f"d_model {config.d_model}, {config.n_heads} heads, k = {config.task.n_context}")
    t = timed({"batched": lambda: training.train(config, seeds, device=device),
               "loop": lambda: bench_training.loop_train(config, seeds, torch.float32, device)}, max(1, repeats // 2), device)
    print(f"  batched {t['batched']:.3f}s  loop of nn.MultiheadAttention {t['loop']:.3f}s  speed-up {t['loop'] / t['batched']:.1f}x")
    many = list(range(16 if small else 256))
    t = timed({"batched": lambda: training.train(config, many, device=device)}, max(1, repeats // 2), device)
    print(f"  batched, {len(many)} seeds: {t['batched']:.3f}s ({1e3 * t['batched'] / (len(many) * config.steps):.3f} ms per model-step)")


def memory(device, n, m, d=16):
    g = torch.Generator(device=device).manual_seed(2)
    queries, keys, values = torch.randn(m, d, device=device, generator=g), torch.randn(n, d, device=device, generator=g), torch.randn(n, device=device, generator=g)
    if torch.device(device).type != "cuda":
        print(f"  memory case n={n}, m={m}: CUDA only (see bench_nw.py for CPU RSS)")
        return
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    start = time.perf_counter()
    out = nw_estimate(queries, keys, values)
    sync(device)
    growth = (torch.cuda.max_memory_allocated() - before) / 2**20
    print(f"  memory case n={n}, m={m}, d={d}: peak allocated growth {growth:.0f} MiB "
          f"(dense weights {m * n * 4 / 2**30:.0f} GiB), {time.perf_counter() - start:.2f}s, finite={bool(torch.isfinite(out).all())}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--small", action="store_true", help="small sizes (CPU smoke run)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-timings", action="store_true")
    parser.add_argument("--budget", type=float, default=220.0, help="seconds after which timed rows are skipped")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    name = torch.cuda.get_device_name() if torch.device(args.device).type == "cuda" else "cpu"
    print(f"gpu_check.py  {datetime.datetime.now().isoformat(timespec='seconds')}  mhacore {mhacore.__version__}  torch {torch.__version__}  device {name}")
    failures = correctness(args.device, args.small)
    failures += training_correctness(args.device, args.small)
    kernels(args.device, args.small)
    if not args.skip_timings:
        timings(args.device, args.small, args.repeats, args.budget)
    print(f"\n{'FAILED: ' + ', '.join(failures) if failures else 'all correctness checks passed'}"
          f"  ({time.perf_counter() - gpu_table.START:.0f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
