"""Command line: ``python -m mhacore doctor``, ``check``, ``sweep`` and ``teach``.

``doctor`` prints the versions of the stack, the torch device and the determinism
settings, and exits with status 1 when a required package is missing.

``teach`` generates student notebooks (solutions removed) or an instructor pack; see
:mod:`mhacore.editions.teach`.

``check`` runs the registered theorem checks (:mod:`mhacore.theorems`) at a chosen scale
and device and writes a JSON report with provenance.  With ``--out`` the report is
rewritten (atomically) after every finished check, and ``--resume`` keeps every result
already in it and runs only the missing checks, so an interrupted long run loses nothing.
``--resume`` refuses (exit 1, file untouched) when the file was made with another seed,
scale or device, is not a report, or holds a result it cannot keep (an estimate,
prediction or SE that is not a finite number, a seed that is not an integer, or a second
result of one check at one seed, which would be counted twice). Kept results carry their own ``provenance``; a
result without one was computed by the run that the top-level ``provenance`` describes.
Bad arguments, an unwritable ``--out`` (its folder must exist; it is not created) and an
unavailable device are usage errors (exit 2) found before any work starts, as is a
process that SLURM started as one of several tasks without ``torchrun``, or launch
variables that cannot start one (``WORLD_SIZE`` above 1 without ``RANK``, ``MASTER_ADDR``
and ``MASTER_PORT``, as without ``torchrun``). Ctrl-C, or SIGTERM in a plain run, ends
with one line saying what is saved (exit 130). A report that cannot be written while the
run goes on (a full disk) ends it with one line naming the file, which keeps what it held
before (exit 1).

``sweep`` (:mod:`mhacore.fair_width` for ``heads-width``, :mod:`mhacore.sweeps` for
``heads-width-fixed``, :mod:`mhacore.trained_heads` for ``trained-heads``) follows the same
rules; its ``--resume`` refuses (exit 1, file untouched) a file made by another sweep or
with another ``--seed``, ``--queries``, ``--block-size``, ``--steps`` or ``--p`` (for
``trained-heads``: another ``--size`` too), one that is not a sweep report, or one holding
a unit of the grid it cannot summarise (a wrong shape, a value not finite or negative).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sys
import threading
import time
from pathlib import Path

from ._provenance import OPTIONAL, REQUIRED, device_info, package_versions, provenance
from .i18n import N_
from ._report import ReportBusy, ReportWriteError, report_lock


def doctor(required: dict[str, str] = REQUIRED, optional: dict[str, str] = OPTIONAL,
           stream=None) -> int:
    """Print the environment report; return 0 when every required package is present."""
    stream = sys.stdout if stream is None else stream
    from ._version import __version__
    import platform

    # the report's words are marked for the catalog (N_): the Chinese edition's
    # environment page shows them in Chinese (book/_ext/localized_outputs.py)
    print(N_("mhacore {version} on Python {python} ({machine})").format(
        version=__version__, python=platform.python_version(), machine=platform.machine()),
        file=stream)
    missing = []
    for title, names, needed in ((N_("required packages:"), required, True),
                                 (N_("optional packages:"), optional, False)):
        print(f"\n{title}", file=stream)
        for dist, version in package_versions(names).items():
            print(f"  {dist:<16} {version or 'MISSING'}", file=stream)
            if version is None and needed:
                missing.append(dist)
    if "torch" not in missing:
        try:
            info = device_info()
        except ImportError as exc:  # installed, but broken (e.g. a wrong build)
            print("\n" + N_("torch is installed but cannot be imported: {error}").format(
                error=exc), file=stream)
            missing.append("torch (importable)")
        else:
            print("\n" + N_("device and determinism:"), file=stream)
            for key, value in info.items():
                print(f"  {key:<26} {value}", file=stream)
    if missing:
        print("\n" + N_("missing required packages: {names}. Install them with: pip install "
                        "-r requirements.txt").format(names=", ".join(missing)), file=stream)
        return 1
    print("\n" + N_("all required packages are present"), file=stream)
    return 0


class _Refusal(Exception):
    """A reason to stop before touching an existing report (exit status 1)."""


class _Parser(argparse.ArgumentParser):
    """Under ``torchrun`` every rank parses the same options: only rank 0 prints a
    usage error (all exit with status 2), so the message appears once. A ``RANK`` set by
    hand (no torchrun) or one that is not a valid rank never silences the message."""

    def error(self, message):
        from .distributed import launch_problem

        rank = os.environ.get("RANK", "0").strip()
        under_torchrun = "TORCHELASTIC_RUN_ID" in os.environ and launch_problem() is None
        if under_torchrun and rank.isdigit() and int(rank) != 0:
            sys.exit(2)
        super().error(message)


def _int_at_least(minimum: int):
    """An argparse type: an integer >= ``minimum`` (the message names the value)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be an integer >= {minimum}; got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}; got {value}")
        return value
    parse.__name__ = f"integer >= {minimum}"
    return parse


