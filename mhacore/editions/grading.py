"""An nbgrader course folder made from the book's chapters: one assignment per course week.

``python -m mhacore teach nbgrader --out DIR`` writes

- ``DIR/nbgrader_config.py``: the course id, and a solution stub (``answer = None``) so an
  unanswered notebook still runs top to bottom and scores zero on that exercise;
- ``DIR/source/<week>/<chapter>.ipynb``: each chapter of the week as the student notebook
  shows it, except that every answer cell keeps the reference solution between
  ``### BEGIN SOLUTION`` and ``### END SOLUTION`` (an nbgrader solution cell), and after
  every self-check a graded test cell (1 point) asserts, inside ``### BEGIN HIDDEN TESTS``,
  that :func:`mhacore.exercises.check` accepts the answer: the same reference and
  precision as the self-check the student sees; and after every exercise, self-checked
  or not, a manually graded answer cell for the student's written working
  (:data:`WORKING_POINTS` points) followed by a locked rubric cell, whose criteria and
  reference steps (the exercise's ``{solution}`` in the chapter, read when the course is
  written) sit between ``=== BEGIN MARK SCHEME ===`` and ``=== END MARK SCHEME ===``.

From there nbgrader's own commands run the course (in ``DIR``):
``nbgrader generate_assignment week1`` writes the release version without solutions,
hidden tests or mark schemes (the working cells read "YOUR ANSWER HERE", the rubric cells
keep only the line saying how the working is graded), and ``nbgrader autograde week1``
grades what students submit: the hidden tests score, every working cell waits in the
formgrader for a grader (``needs_manual_grade``), and the rubric cell under it is
restored from the source, so the grader reads the criteria beside the answer. The
course's ``nbgrader_config.py`` lets the mark schemes sit in locked cells that are not
task cells (``ClearMarkScheme.enforce_metadata``) and clears them from the feedback
students get (``nbgrader generate_feedback``). The notebooks carry standard nbgrader
metadata, so the nbgrader extensions for JupyterHub and any LMS bridge that reads
nbgrader's gradebook work unchanged.

The answers and rubrics are never part of this package: they are read from the book's
chapters each time the course is written, as the answer key is
(:mod:`mhacore.editions.answer_key`).
"""

from __future__ import annotations

import re
from pathlib import Path

# The course weeks of book/course.md, by chapter number.
WEEKS = {"week1": ("01", "02"), "week2": ("03",), "week3": ("04", "05"),
         "week4": ("06", "07", "08", "09")}
POINTS = 1  # each self-check's hidden test
# Each exercise's written working, graded by hand: 2 complete and correct, 1 the right
# approach with a gap or a slip, 0 nothing usable (book/course.md, "Grading").
WORKING_POINTS = 2
MARK_SCHEME = ("=== BEGIN MARK SCHEME ===", "=== END MARK SCHEME ===")
CONFIG = '''\
# nbgrader configuration of the course made by `python -m mhacore teach nbgrader`.
c = get_config()  # noqa: F821 (nbgrader provides it)
c.CourseDirectory.course_id = "mha-nw"
# An unanswered exercise leaves `answer = None`: its self-check says "your turn", the
# notebook runs on, and the hidden test of that exercise scores 0.
c.ClearSolutions.code_stub = {"python": "answer = None  # YOUR ANSWER HERE"}
c.ExecutePreprocessor.timeout = 600
# The rubric under each working cell is a locked Markdown cell (not a task cell: the points
# are the working cell's); its mark scheme is cleared from the release and restored from
# the source by autograde, so the formgrader shows it to the grader.
c.ClearMarkScheme.enforce_metadata = False
# The feedback students get shows their graded notebook without the rubrics (which quote
# the chapter's solutions); delete the `c.GenerateFeedback.preprocessors` line to hand
# the rubrics out with the grades.
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor  # noqa: E402
from nbgrader.preprocessors import ClearMarkScheme, GetGrades  # noqa: E402

c.GenerateFeedback.preprocessors = [GetGrades, ClearMarkScheme, CSSHTMLHeaderPreprocessor]
'''


def _nbgrader(cell, grade_id: str, *, solution: bool, grade: bool,
              points: int = POINTS) -> None:
    """nbgrader's cell metadata (schema 3): an autograded test (``grade``), an answer
    (``solution``), a manually graded answer (both) or a locked cell (neither)."""
    cell.metadata["nbgrader"] = {"grade": grade, "grade_id": grade_id,
                                 "locked": not solution, "schema_version": 3,
                                 "solution": solution, "task": False}
    if grade:
        cell.metadata["nbgrader"]["points"] = points


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


