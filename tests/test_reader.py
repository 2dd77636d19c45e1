"""Reader notebooks: plain Markdown with the site's numbers, no solutions, and the site's
``.ipynb`` download of every chapter is exactly the reader notebook, which runs top to
bottom in a plain kernel and shows every figure the site shows."""

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from mhacore.editions.references import read_references
from mhacore.editions.reader import (Book, chapter_numbers, cite, edition_notebook, page_labels,
                            plain_markdown, read_book, reader_notebooks)
from mhacore.editions.common import _GLUE_ROLE, STUB
from mhacore.editions.reader import GLUE_CALL, chapter_sources
from mhacore.editions.teach import generate

ROOT = Path(__file__).resolve().parents[1]
LEFTOVER_MYST = re.compile(r"\{glue|:::\{|```\{|\{numref\}|\{cite|\{prf:|\{ref\}|\{doc\}|\{eq\}"
                           r"|^\([\w-]+\)=\s*$", re.M)
CHAPTERS = [s.stem for s in chapter_sources(ROOT)]


def markdown_of(nb) -> str:
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


@pytest.fixture(scope="module")
def readers():
    return reader_notebooks(ROOT)


def test_converter_numbers_labels_like_the_site():
    text = ("(sec-a)=\n## Start\n\n{numref}`fig-b` and {numref}`Panel %s <fig-b>`, "
            "{prf:ref}`thm-c`, {eq}`eq-d`, {ref}`sec-a`.\n\n```{glue:figure} fig-a\n"
            ":name: fig-a\n\nFirst.\n```\n\n```{glue:figure} fig-b\n:name: fig-b\n\nSecond.\n"
            "```\n\n:::{prf:theorem} Big\n:label: thm-c\n\nHolds.\n:::\n\n$$\nx = 1\n$$ (eq-d)\n")
    book = Book(labels=page_labels(text, "03-x", chapter=3))
    out = plain_markdown(text, book, "03-x")
    assert "Figure 3.2 and Panel 3.2, Theorem 3.1, (3.1), Start." in out
    assert "**Figure 3.1.** First." in out and "> **Theorem 3.1 (Big).**" in out
    assert "\\tag{3.1}" in out and not LEFTOVER_MYST.search(out)
    # a label on another page keeps its chapter's number, as on the site
    assert plain_markdown("{prf:ref}`thm-c`", book, "05-y") == "Theorem 3.1"
    # an unnumbered page (front matter, appendix) numbers per page
    assert page_labels(text, "notes")["thm-c"].name() == "Theorem 1"


def test_chapter_numbers_follow_the_numbered_parts():
    numbers = chapter_numbers(ROOT)
    assert numbers["01-nadaraya-watson"] == 1 and numbers["08-three-ensembles"] == 8
    assert sorted(numbers.values()) == list(range(1, 10))
    assert "notation" not in numbers and "ledger" not in numbers


def test_exercises_become_headings_and_solutions_go():
    text = ("```{exercise} 2.1 Sum it\n:label: ex-2-1\n:nonumber:\n\nAdd.\n```\n\n"
            "```{solution} ex-2-1\n:class: dropdown\n\nIt is 4.\n```\n\n"
            "```{exercise} Count\n:label: ex-b\n\nCount.\n```\n")
    book = Book(labels=page_labels(text, "02-x"))
    reader = plain_markdown(text, book, "02-x")
    assert "### Exercise 2.1 Sum it" in reader and "### Exercise 1: Count" in reader
    assert "It is 4" not in reader
    assert "It is 4" in plain_markdown(text, book, "02-x", solutions=True)


def test_exercises_are_named_as_the_site_links_them():
    """A reference to an exercise numbered by hand reads as the site's link text
    (book/_ext/exercise_titles.py), with Markdown's emphasis characters escaped."""
    book = read_book(ROOT)
    assert plain_markdown("See {ref}`ex-1-1`.", book) == \
        "See Exercise 1.1 (The Epanechnikov constants)."
    assert plain_markdown("{ref}`ex-1-2`", book) == \
        r"Exercise 1.2 (Find h\* for a new sample size)"
    solution = plain_markdown("```{solution} ex-1-1\n:class: dropdown\n\nIt is 4.\n```", book,
                              "01-nadaraya-watson", solutions=True)
    assert solution.startswith("> **Solution to Exercise 1.1 (The Epanechnikov constants).**")