_seed_arg = _int_at_least(0)
#: The most seeds one ``check --seeds`` run takes.
MAX_SEEDS = 1000


def _seeds_arg(text: str) -> list[int]:
    """``--seeds``: ``A-B`` (every seed from A to B, both included, ``0 <= A <= B``), or
    ``random:K``, K seeds (1 to 1000) that the command draws from the operating system and
    records in the report, so that no one picks them by hand and a failure can be rerun."""
    text = text.strip()
    if text.startswith("random:"):
        count = _int_at_least(1)(text[len("random:"):])
        if count > MAX_SEEDS:
            raise argparse.ArgumentTypeError(f"random:K takes at most {MAX_SEEDS} seeds; got {count}")
        return sorted(int.from_bytes(os.urandom(4), "little") for _ in range(count))
    first, sep, last = text.partition("-")
    if not sep:
        raise argparse.ArgumentTypeError(f"give A-B (e.g. 1-20) or random:K; got {text!r}")
    a, b = _seed_arg(first), _seed_arg(last)
    if a > b:
        raise argparse.ArgumentTypeError(f"A-B needs A <= B; got {text!r}")
    if b - a + 1 > MAX_SEEDS:
        raise argparse.ArgumentTypeError(f"A-B spans at most {MAX_SEEDS} seeds; got {b - a + 1}")
    return list(range(a, b + 1))


def _before_work(parser, out: Path | None, kind: str | None) -> None:
    """Usage errors found before any work and before a process group starts: an
    ``--out`` that cannot hold a report of ``kind``, or several SLURM tasks without
    torchrun."""
    from .distributed import launch_problem

    problem = launch_problem()
    if problem:
        parser.error(problem)
    _check_out(parser, out, kind)


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """Alone, SIGTERM (a scheduler's stop, ``kill``) ends like Ctrl-C: one line saying
    what is saved. Under ``torchrun`` its agent handles signals, so this does nothing."""
    if os.environ.get("WORLD_SIZE", "1") not in ("", "1") or \
            threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _out_arg(text: str) -> Path:
    """``--out``: a file name (a trailing ``/`` names a folder, which a report cannot be)."""
    if text.endswith(("/", os.sep)):
        raise argparse.ArgumentTypeError(f"{text!r} names a folder; give a file name, e.g. "
                                         f"{text.rstrip('/' + os.sep) or '.'}/report.json")
    return Path(text)


def _device_arg(text: str) -> str:
    from ._validation import check_device

    try:
        return str(check_device(text.strip().lower()))
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _check_out(parser, out: Path | None, kind: str | None) -> None:
    """Fail with a usage error, before any work, when ``--out`` cannot be written or is
    not a report of ``kind`` (a device, a FIFO, a folder, a README)."""
    from ._report import out_problem

    problem = None if out is None else out_problem(out, kind)
    if problem:
        parser.error(f"--out: {problem}")


