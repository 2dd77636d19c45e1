"""Student and instructor notebooks: no solution text, still executable, in sync, with the
site's numbers and author–year citations (the one converter, mhacore.editions.reader)."""

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import jupytext
import nbformat
import pytest

from mhacore.editions.common import GLUE_CELL_KEY, GLUE_IMPORT, INSTRUCTOR_TAG, STUB
from mhacore.editions.reader import READER_KEY, chapter_sources, cite, plain_markdown, read_book
from mhacore.editions.references import escape_markdown
from mhacore.editions.teach import generate

ROOT = Path(__file__).resolve().parents[1]
SOLUTION_BLOCK = re.compile(r"^(`{3,}|:{3,})\{solution\}.*?^\1\s*$", re.S | re.M)
REFERENCE = re.compile(r"\{(?:prf:ref|numref|eq)\}`([^`<]*)`")  # a bare label, no own text
CITATION = re.compile(r"\{cite(:t)?\}`([^`]*)`")
LEFTOVER_MYST = re.compile(r"\{glue|:::\{|```\{|\{numref\}|\{cite|\{prf:|\{ref\}|\{doc\}|\{eq\}"
                           r"|^\([\w-]+\)=\s*$", re.M)


def solution_texts(source: Path) -> list[str]:
    """Distinctive lines of every solution in a chapter (solution blocks and cells) that
    appear nowhere else in the chapter."""
    text = source.read_text(encoding="utf-8")
    lines = []
    for block in SOLUTION_BLOCK.finditer(text):
        lines += [ln.strip() for ln in block.group(0).splitlines()[1:-1]
                  if len(ln.strip()) > 25 and not ln.strip().startswith(":")]
    rest = SOLUTION_BLOCK.sub("", text)
    for cell in jupytext.read(source).cells:
        if cell.cell_type == "code" and "solution" in cell.metadata.get("tags", []):
            rest = rest.replace(cell.source, "")
            lines += [ln.strip() for ln in cell.source.splitlines() if len(ln.strip()) > 15]
    return [ln for ln in lines if ln not in rest]


@pytest.fixture(scope="module")
def student_dir(tmp_path_factory):
    return generate("student", tmp_path_factory.mktemp("student"), ROOT)


@pytest.fixture(scope="module")
def book():
    return read_book(ROOT)


def markdown_cells(path: Path) -> list[str]:
    return [c.source for c in nbformat.read(path, as_version=4).cells
            if c.cell_type == "markdown"]


def test_solutions_go_with_colon_fences_and_the_rest_stays():
    text = "Before\n::::{solution} ex-1\nhidden\n::::\nAfter"
    assert plain_markdown(text) == "Before\nAfter"
    assert "hidden" in plain_markdown(text, solutions=True)
    with pytest.raises(ValueError, match=r"unclosed \{solution\} block"):
        plain_markdown("```{solution} ex-1\nnever closed")


def test_every_chapter_gets_a_student_notebook(student_dir):
    sources = chapter_sources(ROOT)
    assert len(sources) >= 2
    assert sorted(p.name for p in student_dir.glob("*.ipynb")) == sorted(
        f"{s.stem}.ipynb" for s in sources)


def test_student_readme_sends_no_one_to_the_repository(student_dir):
    readme = (student_dir / "README.md").read_text(encoding="utf-8")
    assert "clone" not in readme and "repository" not in readme  # it holds the solutions
    assert "your instructor provides" in readme and "_build/student-notebooks" in readme


def test_student_notebooks_hold_no_solution_text(student_dir):
    checked = 0
    for source in chapter_sources(ROOT):
        student = (student_dir / f"{source.stem}.ipynb").read_text(encoding="utf-8")
        assert "{solution}" not in student
        assert "{exercise}" not in student and "{cite}" not in student  # plain markdown
        decoded = "\n".join("".join(c["source"]) for c in json.loads(student)["cells"])
        for line in solution_texts(source):
            assert line not in decoded, f"{source.name}: solution text left: {line!r}"
            checked += 1
    assert checked > 0, "no solution text was found in the chapters to check"


def test_student_notebooks_show_numbers_and_author_year_citations(student_dir, book):
    """No bare label or citation key: every reference reads as the site numbers it
    ("Theorem 3.1", "Figure 6.2", "(6.1)") and every citation author–year, with the works
    listed in a references cell at the end."""
    numbered = 0
    for source in chapter_sources(ROOT):
        text = SOLUTION_BLOCK.sub("", source.read_text(encoding="utf-8"))  # what students see
        cells = markdown_cells(student_dir / f"{source.stem}.ipynb")
        markdown = "\n".join(cells)
        assert not LEFTOVER_MYST.search(markdown), (source.stem, LEFTOVER_MYST.search(markdown))
        for label in set(REFERENCE.findall(text)):
            target = book.labels[label.strip()]
            assert escape_markdown(target.name()) in markdown, (source.stem, label)
            numbered += bool(re.fullmatch(r"(\w+ |\()\d+\.\d+\)?", target.name()))
        keys = {k.strip() for _, body in CITATION.findall(text) for k in body.split(",")}
        for key in keys:
            assert re.search(rf"\b{re.escape(key)}\b", markdown) is None, (source.stem, key)
            assert cite([key], book)[1:-1] in markdown, (source.stem, key)
        if keys:  # each work cited, once (solutions may cite more)
            assert cells[-1].startswith("## References\n"), source.stem
            entries = cells[-1].split("\n- ")[1:]
            assert len(entries) >= len(keys) and len(set(entries)) == len(entries), source.stem
    assert numbered >= 20, numbered  # chapter-prefixed numbers (25 today), not just titles
    chapter4 = next(s for s in chapter_sources(ROOT) if s.name.startswith("04-"))
    cell = next(c for c in markdown_cells(student_dir / f"{chapter4.stem}.ipynb")
                if c.startswith("**Why the orthonormal form.**"))
    assert "The summary of (Fokoué, 2026) that" in cell and cell.endswith("of\nDefinition 4.2.")