# Abbreviations after which a full stop ends no sentence (the rubric's steps).
_ABBREVIATIONS = ("e.g.", "i.e.", "cf.", "vs.", "i.i.d.", "al.", "approx.")
_SPANS = re.compile(r"\$\$.*?\$\$|\$[^$\n]*\$|`[^`]*`", re.S)  # never cut inside these
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z*(\[\u0001])")


def _sentences(paragraph: str) -> list[str]:
    """A prose paragraph cut at its sentences; math and code spans are never cut.

    >>> _sentences("It is $1.5$. So `a. B` holds, e.g. Here. Done!")
    ['It is $1.5$.', 'So `a. B` holds, e.g. Here.', 'Done!']
    """
    spans = []

    def hide(match):
        spans.append(match.group(0))
        return f"\u0001{len(spans) - 1}\u0002"

    text = _SPANS.sub(hide, " ".join(paragraph.split()))
    pieces, start = [], 0
    for cut in _SENTENCE_END.finditer(text):
        if text[:cut.start()].endswith(_ABBREVIATIONS):
            continue
        pieces.append(text[start:cut.start()])
        start = cut.end()
    pieces.append(text[start:])
    return [re.sub("\u0001(\\d+)\u0002", lambda m: spans[int(m.group(1))], piece)
            for piece in pieces if piece.strip()]


def solution_steps(markdown: str) -> list[str]:
    """The steps of a written solution (plain Markdown), as a rubric lists them: every
    sentence of its prose, and each code block, displayed formula or list whole.

    Examples
    --------
    >>> solution_steps("First $a = 1$. Then b.\\n\\n```python\\nx = 1\\n```\\n\\nSo c.")
    ['First $a = 1$.', 'Then b.', '```python\\nx = 1\\n```', 'So c.']
    """
    blocks, lines, fence, in_math = [], [], None, False
    for line in markdown.split("\n"):
        stripped = line.strip()
        if fence is None and not in_math and not stripped:
            if lines:
                blocks.append(lines)
            lines = []
            continue
        lines.append(line)
        opening = re.match(r"(`{3,}|~{3,})", stripped)
        if fence is None and opening and not in_math:
            fence = opening.group(1)
        elif fence is not None and stripped == fence:
            fence = None
        elif fence is None and stripped.startswith("$$") and not in_math:
            in_math = stripped == "$$" or not stripped.endswith("$$") or len(stripped) < 4
        elif in_math and stripped.endswith("$$"):
            in_math = False
    if lines:
        blocks.append(lines)
    steps = []
    for block in blocks:
        text = "\n".join(block)
        whole = (block[0].lstrip().startswith(("```", "~~~", "$$", "- ", "* ", "> ", "|"))
                 or re.match(r"\s*\d+\.\s", block[0]))
        steps += [text] if whole else _sentences(text)
    return steps


def _exercise_name(label: str, book) -> str:
    """``Exercise 1.2 (Find h\\* for a new sample size)``: Markdown-safe."""
    from .references import escape_markdown

    target = book.labels.get(label)
    return escape_markdown(target.name()) if target else label


def working_cells(label: str, book, solution: str, self_checked: bool) -> list:
    """The manually graded answer cell of exercise ``label`` (the student's written
    working, :data:`WORKING_POINTS` points) and the locked rubric cell after it.

    ``solution`` is the exercise's written solution as plain Markdown (read from the
    chapter by :func:`assignment_notebook`; ``""`` if it has none). The answer cell holds
    it as the model answer, between ``### BEGIN SOLUTION`` and ``### END SOLUTION``; the
    rubric cell's mark scheme holds the grading levels and the solution's steps. nbgrader
    releases the first as "YOUR ANSWER HERE" and the second as its first line only.
    """
    import nbformat

    name = _exercise_name(label, book)
    answer = nbformat.v4.new_markdown_cell(
        f"**Your working on {name}**, graded by hand: the steps that lead to your "
        "answer, in words and formulas (for a computation, what you ran and what it "
        "shows).\n\n### BEGIN SOLUTION\n"
        f"{solution or '*(The chapter gives no written solution.)*'}\n### END SOLUTION")
    _nbgrader(answer, f"{label}-working", solution=True, grade=True, points=WORKING_POINTS)
    autograded = (f" The answer itself is checked by a hidden test ({POINTS} point)."
                  if self_checked else "")
    steps = solution_steps(solution)
    listed = "\n".join(f"{k}. " + step.replace("\n", "\n   ")
                       for k, step in enumerate(steps, 1))
    rubric = nbformat.v4.new_markdown_cell(
        f"*Your working on {name} is graded by hand: {WORKING_POINTS} points if complete "
        "and correct, 1 for the right approach with a gap or a slip, 0 for nothing "
        f"usable.{autograded}*\n\n"
        f"{MARK_SCHEME[0]}\n\n"
        f"**Rubric for graders ({WORKING_POINTS} points).** Read the working against the "
        "steps of the chapter's solution below; another valid route to the same result "
        "earns full marks.\n\n"
        f"- **{WORKING_POINTS} points**: complete and correct: every step below (or an "
        "equivalent one) is there and right, and the conclusion is stated.\n"
        "- **1 point**: the right approach with a gap or a slip: a step below missing or "
        "wrong, or the conclusion not drawn, the rest sound.\n"
        "- **0 points**: nothing usable: no working, a bare answer, or an approach that "
        "cannot reach the result.\n\n"
        + (f"Steps of the chapter's solution:\n\n{listed}\n\n" if steps
           else "The chapter gives no written solution: grade against the answer key.\n\n")
        + MARK_SCHEME[1])
    _nbgrader(rubric, f"{label}-rubric", solution=False, grade=False)
    return [answer, rubric]