def _load_report(path: Path) -> dict | None:
    """The report in ``path`` (None when there is none), or a refusal saying why it is not one."""
    if not path.exists():
        return None
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:  # ValueError: also an integer of 5000 digits
        raise _Refusal(f"{path} is not a check report (not JSON: {exc})") from None
    except (RecursionError, MemoryError):
        raise _Refusal(f"{path} is not a check report (JSON nested too deeply or too large)") from None
    if not isinstance(report, dict):
        raise _Refusal(f"{path} is not a check report (a JSON {type(report).__name__}, not an object)")
    results = report.get("results")
    if not isinstance(results, list) or not all(isinstance(r, dict) and "theorem_id" in r for r in results):
        raise _Refusal(f"{path} is not a check report (no list of results with theorem ids)")
    missing = [k for k in ("scale", "device", "seed") if k not in report]
    if missing:
        raise _Refusal(f"{path} is not a check report (no {', '.join(missing)})")
    kinds = {"scale": str, "device": str, "seed": int}
    wrong = [f"{k} {report[k]!r}" for k, kind in kinds.items()
             if not isinstance(report[k], kind) or isinstance(report[k], bool)]
    seen = set()
    for i, r in enumerate(results):
        if not isinstance(r["theorem_id"], str):
            wrong.append(f"results[{i}].theorem_id {r['theorem_id']!r}, not a string")
        if not isinstance(r.get("passed"), bool):
            wrong.append(f"results[{i}].passed {r.get('passed', 'missing')!r}, not true/false")
        for key in ("estimate", "prediction", "standard_error"):  # a summary needs them
            value = r.get(key, "missing")
            if not _finite(value):
                wrong.append(f"results[{i}].{key} {_short(value)}, not a finite number")
        if "seeds" in report:  # what theorems.calibration reads of every result
            wrong += _calibration_problems(i, r)
        verdict = _recomputed_verdict(r)
        if verdict is not None and isinstance(r.get("passed"), bool) and verdict != r["passed"]:
            wrong.append(f"results[{i}].passed {r['passed']!r}, but its gap, tolerance and "
                         f"conditions say {verdict!r}")
        seed = r.get("seed", report["seed"])
        if isinstance(seed, bool) or not isinstance(seed, int):
            wrong.append(f"results[{i}].seed {seed!r}, not an integer")
        elif isinstance(r["theorem_id"], str):
            if (r["theorem_id"], seed) in seen:  # would be counted twice
                wrong.append(f"results[{i}] a second result of {r['theorem_id']} at seed "
                             f"{seed}")
            seen.add((r["theorem_id"], seed))
    if wrong:
        raise _Refusal(f"{path} is not a check report (wrong entries: {'; '.join(wrong[:3])})")
    return report


def _recomputed_verdict(r: dict) -> bool | None:
    """The verdict a kept result's own numbers give (the rule of
    :func:`mhacore.theorems.run`: a finite gap within the tolerance and every condition
    met), or None when they are not there to say."""
    numbers = [r.get(k) for k in ("estimate", "prediction", "tolerance")]
    if not all(_finite(x) for x in numbers):
        return None
    conditions = r.get("details", {}).get("conditions", {}) if isinstance(r.get("details"), dict) else {}
    if not isinstance(conditions, dict):
        return None
    from .theorems._registry import holds, side_of

    rule = r.get("tolerance_rule")
    return holds(*(float(x) for x in numbers), conditions,
                 side_of(rule) if isinstance(rule, str) else "both")