def test_every_edition_keeps_what_it_should(readers):
    """One converter, four editions that differ only in what they keep."""
    book = read_book(ROOT)
    source = ROOT / "book" / f"{CHAPTERS[0]}.md"
    editions = {e: edition_notebook(source, book, e) for e in
                ("reader", "student", "instructor", "nbgrader")}
    answers = {e: [c.source for c in nb.cells if c.cell_type == "code"
                   and "check(" in c.source] for e, nb in editions.items()}
    assert answers["reader"] == answers["student"] == answers["instructor"] \
        == answers["nbgrader"] != []  # the self-checks, in every edition
    for edition, nb in editions.items():
        text = markdown_of(nb)
        assert not LEFTOVER_MYST.search(text), edition
        assert nb.metadata["mhacore_edition"] == edition
        assert ("Solution to Exercise 1.1" in text) == (edition == "instructor"), edition
        stubs = [c for c in nb.cells if c.cell_type == "code" and c.source == STUB]
        assert bool(stubs) == (edition in ("reader", "student")), edition
    assert markdown_of(editions["reader"]).replace("*Reader edition", "*Student edition") == \
        markdown_of(editions["student"])
    assert editions["reader"].cells == readers[CHAPTERS[0]].cells
    with pytest.raises(ValueError, match="edition must be one of"):
        edition_notebook(source, book, "teacher")
    with pytest.raises(TypeError, match="book must be a Book .read_book.; got dict"):
        edition_notebook(source, {}, "student")


def test_citations_are_author_year():
    book = read_book(ROOT)
    assert cite(["nadaraya1964", "watson1964"], book) == "(Nadaraya, 1964; Watson, 1964)"
    assert cite(["vaswani2017"], book, textual=True) == "Vaswani et al. (2017)"


def test_reader_notebooks_are_plain_and_hold_no_solution(readers):
    assert sorted(readers) == sorted(CHAPTERS) and len(CHAPTERS) >= 5
    for stem, nb in readers.items():
        text = markdown_of(nb)
        assert not LEFTOVER_MYST.search(text), (stem, LEFTOVER_MYST.search(text).group(0))
        assert "{solution}" not in text and "Solution to" not in text, stem
        assert "solution" not in json.dumps([c.metadata for c in nb.cells]), stem
        assert "instructor-only" not in json.dumps([c.metadata for c in nb.cells]), stem
        if "{cite" in (ROOT / "book" / f"{stem}.md").read_text(encoding="utf-8"):
            assert nb.cells[-1].source.startswith("## References"), stem


def test_reader_notebooks_never_import_myst_nb(readers):
    """A reader's plain Python has no myst_nb: the edition's own cell defines glue()."""
    for stem, nb in readers.items():
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        assert not re.search(r"^\s*(from|import)\s+myst_nb", code, re.M), stem
        if "{glue" in (ROOT / "book" / f"{stem}.md").read_text(encoding="utf-8"):
            assert "def glue(" in code, stem


def test_references_decode_latex_in_author_names(tmp_path):
    bib = tmp_path / "refs.bib"
    bib.write_text("@inproceedings{v2017,\n  author = {Kaiser, {\\L}ukasz and "
                   "Polosukhin, Illia and M{\\\"u}ller, J{\\o}rg},\n"
                   "  title = {Attention},\n  year = {2017},\n  booktitle = {NeurIPS}\n}\n",
                   encoding="utf-8")
    bib.write_text(bib.read_text(encoding="utf-8") + "@article{b1973,\n  author = "
                   "{Bj{\\\"o}rck, {\\AA}ke and Golub, Gene H.},\n  title = {Angles},\n"
                   "  year = {1973},\n  journal = {Math. Comp.}\n}\n", encoding="utf-8")
    refs = read_references(bib)
    ref = refs["v2017"]
    assert ref["entry"].startswith("Kaiser, Ł.; Polosukhin, I.; Müller, J. (2017)."), ref
    assert (ref["who"], ref["year"]) == ("Kaiser et al.", "2017")
    assert (refs["b1973"]["who"], refs["b1973"]["year"]) == ("Björck and Golub", "1973")
    assert "{" not in ref["entry"] and "\\" not in ref["entry"]
    book = read_book(ROOT)
    assert all("{" not in r["entry"] and "\\" not in r["entry"]
               for r in book.references.values())


def site_figures(page: Path) -> int:
    """Figures a built chapter page shows (numbered captions of figures)."""
    return len(re.findall(r'caption-number">Fig\. \d+', page.read_text(encoding="utf-8")))


