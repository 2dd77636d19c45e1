"""Execute every notebook of a folder in a plain ``python3`` kernel, as a reader would.

    python tests/run_notebooks.py WRITTEN EXECUTED CWD [--probe CODE]

Each ``WRITTEN/*.ipynb`` runs top to bottom with ``CWD`` as its working folder and is
saved, outputs included, to ``EXECUTED``; with ``--probe``, ``CODE`` runs as one more cell
at the end (to ask the kernel something, e.g. where it imported a package from); a cell that raises is recorded as its error
output and the run goes on (the tests read the outputs). The exit status is 0 unless a
notebook could not be run at all. Used by ``tests/builds.py``.
"""

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def main(written: Path, executed: Path, cwd: Path, probe: str | None = None) -> int:
    for path in sorted(written.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        if probe:
            nb.cells.append(nbformat.v4.new_code_cell(probe))
        NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(cwd)}}).execute()
        nbformat.write(nb, executed / path.name)
        print(path.name, flush=True)
    return 0


if __name__ == "__main__":
    probe = sys.argv[sys.argv.index("--probe") + 1] if "--probe" in sys.argv else None
    sys.exit(main(*map(Path, sys.argv[1:4]), probe=probe))
