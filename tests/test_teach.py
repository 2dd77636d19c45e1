"""Student and instructor notebooks: no solution text, still executable, in sync."""

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import jupytext
import nbformat
import pytest

from mhacore.teach import (GLUE_CELL_KEY, GLUE_IMPORT, INSTRUCTOR_TAG, STUB, chapter_sources,
                           generate, strip_solution_blocks)

ROOT = Path(__file__).resolve().parents[1]
SOLUTION_BLOCK = re.compile(r"^(`{3,}|:{3,})\{solution\}.*?^\1\s*$", re.S | re.M)


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


def test_strip_handles_colon_fences_and_keeps_the_rest():
    text = "Before\n::::{solution} ex-1\nhidden\n::::\nAfter"
    assert strip_solution_blocks(text) == "Before\nAfter"
    with pytest.raises(ValueError, match="unclosed"):
        strip_solution_blocks("```{solution} ex-1\nnever closed")


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


def test_student_notebooks_stay_in_sync_with_the_chapters(student_dir):
    for source in chapter_sources(ROOT):
        chapter = jupytext.read(source)
        kept = [c for c in chapter.cells if INSTRUCTOR_TAG not in c.metadata.get("tags", [])]
        student = nbformat.read(student_dir / f"{source.stem}.ipynb", as_version=4)
        added = [c for c in student.cells if c.metadata.get(GLUE_CELL_KEY)]
        assert len(added) == (GLUE_IMPORT in source.read_text("utf-8"))
        student.cells = [c for c in student.cells if not c.metadata.get(GLUE_CELL_KEY)]
        assert len(student.cells) == len(kept)
        for mine, theirs in zip(student.cells, kept):
            assert mine.cell_type == theirs.cell_type
            if theirs.cell_type == "code" and "solution" in theirs.metadata.get("tags", []):
                assert mine.source == STUB
            elif theirs.cell_type == "code":  # less myst_nb's import: the added cell has glue
                assert mine.source == "\n".join(
                    line for line in theirs.source.split("\n") if line.strip() != GLUE_IMPORT)
                assert GLUE_IMPORT not in mine.source


def test_student_notebooks_execute_and_say_your_turn(student_dir):
    from nbclient import NotebookClient

    for path in sorted(student_dir.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        has_stub = any(c.cell_type == "code" and c.source == STUB for c in nb.cells)
        NotebookClient(nb, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(ROOT / "book")}}).execute()
        outputs = json.dumps([c.get("outputs", []) for c in nb.cells])
        if has_stub:
            assert "Your turn" in outputs, path.name


def test_glued_figures_equations_and_numbers_show_in_the_notebook(student_dir):
    """The book's glue(..., display=False) shows nothing in a plain notebook, and its
    {glue:...} roles are raw text there: the notebooks show them in the cell outputs."""
    from nbclient import NotebookClient

    for path in student_dir.glob("*.ipynb"):
        cells = nbformat.read(path, as_version=4).cells
        assert not [c.source for c in cells if c.cell_type == "markdown"
                    and "{glue" in c.source], path.name
    source = next(s for s in chapter_sources(ROOT) if s.name.startswith("06-"))
    text = source.read_text(encoding="utf-8")
    n_figures, n_equations = text.count("{glue:figure}"), text.count("{glue:math}")
    assert n_figures and n_equations and "{glue:text}" in text  # the chapter exercises all
    nb = nbformat.read(student_dir / f"{source.stem}.ipynb", as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "book")}}).execute()
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
    assert "Solution to" in text and "{solution}" not in text  # kept, as plain markdown
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
