"""The whole-book PDF: built with Jupyter Book's LaTeX builder from the outputs the strict
build cached (no chapter is executed again), and checked with poppler's tools: every
chapter title, numbered theorems, exercises, figures and the bibliography are there, no
unresolved reference, every font embedded, no missing glyph, and the title page names the
version, commit and date."""

import re
import shutil
import subprocess
import unicodedata

import pytest
import yaml

from mhacore.reader import page_title, toc_pages

needs_tex = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("xelatex", "latexmk", "pdfinfo", "pdftotext",
                                      "pdffonts")),
    reason="needs TeX Live and poppler-utils (`.ci/install-debian pdf` installs them)")


def words(text: str) -> str:
    """Text with ligatures unfolded and all whitespace one space (pdftotext wraps lines)."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).replace("- ", "-")


@pytest.fixture(scope="module")
def pdf(strict_build, book_cache, book_tools):
    root, _, jupyter_book = book_tools
    proc, html = strict_build
    if proc.returncode != 0:
        pytest.fail("the strict build failed; see test_strict_build_has_no_warnings")
    out = html.parent.parent
    build = jupyter_book("build", "-W", "-n", "--keep-going", "--builder", "pdflatex",
                         "--path-output", out, root, cache=book_cache)
    log = build.stdout + build.stderr
    latex = out / "_build" / "latex"
    assert build.returncode == 0, log[-5000:]
    assert "Executing notebook" not in log, "the PDF build executed a chapter again"
    text = subprocess.run(["pdftotext", "-layout", str(latex / "book.pdf"), "-"],
                          capture_output=True, text=True, check=True).stdout
    return latex / "book.pdf", text, (latex / "book.log").read_text(errors="replace")


@needs_tex
def test_every_chapter_title_and_a_page_each(pdf, book_tools):
    path, text, _ = pdf
    root = book_tools[0]
    titles = [page_title(p.read_text(encoding="utf-8")) for p in toc_pages(root)]
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True,
                          check=True).stdout
    pages = int(re.search(r"^Pages:\s+(\d+)", info, re.M).group(1))
    assert pages >= len(titles)
    flat = words(text)
    missing = [t for t in titles if words(t) not in flat]
    assert not missing
    print(f"book.pdf: {pages} pages")


@needs_tex
def test_theorems_exercises_figures_and_bibliography(pdf):
    _, text, _ = pdf
    flat = words(text)
    for needle in ("Theorem 1", "Definition 1", "Exercise", "Fig. 1", "Bibliography",
                   "Nadaraya", "arXiv"):
        assert needle in flat, needle


@needs_tex
def test_no_unresolved_reference_and_no_missing_glyph(pdf):
    _, text, log = pdf
    assert "??" not in text
    unresolved = r"LaTeX Warning: (?:Hyper reference|Reference|Citation) .* undefined"
    assert not re.findall(unresolved, log)  # broken internal links and citations
    assert not re.findall(r"Missing character: .*", log)


@needs_tex
def test_every_font_is_embedded(pdf):
    path, _, _ = pdf
    fonts = subprocess.run(["pdffonts", str(path)], capture_output=True, text=True,
                           check=True).stdout.splitlines()[2:]
    assert fonts
    # columns: name type encoding emb sub uni object ID; "emb" is the 4th from the end
    assert not [f for f in fonts if f.split()[-5] != "yes"]


@needs_tex
def test_title_page_names_version_commit_and_date(pdf):
    from mhacore import __version__

    _, text, _ = pdf
    first_page = words(text.split("\f")[0])
    assert re.search(rf"{re.escape(__version__)}, commit \w+\+?, built \d{{4}}-\d\d-\d\d",
                     first_page), first_page[:500]
