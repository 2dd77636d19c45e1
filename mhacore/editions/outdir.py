"""Output folders that ``teach`` may write into without destroying anything.

``teach`` writes only files it created, and only while they are as it wrote them. It
leaves a marker file (:data:`MARKER`) in its folder recording the SHA-256 of every file it
wrote; a file is teach's own only while its content still has the recorded hash. So:

- a folder holding other files is refused with a message naming ``--force``; with
  ``--force`` teach writes beside them, and still never overwrites or deletes a file it
  did not write: a run that would is refused, naming the files, before anything moves;
- a file teach wrote and someone then changed (a student's answers in a notebook) is
  never overwritten or deleted either;
- a run writes into a staging folder inside ``--out`` and moves its files into place only
  when all of them are written, so an interrupted run leaves the previous files as they
  were; the next run removes the stale staging folder;
- a lock (``fcntl.flock``) keeps two runs on one folder apart: the second is refused at
  once, naming the first;
- before moving its files in, a run removes the files the previous run wrote that this
  one does not write again (unchanged ones only), so nothing stale survives.

The archive holds exactly this run's files, is named after the folder (``pack.v2/`` ->
``pack.v2.zip`` beside it), and replaces an existing archive only when the marker says
teach made it (and it is unchanged), or with ``--force``.

Usage: ``target = prepare(out, force=..., make_zip=...)``, then write every file into
``target.stage``, then ``finish(target)``, which moves them into ``target.folder``; call
:func:`abandon` instead if writing failed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from .._report import ReportBusy, lock_file, report_lock

__all__ = ["MARKER", "STAGE", "Target", "prepare", "finish", "abandon", "write_error"]

MARKER = ".mhacore-teach"
STAGE = ".mhacore-teach-staging"  # this run's files, before they move into the folder
_LOCK = lock_file(MARKER, follow=False).name  # the lock file report_lock keeps
_OWN = (MARKER, STAGE, _LOCK)  # teach's bookkeeping: never listed, never packed
_SENTINEL = ".staging"  # inside STAGE: says teach made it (anything else there is kept)


@dataclass
class Target:
    """A folder claimed by :func:`prepare`: where this run writes and what teach owns."""

    folder: Path
    stage: Path
    archive: Path | None
    owned: dict = field(default_factory=dict)  # relative path -> sha256, unchanged files
    held: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    previous_archive: tuple = (None, None)  # the archive the marker records, and its hash
    created: bool = False  # prepare made the folder: a failed run removes it again


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def _files(folder: Path) -> list[str]:
    """Relative paths of the regular files under ``folder``, teach's bookkeeping left out."""
    found = []
    for path in folder.rglob("*"):
        relative = path.relative_to(folder)
        if relative.parts[0] not in (*_OWN, _SENTINEL) and path.is_file() and not path.is_symlink():
            found.append(relative.as_posix())
    return sorted(found)


def _marker(folder: Path) -> dict | None:
    """The marker's record: ``written`` (path -> sha256; ``None`` for a marker of the
    older kind, a list of paths without hashes, whose files are therefore never taken
    for teach's), ``pending`` and ``archive``; None when the folder has no readable
    marker."""
    path = folder / MARKER
    if path.is_symlink() or not path.is_file():  # a link, a FIFO (would block), a folder
        return None
    try:
        marker = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(marker, dict):
        return None
    written = marker.get("written")
    if isinstance(written, list):  # an older teach recorded names only
        written = {name: None for name in written if isinstance(name, str)}
    if not isinstance(written, dict):
        return None
    pending = marker.get("pending") if isinstance(marker.get("pending"), dict) else {}
    return {"written": written, "pending": pending, "archive": marker.get("archive"),
            "archive_sha256": marker.get("archive_sha256")}


def _inside(folder: Path, name: str) -> Path | None:
    """``folder / name`` when that is a regular file inside ``folder`` (no escape by
    ``..`` or links), else None."""
    path = folder / name
    try:
        if path.is_file() and not path.is_symlink() and \
                path.resolve().is_relative_to(folder.resolve()):
            return path
    except (OSError, ValueError):
        pass
    return None


