"""Report files (``check --out``, ``sweep --out``), written without losing anything.

Reports are written by :func:`write_json_atomic`: a temporary file of a fresh name beside
the report, then a rename, so an interrupted write never leaves a half report and never
touches a user's file of a guessed name. The report gets the permissions of a plainly
written file (``0666`` less the umask), not the temporary file's ``0600``, so that a group
that shares a cluster folder can read it; its folder must exist (:func:`out_problem` says
so before any work).

A report path may be a new name, a report of the same kind, or a symbolic link to either:
the link is kept and its target updated. Anything else is refused before any work: a
folder, a device (``/dev/null``, ``/dev/stdout``), a FIFO or socket, and a file that is
not a report of that kind (``check --out README.md``). While a run writes a report it
holds :func:`report_lock`, so a second run on the same report is refused at once, naming
the first, instead of the two dropping each other's results.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path

__all__ = ["measurement_main", "read_report", "write_json_atomic", "out_problem", "report_target", "is_report", "report_lock",
           "lock_file", "ReportBusy", "ReportWriteError"]

#: What each kind of report holds at its top level (``check --out``, ``sweep --out``).
REPORT_KEYS = {"check": ("results", "seed", "scale"), "sweep": ("settings", "units"),
               # a measurement module's report (ensemble_rho, minilm_heads)
               "measurement": ("provenance", "scale", "seed", "settings")}
_MAX_REPORT_BYTES = 256 * 2**20  # a report is far smaller; a bigger file is no report


class ReportBusy(RuntimeError):
    """Another run holds the report's lock (``holder``: its pid as written in the lock
    file), or the lock file cannot be used (``holder`` is None)."""

    def __init__(self, message: str, holder: str | None = None):
        super().__init__(message)
        self.holder = holder


class ReportWriteError(OSError):
    """A report could not be written (a full disk, a folder made read-only while the run
    went on); the message names the file, which keeps what it held before."""


def lock_file(out, *, follow: bool = True) -> Path:
    """The hidden lock file of :func:`report_lock` for ``out``: ``.NAME.lock`` beside the
    file ``out`` names (``follow=False``) or the file a link there points to."""
    target = report_target(out) if follow else Path(out)
    return target.parent / f".{target.name}.lock"


def report_target(path) -> Path:
    """The file a report at ``path`` is written to: ``path`` itself, or the file a
    symbolic link at ``path`` points to (the link is kept and its target updated)."""
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _link_loops(path: Path) -> bool:
    """Whether ``path`` is a symbolic link that never reaches a file or a missing name."""
    if not path.is_symlink():
        return False
    try:
        os.path.realpath(path, strict=True)
    except FileNotFoundError:
        return False  # dangling: the report is written at the name it points to
    except OSError:
        return True
    return False


def is_report(path, kind: str) -> bool:
    """Whether the regular file ``path`` holds a JSON report of ``kind`` ("check" or
    "sweep"): an object with that kind's top-level keys."""
    path = Path(path)
    try:
        if path.stat().st_size > _MAX_REPORT_BYTES:
            return False
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError, MemoryError):
        return False
    return isinstance(data, dict) and all(key in data for key in REPORT_KEYS[kind])


