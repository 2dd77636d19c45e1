"""Reader and student notebooks and an instructor pack, generated from the book's chapters.

``python -m mhacore teach student --out DIR`` writes one ``.ipynb`` per chapter with the
solutions removed: every ``{solution}`` block goes, every code cell tagged ``solution``
becomes a stub that sets ``answer = None`` (so the self-check cell after it replies "your
turn" instead of failing, and the notebook still runs top to bottom), and cells tagged
``instructor-only`` (the book's assertion that its own answer passes) are dropped.

``python -m mhacore teach reader --out DIR`` writes the reader edition (the same
notebooks, with a note for readers; the site's ``.ipynb`` download of each chapter).

``python -m mhacore teach instructor --out DIR`` writes the full notebooks (solutions
included), the answer key and the teaching plan. ``--zip`` packs any of them into a single
archive named after the folder. ``teach`` writes only into a new or empty folder, or one it
wrote before (a marker file says so), and refuses otherwise unless given ``--force`` (see
:mod:`mhacore.editions.outdir`).

Every edition's Markdown is made plain by the one converter,
:func:`mhacore.editions.reader.plain_markdown`, from the book read once per run
(:func:`mhacore.editions.reader.read_book`): theorems, figures and equations by the numbers the
site gives them ("Theorem 3.1", "Figure 6.2", "(6.1)"), citations author–year with a
references cell at the end. The figures, equations and numbers a chapter passes to its
text with myst-nb's ``glue`` show in the output of the cell that computes them (a cell
added after the imports redefines ``glue`` to display its value).

The chapters are read from the book's ``_toc.yml``, in its order, so the notebooks follow
the chapters exactly as they are built.

Exit status: 0 when the folder (or zip) is written; 1 when a source of the book cannot be
read (:class:`mhacore.editions.reader.SourceError`: one line naming the file, e.g. a
``_toc.yml``, ``_config.yml`` or chapter front matter that is not YAML, a BibTeX syntax
error or repeated key); 2 for a usage error (``--out`` refused or not writable, as on a
full disk, or no ``_toc.yml`` under ``--book``). A failed run leaves ``--out`` as it was
(a folder it made is removed again).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from . import outdir as _outdir
from .reader import (
    Book,
    SourceError,
    chapter_sources,
    edition_notebook,
    plain_markdown,
    read_book,
    read_source,
)

# {exec-time}`this`: a page's run time, filled in by the site's build (book/_ext/exec_time.py)
_EXEC_TIME = re.compile(r"\{exec-time\}`[^`]*`")
TEACHING_PLAN = "book/course.md"


_SLIDE_LINK = re.compile(r'<a href="\.\./slides/(session-\d+\.slides\.html)">[^<]*</a>')
SLIDES_IN_SITE = "`slides/{}` of the built site (`make book` writes it into `_build/html`)"


def plan_markdown(plan: str, book: Book) -> str:
    """The course page as the instructor pack's ``teaching-plan.md`` (Markdown made plain
    by :func:`mhacore.editions.reader.plain_markdown`): chapters linked to their notebooks in the
    pack by their titles, exercises as "Exercise 1.1 (title)", each slide link pointing
    into the built site (the pack holds no slides), and the run-time lines dropped (they
    are measured by the site's build, which the pack does not run).

    Examples
    --------
    >>> link = '- **Slides.** <a href="../slides/session-1.slides.html">session 1</a>.'
    >>> print(plan_markdown(link, Book()))
    - **Slides.** `slides/session-1.slides.html` of the built site (`make book` writes it into `_build/html`).
    """
    lines = [line for line in plan.split("\n") if not _EXEC_TIME.search(line)]
    text = _SLIDE_LINK.sub(lambda m: SLIDES_IN_SITE.format(m.group(1)), "\n".join(lines))
    return plain_markdown(text, book, Path(TEACHING_PLAN).stem)


def generate(kind: str, out: Path, book_root: Path = Path("."), make_zip: bool = False,
             force: bool = False) -> Path:
    """Write the reader, student or instructor notebooks into ``out``; return the folder
    or zip.

    Parameters
    ----------
    kind : {"reader", "student", "instructor"}
        The edition (:data:`mhacore.editions.reader.EDITIONS`); the student and instructor ones
        come with a README, the instructor one with the answer key and teaching plan.
    out : Path
        The folder to write: new, empty, or one ``teach`` wrote before (see
        :mod:`mhacore.editions.outdir`); otherwise ``ValueError`` unless ``force``.
    book_root : Path
        The repository root holding ``_toc.yml`` and ``book/``.
    make_zip : bool
        Also pack this run's files into ``<folder name>.zip`` beside the folder and return
        that path.
    force : bool
        Write into a folder holding other files (they are kept, not packed, and never
        overwritten: a run that would replace one is refused), and replace an archive
        ``teach`` did not make.
    """
    import nbformat

    if kind not in ("reader", "student", "instructor"):
        raise ValueError(f"kind must be 'reader', 'student' or 'instructor'; got {kind!r}")
    book_root, out = Path(book_root), Path(out)
    sources = chapter_sources(book_root)
    if not sources:
        raise ValueError(f"book_root must hold _toc.yml and MyST chapters; none in {book_root}")
    book = read_book(book_root)
    target = _outdir.prepare(out, force=force, make_zip=make_zip)
    stage = target.stage  # moved into ``out`` by finish, once every file is written
    try:
        for source in sources:
            nbformat.write(edition_notebook(source, book, kind), stage / f"{source.stem}.ipynb")
        if kind == "instructor" and (book_root / TEACHING_PLAN).is_file():
            plan = read_source(book_root / TEACHING_PLAN, "teaching plan")
            try:
                plan = plan_markdown(plan, book)
            except ValueError as exc:  # a directive left open
                raise SourceError(f"teaching plan {book_root / TEACHING_PLAN}: {exc}") from None
            (stage / "teaching-plan.md").write_text(plan, encoding="utf-8")
        if kind == "instructor":
            from .answer_key import write_answer_key

            write_answer_key(stage, sources, book)
        if kind != "reader":
            (stage / "README.md").write_text(_readme(kind, sources), encoding="utf-8")
    except OSError as exc:  # a full disk, a folder made read-only meanwhile
        _outdir.abandon(target)
        raise _outdir.write_error(out, exc) from None
    except BaseException:
        _outdir.abandon(target)
        raise
    return _outdir.finish(target)


def _readme(kind: str, sources: list[Path]) -> str:
    if kind == "instructor":
        return _instructor_readme(sources)
    lines = ["# Student notebooks", "",
             "Solutions are removed. Each exercise with a self-check has a cell that sets",
             "`answer = None`: replace `None` with your answer and run the next cell,",
             "which says whether it is right without revealing the solution. Numeric",
             "answers are judged to the precision the exercise states.", ""]
    lines += ["Figures, equations and numbers that the book shows inside its text appear",
              "here in the output of the code cell that computes them (numbers are printed",
              "as `key = value`); the text numbers them as the book does.", ""]
    lines += ["Run them in the book's environment, which your instructor provides (a lab",
              "machine or a JupyterHub with the `mhacore` package and its requirements",
              "installed): open this folder in JupyterLab there and pick that environment's",
              "Python as the kernel. Where the book's own folder is installed, `make lab`",
              "there writes these notebooks into `_build/student-notebooks` and opens them.",
              "",
              "Chapters:", ""] + [f"- {s.stem}.ipynb" for s in sources]
    return "\n".join(lines) + "\n"


def _instructor_readme(sources: list[Path]) -> str:
    lines = ["# Instructor pack", "",
             "This pack is for you, the instructor; do not hand it to students. It holds:", "",
             "- `teaching-plan.md`: the course page of the book (syllabus template with",
             "  dates to fill in, sessions with goals, reading, activity and homework,",
             "  grading, and how to keep solutions hidden);",
             "- `answer-key.html`: every exercise with its solution, in one page (open it",
             "  in a browser; its math is typeset offline);",
             "- the full chapters as notebooks, solutions included.", "",
             "The slides the plan links to are not in the pack: `make book` writes them",
             "into `_build/html/slides/` of the built site (one reveal.js deck per session,",
             "with reveal.js and MathJax beside them, so the folder works offline; copy it",
             "whole to share it).", "",
             "For students, generate instead, from the book's repository:", "",
             "    .venv/bin/python -m mhacore teach student --out student-notebooks --zip",
             "    make book-student   # the website without solutions", "",
             "and for autograding an nbgrader course folder, one assignment per week:", "",
             "    .venv/bin/python -m mhacore teach nbgrader --out course", "",
             "Figures, equations and numbers that the book shows inside its text appear in",
             "these notebooks in the output of the code cell that computes them.", "",
             "Chapters:", ""] + [f"- {s.stem}.ipynb" for s in sources]
    return "\n".join(lines) + "\n"


def _nbgrader_course(out: Path, book_root: Path, make_zip: bool, force: bool) -> Path:
    """The nbgrader course folder (:mod:`mhacore.editions.grading`), with the same folder safety."""
    from .grading import write_course

    target = _outdir.prepare(out, force=force, make_zip=make_zip)
    try:
        write_course(target.stage, book_root)
    except OSError as exc:
        _outdir.abandon(target)
        raise _outdir.write_error(out, exc) from None
    except BaseException:
        _outdir.abandon(target)
        raise
    return _outdir.finish(target)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m mhacore teach",
                                     description="Generate student or instructor notebooks.")
    parser.add_argument("kind", choices=["reader", "student", "instructor", "nbgrader"],
                        help="nbgrader: a course folder for nbgrader (see mhacore.editions.grading)")
    parser.add_argument("--out", type=Path, required=True, help="folder to write")
    parser.add_argument("--book", type=Path, default=Path("."), help="repository root")
    parser.add_argument("--zip", action="store_true",
                        help="also pack the notebooks into <folder name>.zip beside the folder")
    parser.add_argument("--force", action="store_true",
                        help="write into a folder teach did not make, beside its files (a file "
                             "teach did not write, or that changed since, is never overwritten "
                             "or deleted: the run is refused naming it), and replace an "
                             "archive teach did not make")
    args = parser.parse_args(argv)
    try:
        if args.kind == "nbgrader":
            result = _nbgrader_course(args.out, args.book, args.zip, args.force)
        else:
            result = generate(args.kind, args.out, args.book, args.zip, force=args.force)
    except SourceError as exc:  # the book's sources: bad data
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:  # --out, --book: a usage error
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {result}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
