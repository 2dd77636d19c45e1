"""Output folders that ``teach`` may write into without destroying anything.

A command writes only into a new or empty folder, or into one it wrote before: it leaves
a marker file (:data:`MARKER`) there listing what it wrote. Any other folder is refused
with a message naming ``--force`` (with ``--force`` the folder's own files are kept, and
never packed). Before writing again into its own folder, the command removes the files it
wrote last time, so nothing stale survives; the archive holds exactly this run's files,
is named after the folder (``pack.v2/`` -> ``pack.v2.zip`` beside it), and replaces an
existing archive only when this folder's marker says the command made it, or with ``--force``.

Usage: ``target = prepare(out, force=..., make_zip=...)`` before writing anything, then
``finish(target)`` afterwards; files written in between, by any code, are this run's.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["MARKER", "Target", "prepare", "finish"]

MARKER = ".mhacore-teach"


@dataclass
class Target:
    """A folder claimed by :func:`prepare`: what was in it before this run wrote anything."""

    folder: Path
    archive: Path | None
    before: dict = field(default_factory=dict)  # relative path -> (mtime_ns, size)


def _files(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in folder.rglob("*") if p.is_file() and p.name != MARKER}


def _marker(folder: Path) -> dict | None:
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) and isinstance(marker.get("written"), list) else None


def prepare(out, *, force: bool = False, make_zip: bool = False) -> Target:
    """Claim ``out`` for writing, or raise ``ValueError`` saying why not (and naming --force).

    Removes the files this command wrote there last time (listed in the marker), so the
    run leaves no stale files; files it did not write are never touched.
    """
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--out {str(folder)!r} is a file; give a folder to write the notebooks into")
    marker = _marker(folder) if folder.is_dir() else None
    archive = None
    if make_zip:
        resolved = folder.resolve()
        archive = resolved.parent / f"{resolved.name}.zip"
        ours = marker is not None and marker.get("archive") == archive.name
        if archive.exists() and not (ours or force):
            raise ValueError(f"{archive} already exists and teach did not make it; remove it, or pass "
                             "--force to overwrite it")
    if folder.is_dir() and marker is None and any(folder.iterdir()) and not force:
        example = sorted(p.name for p in folder.iterdir())[:3]
        raise ValueError(f"--out {str(folder)!r} holds files teach did not write (e.g. {example}); choose a "
                         "new or empty folder, or pass --force to write into it anyway (its files are kept)")
    folder.mkdir(parents=True, exist_ok=True)
    for name in (marker or {}).get("written", []):
        stale = folder / name
        if stale.is_file() and stale.resolve().is_relative_to(folder.resolve()):
            stale.unlink()
    return Target(folder, archive, _files(folder))


def finish(target: Target) -> Path:
    """Record this run's files in the marker, pack them if asked; return the folder or zip."""
    after = _files(target.folder)
    written = sorted(name for name, stamp in after.items() if target.before.get(name) != stamp)
    record = {"written": written, "archive": target.archive.name if target.archive else None}
    (target.folder / MARKER).write_text(json.dumps(record, indent=1), encoding="utf-8")
    if target.archive is None:
        return target.folder
    top = Path(target.archive.stem)
    with zipfile.ZipFile(target.archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in written:
            zf.write(target.folder / name, top / name)
    return target.archive
