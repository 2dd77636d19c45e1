"""Book-level checks: the strict build passes, and a failing cell fails both commands."""

import shutil
import subprocess
import sys
import textwrap

import pytest


CHAPTER_HEADER = textwrap.dedent("""\
    ---
    jupytext:
      text_representation:
        extension: .md
        format_name: myst
        format_version: 0.13
        jupytext_version: 1.19.6
    kernelspec:
      display_name: Python 3 (ipykernel)
      language: python
      name: python3
    ---
    """)


def test_strict_build_has_no_warnings(strict_build):
    proc, html = strict_build
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    assert "WARNING:" not in log, [line for line in log.splitlines() if "WARNING:" in line]
    assert (html / "index.html").is_file()
    assert (html / "_static" / "mathjax" / "tex-chtml.js").is_file()


def test_every_toc_page_is_built(strict_build, book_tools):
    proc, html = strict_build
    ROOT, _, _ = book_tools
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [c["file"] for part in toc["parts"] for c in part["chapters"]]
    missing = [f for f in files if not (html / f"{f}.html").is_file()]
    assert not missing


@pytest.fixture
def failing_book(tmp_path, book_tools):
    """A throwaway book with the project's configuration and one chapter that raises."""
    ROOT, _, _ = book_tools
    shutil.copy(ROOT / "_config.yml", tmp_path)
    shutil.copy(ROOT / "conftest.py", tmp_path)
    (tmp_path / "book").mkdir()
    shutil.copytree(ROOT / "book" / "_ext", tmp_path / "book" / "_ext")
    shutil.copy(ROOT / "book" / "references.bib", tmp_path / "book")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/broken\n")
    (tmp_path / "book" / "broken.md").write_text(CHAPTER_HEADER + textwrap.dedent("""
        # A broken chapter

        ```{code-cell} ipython3
        x = 1
        ```

        ```{code-cell} ipython3
        raise RuntimeError("deliberate failure in a chapter cell")
        ```
        """))
    return tmp_path


def test_failing_cell_fails_the_build(failing_book, book_tools):
    _, build_command, jupyter_book = book_tools
    proc = jupyter_book(*build_command, failing_book, timeout=600)
    assert proc.returncode != 0
    assert "deliberate failure in a chapter cell" in proc.stdout + proc.stderr


def test_failing_cell_fails_the_test_run(failing_book):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env",
         "-p", "no:cacheprovider", "--rootdir", str(failing_book), "book/broken.md"],
        cwd=failing_book, capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 1, log[-3000:]
    assert "deliberate failure in a chapter cell" in log
    assert "1 failed, 1 passed" in log