def _finite(value) -> bool:
    """Whether ``value`` is a JSON number that is finite as a float (not a bool, not an
    integer too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _short(value) -> str:
    """``repr(value)``, cut to 40 characters (a kept value may be huge)."""
    text = repr(value) if not isinstance(value, int) or value.bit_length() < 128 else \
        f"an integer of {value.bit_length()} bits"
    return text if len(text) <= 40 else text[:37] + "..."


def _calibration_problems(i: int, r: dict) -> list[str]:
    """Why result ``i`` of a calibration report cannot be summarised by
    :func:`mhacore.theorems.calibration` (an empty list when it can)."""
    wrong = []
    if not isinstance(r.get("tolerance_rule"), str):
        wrong.append(f"results[{i}].tolerance_rule {_short(r.get('tolerance_rule', 'missing'))}, "
                     "not a string")
    if not _finite(r.get("tolerance", "missing")):
        wrong.append(f"results[{i}].tolerance {_short(r.get('tolerance', 'missing'))}, "
                     "not a finite number")
    details = r.get("details")
    if not isinstance(details, dict) or not isinstance(details.get("conditions", {}), dict):
        wrong.append(f"results[{i}].details {_short(details)}, not an object with an object "
                     "of conditions")
    wrong += [f"results[{i}].{key} {_short(r[key])}, not a string"
              for key in ("kind", "rule", "claim_id") if key in r and not isinstance(r[key], str)]
    return wrong


def _kept_results(path: Path, report: dict) -> list[dict]:
    """Results of the report in ``path`` that this run may keep (all of them), or a refusal.

    Every kept result carries its own provenance: the one it already has, else that of the
    run that wrote it (the old report's top-level provenance).
    """
    old = _load_report(path)
    if old is None:
        return []
    for key in ("seed", "seeds", "scale", "device"):
        if old.get(key) != report.get(key):
            raise _Refusal(f"{path} was made with {key}={old.get(key)!r} and this run has {key}={report.get(key)!r}; "
                           f"refusing to mix or overwrite its results. Rerun with the same {key}, "
                           "or write to another --out")
    return [{**r, "provenance": r.get("provenance", old.get("provenance"))} for r in old["results"]]


def _write(out: Path, report: dict) -> None:
    """Write the report atomically (:func:`mhacore._report.write_json_atomic`)."""
    from ._report import write_json_atomic

    write_json_atomic(out, report, indent=2)


def _seed_span(seeds) -> str:
    """``A-B`` for a run of consecutive seeds, else the seeds themselves."""
    if len(seeds) > 1 and seeds[-1] - seeds[0] + 1 == len(seeds) == len(set(seeds)):
        return f"{seeds[0]}-{seeds[-1]}"  # consecutive (never build the range: seeds are up to 2^32)
    return ", ".join(map(str, seeds))


def _check_rounds(ids, world):
    """Rounds of work: a sharded check alone (every rank shares its replicates), or up
    to ``world`` other checks side by side (one rank each)."""
    from . import theorems

    rounds, batch = [], []
    for theorem_id in ids:
        if getattr(theorems.REGISTRY[theorem_id].check, "sharded", False):
            rounds += [batch] if batch else []
            rounds.append([theorem_id])
            batch = []
            continue
        batch.append(theorem_id)
        if len(batch) == world:
            rounds.append(batch)
            batch = []
    return rounds + ([batch] if batch else [])


def _run_checks(ids, args, report, lead):
    """Run the checks not yet in ``report`` and, on rank 0, print and save after each
    round. Alone it runs them in order; under ``torchrun`` see :func:`_check_rounds`."""
    from . import distributed, theorems

    done = {r["theorem_id"] for r in report["results"] if r.get("seed", args.seed) == args.seed}
    for theorem_id in (i for i in ids if i in done and lead):
        print(f"{theorem_id}: kept from {args.out}" + (f" (seed {args.seed})" if "seeds" in report else ""))
    start = time.perf_counter()

    def run(theorem_id):
        return theorems.run(theorem_id, scale=args.scale, device=args.device,
                            seed=args.seed).to_dict()

    def run_solo(batch, i):
        with distributed.solo():
            return run(batch[i])

    for batch in _check_rounds([i for i in ids if i not in done], distributed.world_size()):
        if len(batch) == 1 and getattr(theorems.REGISTRY[batch[0]].check, "sharded", False):
            results = [run(batch[0])]
        else:
            results = distributed.map_items(lambda i, b=batch: run_solo(b, i), len(batch))
        report["results"] += results  # rounds keep the order of ids
        report["wall_time_s"] = round(time.perf_counter() - start, 3)
        if "seeds" in report:
            report["calibration"] = theorems.calibration(report["results"])
        for result in results if lead else ():
            seed = f", seed {args.seed}" if "seeds" in report else ""
            print(f"{theorems.CheckResult(**result).summary()}  "
                  f"[{result['wall_time_s']:.1f} s{seed}]")
        if lead and args.out is not None:
            _write(args.out, report)


def check(argv: list[str]) -> int:
    """Run theorem checks; see ``python -m mhacore check --help``.

    Exit status: 0 when every requested check holds, 1 when one fails or when ``--resume``
    refuses an existing file, 2 for a usage error (found before any work starts), 130
    after Ctrl-C (finished checks are saved, and one line says so).

    Under ``torchrun`` every rank runs this; rank 0 reads and writes the report and prints.
    """
    from . import distributed, theorems

    parser = _Parser(prog="python -m mhacore check",
                                     description="Run the book's registered theorem checks.")
    parser.add_argument("--theorem", action="append", metavar="ID",
                        help="a theorem id (repeatable; a repeated id runs once); default: all. "
                             f"Known: {', '.join(theorems.REGISTRY) or 'none'}")
    parser.add_argument("--scale", choices=theorems.SCALES, default="book",
                        help="problem size (default: %(default)s)")
    parser.add_argument("--device", type=_device_arg, default="cpu",
                        help="torch device, e.g. cpu or cuda; must exist here (default: %(default)s)")
    parser.add_argument("--seed", type=_seed_arg, default=theorems.DEFAULT_SEED,
                        help="integer >= 0 seeding every check (default: %(default)s)")
    parser.add_argument("--seeds", type=_seeds_arg, metavar="A-B|random:K",
                        help="calibration: run every check at each seed (A-B, both included, or "
                             "K seeds the command draws) and add per check the pass count and the "
                             "spread of z = (estimate - prediction)/SE to the report")
    parser.add_argument("--out", type=_out_arg, help="JSON report, rewritten after each check; an earlier check report there is "
                             "replaced (--resume keeps it), any other file is refused")
    parser.add_argument("--resume", action="store_true",
                        help="keep every result already in --out and run only the missing checks; "
                             "refuses (exit 1) when --out was made with another seed, scale or "
                             "device, or is not a report")
    args = parser.parse_args(argv)
    if args.seeds is not None and any(a == "--seed" or a.startswith("--seed=") for a in argv):
        parser.error("give --seed or --seeds, not both")
    ids = list(dict.fromkeys(args.theorem or theorems.REGISTRY))  # a repeated id runs once
    unknown = [i for i in ids if i not in theorems.REGISTRY]
    if unknown:
        parser.error(f"unknown theorem id(s) {unknown}; known: {list(theorems.REGISTRY)}")
    if args.resume and args.out is None:
        parser.error("--resume needs --out")
    # --resume reads the file and says in detail why it is not a report (exit 1)
    _before_work(parser, args.out, None if args.resume else "check")

    try:
        ctx = distributed.setup(args.device)
    except distributed.LaunchError as exc:
        print(f"check: {exc}", file=sys.stderr)
        return 1
    lead = ctx.rank == 0
    report = {"provenance": provenance(["python", "-m", "mhacore", "check", *argv]),
              "scale": args.scale, "device": args.device, "seed": args.seed, "results": [],
              "distributed": distributed.describe(ctx)}
    if args.seeds is not None:  # a calibration report: results of every seed, and their spread
        report.update(seed=args.seeds[0], seeds=args.seeds)
    held, busy = contextlib.ExitStack(), None
    if lead and args.out is not None:  # rank 0 alone writes the report
        try:
            held.enter_context(report_lock(args.out))
        except ReportBusy as exc:
            busy = str(exc)
    busy = distributed.broadcast(busy)
    if busy is not None:
        if lead:
            print(f"--out: {busy}", file=sys.stderr)
        distributed.teardown()
        return 1
    with held:
        if args.resume:
            kept = None
            if lead:
                try:
                    kept = _kept_results(args.out, report)
                except _Refusal as exc:
                    kept = exc
            kept = distributed.broadcast(kept)
            if isinstance(kept, _Refusal):
                if lead:
                    print(f"--resume: {kept}", file=sys.stderr)
                distributed.teardown()
                return 1
            report["results"] = kept
        try:
            with _sigterm_as_interrupt():
                for seed in args.seeds or [args.seed]:
                    args.seed = seed
                    _run_checks(ids, args, report, lead)
        except KeyboardInterrupt:
            saved = (f"{len(report['results'])} finished check(s) are saved in {args.out}; "
                     "rerun with --resume to continue"
                     if args.out is not None else "nothing saved (no --out)")
            print(f"interrupted: {saved}", file=sys.stderr)
            return 130
        except ReportWriteError as exc:  # a full disk, a folder made read-only meanwhile
            print(f"--out: {exc}; rerun with --resume once it can be written",
                  file=sys.stderr)
            return 1
        requested = [r for r in report["results"] if r["theorem_id"] in ids]
        failed = [r["theorem_id"] for r in requested if not r["passed"]]
        # a check whose chapter reports that the data do not support the claim fails
        # as reported; only a verdict other than the chapter's is an error
        reported = sum(r.get("finding") == "fails" and not r["passed"] for r in requested)
        unexpected = [r["theorem_id"] for r in requested
                      if r["passed"] != (r.get("finding", "holds") != "fails")]
        tally = f"{len(requested) - len(failed)} passed, {len(failed)} failed"
        if reported:
            tally += f" ({reported} as their chapters report)"
        if lead and args.seeds is not None:
            print(theorems.calibration_table(theorems.calibration(requested)))
            print(f"seeds {_seed_span(args.seeds)}: {tally}")
        elif lead:
            print(tally)
        distributed.teardown()
        return 1 if unexpected else 0


#: What each ``--size`` runs, and its time in one process on two CPU cores.
SWEEP_SIZES = {
    "heads-width": {
        "tiny": "D 2 and 4, n 20 and 60, 2 blocks of 2 designs (a few seconds)",
        "small": "D 4 and 8, n 20 and 200, 2 blocks of 3 designs (about a minute)",
        "large": "D 4, 8, 16 (p = D), n 20 to 2000, 4 blocks of 3 designs (about 35 "
                 "minutes)"},
    "heads-width-fixed": {
        "tiny": "D 4 and 8, n 20 and 200, 3 blocks of 2 designs (about 2 s)",
        "small": "D 8, 16, 32, n 30 to 3000, 4 blocks of 2 designs (about 2 s with "
                 "OMP_NUM_THREADS=1, 5-20 s without)",
        "large": "D 8 to 128, 22 n from 10 to 31 623, 32 blocks of 1 design (about 30 "
                 "minutes)"},
    "trained-heads": {
        "tiny": "smooth, H 1 and 2, k 4 and 8, 2 seeds, 6 steps (a few seconds)",
        "small": "smooth and linear, H 1, 4, 16, k 8 and 32, 4 seeds, 200 steps (under a "
                 "minute)",
        "large": "smooth and linear, H 1 to 16 (d_model 32), k 8 to 64, 8 seeds, 2000 steps, "
                 "lambda sweep at H 4, k 32 (14 minutes measured with OMP_NUM_THREADS=1)"},
}


def sweep(argv: list[str]) -> int:
    """Run a sweep; see ``python -m mhacore sweep heads-width --help``.

    ``heads-width`` is the fair sweep of claim C5 (:mod:`mhacore.fair_width`:
    temperatures chosen by cross-validation, random, signal-aware and learned heads,
    mixture and concat outputs, three targets, baselines); ``heads-width-fixed`` is
    chapter 6's first model (:mod:`mhacore.sweeps`: one projection scale, random heads,
    the convex mixture). Alone it runs in this process; under ``torchrun
    --nproc-per-node N -m mhacore sweep ...`` the units are shared by the ranks and rank
    0 writes the report.

    Exit status: 0 when the sweep finished, 1 when ``--resume`` refuses ``--out``, 2 for
    a usage error (found before any work starts and before the process group), 130
    after Ctrl-C or SIGTERM (one line says how many units are saved).
    """
    from . import distributed, fair_width, sweeps, trained_heads

    fixed = bool(argv) and argv[0] == "heads-width-fixed"
    trained = bool(argv) and argv[0] == "trained-heads"
    module = sweeps if fixed else trained_heads if trained else fair_width
    name = "heads-width-fixed" if fixed else "trained-heads" if trained else "heads-width"
    sizes = "; ".join(f"{s}: {SWEEP_SIZES[name][s]}" for s in module.SIZES)
    parser = _Parser(
        prog="python -m mhacore sweep",
        description="Claim C5: best head width d_k* over budgets D and sizes n. "
                    "heads-width: the fair sweep (temperatures by cross-validation, "
                    "random, signal-aware and learned heads, mixture and concat "
                    "outputs, p = D); heads-width-fixed: chapter 6's first model (one "
                    "projection scale). trained-heads: chapter 9, a trained attention "
                    "layer on in-context regression (best H per prompt length, head "
                    "diversity at initialisation and after training, a diversity-penalty "
                    "sweep). "
                    f"Sizes of {name} (one process, two CPU cores): {sizes}.")
    parser.add_argument("name", choices=["heads-width", "heads-width-fixed", "trained-heads"])
    parser.add_argument("--size", choices=list(module.SIZES), default="small",
                        help="grid and replicates (default: %(default)s)")
    parser.add_argument("--budgets", type=_int_at_least(2), nargs="+", metavar="D",
                        help="override the size's budgets D (each >= 2)")
    parser.add_argument("--n-values", type=_int_at_least(2), nargs="+", metavar="N",
                        help="override the size's sample sizes n (each >= 2; "
                             "heads-width: >= 10)")
    parser.add_argument("--blocks", type=_int_at_least(1),
                        help="override the number of blocks")
    parser.add_argument("--block-size", type=_int_at_least(1),
                        help="override designs per block")
    parser.add_argument("--queries", type=_int_at_least(1),
                        help="override queries per design")
    parser.add_argument("--p", type=_int_at_least(1),
                        help="heads-width-fixed only: override the dimension of keys "
                             "and queries (>= every D; heads-width has p = D)")
    parser.add_argument("--steps", type=_int_at_least(0),
                        help="heads-width: gradient steps of the learned heads; "
                             "trained-heads: training steps (>= 1)")
    parser.add_argument("--seed", type=_seed_arg, default=20260521,
                        help="integer >= 0 (default: %(default)s)")
    parser.add_argument("--device", type=_device_arg, default="cpu",
                        help="cpu or cuda (each rank takes its LOCAL_RANK's GPU)")
    parser.add_argument("--out", type=_out_arg, help="JSON report, rewritten every round; an earlier sweep report there is "
                             "replaced (--resume keeps it), any other file is refused")
    parser.add_argument("--resume", action="store_true",
                        help="keep the units already in --out and run the missing ones; "
                             "more --blocks, --n-values or --budgets grow the grid. "
                             "Refuses (exit 1, file untouched) when --out was made with "
                             "another sweep, --seed, --p, --queries, --block-size or "
                             "--steps, or is not a sweep report")
    args = parser.parse_args(argv)
    if args.resume and args.out is None:
        parser.error("--resume needs --out")
    if fixed and args.steps is not None:
        parser.error("--steps belongs to heads-width (learned heads), not heads-width-fixed")
    if not fixed and not trained and args.p is not None:
        parser.error("--p belongs to heads-width-fixed; heads-width has p = D")
    if trained:
        given = [o for o, v in (("--budgets", args.budgets), ("--n-values", args.n_values), ("--p", args.p),
                                ("--blocks", args.blocks), ("--queries", args.queries)) if v is not None]
        if given:
            parser.error(f"{given[0]} is not an option of trained-heads (it takes --size, --steps, "
                         "--block-size (seeds per unit), --seed, --device, --out, --resume)")
        overrides = {"steps": args.steps, "block_size": args.block_size}
    else:
        overrides = {"budgets": args.budgets, "n_values": args.n_values,
                     "blocks": args.blocks, "block_size": args.block_size, "m": args.queries}
        overrides.update({"p": args.p} if fixed else {"steps": args.steps})
    try:
        module.settings(args.size, seed=args.seed, overrides=overrides)
    except ValueError as exc:  # --p below a budget: checked before any work
        if trained:
            parser.error(str(exc).replace("steps must", "--steps must", 1)
                         .replace("block_size must", "--block-size must", 1))
        parser.error(str(exc).replace("p must", "--p must", 1)
                     .replace("n_values must", "--n-values must", 1))
    _before_work(parser, args.out, None if args.resume else "sweep")
    try:
        with _sigterm_as_interrupt():
            report = module.run_sweep(args.size, seed=args.seed, device=args.device,
                                      out=args.out, resume=args.resume,
                                      overrides=overrides,
                                      command=["python", "-m", "mhacore", "sweep", *argv])
        if distributed.rank() == 0:
            print(module.format_summary(report["summary"]))
    except sweeps.ResumeRefused as exc:
        if distributed.rank() == 0:
            print(f"--resume: {exc}", file=sys.stderr)
        return 1
    except distributed.LaunchError as exc:
        print(f"sweep: {exc}", file=sys.stderr)
        return 1
    except (ReportBusy, ReportWriteError) as exc:
        if distributed.rank() == 0:
            print(f"--out: {exc}" + ("; rerun with --resume once it can be written"
                                     if isinstance(exc, ReportWriteError) else ""),
                  file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        saved = getattr(exc, "saved", None)
        print("interrupted: " + (f"{saved} finished unit(s) are saved in {args.out}; "
                                 "rerun with --resume to continue"
                                 if args.out is not None else "nothing saved (no --out)"),
              file=sys.stderr)
        return 130
    finally:
        distributed.teardown()
    return 0


def _doctor(argv: list[str]) -> int:
    """``python -m mhacore doctor``: no options (an unknown one is a usage error, exit 2)."""
    argparse.ArgumentParser(prog="python -m mhacore doctor",
                            description="Print the versions of the stack, the torch device and the "
                                        "determinism settings.").parse_args(argv)
    return doctor()


def _teach(argv: list[str]) -> int:
    """``python -m mhacore teach``: the editions wing is imported only here, so doctor,
    check and sweep run without what the editions need (PyYAML, nbformat, ...)."""
    from .editions.teach import main as teach

    return teach(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    commands = {"doctor": _doctor, "check": check, "teach": _teach, "sweep": sweep}
    asked = argv[:1] in (["-h"], ["--help"])  # help asked for: usage on stdout, exit 0
    if not argv or argv[0] not in commands:
        print("usage: python -m mhacore {doctor,check,teach,sweep} [options]\n"
              "  doctor  versions of the stack, device and determinism settings\n"
              "  check   run the book's theorem checks and write a JSON report\n"
              "  teach   generate reader, student or instructor notebooks from the chapters\n"
              "  sweep   heads-width: best head width over budgets and sizes (C5); "
              "heads-width-fixed: chapter 6's first model; trained-heads: chapter 9's "
              "trained attention",
              file=sys.stdout if asked else sys.stderr)
        return 0 if asked else 2
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
