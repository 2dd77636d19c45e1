"""The answer key of the instructor pack: every exercise with its solution, in one page.

``answer_key_notebook`` collects, chapter by chapter, each ``{exercise}`` of the book with
its ``{solution}`` and the reference code of its answer cell (if it has one);
``write_answer_key`` renders that as ``answer-key.html`` with nbconvert. The math is
typeset offline by a single-file MathJax 3 (``tex-svg-full.js`` from the pinned
``django-static-mathjax``), copied beside the page: nothing loads from a network.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from .common import MATHJAX, SOLUTION_TAG, TEMPLATES, mathjax_file

_BLOCK = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>exercise|solution)\}[^\n]*\n"
                    r".*?^(?P=fence)\s*$", re.S | re.M)
_LABEL = re.compile(r"^:label:\s*(\S+)", re.M)
_TARGET = re.compile(r"\{solution\}\s*(\S+)")


def exercise_blocks(markdown: str) -> list[tuple[str, str, str]]:
    """``(label, exercise block, solution block)`` for every exercise of a MyST text.

    Examples
    --------
    >>> text = ("```{exercise} 1.1 Sum\\n:label: ex-1\\n\\nAdd.\\n```\\n\\n"
    ...         "```{solution} ex-1\\n:class: dropdown\\n\\nIt is 2.\\n```\\n")
    >>> [(label, "Add." in ex, "It is 2." in sol) for label, ex, sol in exercise_blocks(text)]
    [('ex-1', True, True)]
    """
    exercises, solutions = {}, {}
    for block in _BLOCK.finditer(markdown):
        text = block.group(0)
        if block.group("name") == "exercise":
            label = _LABEL.search(text)
            if label:
                exercises[label.group(1)] = text
        else:
            solutions[_TARGET.search(text.split("\n", 1)[0]).group(1)] = text
    return [(label, text, solutions.get(label, "")) for label, text in exercises.items()]


def answer_key_notebook(sources: list[Path], book):
    """A notebook (nbformat) holding every exercise of ``sources`` with its solution, made
    plain by :func:`mhacore.editions.reader.plain_markdown` with the numbers and citations of
    ``book`` (a :class:`mhacore.editions.reader.Book`)."""
    import jupytext
    import nbformat

    from .reader import plain_markdown

    cells = [nbformat.v4.new_markdown_cell(
        "# Answer key\n\nEvery exercise of the book with its solution and, for the "
        "self-checked ones, the reference code of the answer cell.")]
    for source in sources:
        source = Path(source)
        text = source.read_text(encoding="utf-8")
        cells.append(nbformat.v4.new_markdown_cell(
            f"## {book.titles.get(source.stem) or source.stem}"))
        answers = {}
        notebook = jupytext.read(source)
        for at, cell in enumerate(notebook.cells):
            if cell.cell_type == "code" and SOLUTION_TAG in cell.metadata.get("tags", []):
                later = "".join(c.source for c in notebook.cells[at + 1:at + 2])
                label = re.search(r"check\(\s*[\"'](ex-[\w-]+)[\"']", later)
                if label:
                    answers[label.group(1)] = cell.source
        for label, exercise, solution in exercise_blocks(text):
            cells.append(nbformat.v4.new_markdown_cell(
                plain_markdown(exercise, book, source.stem)))
            cells.append(nbformat.v4.new_markdown_cell(
                plain_markdown(solution, book, source.stem, solutions=True) if solution
                else "*(no written solution)*"))
            if label in answers:
                cells.append(nbformat.v4.new_code_cell(answers[label]))
    return nbformat.v4.new_notebook(cells=cells, metadata={"title": "Answer key"})


def write_answer_key(out: Path, sources: list[Path], book) -> Path:
    """Write ``answer-key.html`` (with its MathJax) into the folder ``out``; return it."""
    from nbconvert import HTMLExporter

    out = Path(out)
    assets = out / "answer-key_files"
    assets.mkdir(parents=True, exist_ok=True)
    shutil.copy(mathjax_file(), assets)
    exporter = HTMLExporter(template_name="offline_lab", extra_template_basedirs=[str(TEMPLATES)],
                            extra_template_paths=[str(TEMPLATES)],
                            mathjax_url=f"answer-key_files/{MATHJAX}", exclude_input_prompt=True,
                            exclude_anchor_links=True)
    html, _ = exporter.from_notebook_node(answer_key_notebook(sources, book))
    page = out / "answer-key.html"
    page.write_text(html, encoding="utf-8")
    return page
