"""Benchmark of the batched trainer (``mhacore.training``) against a loop of torch models.

Run: ``python benchmarks/bench_training.py`` (about a minute on one core). Both sides do the
same work: ``S`` models (one per seed), ``steps`` Adam steps, ``batch`` fresh prompts per
model and step from the same per-seed streams (``mhacore.training.prompt_stream``, so the
loss histories agree, which is checked and printed), the same initial weights. The batched side
is ``mhacore.training.train`` (one tensor program for all seeds); the reference is a Python
loop over seeds of separately built ``torch.nn.Linear -> torch.nn.MultiheadAttention
(bias=False, batch_first=True) -> torch.nn.Linear`` models, each with its own
``torch.optim.Adam``. Timings are whole training runs, candidate and reference in turn
within each repeat; the ratio is loop median / batched median (the paired repeat-by-repeat
ratios' median and quartiles are printed too).

Defaults are the book's configuration: x_dim 8, d_model 32, 4 heads, 32 context points,
16 seeds, 64 prompts per step, 50 steps, float32, one torch thread (DESIGN.md: ratios on one
thread; a neighbour on the shared machine can slow two-thread runs 1.5-20x). Options:
``--device``, ``--threads``, ``--repeats``, ``--seeds``, ``--steps``, ``--batch``,
``--family``, ``--quick`` (4 seeds, 10 steps: a smoke run).

Then where the batched step's time goes: drawing the prompts, and forward + backward in
the folded (token-space) form ``train`` uses against the unfolded per-head projections
(``_heads``, what ``torch.nn.MultiheadAttention`` computes). The last line is
``batched vs loop: R.Rx``.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import time

import torch

import mhacore
from mhacore import training


def sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def reference_models(params, dtype, device):
    """One ``(embed, attention, readout)`` of torch modules per seed, holding ``params``' weights."""
    n_seeds, d_in, d_model = params.embed.shape
    n_heads, d_head = params.w_query.shape[1], params.w_query.shape[3]
    models = []
    for s in range(n_seeds):
        embed = torch.nn.Linear(d_in, d_model, bias=False, dtype=dtype, device=device)
        attention = torch.nn.MultiheadAttention(d_model, n_heads, bias=False, batch_first=True, dtype=dtype, device=device)
        readout = torch.nn.Linear(d_model, 1, bias=False, dtype=dtype, device=device)
        with torch.no_grad():
            embed.weight.copy_(params.embed[s].T)  # (D, d+2)
            rows = [w[s].transpose(1, 2).reshape(d_model, d_model) for w in (params.w_query, params.w_key, params.w_value)]  # (H d_head, D) each
            attention.in_proj_weight.copy_(torch.cat(rows))  # (3 D, D): q | k | v
            attention.out_proj.weight.copy_(params.w_out[s].reshape(n_heads * d_head, d_model).T)  # (D, H d_head)
            readout.weight.copy_(params.readout[s][None])  # (1, D)
        models.append(torch.nn.ModuleList([embed, attention, readout]))
    return models


def reference_predict(model, prompts, s):
    """Seed ``s``'s predictions (B,) from tokens (x, y, 0) and the query token (x_q, 0, 1)."""
    embed, attention, readout = model
    xc, yc, xq = prompts.x_context[s], prompts.y_context[s], prompts.x_query[s]  # (B, k, d), (B, k), (B, d)
    zeros, ones = torch.zeros_like(yc[..., None]), torch.ones_like(xq[:, :1])
    context = embed(torch.cat([xc, yc[..., None], zeros], -1))  # (B, k, D)
    query = embed(torch.cat([xq, torch.zeros_like(ones), ones], -1))[:, None]  # (B, 1, D)
    out, _ = attention(query, context, context, need_weights=False)  # (B, 1, D)
    return readout(out)[:, 0, 0]  # (B,)


def loop_train(config, seeds, dtype, device):
    """The reference: a Python loop over seeds of torch models, same prompts, same initialisation."""
    params = training.init_params(config, seeds, dtype=dtype, device=device)
    models = reference_models(params, dtype, device)
    optimizers = [torch.optim.Adam(model.parameters(), lr=config.lr) for model in models]
    streams = [training.prompt_stream(config.task, [s], config.batch_size, dtype=dtype, device=device) for s in seeds]
    losses = []
    for _ in range(config.steps):
        step = []
        for model, optimizer, stream in zip(models, optimizers, streams):
            prompts = next(stream)  # S = 1: this seed's prompts, the batched run's prompts[s]
            loss = ((reference_predict(model, prompts, 0) - prompts.y_query[0]) ** 2).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step.append(loss.detach())
        losses.append(torch.stack(step))
    return torch.stack(losses, 1).cpu().double().numpy()  # (S, steps)


