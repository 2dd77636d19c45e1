"""An nbgrader course folder made from the book's chapters: one assignment per course week.

``python -m mhacore teach nbgrader --out DIR`` writes

- ``DIR/nbgrader_config.py``: the course id, and a solution stub (``answer = None``) so an
  unanswered notebook still runs top to bottom and scores zero on that exercise;
- ``DIR/source/<week>/<chapter>.ipynb``: each chapter of the week as the student notebook
  shows it, except that every answer cell keeps the reference solution between
  ``### BEGIN SOLUTION`` and ``### END SOLUTION`` (an nbgrader solution cell), and after
  every self-check a graded test cell (1 point) asserts, inside ``### BEGIN HIDDEN TESTS``,
  that :func:`mhacore.exercises.check` accepts the answer: the same reference and
  precision as the self-check the student sees.

From there nbgrader's own commands run the course (in ``DIR``):
``nbgrader generate_assignment week1`` writes the release version without solutions or
hidden tests, and ``nbgrader autograde week1`` grades what students submit. The
notebooks carry standard nbgrader metadata, so the nbgrader extensions for JupyterHub and
any LMS bridge that reads nbgrader's gradebook work unchanged.
"""

from __future__ import annotations

import re
from pathlib import Path

# The course weeks of book/course.md, by chapter number.
WEEKS = {"week1": ("01", "02"), "week2": ("03",), "week3": ("04", "05"),
         "week4": ("06", "07", "08")}
POINTS = 1
CONFIG = '''\
# nbgrader configuration of the course made by `python -m mhacore teach nbgrader`.
c = get_config()  # noqa: F821 (nbgrader provides it)
c.CourseDirectory.course_id = "mha-nw"
# An unanswered exercise leaves `answer = None`: its self-check says "your turn", the
# notebook runs on, and the hidden test of that exercise scores 0.
c.ClearSolutions.code_stub = {"python": "answer = None  # YOUR ANSWER HERE"}
c.ExecutePreprocessor.timeout = 600
'''


def _nbgrader(cell, grade_id: str, *, solution: bool, grade: bool) -> None:
    cell.metadata["nbgrader"] = {"grade": grade, "grade_id": grade_id, "locked": grade,
                                 "schema_version": 3, "solution": solution, "task": False}
    if grade:
        cell.metadata["nbgrader"]["points"] = POINTS


def hidden_test_cell(label: str):
    """The graded, hidden test of exercise ``label``: the self-check must accept ``answer``.

    Examples
    --------
    >>> print(hidden_test_cell("ex-1-1").source)
    # Autograder test of ex-1-1 (1 point).
    ### BEGIN HIDDEN TESTS
    from mhacore.exercises import check as _check
    assert _check("ex-1-1", answer).correct, _check("ex-1-1", answer).message
    ### END HIDDEN TESTS
    """
    import nbformat

    cell = nbformat.v4.new_code_cell(
        f"# Autograder test of {label} ({POINTS} point).\n"
        "### BEGIN HIDDEN TESTS\n"
        "from mhacore.exercises import check as _check\n"
        f'assert _check("{label}", answer).correct, _check("{label}", answer).message\n'
        "### END HIDDEN TESTS")
    _nbgrader(cell, f"{label}-test", solution=False, grade=True)
    return cell


def assignment_notebook(source: Path, book):
    """The nbgrader source notebook of one chapter (nbformat).

    The chapter's nbgrader edition (:func:`mhacore.editions.reader.edition_notebook`: Markdown as
    in the student notebooks, with the numbers and citations of ``book``, a
    :class:`mhacore.editions.reader.Book`), with each answer cell an nbgrader solution cell and a
    hidden graded test after each self-check. Returns the notebook and the labels of its
    graded exercises.
    """
    from .reader import edition_notebook
    from .common import SELF_CHECK, SOLUTION_TAG

    notebook = edition_notebook(source, book, "nbgrader")
    cells, labels = [], []
    for cell in notebook.cells:
        tags = cell.metadata.get("tags", [])
        cells.append(cell)
        if cell.cell_type == "markdown":
            continue
        if SOLUTION_TAG in tags:
            cell.metadata["tags"] = [t for t in tags if t not in (SOLUTION_TAG, "remove-cell")]
            cell.source = f"### BEGIN SOLUTION\n{cell.source}\n### END SOLUTION"
            _nbgrader(cell, f"answer-{len(labels) + 1}", solution=True, grade=False)
            continue
        match = SELF_CHECK.search(cell.source)
        if match:
            labels.append(match.group(1))
            cells.append(hidden_test_cell(match.group(1)))
    for at, cell in enumerate(cells):  # answer cells are named after the exercise they answer
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if grade_id.startswith("answer-"):
            cell.metadata["nbgrader"]["grade_id"] = f"{labels[int(grade_id[7:]) - 1]}-answer"
    notebook.cells = cells
    return notebook, labels


def write_course(out: Path, book_root: Path = Path("."), weeks: dict | None = None) -> Path:
    """Write the nbgrader course folder ``out``; return it.

    Parameters
    ----------
    out : Path
        The course folder (created).
    book_root : Path
        The repository root holding ``_toc.yml`` and ``book/``.
    weeks : dict of str to tuple of str, optional
        Assignment name to the chapter numbers it covers; :data:`WEEKS` by default.
    """
    from .reader import chapter_sources, read_book

    weeks = WEEKS if weeks is None else weeks
    if not isinstance(weeks, dict) or not weeks:
        raise ValueError(f"weeks must be a non-empty dict of assignment -> chapters; "
                         f"got {weeks!r}")
    sources = {s.name[:2]: s for s in chapter_sources(Path(book_root))}
    if not sources:
        raise ValueError(f"book_root must hold _toc.yml and MyST chapters; none in {book_root}")
    out = Path(out)
    for week, chapters in weeks.items():
        if not re.fullmatch(r"[A-Za-z0-9_-]+", str(week)):
            raise ValueError(f"assignment names must be letters, digits, - or _; got {week!r}")
        missing = [c for c in chapters if c not in sources]
        if missing:
            raise ValueError(f"weeks[{week!r}] names chapters the book lacks: {missing}")
    import nbformat

    book = read_book(book_root)
    for week, chapters in weeks.items():
        folder = out / "source" / week
        folder.mkdir(parents=True, exist_ok=True)
        for chapter in chapters:
            notebook, _ = assignment_notebook(sources[chapter], book)
            nbformat.write(notebook, folder / f"{sources[chapter].stem}.ipynb")
    (out / "nbgrader_config.py").write_text(CONFIG, encoding="utf-8")
    return out