def _owned(folder: Path, marker: dict | None) -> dict:
    """The files the marker lists whose content is still what teach wrote (or, for an
    interrupted run, what it was about to write)."""
    owned = {}
    for name, recorded in (marker or {}).get("written", {}).items():
        path = _inside(folder, name) if isinstance(name, str) else None
        if path is None:
            continue
        now = _sha256(path)
        pending = marker["pending"].get(name)
        if recorded is not None and now in (recorded, pending):
            owned[name] = now
    for name, pending in (marker or {}).get("pending", {}).items():
        path = _inside(folder, name) if isinstance(name, str) else None
        if path is not None and name not in owned and _sha256(path) == pending:
            owned[name] = pending
    return owned


def prepare(out, *, force: bool = False, make_zip: bool = False) -> Target:
    """Claim ``out`` for writing, or raise ``ValueError`` saying why not (and naming
    ``--force`` where it would help). Takes the folder's lock and empties a staging folder
    an interrupted run left; nothing of the user's is touched."""
    folder = Path(out)
    if folder.is_symlink() and not folder.is_dir():
        raise ValueError(f"--out {str(folder)!r} is a symbolic link to no folder; give a folder")
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--out {str(folder)!r} is a file; give a folder to write the notebooks into")
    marker = _marker(folder) if folder.is_dir() else None
    archive = None
    if make_zip:
        # named after the folder as given and put beside it: for a link to a folder, the
        # link's name, next to the link (not the name of the folder it points at)
        given = Path(os.path.abspath(folder))
        archive = given.parent / f"{given.name}.zip"
        recorded = (marker or {}).get("archive_sha256")
        ours = (marker is not None and marker.get("archive") == archive.name
                and archive.is_file() and not archive.is_symlink()
                and recorded is not None and recorded == _sha256(archive))
        if archive.exists() and not (ours or force):
            raise ValueError(f"{archive} already exists and teach did not make it; remove it, or pass "
                             "--force to overwrite it")
    others = [p.name for p in folder.iterdir()
              if p.name not in _OWN and not _stale_marker(p.name)] if folder.is_dir() else []
    if marker is None and others and not force:
        raise ValueError(f"--out {str(folder)!r} holds files teach did not write (e.g. {sorted(others)[:3]}); "
                         "choose a new or empty folder, or pass --force to write beside them (teach "
                         "never overwrites or deletes a file it did not write)")
    created = not folder.is_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"--out {str(folder)!r} cannot be made ({exc.strerror or exc})") from None
    target = Target(folder, folder / STAGE, archive, created=created)
    try:
        target.held.enter_context(report_lock(folder / MARKER, follow=False))
    except ReportBusy as exc:
        message = str(exc) if exc.holder is None else (
            f"--out {str(folder)!r} is being written by another teach run (process "
            f"{exc.holder}); wait for it to finish, or choose another folder")
        _release(target)
        raise ValueError(message) from None
    except OSError as exc:  # a read-only folder
        _release(target)
        raise ValueError(f"--out {str(folder)!r} cannot be written ({exc.strerror or exc})") from None
    try:
        _clear_stage(target.stage)
        target.stage.mkdir()
        (target.stage / _SENTINEL).write_text("teach's staging folder\n", encoding="utf-8")
    except OSError as exc:  # a full disk
        if not (target.stage / _SENTINEL).is_file():
            with contextlib.suppress(OSError):
                target.stage.rmdir()  # just made (only while empty)
        abandon(target)
        raise ValueError(f"--out {str(folder)!r} cannot be written ({exc.strerror or exc})") from None
    except ValueError:  # a folder of the stage's name that teach did not make: kept
        _release(target)
        raise
    target.owned = _owned(folder, _marker(folder))
    target.previous_archive = (marker or {}).get("archive"), (marker or {}).get("archive_sha256")
    return target


def _clear_stage(stage: Path) -> None:
    """Remove the staging folder an interrupted run left; refuse anything else there."""
    if not (stage.exists() or stage.is_symlink()):
        return
    if stage.is_symlink() or not stage.is_dir() or not (stage / _SENTINEL).is_file():
        raise ValueError(f"{stage} is in the way of teach's staging folder and teach did not "
                         "make it; move it away")
    shutil.rmtree(stage)


def _stale_marker(name: str) -> bool:
    """Whether ``name`` is a temporary marker file a killed run left (never the user's)."""
    return name.startswith(f"{MARKER}.") and name.endswith(".tmp")


def abandon(target: Target) -> None:
    """Drop this run's staged files and release the folder (the folder is as it was; one
    that :func:`prepare` made is removed again while nothing else is in it)."""
    if (target.stage / _SENTINEL).is_file():
        shutil.rmtree(target.stage, ignore_errors=True)
    _release(target)