def read_report(path, what: str) -> dict:
    """The JSON report at ``path``; a missing file is refused by the report's name ``what``.

    >>> read_report("no-such-file.json", "sweep")
    Traceback (most recent call last):
    ...
    ValueError: path must be an existing sweep report; got 'no-such-file.json'
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"path must be an existing {what} report; got {str(path)!r}")
    return json.loads(path.read_text(encoding="utf-8"))


def write_json_atomic(path: Path, data, indent: int = 2) -> None:
    """Write ``data`` as JSON to ``path`` atomically (fresh temporary name, then a rename);
    through a symbolic link, its target is replaced and the link kept.

    Raises :class:`ReportWriteError` (an ``OSError``) naming ``path`` when the system
    refuses the write (no space left, a read-only folder); ``path`` is then as it was."""
    path = report_target(path)
    if path.exists() and not path.is_file():
        raise ValueError(f"cannot write a report to {path}: not a regular file")
    # an existing report keeps its permissions; a new one gets a plain file's
    mode = path.stat().st_mode & 0o777 if path.is_file() else 0o666 & ~_umask()
    text = json.dumps(data, indent=indent)
    tmp = None
    try:
        handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(tmp, mode)  # mkstemp's 0600 would hide a new report from a group
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            error = ReportWriteError(f"cannot write {path} ({exc.strerror or exc}); it keeps "
                                     "what it held before")
            error.errno = exc.errno
            raise error from None
        raise


def _umask() -> int:
    """The process's umask (read by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def out_problem(out, kind: str | None = None) -> str | None:
    """Why ``out`` cannot be a report file (None when it can): a folder, a device, FIFO
    or socket, a file that is not a report of ``kind`` (when given), a missing folder, a
    parent that is not a folder, or a folder this process cannot write. A symbolic link
    is judged by the file it points to.

    Missing folders are not created: a mistyped path should fail, not leave new folders.
    """
    given = Path(out)
    if _link_loops(given):
        return f"{given} is a symbolic link that loops; give the name of a report file"
    out = report_target(given)
    via = f" (the link {given} points to it)" if given != out else ""
    if out.is_dir():
        return f"{out} is a directory{via}; give a file name, e.g. {out / 'report.json'}"
    if out.exists():
        mode = out.stat().st_mode
        if not stat.S_ISREG(mode):
            what = ("a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else
                    "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                    else "not a regular file")
            return f"{out} is {what}{via}; give the name of a report file"
        if kind is not None and not is_report(out, kind):
            return (f"{out} exists and is not a {kind} report{via}; refusing to overwrite "
                    "it: give a new file name, or remove the file first")
    for parent in out.parents:  # nearest first
        if parent.exists() or parent.is_symlink():
            break
    else:
        parent = Path(".")
    if not parent.is_dir():
        return f"cannot write {out}: {parent} is not a directory"
    if parent != out.parent:
        return f"cannot write {out}: folder {out.parent} does not exist; create it first"
    try:
        with tempfile.NamedTemporaryFile(dir=out.parent, prefix=f".{out.name}.", suffix=".probe"):
            pass  # a fresh name: no file of the user's is touched
    except OSError as exc:
        return f"cannot write {out} ({exc.strerror or exc})"
    return None


@contextlib.contextmanager
def report_lock(out, *, follow: bool = True):
    """Hold an exclusive lock on the report ``out`` for the block, or raise
    :class:`ReportBusy` at once naming the process that holds it (or saying why the lock
    file cannot be used).

    The lock is ``fcntl.flock`` on a hidden regular file beside the report
    (``.NAME.lock``, removed when the block ends), so it is released by the system when
    a run dies, however it dies. The lock file is never reached through a symbolic link
    (one there is refused, so nothing it points to is touched). ``follow=False`` locks
    ``out`` as named, not the file a link there points to. Where ``fcntl`` does not
    exist (Windows) nothing is locked.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on POSIX
        yield
        return
    target = report_target(out) if follow else Path(out)
    lock = lock_file(out, follow=follow)
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    while True:
        try:
            handle = os.open(lock, flags, 0o666 & ~_umask())
        except OSError as exc:  # a link (ELOOP), a folder, no permission
            raise ReportBusy(f"cannot use the lock file {lock} ({exc.strerror or exc}); "
                             "remove it if it is left over") from None
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            os.close(handle)
            raise ReportBusy(f"cannot use the lock file {lock}: it is not a regular file; "
                             "remove it")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(handle, 64).decode(errors="replace").strip() or "another process"
            os.close(handle)
            raise ReportBusy(f"{target} is being written by another run (process {holder}); "
                             "wait for it to finish, or write to another --out", holder) from None
        try:  # the file may have been removed by the run that held it: lock the new one
            same = os.fstat(handle).st_ino == os.lstat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(handle)
    try:
        try:
            os.ftruncate(handle, 0)
            os.write(handle, str(os.getpid()).encode())
        except OSError as exc:  # no space left for the pid
            raise ReportBusy(f"cannot write the lock file {lock} ({exc.strerror or exc})") from None
        yield
    finally:
        with contextlib.suppress(OSError):
            if os.lstat(lock).st_ino == os.fstat(handle).st_ino:
                os.unlink(lock)
        os.close(handle)


def measurement_main(argv, *, prog: str, description: str, scales, default_seed: int,
                     run, write, summary) -> dict:
    """The command line of a measurement module (``python -m mhacore.ensemble_rho``):
    ``--scale``, ``--seed`` and ``--out``; with ``--out``, ``write(out, scale, seed,
    command=...)`` writes the report (an ``--out`` that is a folder, a device or an
    existing file other than such a report is refused, exit 2: :func:`out_problem`), else
    ``run(scale, seed)``; prints ``summary(report)`` and returns the report."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--scale", choices=tuple(scales), default="book")
    parser.add_argument("--seed", type=int, default=default_seed)
    parser.add_argument("--out", default=None, help="write the JSON report here")
    args = parser.parse_args(argv)
    if args.out:
        problem = out_problem(args.out, "measurement")
        if problem:
            parser.error(f"--out: {problem}")
        report = write(args.out, args.scale, args.seed, command=sys.argv)
    else:
        report = run(args.scale, args.seed)
    print(summary(report))
    return report