def test_site_download_is_the_reader_notebook_and_runs(html_dir, reader_runs):
    """Every chapter's .ipynb download on the site equals ``teach reader``'s notebook, runs
    top to bottom in a plain kernel in a folder of its own, shows at least as many
    images as the page has figures, and its self-checks say "Your turn"."""
    html = html_dir
    written, executed, _ = reader_runs
    counts = {}
    for stem in CHAPTERS:
        download = html / "_sources" / "book" / f"{stem}.ipynb"
        page = (html / "book" / f"{stem}.html").read_text(encoding="utf-8")
        assert f'_sources/book/{stem}.ipynb"' in page, f"{stem}: no .ipynb download"
        assert download.read_bytes() == (written / f"{stem}.ipynb").read_bytes(), stem
        nb = nbformat.read(executed / f"{stem}.ipynb", as_version=4)
        has_stub = any(c.cell_type == "code" and c.source == STUB for c in nb.cells)
        outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
        errors = [o for o in outputs if o.get("output_type") == "error"]
        assert not errors, (stem, errors[:1])
        images = sum("image/png" in o.get("data", {}) for o in outputs)
        figures = site_figures(html / "book" / f"{stem}.html")
        counts[stem] = (figures, images)
        assert images >= figures, f"{stem}: {images} images, {figures} figures on the site"
        equations = (ROOT / "book" / f"{stem}.md").read_text(encoding="utf-8").count(
            "{glue:math}")
        shown = sum("text/latex" in o.get("data", {}) for o in outputs)
        assert shown >= equations, f"{stem}: {shown} of {equations} glued equations shown"
        if has_stub:
            text = json.dumps(outputs)
            assert "Your turn" in text and "Correct" not in text, stem
    print("figures on the site / images in the reader notebook:", counts)


def test_site_offers_each_notebook_with_the_outputs_it_shows(html_dir, reader_runs):
    """Beside the notebook to run, each chapter offers it with the build's outputs: the
    same cells, every figure and glued value, the self-checks' "Your turn", and the
    numbers a reader's own run of the notebook prints."""
    written, executed, _ = reader_runs
    for stem in CHAPTERS:
        page = (html_dir / "book" / f"{stem}.html").read_text(encoding="utf-8")
        assert f'_sources/book/{stem}-outputs.ipynb"' in page, stem
        shown = nbformat.read(html_dir / "_sources" / "book" / f"{stem}-outputs.ipynb",
                              as_version=4)
        ran = nbformat.read(executed / f"{stem}.ipynb", as_version=4)
        assert [c.source for c in shown.cells] == [c.source for c in ran.cells]
        outputs = [o for c in shown.cells if c.cell_type == "code" for o in c.outputs]
        assert not [o for o in outputs if o.output_type == "error"], stem
        images = sum("image/png" in o.get("data", {}) for o in outputs)
        assert images >= site_figures(html_dir / "book" / f"{stem}.html"), stem
        if any(c.source == STUB for c in shown.cells):
            assert "Your turn" in json.dumps(outputs) and "Correct" not in json.dumps(outputs)

        keys = {m.group(1).strip() for m in _GLUE_ROLE.finditer(
            (ROOT / "book" / f"{stem}.md").read_text(encoding="utf-8"))}

        def glued(nb):  # the "key = value" lines glue() prints for the text's numbers
            return sorted(line for c in nb.cells if c.cell_type == "code"
                          for o in c.get("outputs", []) if o.output_type == "stream"
                          for line in o.text.splitlines()
                          if line.split(" = ", 1)[0] in keys)
        assert glued(shown) == glued(ran), stem


def test_command_line_writes_the_reader_edition(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mhacore", "teach", "reader",
                           "--out", str(tmp_path / "r"), "--book", str(ROOT)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.stem for p in (tmp_path / "r").glob("*.ipynb")) == sorted(CHAPTERS)


# --- alt text in every edition (issue 26) ----------------------------------------------

PIXEL = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJ"
         "RU5ErkJggg==")  # a 1x1 PNG