def _written_solutions(source: Path, book) -> dict[str, tuple[str, str]]:
    """``{label: (heading, written solution)}`` for the exercises of a chapter, in its
    order, read from its MyST source: the heading the exercise has in the notebooks and
    its ``{solution}`` block, both as plain Markdown (``""`` for no solution)."""
    from .answer_key import exercise_blocks
    from .reader import Block, plain_markdown, read_source, split_blocks

    found = {}
    for label, exercise, solution in exercise_blocks(read_source(source, "chapter")):
        heading = plain_markdown(exercise, book, source.stem).split("\n")[0]
        body = next((item.body for item in split_blocks(solution.split("\n"))
                     if isinstance(item, Block)), [])
        text = "\n".join(body)
        found[label] = (heading, plain_markdown(text, book, source.stem) if text.strip()
                        else "")
    return found


def _split_at(cell, line: int):
    """The markdown ``cell`` cut before its line ``line``: (the part before, the rest)."""
    import copy

    lines = cell.source.split("\n")
    before, after = copy.deepcopy(cell), copy.deepcopy(cell)
    before.source = "\n".join(lines[:line]).strip("\n")
    after.source = "\n".join(lines[line:]).strip("\n")
    return before, after


def assignment_notebook(source: Path, book):
    """The nbgrader source notebook of one chapter (nbformat).

    The chapter's nbgrader edition (:func:`mhacore.editions.reader.edition_notebook`: Markdown as
    in the student notebooks, with the numbers and citations of ``book``, a
    :class:`mhacore.editions.reader.Book`), with each answer cell an nbgrader solution cell and a
    hidden graded test after each self-check, and at the end of every exercise (before the
    next heading) its working cell and rubric (:func:`working_cells`). Returns the
    notebook and the labels of its autograded exercises.
    """
    from .common import SELF_CHECK, SOLUTION_TAG
    from .reader import READER_KEY, edition_notebook

    notebook = edition_notebook(source, book, "nbgrader")
    written = _written_solutions(source, book)
    headings = {heading: label for label, (heading, _) in written.items()}
    cells, labels, open_label = [], [], None

    def close():  # the working and rubric of the exercise that ends here
        if open_label is not None:
            cells.extend(working_cells(open_label, book, written[open_label][1],
                                       open_label in labels))

    for cell in notebook.cells:
        if cell.cell_type == "markdown" and not cell.metadata.get(READER_KEY):
            rest = cell
            while True:
                lines = rest.source.split("\n")
                at = next((k for k, line in enumerate(lines) if re.match(r"#{1,6} ", line)
                           and (open_label is not None or line in headings)
                           and not (k == 0 and rest is not cell)), None)
                if at is None:
                    break
                before, rest = _split_at(rest, at)
                if before.source.strip():
                    cells.append(before)
                close()
                open_label = headings.get(rest.source.split("\n")[0])
            cells.append(rest)
            continue
        if cell.cell_type == "markdown":  # the references cell closes the last exercise
            close()
            open_label = None
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
    close()
    for at, cell in enumerate(cells):  # answer cells are named after the exercise they answer
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if grade_id.startswith("answer-"):
            cell.metadata["nbgrader"]["grade_id"] = f"{labels[int(grade_id[7:]) - 1]}-answer"
        cell.id = f"{Path(source).stem[:40]}-{at:03d}"  # the same file from every run
    notebook.cells = cells
    return notebook, labels


def manual_points(notebook) -> dict[str, int]:
    """``{grade_id: points}`` of the manually graded cells of an assignment notebook."""
    return {c.metadata.nbgrader["grade_id"]: c.metadata.nbgrader["points"]
            for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade")
            and c.metadata.nbgrader.get("solution")}


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
