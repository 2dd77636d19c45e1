"""What the edition modules share: the tags a chapter's cells carry, the stub that replaces
an answer, the cell that shows glued values in a plain notebook, and the offline assets
(nbconvert templates, a single-file MathJax) of the pages they write.

Every module of :mod:`mhacore.editions` may import this one; it imports none of them.
"""

from __future__ import annotations

import re
from pathlib import Path

SOLUTION_TAG = "solution"
INSTRUCTOR_TAG = "instructor-only"  # e.g. the hidden assert that the reference answer passes
# Passages of a page for one edition of the site only (book/_ext/student_edition.py): a
# container of this class, or a section whose label starts with it and "-"
FULL_ONLY, STUDENT_ONLY = "full-edition", "student-edition"
STUB = ("# Your turn: define what you need (e.g. symbols with sp.symbols), compute your\n"
        "# answer, replace None with it, then run the self-check below.\n"
        "answer = None")
# Inline glue roles, {glue:text}`key:fmt` etc.: group 1 is the key, group 2 the format.
_GLUE_ROLE = re.compile(r"\{glue(?::\w+)?\}`([^`:]*)(?::([^`]*))?`")
# a self-check cell's call: check("ex-1-2", answer)
SELF_CHECK = re.compile(r"""\bcheck\(\s*["'](ex-[\w-]+)["']\s*,\s*answer\s*\)""")


def glue_formats(markdown: str) -> dict:
    """The formats a text gives its glued numbers, by key (``{glue:text}`key:.3f```)."""
    return {m.group(1).strip(): m.group(2) for m in _GLUE_ROLE.finditer(markdown)
            if m.group(2)}
GLUE_IMPORT = "from myst_nb import glue"
GLUE_CELL_KEY = "mhacore_glue"  # metadata flag of the added cell
GLUE_CELL = '''\
# Notebook edition: in the book, glue() hands a figure, equation or number to the text,
# which shows it there. A notebook cannot, so here glue() shows it in the output of the
# cell that calls it (numbers as `key = value`, the key being how the text names them).
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
MATHJAX = "tex-svg-full.js"
TEMPLATES = Path(__file__).parent / "_templates"  # nbconvert templates that work offline


#: sphinx-proof's kinds of statement the book uses, by their English names
PROOF_KINDS = ("Theorem", "Definition", "Proposition", "Lemma", "Corollary", "Remark",
               "Assumption", "Example", "Conjecture", "Axiom", "Algorithm", "Criterion",
               "Property", "Observation")


def proof_kind_names(language: str) -> dict[str, str]:
    """``{English name: name in language}`` of :data:`PROOF_KINDS`, from sphinx-proof's own
    catalog: the names the site and the PDF print ("定理", "注记").

    >>> proof_kind_names("zh_CN")["Remark"], proof_kind_names("en")["Remark"]
    ('注记', 'Remark')
    """
    import gettext

    import sphinx_proof.translations

    folder = Path(sphinx_proof.translations.__file__).parent / "locales"
    catalog = gettext.translation("proof", folder, languages=[language], fallback=True)
    return {kind: catalog.gettext(kind) for kind in PROOF_KINDS}


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
    formats = glue_formats("\n".join(c.source for c in notebook.cells
                                      if c.cell_type == "markdown"))
    # the added cell defines glue(), so the edition never needs myst_nb (a reader's plain
    # Python has none)
    source = notebook.cells[at].source
    notebook.cells[at].source = "\n".join(
        line for line in source.split("\n") if line.strip() != GLUE_IMPORT)
    cell = nbformat.v4.new_code_cell(GLUE_CELL.format(formats=pprint.pformat(formats, width=88)))
    cell.metadata[GLUE_CELL_KEY] = True
    notebook.cells.insert(at + 1, cell)
    return notebook


def mathjax_file() -> Path:
    """The single-file MathJax 3 bundle of the pinned ``django-static-mathjax``."""
    import mathjax

    return Path(mathjax.__file__).parent / "static" / "mathjax" / "es5" / MATHJAX


def build_provenance(root: Path) -> dict[str, str]:
    """The package version, the short commit (``+`` when the tree has changes) and the
    build date (``SOURCE_DATE_EPOCH`` when set, for reproducible builds)."""
    import datetime
    import os
    import subprocess

    from .._version import __version__

    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                                  timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    if commit != "unknown" and git("status", "--porcelain", "--untracked-files=no"):
        commit += "+"
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = (datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch
            else datetime.datetime.now(datetime.timezone.utc))
    return {"version": __version__, "commit": commit, "date": when.strftime("%Y-%m-%d")}
