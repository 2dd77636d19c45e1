"""Student notebooks and an instructor pack, generated from the book's chapters.

``python -m mhacore teach student --out DIR`` writes one ``.ipynb`` per chapter with the
solutions removed: every ``{solution}`` block goes, every code cell tagged ``solution``
becomes a stub that sets ``answer = None`` (so the self-check cell after it replies "your
turn" instead of failing, and the notebook still runs top to bottom), and cells tagged
``instructor-only`` (the book's assertion that its own answer passes) are dropped.

``python -m mhacore teach reader --out DIR`` writes the reader edition (plain Markdown,
numbered references, no solutions; the site's ``.ipynb`` download): see
:mod:`mhacore.reader`.

``python -m mhacore teach instructor --out DIR`` writes the full notebooks (solutions
included) and the teaching plan. ``--zip`` packs either into a single archive named after
the folder. ``teach`` writes only into a new or empty folder, or one it wrote before (a
marker file says so), and refuses otherwise unless given ``--force`` (see
:mod:`mhacore._outdir`).

In both, the figures, equations and numbers a chapter passes to its text with myst-nb's
``glue`` show in the output of the cell that computes them (a cell added after the imports
redefines ``glue`` to display its value), and the text names them by their key.

The chapters are read from the book's ``_toc.yml``, in its order, so the notebooks follow
the chapters exactly as they are built.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from . import _outdir
from ._references import escape_markdown

SOLUTION_TAG = "solution"
INSTRUCTOR_TAG = "instructor-only"  # e.g. the hidden assert that the reference answer passes
STUB = ("# Your turn: define what you need (e.g. symbols with sp.symbols), compute your\n"
        "# answer, replace None with it, then run the self-check below.\n"
        "answer = None")
_FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{solution\}")
_DIRECTIVE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[\w:-]+)\}\s*(?P<arg>.*)$")
# Directives a notebook front end cannot render, and the bold heading each becomes.
_HEADINGS = {
    "exercise": "Exercise {arg} [{label}]", "solution": "Solution to {arg}",
    "prf:theorem": "Theorem: {arg}", "prf:definition": "Definition: {arg}",
    "prf:remark": "Remark: {arg}", "prf:lemma": "Lemma: {arg}", "admonition": "{arg}",
    "prf:proposition": "Proposition: {arg}", "prf:corollary": "Corollary: {arg}",
    "note": "Note", "tip": "Tip", "important": "Important", "warning": "Warning",
    "glue:figure": "Figure `{arg}` (drawn in the output of the code cell that computes it)",
    "glue:math": "Equation `{arg}` (shown in the output of the code cell that computes it)",
    "glue": "`{arg}` (shown in the output of the code cell that computes it)",
    "glue:any": "`{arg}` (shown in the output of the code cell that computes it)",
}
# Inline glue roles, {glue:text}`key:fmt` etc.: group 1 is the key, group 2 the format.
_GLUE_ROLE = re.compile(r"\{glue(?::\w+)?\}`([^`:]*)(?::([^`]*))?`")
GLUE_IMPORT = "from myst_nb import glue"
GLUE_CELL_KEY = "mhacore_glue"  # metadata flag of the added cell
GLUE_CELL = '''\
# Notebook edition: in the book, glue() hands a figure, equation or number to the text,
# which shows it there. A notebook cannot, so here glue() shows it in the output of the
# cell that calls it (numbers as `key = value`); the text names each one by its key.
import numbers as _numbers

import IPython.display as _ipd

# The formats the text gives glued numbers.
_GLUE_FORMATS = {formats}


def glue(name, variable, display=True):
    if isinstance(variable, (str, _numbers.Number)):
        try:
            variable = format(variable, _GLUE_FORMATS.get(name, ""))
        except (TypeError, ValueError):
            pass
        print(f"{{name}} = {{variable}}")
    else:
        _ipd.display(variable)'''
_CROSS_REF = re.compile(r"\{(?:prf:ref|ref|doc|numref|eq|term)\}`([^`]*)`")
_CITE = re.compile(r"\{cite(?::\w+)?\}`([^`]*)`")
# {exec-time}`this`: a page's run time, filled in by the site's build (book/_ext/exec_time.py)
_EXEC_TIME = re.compile(r"\{exec-time\}`[^`]*`")
EXEC_TIME_TEXT = "the time the site's build status page lists"
TEACHING_PLAN = "book/course.md"


def strip_solution_blocks(markdown: str) -> str:
    """Remove every ``{solution}`` directive (backtick or colon fence) from MyST text.

    Examples
    --------
    >>> text = "Q?\\n\\n```{solution} ex-1-1\\n:class: dropdown\\n\\nIt is 4.\\n```\\n\\nMore."
    >>> strip_solution_blocks(text)
    'Q?\\n\\n\\nMore.'
    """
    out, fence = [], None
    for line in markdown.split("\n"):
        if fence is None:
            match = _FENCE.match(line.lstrip())
            if match:
                fence = match.group("fence")
                continue
            out.append(line)
        elif line.strip() == fence:
            fence = None
    if fence is not None:
        raise ValueError(f"markdown has an unclosed {{solution}} block (fence {fence!r})")
    return re.sub(r"\n{4,}", "\n\n\n", "\n".join(out))


def plain_markdown(markdown: str) -> str:
    """MyST text as a notebook front end can show it: directives become bold headings,
    cross-references their target, citations ``[key]``, glued values their key.

    Examples
    --------
    >>> print(plain_markdown("```{exercise} 1.1 Sum it\\n:label: ex-1-1\\n\\nSee {cite}`b2001`.\\n```"))
    **Exercise 1.1 Sum it [ex-1-1]**
    <BLANKLINE>
    See [b2001].
    >>> glued = "So rho = {glue:text}`rho:.2f`.\\n```{glue:math} eq-rho\\n:label: eq-rho\\n```"
    >>> print(plain_markdown(glued))
    So rho = `rho`.
    **Equation `eq-rho` (shown in the output of the code cell that computes it)**
    """
    out, fences = [], []
    lines = markdown.split("\n")
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        match = _DIRECTIVE.match(stripped)
        if match and match.group("name") in _HEADINGS:
            i += 1
            options = {}
            while i < len(lines) and re.match(r"^:[\w-]+:", lines[i]):
                key, _, value = lines[i][1:].partition(":")
                options[key] = value.strip()
                i += 1
            heading = _HEADINGS[match.group("name")].format(
                arg=escape_markdown(match.group("arg")),
                label=options.get("label", "")).rstrip(": ")
            out.append(f"**{heading}**" if heading else "")
            fences.append(match.group("fence"))
            continue
        if fences and stripped == fences[-1]:
            fences.pop()
        else:
            out.append(lines[i])
        i += 1
    text = "\n".join(out)
    text = _CROSS_REF.sub(lambda m: re.sub(r"\s*<[^>]*>$", "", m.group(1)), text)
    text = _GLUE_ROLE.sub(lambda m: f"`{m.group(1).strip()}`", text)
    text = _EXEC_TIME.sub(EXEC_TIME_TEXT, text)
    return _CITE.sub(lambda m: "[" + "; ".join(k.strip() for k in m.group(1).split(",")) + "]",
                     text)


_SLIDE_LINK = re.compile(r'<a href="\.\./slides/(session-\d+\.slides\.html)">[^<]*</a>')
SLIDES_IN_SITE = "`slides/{}` of the built site (`make book` writes it into `_build/html`)"


def plan_markdown(plan: str, sources: list[Path]) -> str:
    """The course page as the instructor pack's ``teaching-plan.md``: chapters named by
    their titles, exercises as "Exercise 1.1 (title)", each slide link pointing into the
    built site (the pack holds no slides), and the run-time lines dropped (they are
    measured by the site's build, which the pack does not run).

    Examples
    --------
    >>> link = '- **Slides.** <a href="../slides/session-1.slides.html">session 1</a>.'
    >>> print(plan_markdown(link, []))
    - **Slides.** `slides/session-1.slides.html` of the built site (`make book` writes it into `_build/html`).
    """
    from mhacore._references import chapter_title, escape_markdown, exercise_names, resolve

    names = {}
    for page in sorted({s.parent for s in sources}):  # other pages: the ledger, ...
        names.update({md.stem: escape_markdown(chapter_title(md)) for md in page.glob("*.md")})
    for source in sources:
        names[source.stem] = escape_markdown(chapter_title(source))
        names.update({label: escape_markdown(name) for label, name
                      in exercise_names(source.read_text(encoding="utf-8")).items()})
    lines = [line for line in plan.split("\n") if not _EXEC_TIME.search(line)]
    text = _SLIDE_LINK.sub(lambda m: SLIDES_IN_SITE.format(m.group(1)), "\n".join(lines))
    return plain_markdown(resolve(text, names, {}))


def show_glued(notebook):
    """``notebook`` (nbformat, changed in place and returned) with a cell, right after the
    one that imports ``glue`` from myst_nb, defining ``glue`` to display what it glues; the
    import itself is dropped, so the edition runs without myst_nb.

    In a plain notebook the book's ``glue(key, value, display=False)`` shows nothing and
    the text's ``{glue:...}`` roles and directives cannot fetch it; with this cell every
    glued figure and equation appears in the output of the cell that computes it, and every
    glued number is printed there as ``key = value``, in the format the text gives it.
    Call it before the markdown is made plain (the formats are read from the roles).
    """
    import pprint

    import nbformat

    at = next((i for i, c in enumerate(notebook.cells)
               if c.cell_type == "code" and GLUE_IMPORT in c.source), None)
    if at is None:
        return notebook
    formats = {m.group(1).strip(): m.group(2) for c in notebook.cells
               if c.cell_type == "markdown" for m in _GLUE_ROLE.finditer(c.source)
               if m.group(2)}
    # the added cell defines glue(), so the edition never needs myst_nb (a reader's plain
    # Python has none)
    source = notebook.cells[at].source
    notebook.cells[at].source = "\n".join(
        line for line in source.split("\n") if line.strip() != GLUE_IMPORT)
    cell = nbformat.v4.new_code_cell(GLUE_CELL.format(formats=pprint.pformat(formats, width=88)))
    cell.metadata[GLUE_CELL_KEY] = True
    notebook.cells.insert(at + 1, cell)
    return notebook


def chapter_sources(book_root: Path) -> list[Path]:
    """The numbered executable chapters (``book/NN-slug.md``) of ``_toc.yml``, in order."""
    from .reader import toc_pages  # every page of the table of contents

    return [p for p in toc_pages(book_root) if re.match(r"\d\d-", p.name)
            and "kernelspec:" in p.read_text("utf-8")[:3000]]


def student_notebook(notebook):
    """A copy of ``notebook`` (nbformat) with its solutions removed."""
    import copy

    nb = copy.deepcopy(notebook)
    nb.cells = [c for c in nb.cells if INSTRUCTOR_TAG not in c.metadata.get("tags", [])]
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "markdown":
            cell.source = plain_markdown(strip_solution_blocks(cell.source))
        elif cell.cell_type == "code" and SOLUTION_TAG in tags:
            cell.source = STUB
            cell.metadata["tags"] = [t for t in tags if t not in (SOLUTION_TAG, "remove-cell")]
            cell.outputs = []
    nb.metadata["mhacore_edition"] = "student"
    return nb


def generate(kind: str, out: Path, book_root: Path = Path("."), make_zip: bool = False,
             force: bool = False) -> Path:
    """Write the student or instructor notebooks into ``out``; return the folder or zip.

    Parameters
    ----------
    kind : {"student", "instructor"}
    out : Path
        The folder to write: new, empty, or one ``teach`` wrote before (see
        :mod:`mhacore._outdir`); otherwise ``ValueError`` unless ``force``.
    book_root : Path
        The repository root holding ``_toc.yml`` and ``book/``.
    make_zip : bool
        Also pack this run's files into ``<folder name>.zip`` beside the folder and return
        that path.
    force : bool
        Write into a folder holding other files (they are kept, not packed), and replace
        an archive ``teach`` did not make.
    """
    import jupytext

    if kind not in ("student", "instructor"):
        raise ValueError(f"kind must be 'student' or 'instructor'; got {kind!r}")
    book_root, out = Path(book_root), Path(out)
    sources = chapter_sources(book_root)
    if not sources:
        raise ValueError(f"book_root must hold _toc.yml and MyST chapters; none in {book_root}")
    target = _outdir.prepare(out, force=force, make_zip=make_zip)
    for source in sources:
        nb = show_glued(jupytext.read(source))
        if kind == "student":
            nb = student_notebook(nb)
        else:
            for cell in nb.cells:
                if cell.cell_type == "markdown":
                    cell.source = plain_markdown(cell.source)
        jupytext.write(nb, out / f"{source.stem}.ipynb", fmt="ipynb")
    if kind == "instructor" and (book_root / TEACHING_PLAN).is_file():
        plan = (book_root / TEACHING_PLAN).read_text(encoding="utf-8")
        (out / "teaching-plan.md").write_text(plan_markdown(plan, sources), encoding="utf-8")
    if kind == "instructor":
        _answer_key(out, sources)
    (out / "README.md").write_text(_readme(kind, sources), encoding="utf-8")
    return _outdir.finish(target)


def _answer_key(out: Path, sources: list[Path]) -> None:
    from mhacore.answer_key import write_answer_key

    write_answer_key(out, sources)


def _readme(kind: str, sources: list[Path]) -> str:
    if kind == "instructor":
        return _instructor_readme(sources)
    lines = ["# Student notebooks", "",
             "Solutions are removed. Each exercise with a self-check has a cell that sets",
             "`answer = None`: replace `None` with your answer and run the next cell,",
             "which says whether it is right without revealing the solution. Numeric",
             "answers are judged to the precision the exercise states.", ""]
    lines += ["Figures, equations and numbers that the book shows inside its text appear",
              "here in the output of the code cell that computes them; the text names each",
              "by its key (numbers are printed as `key = value`).", ""]
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
    """The nbgrader course folder (:mod:`mhacore.grading`), with the same folder safety."""
    from mhacore.grading import write_course

    target = _outdir.prepare(out, force=force, make_zip=make_zip)
    write_course(out, book_root)
    return _outdir.finish(target)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m mhacore teach",
                                     description="Generate student or instructor notebooks.")
    parser.add_argument("kind", choices=["reader", "student", "instructor", "nbgrader"],
                        help="nbgrader: a course folder for nbgrader (see mhacore.grading)")
    parser.add_argument("--out", type=Path, required=True, help="folder to write")
    parser.add_argument("--book", type=Path, default=Path("."), help="repository root")
    parser.add_argument("--zip", action="store_true",
                        help="also pack the notebooks into <folder name>.zip beside the folder")
    parser.add_argument("--force", action="store_true",
                        help="write into a folder teach did not make (its files are kept), and "
                             "replace an archive teach did not make")
    args = parser.parse_args(argv)
    try:
        if args.kind == "reader":
            from .reader import write_readers

            result = write_readers(args.out, args.book, args.zip, force=args.force)
        elif args.kind == "nbgrader":
            result = _nbgrader_course(args.out, args.book, args.zip, args.force)
        else:
            result = generate(args.kind, args.out, args.book, args.zip, force=args.force)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {result}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
