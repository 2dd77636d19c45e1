"""The whole-book PDF: built with Jupyter Book's LaTeX builder from the outputs the strict
build cached (no chapter is executed again), and checked with poppler's tools: every
chapter title, numbered theorems, exercises, figures and the bibliography are there, no
unresolved reference, every font embedded, no missing glyph, and the title page names the
version, commit and date."""

import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book" / "_ext"))
import pdf_structure  # noqa: E402  (the PDF's structure: which pages it leaves out)

import debian_packages as debian  # noqa: E402  (is each Debian package the build opens listed?)

from mhacore.editions.reader import KIND_NAMES, chapter_numbers, page_title, read_book, toc_pages

needs_tex = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("xelatex", "latexmk", "pdfinfo", "pdftotext",
                                      "pdffonts")),
    reason="needs TeX Live and poppler-utils (`.ci/install-debian pdf` installs them)")


def words(text: str) -> str:
    """Text with ligatures unfolded and all whitespace one space (pdftotext wraps lines)."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).replace("- ", "-")


@pytest.fixture(scope="module")
def pdf(html_dir):
    from builds import BUILDS

    build, latex = BUILDS.result("pdf")
    log = build.stdout + build.stderr
    assert build.returncode == 0, log[-5000:]
    assert "Executing notebook" not in log, "the PDF build executed a chapter again"
    text = subprocess.run(["pdftotext", "-layout", str(latex / "book.pdf"), "-"],
                          capture_output=True, text=True, check=True).stdout
    return latex / "book.pdf", text, (latex / "book.log").read_text(errors="replace")


@needs_tex
def test_every_chapter_title_and_a_page_each(pdf, book_tools):
    path, text, _ = pdf
    root = book_tools[0]
    web_only = {root / f"{page}.md" for page in pdf_structure.WEB_ONLY}  # the site's
    titles = [page_title(p.read_text(encoding="utf-8")) for p in toc_pages(root)
              if p not in web_only]  # Bibliography page: LaTeX's own closes the PDF
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
    for needle in ("Theorem 1.1", "Definition 1.1", "Exercise", "Fig. 1.1", "Bibliography",
                   "Nadaraya", "arXiv"):
        assert needle in flat, needle
    # the self-checks show the reply before an answer, not the hidden solution's verdict
    assert "Correct (ex-" not in flat and "Your turn (ex-1-1)" in flat


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
    assert "Text, figures and slides: CC BY 4.0" in first_page, first_page[:500]
    assert "code: MIT" in first_page


@needs_tex
def test_chapters_figures_equations_and_theorems_numbered_as_on_the_site(pdf, html_dir,
                                                                         book_tools):
    """One numbering in every edition: the PDF's chapters are the site's (front matter and
    appendices unnumbered, no empty chapter for the site's Bibliography page), and each label's number in the
    PDF (LaTeX's .aux, or the theorem's printed title) and on the site equals the reader
    notebooks' (mhacore.editions.reader)."""
    path, text, _ = pdf
    root = book_tools[0]
    latex = path.parent
    toc = (latex / "book.toc").read_text(encoding="utf-8")
    chapters = re.findall(r"\\contentsline \{chapter\}\{(\\numberline \{(\d+)\})?(.*?)\}\{\d+\}", toc)
    numbered = {int(n): t for _, n, t in chapters if n}
    titles = {p.stem: page_title(p.read_text(encoding="utf-8")) for p in toc_pages(root)}
    stems = chapter_numbers(root)
    expected = {n: titles[stem] for stem, n in stems.items()}
    assert {n: words(t.replace("\\sphinxhyphen {}", "-")) for n, t in numbered.items()} \
        == {n: words(t) for n, t in expected.items()}
    assert [t for _, n, t in chapters].count("Bibliography") == 1  # LaTeX's, at the end
    aux = (latex / "book.aux").read_text(encoding="utf-8")
    latex_numbers = dict(re.findall(r"\\newlabel\{(?:equation:)?([^}]+)\}\{\{([\d.]+)\}", aux))
    flat = words(text)
    book = read_book(root)
    checked = 0
    for label, target in book.labels.items():
        if target.page not in stems or target.number is None or target.kind == "exercise":
            continue  # exercises carry their numbers in their titles
        page = (html_dir / "book" / f"{target.page}.html").read_text(encoding="utf-8")
        if target.kind == "figure":
            assert latex_numbers[f"book/{target.page}:{label}"] == target.number, label
            assert f'caption-number">Fig. {target.number} ' in page, label
        elif target.kind == "equation":
            assert latex_numbers[f"book/{target.page}:{label}"] == target.number, label
            assert re.search(rf'id="equation-{re.escape(label)}".*?eqno">\({re.escape(target.number)}\)',
                             page, re.S), label
        else:
            name = f"{KIND_NAMES[target.kind]} {target.number}"
            assert f'caption-number">{name} ' in page and name in flat, label
        checked += 1
    assert checked >= 40, checked


needs_dpkg = pytest.mark.skipif(not debian.have_dpkg(), reason="needs Debian's dpkg")


@needs_tex
@needs_dpkg
def test_every_debian_package_the_pdf_uses_is_listed(pdf, tmp_path):
    """A new machine gets the packages of .ci/debian-packages.txt and their
    dependencies: every file the build opened must come from one of them. Leaving a
    needed package out of the list is caught (fonts-freefont-otf holds the FreeFont
    the text is set in; no listed package depends on it)."""
    path = pdf[0]
    files = debian.pdf_build_files(path, path.parent)
    assert not debian.unlisted(files, allowed_dirs=[path.parent])
    shorter = debian.without("fonts-freefont-otf", tmp_path)
    problems = debian.unlisted(files, allowed_dirs=[path.parent], package_list=shorter)
    assert any(p.startswith("fonts-freefont-otf ") for p in problems), problems
