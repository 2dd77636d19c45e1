"""Command line: ``python -m mhacore doctor`` and ``python -m mhacore check``.

``doctor`` prints the versions of the stack, the torch device and the determinism
settings, and exits with status 1 when a required package is missing.

``teach`` generates student notebooks (solutions removed) or an instructor pack; see
:mod:`mhacore.teach`.

``check`` runs the registered theorem checks (:mod:`mhacore.theorems`) at a chosen scale
and device and writes a JSON report with provenance.  With ``--out`` the report is
rewritten after every finished check, and ``--resume`` skips checks already in it, so an
interrupted long run loses nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ._provenance import OPTIONAL, REQUIRED, device_info, package_versions, provenance


def doctor(required: dict[str, str] = REQUIRED, optional: dict[str, str] = OPTIONAL,
           stream=None) -> int:
    """Print the environment report; return 0 when every required package is present."""
    stream = sys.stdout if stream is None else stream
    from . import __version__
    import platform

    print(f"mhacore {__version__} on Python {platform.python_version()} ({platform.machine()})",
          file=stream)
    missing = []
    for title, names, needed in (("required", required, True), ("optional", optional, False)):
        print(f"\n{title} packages:", file=stream)
        for dist, version in package_versions(names).items():
            print(f"  {dist:<16} {version or 'MISSING'}", file=stream)
            if version is None and needed:
                missing.append(dist)
    if "torch" not in missing:
        try:
            info = device_info()
        except ImportError as exc:  # installed, but broken (e.g. a wrong build)
            print(f"\ntorch is installed but cannot be imported: {exc}", file=stream)
            missing.append("torch (importable)")
        else:
            print("\ndevice and determinism:", file=stream)
            for key, value in info.items():
                print(f"  {key:<26} {value}", file=stream)
    if missing:
        print(f"\nmissing required packages: {', '.join(missing)}. "
              "Install them with: pip install -r requirements.txt", file=stream)
        return 1
    print("\nall required packages are present", file=stream)
    return 0


def _load_report(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SystemExit(f"--resume: {path} is not a JSON report ({exc})") from exc


def check(argv: list[str]) -> int:
    """Run theorem checks; see ``python -m mhacore check --help``."""
    from . import theorems

    parser = argparse.ArgumentParser(prog="python -m mhacore check",
                                     description="Run the book's registered theorem checks.")
    parser.add_argument("--theorem", action="append", metavar="ID",
                        help="a theorem id (repeatable); default: all. "
                             f"Known: {', '.join(theorems.REGISTRY) or 'none'}")
    parser.add_argument("--scale", choices=theorems.SCALES, default="book")
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda")
    parser.add_argument("--seed", type=int, default=theorems.DEFAULT_SEED)
    parser.add_argument("--out", type=Path, help="JSON report, rewritten after each check")
    parser.add_argument("--resume", action="store_true",
                        help="keep the checks already in --out (same scale, device, seed)")
    args = parser.parse_args(argv)
    ids = args.theorem or list(theorems.REGISTRY)
    unknown = [i for i in ids if i not in theorems.REGISTRY]
    if unknown:
        parser.error(f"unknown theorem id(s) {unknown}; known: {list(theorems.REGISTRY)}")
    if args.resume and args.out is None:
        parser.error("--resume needs --out")

    report = {"provenance": provenance(["python", "-m", "mhacore", "check", *argv]),
              "scale": args.scale, "device": args.device, "seed": args.seed, "results": []}
    if args.resume:
        old = _load_report(args.out)
        if all(old.get(k) == report[k] for k in ("scale", "device", "seed")):
            report["results"] = [r for r in old.get("results", []) if r["theorem_id"] in ids]
    done = {r["theorem_id"] for r in report["results"]}
    start = time.perf_counter()
    for theorem_id in ids:
        if theorem_id in done:
            print(f"{theorem_id}: kept from {args.out}")
            continue
        result = theorems.run(theorem_id, scale=args.scale, device=args.device, seed=args.seed)
        print(f"{result.summary()}  [{result.wall_time_s:.1f} s]")
        report["results"].append(result.to_dict())
        report["wall_time_s"] = round(time.perf_counter() - start, 3)
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            tmp = args.out.with_suffix(args.out.suffix + ".tmp")
            tmp.write_text(json.dumps(report, indent=2), encoding="utf-8")
            tmp.replace(args.out)
    failed = [r["theorem_id"] for r in report["results"] if not r["passed"]]
    print(f"{len(report['results']) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    from .teach import main as teach

    commands = {"doctor": lambda rest: doctor(), "check": check, "teach": teach}
    if not argv or argv[0] not in commands:
        print("usage: python -m mhacore {doctor,check,teach} [options]\n"
              "  doctor  versions of the stack, device and determinism settings\n"
              "  check   run the book's theorem checks and write a JSON report\n"
              "  teach   generate student or instructor notebooks from the chapters",
              file=sys.stderr)
        return 2
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
