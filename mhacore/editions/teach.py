"""Reader and student notebooks and an instructor pack, generated from the book's chapters.

``python -m mhacore teach student --out DIR`` writes one ``.ipynb`` per chapter with the
solutions removed: every ``{solution}`` block goes, every code cell tagged ``solution``
becomes a stub that sets ``answer = None`` (so the self-check cell after it replies "your
turn" instead of failing, and the notebook still runs top to bottom), and cells tagged
``instructor-only`` (the book's assertion that its own answer passes) are dropped.

``python -m mhacore teach reader --out DIR`` writes the reader edition (the same
notebooks, with a note for readers; the site's ``.ipynb`` download of each chapter).

``python -m mhacore teach instructor --out DIR`` writes the full notebooks (solutions
included), the answer key, the teaching plan and the slides: one reveal.js deck per
session (:func:`mhacore.editions.slides.write_decks`), made from the chapters as the
book's build executed them. ``--executed DIR`` names the folder of executed chapters
(``NN-slug.ipynb`` with their ``.glue.json``); by default it is
``_build/jupyter_execute/book`` under ``--book``, where ``make book`` leaves them. Where
there is none, the pack is written without slides, and its README, its teaching plan and
a note on stderr say so and how to add them (build the book, then run ``teach`` again). A
session whose deck cannot be made (no executed chapter, no deck source) is left out the
same way, named. ``--zip`` packs any of them into a single
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
full disk, no ``_toc.yml`` under ``--book``, or an ``--executed`` folder without executed
chapters). A failed run leaves ``--out`` as it was (a folder it made is removed again).
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
    chapter_numbers,
    chapter_sources,
    edition_notebook,
    plain_markdown,
    read_book,
    read_source,
)
from .references import escape_markdown

# {exec-time}`this`: a page's run time, filled in by the site's build (book/_ext/exec_time.py)
_EXEC_TIME = re.compile(r"\{exec-time\}`[^`]*`")
TEACHING_PLAN = "book/course.md"


# Where `make book` leaves the executed chapters, under the repository root (myst-nb's
# jupyter_execute folder): the instructor pack's slides are made from them.
EXECUTED = Path("_build") / "jupyter_execute" / "book"
SLIDES = "slides"  # the pack's folder of decks
CHINESE_SLIDES = "zh_CN"  # the folder of the Chinese decks inside it
_SLIDE_LINK = re.compile(r'<a href="\.\./slides/(session-(\d+)\.slides\.html)">([^<]*)</a>')
SLIDES_IN_SITE = "`slides/{}` of the built site (`make book` writes it into `_build/html`)"
_SESSION_HEADING = re.compile(r"^###\s.*?\bsession (\d+)\b", re.M)
# a {doc} role, with or without text of its own ({doc}`chapter 1 <01-nw>`): group 1 is the page
_DOC = re.compile(r"\{doc\}`(?:[^`<>]*<)?([^`<>]+?)>?`")


def plan_markdown(plan: str, book: Book, chapters: dict[str, int] | None = None,
                  decks: frozenset[int] = frozenset()) -> str:
    """The course page as the instructor pack's ``teaching-plan.md`` (Markdown made plain
    by :func:`mhacore.editions.reader.plain_markdown`): chapters linked to their notebooks in the
    pack by their titles, exercises as "Exercise 1.1 (title)", and the run-time lines
    dropped (they are measured by the site's build, which the pack does not run).

    A heading names its chapter as "Chapter 1, *Kernel smoothing ...*" (the number from
    ``chapters``, ``{page stem: chapter number}``, as
    :func:`mhacore.editions.reader.chapter_numbers` gives it; the title alone without it),
    never by its file name. Each slide link points to the deck in the pack's ``slides/``
    folder when its session is in ``decks``, else into the built site.

    Examples
    --------
    >>> link = '- **Slides.** <a href="../slides/session-1.slides.html">session 1</a>.'
    >>> print(plan_markdown(link, Book()))
    - **Slides.** `slides/session-1.slides.html` of the built site (`make book` writes it into `_build/html`).
    >>> print(plan_markdown(link, Book(), decks=frozenset({1})))
    - **Slides.** [session 1](slides/session-1.slides.html).
    >>> heading = "### Week 1, session 1 — smoothing ({doc}`chapter 1 <01-nw>`)"
    >>> print(plan_markdown(heading, Book(titles={"01-nw": "Kernel smoothing"}), {"01-nw": 1}))
    ### Week 1, session 1 — smoothing (Chapter 1, *Kernel smoothing*)
    """
    chapters = chapters or {}

    def chapter(match):
        stem = match.group(1).strip().rstrip("/").split("/")[-1]
        title = escape_markdown(book.titles.get(stem) or stem)
        return f"Chapter {chapters[stem]}, *{title}*" if stem in chapters else f"*{title}*"

    def slide(match):
        name, session, text = match.groups()
        if int(session) in decks:
            return f"[{text}]({SLIDES}/{name})"
        return SLIDES_IN_SITE.format(name)

    lines = [_DOC.sub(chapter, line) if line.startswith("#") else line
             for line in plan.split("\n") if not _EXEC_TIME.search(line)]
    text = _SLIDE_LINK.sub(slide, "\n".join(lines))
    return plain_markdown(text, book, Path(TEACHING_PLAN).stem)


def _executed_dir(book_root: Path, executed: Path | None) -> Path | None:
    """The folder of executed chapters the pack's slides are made from: ``executed``
    (``ValueError`` if it holds no ``NN-slug.ipynb``), else the book's :data:`EXECUTED`
    folder if it holds some, else None (no slides)."""
    if executed is not None:
        if not any(Path(executed).glob("[0-9][0-9]-*.ipynb")):
            raise ValueError(f"executed must be a folder of executed chapters (NN-slug.ipynb, "
                             f"as `make book` leaves in {EXECUTED}); none in {executed}")
        return Path(executed)
    default = Path(book_root) / EXECUTED
    return default if any(default.glob("[0-9][0-9]-*.ipynb")) else None


def _write_slides(folder: Path, executed: Path | None, plan: str, book: Book,
                  book_root: Path) -> dict:
    """Write the deck of each session of ``plan`` into ``folder`` from ``executed``, and
    its Chinese deck (the Chinese site's) into ``folder/zh_CN``; return ``{session:
    None}`` for each session whose decks were written and ``{session: why}`` for each
    left out."""
    from .slides import write_decks

    sessions = sorted({int(n) for n in _SESSION_HEADING.findall(plan)})
    if executed is None:
        return {n: "no executed chapters" for n in sessions}
    made = {}
    for session in sessions:
        try:
            write_decks(folder, executed, sessions=[session], book=book, root=book_root)
            write_decks(folder / CHINESE_SLIDES, executed, sessions=[session], book=book,
                        root=book_root, language="zh_CN")
            made[session] = None
        except ValueError as exc:  # no executed chapter or no source for this session
            why = " ".join(str(exc).split()).replace(f"{Path.cwd()}/", "")
            made[session] = re.sub(rf"^session {session}\b\s*(?:has no slides)?:?\s*", "",
                                   why) or "no deck"
    return made


def generate(kind: str, out: Path, book_root: Path = Path("."), make_zip: bool = False,
             force: bool = False, executed: Path | None = None) -> Path:
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
    executed : Path, optional
        The instructor pack only: the executed chapters (``NN-slug.ipynb``) its slides are
        made from; by default :data:`EXECUTED` under ``book_root`` when it holds them, else
        the pack has no slides (its README says so). A folder without executed chapters
        is a ``ValueError``.
    """
    import nbformat

    if kind not in ("reader", "student", "instructor"):
        raise ValueError(f"kind must be 'reader', 'student' or 'instructor'; got {kind!r}")
    if executed is not None and kind != "instructor":
        raise ValueError(f"executed is for the instructor pack's slides; got kind {kind!r}")
    book_root, out = Path(book_root), Path(out)
    sources = chapter_sources(book_root)
    if not sources:
        raise ValueError(f"book_root must hold _toc.yml and MyST chapters; none in {book_root}")
    executed = _executed_dir(book_root, executed) if kind == "instructor" else None
    book = read_book(book_root)
    target = _outdir.prepare(out, force=force, make_zip=make_zip)
    stage = target.stage  # moved into ``out`` by finish, once every file is written
    try:
        for source in sources:
            nbformat.write(edition_notebook(source, book, kind), stage / f"{source.stem}.ipynb")
        decks = {}
        if kind == "instructor" and (book_root / TEACHING_PLAN).is_file():
            plan = read_source(book_root / TEACHING_PLAN, "teaching plan")
            decks = _write_slides(stage / SLIDES, executed, plan, book, book_root)
            made = frozenset(n for n, why in decks.items() if why is None)
            try:
                plan = plan_markdown(plan, book, chapter_numbers(book_root), made)
            except ValueError as exc:  # a directive left open
                raise SourceError(f"teaching plan {book_root / TEACHING_PLAN}: {exc}") from None
            (stage / "teaching-plan.md").write_text(plan, encoding="utf-8")
        if kind == "instructor":
            from .answer_key import write_answer_key

            write_answer_key(stage, sources, book)
        if kind != "reader":
            (stage / "README.md").write_text(_readme(kind, sources, decks, executed),
                                             encoding="utf-8")
    except OSError as exc:  # a full disk, a folder made read-only meanwhile
        _outdir.abandon(target)
        raise _outdir.write_error(out, exc) from None
    except BaseException:
        _outdir.abandon(target)
        raise
    return _outdir.finish(target)


def _readme(kind: str, sources: list[Path], decks: dict | None = None,
            executed: Path | None = None) -> str:
    if kind == "instructor":
        return _instructor_readme(sources, decks or {}, executed)
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


def slides_note(decks: dict, executed: Path | None) -> tuple[list[str], list[str]]:
    """The README's words on the pack's slides: ``(item, paragraph)``, the item listing
    ``slides/`` among the pack's contents (empty when no deck was made) and a paragraph
    saying which sessions have no deck, why, and how to add them (empty when none is
    missing). ``decks`` is ``{session: None}`` for a deck made, ``{session: why}`` else."""
    made = [n for n, why in sorted(decks.items()) if why is None]
    missing = {n: why for n, why in sorted(decks.items()) if why is not None}
    how = ["Build the book (`make book` executes every chapter into",
           f"`{EXECUTED.as_posix()}`) and generate the pack again, or pass",
           "`--executed DIR` naming a folder of executed chapters. Meanwhile `make book`",
           "writes the decks into `_build/html/slides/` of the built site.", ""]
    item = ["- `slides/`: the slides, one reveal.js deck per session",
            f"  (`session-{made[0]}.slides.html` ...), with reveal.js and MathJax beside",
            "  them, so the folder works offline (copy it whole); open a deck in a browser",
            "  and press `s` for the speaker view; `slides/zh_CN/` holds the same decks in",
            "  Chinese (the Chinese edition's). They show the figures and numbers of",
            f"  the chapters as the book's build executed them (`{executed}`);"] if made else []
    if not missing:
        return item, []
    if executed is None:
        return item, ["The slides are not in this pack: they are made from the executed",
                      f"chapters, and `{EXECUTED.as_posix()}` under the book holds none.",
                      *how]
    head = ("The slides are not in this pack: no session's deck could be made:" if not made
            else "Some sessions have no deck in this pack:")
    return item, [head, "", *[f"- session {n}: {why}" for n, why in missing.items()], "",
                  *how]


def _instructor_readme(sources: list[Path], decks: dict, executed: Path | None) -> str:
    item, paragraph = slides_note(decks, executed)
    lines = ["# Instructor pack", "",
             "This pack is for you, the instructor; do not hand it to students. It holds:", "",
             "- `teaching-plan.md`: the course page of the book (syllabus template with",
             "  dates to fill in, sessions with goals, reading, activity and homework,",
             "  grading, and how to keep solutions hidden);",
             "- `answer-key.html`: every exercise with its solution, in one page (open it",
             "  in a browser; its math is typeset offline);", *item,
             "- the full chapters as notebooks, solutions included.", "", *paragraph,
             "For students, generate instead, from the book's repository:", "",
             "    .venv/bin/python -m mhacore teach student --out student-notebooks --zip",
             "    make book-student   # the website without solutions", "",
             "and for grading, an nbgrader course folder, one assignment per week: the",
             "self-checks autograded by hidden tests, and each exercise's written working",
             "in a cell graded by hand, its rubric beside it in nbgrader's formgrader:", "",
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
    parser.add_argument("--executed", type=Path, default=None,
                        help="instructor pack: the executed chapters (NN-slug.ipynb) its "
                             f"slides are made from; default BOOK/{EXECUTED.as_posix()} "
                             "(where `make book` leaves them) when it holds them, else the "
                             "pack has no slides and says so")
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
            result = generate(args.kind, args.out, args.book, args.zip, force=args.force,
                              executed=args.executed)
    except SourceError as exc:  # the book's sources: bad data
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:  # --out, --book: a usage error
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {result}")
    if args.kind == "instructor":
        note = _missing_slides(args.out)
        if note:
            print(f"note: {note}", file=sys.stderr)
    return 0


def _missing_slides(pack: Path) -> str:
    """One line saying which of the pack's decks are missing (read from its README), or
    ``""`` when every session has its deck."""
    readme = Path(pack) / "README.md"
    text = readme.read_text(encoding="utf-8") if readme.is_file() else ""
    if "under the book holds none" in text:
        return ("the pack has no slides: they are made from the executed chapters, which "
                "`make book` writes; build the book and run teach again, or pass "
                "--executed DIR (see the pack's README.md)")
    missing = re.findall(r"^- session (\d+): ", text, re.M)
    return (f"the pack has no deck for session(s) {', '.join(missing)} (the pack's README.md "
            "says why)" if missing else "")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