def test_every_edition_describes_its_figures():
    """Each code cell that draws a figure carries the alt text of its ``{glue:figure}``,
    in every notebook edition and in the nbgrader course."""
    from mhacore.editions.grading import assignment_notebook
    from mhacore.editions.reader import ALT_KEY, figure_alt_texts

    book = read_book(ROOT)
    total = 0
    for source in chapter_sources(ROOT):
        alts = figure_alt_texts(source.read_text(encoding="utf-8"))
        total += len(alts)
        notebooks = [edition_notebook(source, book, e)
                     for e in ("reader", "student", "instructor", "nbgrader")]
        for notebook in notebooks + [assignment_notebook(source, book)[0]]:
            described = {key: cell.metadata[ALT_KEY] for cell in notebook.cells
                         if ALT_KEY in cell.metadata
                         for key in GLUE_CALL.findall(cell.source)
                         if key.startswith("fig-")}
            assert described == alts, source.stem
    assert total >= 15


def test_notebook_html_describes_every_figure():
    """The reader notebook with the build's outputs (the site's download) describes each
    figure in its output's metadata, and nbconvert's classic HTML (what nbgrader's
    formgrader and feedback use) writes it into every ``<img>``: no stand-in, no warning."""
    import jupytext
    from bs4 import BeautifulSoup
    from nbconvert import HTMLExporter

    from mhacore.editions.reader import figure_alt_texts, with_outputs

    source = ROOT / "book" / "01-nadaraya-watson.md"
    alts = figure_alt_texts(source.read_text(encoding="utf-8"))
    executed = jupytext.read(source)  # as the build executes it: each figure glued
    prefix = "application/papermill.record/"
    for cell in executed.cells:
        for key in [k for k in GLUE_CALL.findall(cell.source) if k.startswith("fig-")]:
            cell.outputs = [nbformat.v4.new_output(
                "display_data", data={f"{prefix}image/png": PIXEL,
                                      f"{prefix}text/plain": "<Figure>"},
                metadata={"scrapbook": {"name": key, "mime_prefix": prefix}})]
    reader = edition_notebook(source, read_book(ROOT), "reader")
    notebook = with_outputs(reader, executed)
    shown = [o.metadata["image/png"]["alt"] for c in notebook.cells if c.cell_type == "code"
             for o in c.outputs if "image/png" in o.get("data", {})]
    assert sorted(shown) == sorted(alts.values()) and len(shown) == 2
    exporter = HTMLExporter(template_name="classic")
    html, _ = exporter.from_notebook_node(notebook)
    images = BeautifulSoup(html, "html.parser").find_all("img")
    assert sorted(i.get("alt") for i in images) == sorted(alts.values())


# --- the converter's words in another language (issue 26: Chinese reader notebooks) -----

def test_converter_writes_its_words_in_the_books_language():
    """With a Book's ``words`` (mhacore.editions.translated.WORDS) the labels, the
    notebook's note and the comments of the cells it adds are in that language; without
    them, English (tests/test_zh_notebooks.py checks the Chinese notebooks whole)."""
    from mhacore.editions.translated import WORDS

    text = ("```{glue:figure} fig-a\n:name: fig-a\n\nFirst.\n```\n\n:::{prf:theorem} Big\n"
            ":label: thm-c\n\nHolds.\n:::\n\n:::{prf:proof}\nSo.\n:::\n\n{prf:ref}`thm-c`, "
            "{numref}`fig-a`.\n")
    labels = page_labels(text, "03-x", chapter=3)
    chinese = plain_markdown(text, Book(labels=labels, language="zh_CN",
                                        words=WORDS["zh_CN"]), "03-x")
    assert "**图 3.1** First. *（由上方的代码单元绘制）*" in chinese
    assert "> **定理 3.1（Big）**" in chinese and "> *证明。*" in chinese
    assert "定理 3.1, 图 3.1." in chinese and "Theorem" not in chinese
    english = plain_markdown(text, Book(labels=labels), "03-x")
    assert "> **Theorem 3.1 (Big).**" in english and "Theorem 3.1, Figure 3.1." in english
    source = ROOT / "book" / f"{CHAPTERS[0]}.md"
    book = read_book(ROOT, texts={CHAPTERS[0]: "# 标题\n"}, language="zh_CN",
                     words=WORDS["zh_CN"])
    assert book.titles[CHAPTERS[0]] == "标题"
    assert book.prose_words == read_book(ROOT).prose_words  # the English pages' reading times
    nb = edition_notebook(source, book, "student")
    assert nb.cells[1].source.startswith("*学生版")
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert first.source.endswith('mhacore.set_language("zh_CN")\n# 各单元打印和显示的内容也用中文，与本书页面上一致\n'
                                 'mhacore.i18n.translate_outputs()')
    assert all(c.source != STUB for c in nb.cells) and any(
        c.source.startswith("# 轮到你了") for c in nb.cells)