def paired(candidates: dict, repeats: int, device) -> dict:
    """Seconds of each callable, timed in turn within every repeat, after one warm-up call each."""
    for fn in candidates.values():
        fn()
    times = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            sync(device)
            start = time.perf_counter()
            fn()
            sync(device)
            times[name].append(time.perf_counter() - start)
    return times


def quartiles(ratios):
    ratios = sorted(ratios)
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
    return f"{statistics.median(ratios):.2f} [{q1:.2f}, {q3:.2f}]"


def breakdown(config, seeds, dtype, device, repeats):
    """Per-step milliseconds: drawing prompts, folded and unfolded forward + backward, Adam."""
    params = training.AttentionParams(*(t.requires_grad_() for t in training.init_params(config, seeds, dtype=dtype, device=device)))
    optimizer = torch.optim.Adam(params, lr=config.lr)
    stream = training.prompt_stream(config.task, seeds, config.batch_size, dtype=dtype, device=device)
    draw = lambda: next(stream)  # noqa: E731
    prompts = draw()

    def backward(contributions):
        def run():
            optimizer.zero_grad(set_to_none=True)
            ((contributions().sum(1) - prompts.y_query) ** 2).mean(-1).sum().backward()
        return run

    read = lambda: torch.einsum("shjm,sm->shj", params.w_out, params.readout)  # noqa: E731 (S, H, d_head)
    unfolded = lambda: torch.einsum("shbj,shj->shb", training._heads(params, prompts), read())  # noqa: E731 (S, H, B)
    t = paired({"draw": draw, "folded": backward(lambda: training._contributions(params, prompts)),
                "unfolded": backward(unfolded), "adam": optimizer.step}, max(5, repeats), device)
    ms = {name: 1e3 * statistics.median(v) for name, v in t.items()}
    print(f"  per step: draw prompts {ms['draw']:.2f} ms, forward + backward folded {ms['folded']:.2f} ms "
          f"(unfolded, per-head projections of every token: {ms['unfolded']:.2f} ms), Adam {ms['adam']:.2f} ms")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--family", default="linear", choices=list(training.FAMILIES))
    parser.add_argument("--quick", action="store_true", help="4 seeds, 10 steps (smoke run)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.quick:
        args.seeds, args.steps = 4, 10
    dtype = getattr(torch, args.dtype)
    config = training.TrainConfig(training.Task(args.family, x_dim=8, n_context=32), d_model=32, n_heads=4,
                                  batch_size=args.batch, steps=args.steps)
    seeds = list(range(args.seeds))
    print(f"bench_training.py  {datetime.datetime.now().isoformat(timespec='seconds')}  mhacore {mhacore.__version__}  "
          f"torch {torch.__version__}  {platform.processor() or platform.machine()}  device={args.device}  "
          f"threads={args.threads}  repeats={args.repeats}")
    print(f"{args.family} tasks, x_dim 8, d_model 32, 4 heads, k = 32, {args.seeds} seeds, batch {args.batch}, "
          f"{args.steps} steps, {args.dtype}")
    batched = training.train(config, seeds, dtype=dtype, device=args.device).losses
    loop = loop_train(config, seeds, dtype, args.device)
    diff = float(abs(batched - loop).max() / abs(loop).max())
    print(f"  loss histories, batched vs loop: max relative difference {diff:.1e}")
    breakdown(config, seeds, dtype, args.device, args.repeats)
    t = paired({"batched": lambda: training.train(config, seeds, dtype=dtype, device=args.device),
                "loop": lambda: loop_train(config, seeds, dtype, args.device)}, args.repeats, args.device)
    b, lp = statistics.median(t["batched"]), statistics.median(t["loop"])
    print(f"  whole run: batched {b:.3f} s, loop {lp:.3f} s; paired ratios {quartiles([x / y for x, y in zip(t['loop'], t['batched'])])}")
    print(f"batched vs loop: {lp / b:.1f}x")


if __name__ == "__main__":
    main()
