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
