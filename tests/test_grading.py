"""nbgrader: the course folder, and nbgrader's own generate_assignment and autograde on it.

One small assignment (chapter 2, two graded exercises) keeps this cheap: nbgrader executes
the chapter once per submission (about 30 s in all on two cores).
"""

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from mhacore.exercises import EXERCISES
from mhacore.editions.grading import WEEKS, assignment_notebook, write_course
from mhacore.editions.reader import read_book
from mhacore.editions.reader import chapter_sources

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = "02-one-head-is-nw"


def test_every_self_check_becomes_a_graded_hidden_test():
    book = read_book(ROOT)
    for source in chapter_sources(ROOT):
        notebook, labels = assignment_notebook(source, book)
        assert sorted(labels) == sorted(k for k, e in EXERCISES.items()
                                        if e.chapter == source.stem)
        graded = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade")]
        answers = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("solution")]
        assert [c.metadata.nbgrader.grade_id for c in graded] == [f"{x}-test" for x in labels]
        assert [c.metadata.nbgrader.grade_id for c in answers] == [f"{x}-answer" for x in labels]
        for cell in graded:
            assert "### BEGIN HIDDEN TESTS" in cell.source and "_check(" in cell.source
        for cell in answers:
            assert cell.source.startswith("### BEGIN SOLUTION\n")
        assert "{solution}" not in "".join(c.source for c in notebook.cells)
        markdown = "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
        # the student notebooks' Markdown: the site's numbers, author-year citations
        for role in ("{prf:ref}", "{numref}", "{cite", "{ref}", "{eq}", "{glue", "```{"):
            assert role not in markdown, (source.stem, role)
        assert "Solution to" not in markdown, source.stem
        if "{cite" in source.read_text(encoding="utf-8"):
            assert notebook.cells[-1].source.startswith("## References\n"), source.stem
    markdown = "\n".join(c.source for c in assignment_notebook(
        ROOT / "book" / "03-bias-variance-covariance.md", book)[0].cells)
    assert "Theorem 3.1" in markdown and "(Krogh and Vedelsby, 1995)" in markdown


@pytest.mark.parametrize("answer, points", [
    (0.0292, 1), ("0.0292", 1), ([0.0292], 0), ([[0.0292]], 0), (float("nan"), 0),
    ("1,04", 0), ("", 0), (None, 0)])
def test_a_hidden_test_gives_a_point_only_to_one_right_number(answer, points):
    """The hidden test of ex-1-2 run as nbgrader runs it: a list holding the right number
    earns nothing, and no answer makes the test cell fail with anything but an
    AssertionError (which nbgrader scores 0)."""
    from mhacore.editions.grading import hidden_test_cell

    namespace = {"answer": answer}
    try:
        exec(hidden_test_cell("ex-1-2").source, namespace)
        earned = 1
    except AssertionError:
        earned = 0
    assert earned == points


def test_the_weeks_cover_every_chapter_once():
    chapters = sorted(c for week in WEEKS.values() for c in week)
    assert chapters == sorted(s.name[:2] for s in chapter_sources(ROOT))


@pytest.mark.parametrize("weeks, match", [
    ({}, "weeks must be a non-empty dict"),
    ({"w 1": ("02",)}, "assignment names must be letters"),
    ({"w1": ("99",)}, r"names chapters the book lacks: \['99'\]"),
])
def test_bad_weeks(tmp_path, weeks, match):
    with pytest.raises(ValueError, match=match):
        write_course(tmp_path, ROOT, weeks)


def _nbgrader(course, *args):
    env = dict(os.environ, PYTHONPATH=str(ROOT),
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def _submit(course, student, wrong):
    """A submission: the released notebook with each answer cell filled in, by the
    reference solution or by ``wrong[label]``."""
    source = nbformat.read(course / "source" / "week1" / f"{CHAPTER}.ipynb", 4)
    solutions = {c.metadata.nbgrader.grade_id[:-len("-answer")]:
                 c.source.replace("### BEGIN SOLUTION\n", "").replace("\n### END SOLUTION", "")
                 for c in source.cells if c.metadata.get("nbgrader", {}).get("solution")}
    notebook = nbformat.read(course / "release" / "week1" / f"{CHAPTER}.ipynb", 4)
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if grade_id.endswith("-answer"):
            assert cell.source.startswith("answer = None")  # the release hides the solution
            label = grade_id[:-len("-answer")]
            cell.source = wrong.get(label, solutions[label])
    folder = course / "submitted" / student / "week1"
    folder.mkdir(parents=True)
    nbformat.write(notebook, folder / f"{CHAPTER}.ipynb")


def test_nbgrader_generates_and_autogrades(tmp_path):
    from nbgrader.api import Gradebook

    course = write_course(tmp_path / "course", ROOT, {"week1": (CHAPTER[:2],)})
    _nbgrader(course, "generate_assignment", "week1", "--force")
    released = (course / "release" / "week1" / f"{CHAPTER}.ipynb").read_text("utf-8")
    assert "BEGIN SOLUTION" not in released and "HIDDEN TESTS" not in released
    assert ".temperature ** 0.5" not in released  # the reference answer of ex-2-2
    _submit(course, "right", {})
    _submit(course, "wrong", {"ex-2-2": "answer = 3 ** 0.5  # the temperature itself"})
    _nbgrader(course, "autograde", "week1", "--create")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        scores = {}
        for student in ("right", "wrong"):
            submission = gradebook.find_submission("week1", student)
            scores[student] = {g.name: g.score for nb in submission.notebooks
                               for g in nb.grades}
            assert submission.max_score == 2
    assert scores["right"] == {"ex-2-1-test": 1, "ex-2-2-test": 1}
    assert scores["wrong"] == {"ex-2-1-test": 1, "ex-2-2-test": 0}
