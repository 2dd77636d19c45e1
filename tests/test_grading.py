"""nbgrader: the course folder, and nbgrader's own generate_assignment and autograde on it.

One small assignment (chapter 2: two autograded exercises, three written workings graded
by hand) keeps this cheap: nbgrader executes the chapter once per submission (about 30 s
in all on two cores).
"""

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from mhacore.exercises import EXERCISES
from mhacore.editions.grading import (
    MARK_SCHEME,
    POINTS,
    WEEKS,
    WORKING_POINTS,
    assignment_notebook,
    manual_points,
    write_course,
)
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
        meta = [c.metadata.get("nbgrader", {}) for c in notebook.cells]
        graded = [c for c, m in zip(notebook.cells, meta) if m.get("grade")
                  and not m.get("solution")]
        answers = [c for c, m in zip(notebook.cells, meta) if m.get("solution")
                   and not m.get("grade")]
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


def test_every_exercise_has_its_working_graded_by_hand_with_a_rubric():
    """After each exercise (after its self-check and hidden test, if any; before the next
    heading), a manually graded Markdown answer cell for the written working and a locked
    rubric cell whose mark scheme lists the steps of the chapter's own solution."""
    from mhacore.editions.answer_key import exercise_blocks
    from mhacore.editions.grading import solution_steps

    book = read_book(ROOT)
    for source in chapter_sources(ROOT):
        text = source.read_text(encoding="utf-8")
        exercises = [label for label, _, _ in exercise_blocks(text)]
        notebook, labels = assignment_notebook(source, book)
        cells = notebook.cells
        meta = [c.metadata.get("nbgrader", {}) for c in cells]
        assert manual_points(notebook) == {f"{x}-working": WORKING_POINTS for x in exercises}
        for label in exercises:
            at = next(i for i, m in enumerate(meta) if m.get("grade_id") == f"{label}-working")
            working, rubric = cells[at], cells[at + 1]
            assert working.cell_type == rubric.cell_type == "markdown"
            assert meta[at] == {"grade": True, "solution": True, "task": False, "locked": False,
                                "points": WORKING_POINTS, "grade_id": f"{label}-working",
                                "schema_version": 3}
            assert meta[at + 1] == {"grade": False, "solution": False, "task": False,
                                    "locked": True, "grade_id": f"{label}-rubric",
                                    "schema_version": 3}
            assert "### BEGIN SOLUTION\n" in working.source  # the model answer
            scheme = rubric.source.split(MARK_SCHEME[0])[1].split(MARK_SCHEME[1])[0]
            assert "**2 points**" in scheme and "**1 point**" in scheme and "**0 points**" in scheme
            steps = solution_steps(working.source.split("### BEGIN SOLUTION\n")[1]
                                   .split("\n### END SOLUTION")[0])
            assert len(steps) >= 2, label
            for k, step in enumerate(steps, 1):
                assert f"{k}. {step.split(chr(10))[0]}" in scheme, (label, k)
            # the exercise's heading comes before it, with nothing but its own cells between
            heading = max(i for i in range(at) if cells[i].cell_type == "markdown"
                          and cells[i].source.startswith("### Exercise "))
            number = label.removeprefix("ex-").replace("-", ".")
            assert cells[heading].source.startswith(f"### Exercise {number} "), label
            between = [m.get("grade_id", "") for m in meta[heading + 1:at] if m]
            assert all(g.startswith(label + "-") for g in between), (label, between)
            if label in labels:
                assert between == [f"{label}-answer", f"{label}-test"]
            after = cells[at + 2] if at + 2 < len(cells) else None
            assert after is None or after.cell_type == "markdown" and \
                after.source.startswith("#"), label  # the next heading, or the references
    ex_1_3 = assignment_notebook(ROOT / "book" / "01-nadaraya-watson.md", book)[0]
    rubric = next(c.source for c in ex_1_3.cells
                  if c.metadata.get("nbgrader", {}).get("grade_id") == "ex-1-3-rubric")
    assert "2. The optimal $h$ shrinks only as fast as keeps $n h^{d}$ growing" in rubric


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


def _submit(course, student, wrong, working=None):
    """A submission: the released notebook with each answer cell filled in, by the
    reference solution or by ``wrong[label]``, and each working cell by ``working``
    (left as released when None)."""
    source = nbformat.read(course / "source" / "week1" / f"{CHAPTER}.ipynb", 4)
    solutions = {c.metadata.nbgrader.grade_id[:-len("-answer")]:
                 c.source.replace("### BEGIN SOLUTION\n", "").replace("\n### END SOLUTION", "")
                 for c in source.cells if c.metadata.get("nbgrader", {}).get("solution")
                 and c.cell_type == "code"}
    notebook = nbformat.read(course / "release" / "week1" / f"{CHAPTER}.ipynb", 4)
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if grade_id.endswith("-answer"):
            assert cell.source.startswith("answer = None")  # the release hides the solution
            label = grade_id[:-len("-answer")]
            cell.source = wrong.get(label, solutions[label])
        if grade_id.endswith("-working"):
            assert cell.source.endswith("\n\nYOUR ANSWER HERE")  # and the model answer
            cell.source = working or cell.source
    folder = course / "submitted" / student / "week1"
    folder.mkdir(parents=True)
    nbformat.write(notebook, folder / f"{CHAPTER}.ipynb")