def test_student_notebooks_stay_in_sync_with_the_chapters(student_dir, book):
    for source in chapter_sources(ROOT):
        chapter = jupytext.read(source)
        kept = [c for c in chapter.cells if INSTRUCTOR_TAG not in c.metadata.get("tags", [])
                and (c.cell_type != "markdown"  # a cell of solutions and targets alone goes
                     or plain_markdown(c.source, book, source.stem).strip())]
        student = nbformat.read(student_dir / f"{source.stem}.ipynb", as_version=4)
        added = [c for c in student.cells if c.metadata.get(GLUE_CELL_KEY)]
        assert len(added) == (GLUE_IMPORT in source.read_text("utf-8"))
        note = student.cells[1]  # after the title
        assert note.metadata.get(READER_KEY) and note.source.startswith("*Student edition")
        student.cells = [c for c in student.cells
                         if not (c.metadata.get(GLUE_CELL_KEY) or c.metadata.get(READER_KEY))]
        assert len(student.cells) == len(kept)
        for mine, theirs in zip(student.cells, kept):
            assert mine.cell_type == theirs.cell_type
            if theirs.cell_type == "code" and "solution" in theirs.metadata.get("tags", []):
                assert mine.source == STUB
            elif theirs.cell_type == "code":  # less myst_nb's import: the added cell has glue
                assert mine.source == "\n".join(
                    line for line in theirs.source.split("\n") if line.strip() != GLUE_IMPORT)
                assert GLUE_IMPORT not in mine.source


def code_cells(nb) -> list[str]:
    """The chapter's code cells of an edition's notebook (not the cells an edition adds)."""
    return [c.source for c in nb.cells
            if c.cell_type == "code" and not c.metadata.get(READER_KEY)]


def test_student_notebooks_execute_and_say_your_turn(student_dir, reader_runs):
    """A student notebook runs the reader notebook's code, cell for cell, so the reader
    notebooks' one execution (in a folder of their own) runs it: no error, and every
    self-check says "Your turn"."""
    written, executed, _ = reader_runs
    for path in sorted(student_dir.glob("*.ipynb")):
        student = nbformat.read(path, as_version=4)
        ran = nbformat.read(executed / path.name, as_version=4)
        assert code_cells(student) == code_cells(ran), path.name
        outputs = [o for c in ran.cells if c.cell_type == "code" for o in c.get("outputs", [])]
        assert not [o for o in outputs if o.output_type == "error"], path.name
        if STUB in code_cells(student):
            assert "Your turn" in json.dumps(outputs), path.name


def test_glued_figures_equations_and_numbers_show_in_the_notebook(student_dir, reader_runs):
    """The book's glue(..., display=False) shows nothing in a plain notebook, and its
    {glue:...} roles are raw text there: the notebooks show them in the cell outputs."""
    written, executed, _ = reader_runs
    for path in student_dir.glob("*.ipynb"):
        cells = nbformat.read(path, as_version=4).cells
        assert not [c.source for c in cells if c.cell_type == "markdown"
                    and "{glue" in c.source], path.name
    source = next(s for s in chapter_sources(ROOT) if s.name.startswith("06-"))
    text = source.read_text(encoding="utf-8")
    n_figures, n_equations = text.count("{glue:figure}"), text.count("{glue:math}")
    assert n_figures and n_equations and "{glue:text}" in text  # the chapter exercises all
    nb = nbformat.read(executed / f"{source.stem}.ipynb", as_version=4)
    assert code_cells(nb) == code_cells(
        nbformat.read(student_dir / f"{source.stem}.ipynb", as_version=4))
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= n_figures
    assert sum("text/latex" in o.get("data", {}) for o in outputs) >= n_equations
    key = re.search(r"\{glue:text\}`([^`:]+)", text).group(1)
    assert any(o.output_type == "stream" and f"{key} = " in o.text for o in outputs)


def test_instructor_pack_zip_has_solutions_and_the_plan(tmp_path):
    archive = generate("instructor", tmp_path / "pack", ROOT, make_zip=True)
    names = zipfile.ZipFile(archive).namelist()
    assert "pack/teaching-plan.md" in names and "pack/README.md" in names
    first = chapter_sources(ROOT)[0]
    text = zipfile.ZipFile(archive).read(f"pack/{first.stem}.ipynb").decode()
    # kept, as plain markdown
    assert "Solution to Exercise 1.1 (The Epanechnikov constants)" in text
    assert "{solution}" not in text and "{prf:ref}" not in text and "{cite}" not in text
    assert json.loads(text)["metadata"]["mhacore_edition"] == "instructor"
    assert GLUE_CELL_KEY in text and "{glue" not in text  # glued values shown here too
    plan = zipfile.ZipFile(archive).read("pack/teaching-plan.md").decode()
    assert "Week 1" in plan and "{ref}" not in plan and "{doc}" not in plan


def test_command_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mhacore", "teach", "student",
                           "--out", str(tmp_path / "s"), "--book", str(ROOT)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert list((tmp_path / "s").glob("*.ipynb"))
    bad = subprocess.run([sys.executable, "-m", "mhacore", "teach", "student", "--out",
                          str(tmp_path / "t"), "--book", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "_toc.yml" in bad.stderr