def _release(target: Target) -> None:
    """Release the folder's lock; remove the folder again if :func:`prepare` made it and
    nothing is in it."""
    target.held.close()
    if target.created:
        with contextlib.suppress(OSError):
            target.folder.rmdir()  # only while empty


def write_error(out, exc: OSError) -> ValueError:
    """The one-line error of a run that could not write its files into ``out`` (a full
    disk, a folder made read-only while it ran); its staged files are dropped."""
    return ValueError(f"--out {str(out)!r} cannot be written ({exc.strerror or exc}); "
                      "nothing in it was changed")


def _write_marker(target: Target, written: dict, pending: dict, archive_sha: str | None) -> None:
    if target.archive is not None:
        archive = target.archive.name if archive_sha else None, archive_sha
    else:  # this run made no archive: the one made before stays teach's while unchanged
        archive = target.previous_archive
    record = {"written": written, "pending": pending, "archive": archive[0],
              "archive_sha256": archive[1]}
    handle, tmp = tempfile.mkstemp(dir=target.folder, prefix=f"{MARKER}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:  # a fresh name: no link followed
            stream.write(json.dumps(record, indent=1, sort_keys=True))
        os.replace(tmp, target.folder / MARKER)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _blocked(target: Target, new: dict) -> list[str]:
    """The staged names that would replace something teach may not replace: a file (or
    link, or folder) it did not write or that changed since, checked again just before
    anything moves; or a path that passes through a link or a file inside the folder."""
    blocked = []
    root = target.folder.resolve()
    for name in new:
        destination = target.folder / name
        parent = destination.parent
        while parent != target.folder:  # every folder on the way: a real folder inside
            if parent.is_symlink() or (parent.exists() and not parent.is_dir()):
                blocked.append(name)
                break
            parent = parent.parent
        else:
            if os.path.lexists(destination):
                owned = target.owned.get(name)
                if (owned is None or destination.is_symlink() or not destination.is_file()
                        or _sha256(destination) != owned
                        or not destination.resolve().is_relative_to(root)):
                    blocked.append(name)
    return sorted(blocked)


def _remove_empty_parents(folder: Path, top: Path) -> None:
    """Remove ``folder`` and its parents up to ``top`` (excluded) while they are empty."""
    while folder != top and folder.is_relative_to(top):
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def finish(target: Target) -> Path:
    """Move this run's staged files into the folder, record them, pack them if asked;
    return the folder or the zip. Refuses (``ValueError``, nothing moved) when a staged
    file would replace a file teach did not write or that changed since."""
    try:
        new = {name: _sha256(target.stage / name) for name in _files(target.stage)}
        blocked = _blocked(target, new)
        if blocked:
            raise ValueError(
                f"teach would overwrite {blocked[:5]} in {str(target.folder)!r}, which it did not "
                "write or which changed since it wrote them; nothing was written. Move them "
                "away, or choose another --out")
        # the marker first names both versions, so an interruption while moving leaves
        # every file recognisably teach's
        _write_marker(target, target.owned, new, None)
        for name in sorted(set(target.owned) - set(new)):  # stale, and unchanged
            path = target.folder / name
            if not path.is_symlink() and path.is_file() and _sha256(path) == target.owned[name]:
                path.unlink()
                _remove_empty_parents(path.parent, target.folder)
        for name in new:
            destination = target.folder / name
            destination.parent.mkdir(parents=True, exist_ok=True)
            os.replace(target.stage / name, destination)
        archive_sha = None
        if target.archive is not None:
            top = Path(target.archive.stem)
            handle, partial = tempfile.mkstemp(dir=target.archive.parent,
                                               prefix=f".{target.archive.name}.", suffix=".tmp")
            os.close(handle)  # a fresh name: no link of anyone's is followed
            try:
                with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
                    for name in new:
                        zf.write(target.folder / name, top / name)
                os.replace(partial, target.archive)
            except BaseException:
                Path(partial).unlink(missing_ok=True)
                raise
            archive_sha = _sha256(target.archive)
        _write_marker(target, new, {}, archive_sha)
        return target.archive if target.archive is not None else target.folder
    except OSError as exc:
        raise ValueError(f"--out {str(target.folder)!r} cannot be written "
                         f"({exc.strerror or exc}); the files teach wrote before are kept") from None
    finally:
        abandon(target)
