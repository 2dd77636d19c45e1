"""Let ``pytest --nbval-lax`` execute the book's MyST chapters straight from their sources.

nbval only collects ``.ipynb`` files.  Every chapter of the book is a jupytext MyST
notebook (a ``.md`` file whose front matter names a ``kernelspec``); this hook reads such
a file with ``jupytext.read`` and hands the notebook to nbval's own collector, so one
pytest run covers the unit tests and every executable chapter.
"""

from pathlib import Path
from unittest import mock


def is_executable_chapter(path) -> bool:
    """True for a MyST notebook: a ``.md`` file whose front matter names a kernel."""
    path = Path(path)
    if path.suffix != ".md":
        return False
    head = path.read_text(encoding="utf-8")[:3000]
    return head.startswith("---") and "kernelspec:" in head


def pytest_collect_file(file_path, parent):
    opt = parent.config.option
    if not (getattr(opt, "nbval", False) or getattr(opt, "nbval_lax", False)):
        return None
    if is_executable_chapter(file_path):
        return MystNotebookFile.from_parent(parent, path=file_path)
    return None


try:
    import jupytext
    import nbval.plugin

    class MystNotebookFile(nbval.plugin.IPyNbFile):
        """nbval's collector, with the notebook read from MyST by jupytext."""

        def collect(self):
            notebook = jupytext.read(str(self.fspath))
            with mock.patch.object(nbval.plugin.nbformat, "read", lambda *a, **k: notebook):
                return list(super().collect())

except ImportError:  # without nbval or jupytext there is nothing to hand chapters to
    MystNotebookFile = None


# --- the strict build, shared by the build test and the browser tests --------------------

import os
import subprocess
import sys

import pytest

ROOT = Path(__file__).resolve().parent
BUILD_COMMAND = ["build", "-W", "-n", "--keep-going", "--all"]
CACHE_ENV = "MHACORE_BOOK_CACHE"  # read by book/_ext/editions.py


def jupyter_book(*args, cwd=None, timeout=1500, cache=None):
    """Run the venv's ``jupyter-book`` with ``args``; return the completed process.

    ``cache`` is the jupyter-cache folder the build executes into and reads from."""
    exe = Path(sys.executable).with_name("jupyter-book")
    env = dict(os.environ)
    if cache is not None:
        env[CACHE_ENV] = str(cache)
    return subprocess.run([str(exe), *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.fixture(scope="session")
def book_tools():
    """The repository root, the strict build's arguments and a ``jupyter-book`` runner."""
    return ROOT, BUILD_COMMAND, jupyter_book


@pytest.fixture(scope="session")
def book_cache(tmp_path_factory):
    """The one jupyter-cache of this test session: the strict build executes every chapter
    into it, and every other edition built by the tests (PDF, ...) reads it."""
    return tmp_path_factory.mktemp("jupyter-cache")


@pytest.fixture(scope="session")
def strict_build(tmp_path_factory, book_cache):
    """Build the whole book strictly into a temporary folder, once per session.

    Returns ``(process, html_dir)``; the tests decide what counts as failure. Other
    editions can be built beside it, in ``html_dir.parent``, from ``book_cache``.
    """
    out = tmp_path_factory.mktemp("strict-build")
    proc = jupyter_book(*BUILD_COMMAND, "--path-output", out, ROOT, cache=book_cache)
    return proc, out / "_build" / "html"


@pytest.fixture(scope="session")
def html_dir(strict_build):
    """The strict build's HTML folder; fails the test when that build failed."""
    proc, html = strict_build
    if proc.returncode != 0:
        pytest.fail("the strict build failed; see test_strict_build_has_no_warnings")
    return html

