"""Report files (``check --out``, ``sweep --out``), written without losing anything.

Reports are written by :func:`write_json_atomic`: a temporary file of a fresh name beside
the report, then a rename, so an interrupted write never leaves a half report and never
touches a user's file of a guessed name. The report gets the permissions of a plainly
written file (``0666`` less the umask), not the temporary file's ``0600``, so that a group
that shares a cluster folder can read it; its folder must exist (:func:`out_problem` says
so before any work).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

__all__ = ["write_json_atomic", "out_problem"]


def write_json_atomic(path: Path, data, indent: int = 2) -> None:
    """Write ``data`` as JSON to ``path`` atomically (fresh temporary name, then a rename)."""
    path = Path(path)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(json.dumps(data, indent=indent))
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 would hide it from a group
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process's umask (read by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def out_problem(out) -> str | None:
    """Why ``out`` cannot be a report file (None when it can): a folder, a missing
    folder, a parent that is not a folder, or a folder this process cannot write.

    Missing folders are not created: a mistyped path should fail, not leave new folders.
    """
    out = Path(out)
    if out.is_dir():
        return f"{out} is a directory; give a file name, e.g. {out / 'report.json'}"
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