def _by_id(notebook):
    return {c.metadata["nbgrader"]["grade_id"]: c for c in notebook.cells
            if "grade_id" in c.metadata.get("nbgrader", {})}


def test_nbgrader_generates_and_autogrades(tmp_path):
    """The course through nbgrader: the release hides solutions, hidden tests and rubrics;
    autograde scores the hidden tests, leaves each written working to a grader with its
    rubric restored beside it (what the formgrader shows), and the feedback students get
    shows their grades and the figures' alt text but no rubric."""
    from nbgrader.api import Gradebook

    from mhacore.editions.reader import figure_alt_texts

    course = write_course(tmp_path / "course", ROOT, {"week1": (CHAPTER[:2],)})
    source = nbformat.read(course / "source" / "week1" / f"{CHAPTER}.ipynb", 4)
    manual = {f"ex-2-{k}-working": WORKING_POINTS for k in (1, 2, 3)}
    assert manual_points(source) == manual
    solution_of_2_3 = "Slightly fewer, and nearly constant."  # the chapter's, in the rubric
    assert solution_of_2_3 in _by_id(source)["ex-2-3-rubric"].source
    _nbgrader(course, "generate_assignment", "week1", "--force")
    released = (course / "release" / "week1" / f"{CHAPTER}.ipynb").read_text("utf-8")
    assert "BEGIN SOLUTION" not in released and "HIDDEN TESTS" not in released
    assert "MARK SCHEME" not in released and "Rubric for graders" not in released
    assert ".temperature ** 0.5" not in released  # the reference answer of ex-2-2
    assert solution_of_2_3 not in released and "Slightly fewer" not in released
    release = _by_id(nbformat.reads(released, 4))
    for grade_id in manual:  # in the release: the prompt, and room for the answer
        assert release[grade_id].source.endswith("graded by hand: the steps that lead to your "
                                                 "answer, in words and formulas (for a "
                                                 "computation, what you ran and what it "
                                                 "shows).\n\nYOUR ANSWER HERE")
        rubric = release[grade_id.replace("-working", "-rubric")]
        assert rubric.source.startswith("*Your working on Exercise 2.")
        assert rubric.source.strip().endswith("0 for nothing usable.*") or \
            rubric.source.strip().endswith("(1 point).*")
    _submit(course, "right", {}, working="I expanded both squared distances; the "
                                         "cross terms give the ratio.")
    _submit(course, "wrong", {"ex-2-2": "answer = 3 ** 0.5  # the temperature itself"})
    _nbgrader(course, "autograde", "week1", "--create")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        scores, waiting = {}, {}
        for student in ("right", "wrong"):
            submission = gradebook.find_submission("week1", student)
            grades = [g for nb in submission.notebooks for g in nb.grades]
            scores[student] = {g.name: g.score for g in grades if g.name.endswith("-test")}
            waiting[student] = {g.name: (g.max_score, g.auto_score, g.needs_manual_grade)
                                for g in grades if g.name.endswith("-working")}
            assert submission.max_score == 2 * POINTS + 3 * WORKING_POINTS
        assert scores["right"] == {"ex-2-1-test": 1, "ex-2-2-test": 1}
        assert scores["wrong"] == {"ex-2-1-test": 1, "ex-2-2-test": 0}
        # written working: for a grader (the formgrader's "needs manual grade"); an
        # untouched cell scores 0 at once
        assert waiting["right"] == {g: (WORKING_POINTS, None, True) for g in manual}
        assert waiting["wrong"] == {g: (WORKING_POINTS, 0, False) for g in manual}
        for grade_id, points in zip(sorted(manual), (2, 1, 0)):  # a grader's marks
            gradebook.find_grade(grade_id, CHAPTER, "week1", "right").manual_score = points
        gradebook.db.commit()
        gradebook.db.expire_all()
        assert gradebook.find_submission("week1", "right").score == 2 + 3
    graded = _by_id(nbformat.read(course / "autograded" / "right" / "week1" /
                                  f"{CHAPTER}.ipynb", 4))
    for grade_id in manual:  # the grader reads the rubric beside the answer
        rubric = graded[grade_id.replace("-working", "-rubric")].source
        assert MARK_SCHEME[0] in rubric and "Rubric for graders" in rubric
    assert solution_of_2_3 in graded["ex-2-3-rubric"].source
    _nbgrader(course, "generate_feedback", "week1")
    feedback = (course / "feedback" / "right" / "week1" / f"{CHAPTER}.html").read_text("utf-8")
    assert "Rubric for graders" not in feedback and solution_of_2_3 not in feedback
    assert "the cross terms give the ratio" in feedback
    alt = figure_alt_texts((ROOT / "book" / f"{CHAPTER}.md").read_text(encoding="utf-8"))
    assert len(alt) == 1 and f'alt="{next(iter(alt.values()))}"' in feedback
    assert "No description has been provided" not in feedback
