"""Per-session reveal.js slides, made from the executed chapters, with no network at all.

Each session of the course (``book/course.md``) gets a deck: its chapter's sections (the
first or second half of chapter 3 for sessions 3 and 4) up to its exercises, one slide per
``##`` section and one sub-slide per block of text (at most :data:`MAX_WORDS` words each), with the figures and printed results of the executed
chapter and without code, solutions or hidden checks. nbconvert's slides exporter
renders them; reveal.js comes from the pinned PyPI package ``sphinx-revealjs`` (only its
files are used) and MathJax from ``django-static-mathjax``, both copied beside the decks.

The site's build calls :func:`write_decks` on the notebooks it has just executed
(``book/_ext/course_slides.py``), so the slides show the same numbers as the chapters; the
text is made plain by the converter every edition uses (:func:`mhacore.editions.reader.plain_markdown`),
so references read "Theorem 3.1", "Figure 6.2", "(6.1)" and citations author–year.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import shutil
from pathlib import Path

from .common import MATHJAX, TEMPLATES, mathjax_file

# session -> (chapter number, which half of its "##" sections; None for all)
SESSIONS = {1: ("01", None), 2: ("02", None), 3: ("03", 0), 4: ("03", 1), 5: ("04", None),
            6: ("05", None), 7: ("06", None), 8: ("07", None), 9: ("08", None)}
REVEAL_FILES = ("dist/reveal.js", "dist/reveal.css", "dist/theme/white.css",
                "dist/theme/fonts/source-sans-pro", "plugin/notes/notes.js")
_HIDDEN_TAGS = {"remove-cell", "remove-output", "solution", "instructor-only"}
MAX_WORDS = 120  # of text on one slide; longer sections are split at paragraphs
_EXERCISES = re.compile(r"^## Exercises", re.M)
# a glued figure or equation: ```{glue:figure} key ... ``` (any fence), shown as its output
_GLUE_BLOCK = re.compile(r"^(?P<fence>`{3,}|:{3,})\{glue(?::figure|:math|:any)?\}\s*(?P<key>\S+)"
                         r".*?^(?P=fence)\s*$", re.S | re.M)
_GLUE_TEXT = re.compile(r"\{glue(?::text)?\}`([^`:]*)(?::([^`]*))?`")
# the converter's block quotes (theorems, proofs, admonitions): a slide shows them as plain
# paragraphs under their bold title, so that a long one can be cut across slides
_QUOTE = re.compile(r"^(?:> ?)+", re.M)


def _glued_text(glued: dict, key: str, fmt: str | None) -> str:
    """A glued number as the text shows it (``{glue:text}`key:.3f```)."""
    value = glued.get(key, {}).get("data", {}).get("text/plain", key)
    try:
        return format(float(value), fmt) if fmt else value
    except ValueError:
        return value


def _with_glued(cell, glued: dict) -> list:
    """The markdown ``cell`` with glued numbers in place, followed by a cell showing each
    glued figure or equation it names (as the site shows them in the text)."""
    import nbformat

    keys = [m.group("key") for m in _GLUE_BLOCK.finditer(cell.source)]
    cell.source = _GLUE_BLOCK.sub("", cell.source)
    cell.source = _GLUE_TEXT.sub(lambda m: _glued_text(glued, m.group(1).strip(), m.group(2)),
                                 cell.source)
    shown = []
    for key in keys:
        if key in glued:
            output = nbformat.from_dict({k: v for k, v in glued[key].items()
                                         if k in ("output_type", "data", "metadata")})
            shown.append(nbformat.v4.new_code_cell("", outputs=[output]))
    return [cell] + shown


def deck_name(session: int) -> str:
    """The file name of a session's deck, e.g. ``session-1.slides.html``."""
    return f"session-{session}.slides.html"


def _visible_outputs(cell) -> list:
    """Outputs worth a slide: figures and results, and glued values (which the site shows
    inside its text), but no warnings or progress bars."""
    keep = []
    for output in cell.get("outputs", []):
        if output.output_type == "stream":
            if output.name == "stdout":
                keep.append(output)
        elif output.output_type in ("display_data", "execute_result"):
            keep.append(output)
    return keep


def _paragraphs(text: str) -> list[str]:
    """``text`` split at blank lines, keeping display math and fenced blocks whole."""
    blocks, current, fence = [], [], None
    for line in text.split("\n"):
        stripped = line.strip()
        if fence is None and not stripped and current:
            blocks.append("\n".join(current))
            current = []
            continue
        current.append(line)
        if stripped.startswith("$$") and stripped.count("$$") == 1:
            fence = None if fence == "$$" else "$$"
        elif re.match(r"^(`{3,}|:{3,})", stripped):
            mark = re.match(r"^(`{3,}|:{3,})", stripped).group(1)
            fence = None if fence == mark else (fence or mark)
    if current:
        blocks.append("\n".join(current))
    return [b for b in blocks if b.strip()]


def word_count(text: str) -> int:
    """The words of a slide's text: whitespace-separated tokens holding a letter or digit
    (so ``$x + y$`` counts 2, a lone ``-`` or ``+`` none)."""
    return sum(1 for token in text.split() if re.search(r"\w", token))


_MATH = re.compile(r"\$\$.*?\$\$|\$[^$]*\$", re.S)


def _protected(text: str, split) -> list[str]:
    """``split(text)`` with every ``$...$`` span kept whole (never cut inside math)."""
    spans = _MATH.findall(text)
    masked = _MATH.sub(lambda m: f"\0{spans.index(m.group())}\0", text)
    return [re.sub(r"\0(\d+)\0", lambda m: spans[int(m.group(1))], part)
            for part in split(masked) if part.strip()]


def _units(paragraph: str, limit: int) -> list[tuple[str, str]]:
    """A paragraph cut into pieces of at most ``limit`` words: at list items, then at
    sentences, then (a single sentence longer than a slide) between words. Each piece
    comes with the separator that rejoins it to the previous one."""
    units = []
    for item in re.split(r"\n(?=\s*(?:[-*+]|\d+\.)\s)", paragraph):
        if word_count(item) <= limit:
            units.append((item, "\n"))
            continue
        for sentence in _protected(item, lambda t: re.split(r"(?<=[.;:?!])\s+", t)):
            if word_count(sentence) <= limit:
                units.append((sentence, " "))
                continue
            words, current = _protected(sentence, str.split), []
            for word in words:
                if current and word_count(" ".join(current + [word])) > limit:
                    units.append((" ".join(current), " "))
                    current = []
                current.append(word)
            units.append((" ".join(current), " "))
    return [(text, "\n\n" if at == 0 else sep) for at, (text, sep) in enumerate(units)]


def split_long(text: str, limit: int = MAX_WORDS) -> list[str]:
    """``text`` as consecutive slide texts of at most ``limit`` words, cut at paragraphs
    (a longer paragraph is cut at list items, sentences, and as a last resort between
    words; display math and fenced blocks stay whole).

    Examples
    --------
    >>> [word_count(t) for t in split_long("one two three.\\n\\nfour five.", limit=3)]
    [3, 2]
    >>> split_long("A b $x + y$ c. D e f.", limit=5)
    ['A b $x + y$ c.', 'D e f.']
    """
    pieces = []
    for paragraph in _paragraphs(text):
        if word_count(paragraph) <= limit or paragraph.lstrip().startswith(("$$", "```")):
            pieces.append((paragraph, "\n\n"))
        else:
            pieces += _units(paragraph, limit)
    slides, current = [], ""
    for piece, sep in pieces:
        joined = f"{current}{sep}{piece}" if current else piece
        if current and word_count(joined) > limit:
            slides.append(current)
            joined = piece
        current = joined
    if current:
        slides.append(current)
    return slides


def session_notebook(executed, half: int | None = None, glued: dict | None = None,
                     book=None, page: str = ""):
    """A deck (nbformat) from an executed chapter notebook.

    Everything from the chapter's ``## Exercises`` heading on is left out (exercises,
    their answer cells and self-check outputs); the text is made plain with the numbers
    and citations of ``book`` (:func:`mhacore.editions.reader.plain_markdown`, solutions dropped,
    block quotes as plain paragraphs); a section longer than :data:`MAX_WORDS` words is
    split into several slides at its paragraphs.

    Parameters
    ----------
    executed : nbformat.NotebookNode
        The chapter as the site's build executed it.
    half : {None, 0, 1}
        All sections, or the first or second half of its ``##`` sections.
    glued : dict, optional
        The chapter's glued outputs (myst-nb's ``.glue.json`` beside the notebook).
    book : mhacore.editions.reader.Book, optional
        The book's labels, titles and references (:func:`mhacore.editions.reader.read_book`).
    page : str
        The chapter's file stem (``06-heads-and-width``).
    """
    import nbformat

    from .reader import plain_markdown

    if half not in (None, 0, 1):
        raise ValueError(f"half must be None, 0 or 1; got {half!r}")
    source_cells = []
    for cell in copy.deepcopy(executed.cells):
        tags = set(cell.metadata.get("tags", []))
        if tags & _HIDDEN_TAGS:
            continue
        if cell.cell_type == "markdown" and _EXERCISES.search(cell.source):
            # the exercises stay in the chapter: nothing from their heading on is shown
            cell.source = _EXERCISES.split(cell.source)[0]
            source_cells += _with_glued(cell, glued or {})
            break
        source_cells += _with_glued(cell, glued or {}) if cell.cell_type == "markdown" \
            else [cell]
    cells = []
    for cell in source_cells:
        if cell.cell_type == "markdown":
            text = _QUOTE.sub("", plain_markdown(cell.source, book, page)).strip()
            if not text:
                continue
            for at, part in enumerate(split_long(text)):
                heading = at == 0 and (part.startswith("# ") or part.startswith("## "))
                piece = nbformat.v4.new_markdown_cell(part)
                piece.metadata["slideshow"] = {"slide_type": "slide" if heading
                                               else "subslide"}
                cells.append(piece)
            continue
        if cell.cell_type == "code":
            cell.outputs = _visible_outputs(cell)
            if not cell.outputs:
                continue
            cell.metadata["slideshow"] = {"slide_type": "-"}
        cells.append(cell)
    if half is not None:
        starts = [i for i, c in enumerate(cells) if c.cell_type == "markdown"
                  and c.source.startswith("## ")]
        if len(starts) >= 2:
            middle = starts[len(starts) // 2]
            title = cells[:1]
            cells = title + (cells[1:middle] if half == 0 else cells[middle:])
    deck = copy.deepcopy(executed)
    deck.cells = cells
    return deck


def _copy_assets(out: Path) -> None:
    import sphinx_revealjs

    reveal = Path(sphinx_revealjs.__file__).parent / "_static" / "revealjs"
    for name in REVEAL_FILES:
        source, target = reveal / name, out / "reveal.js" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copy(source, target)
    shutil.copy(mathjax_file(), out)


def write_decks(out: Path, executed_dir: Path, sessions: dict | None = None,
                book=None) -> list[Path]:
    """Write one deck per session into ``out`` from the executed chapters in
    ``executed_dir`` (``NN-slug.ipynb``); return the decks written.

    Sessions whose chapter is not in ``executed_dir`` are skipped; ``book`` is as in
    :func:`session_notebook` (a page it names reads as its title: the decks hold no
    notebooks to link to).
    """
    import nbformat
    from nbconvert import SlidesExporter

    from .reader import Book

    sessions = SESSIONS if sessions is None else sessions
    book = dataclasses.replace(book or Book(), notebooks=set())
    executed = {p.name[:2]: p for p in sorted(Path(executed_dir).glob("[0-9][0-9]-*.ipynb"))}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _copy_assets(out)
    exporter = SlidesExporter(template_name="offline_reveal",
                              extra_template_basedirs=[str(TEMPLATES)],
                              extra_template_paths=[str(TEMPLATES)],
                              reveal_url_prefix="reveal.js", reveal_theme="white",
                              mathjax_url=MATHJAX, exclude_input=True,
                              exclude_input_prompt=True, exclude_output_prompt=True,
                              exclude_anchor_links=True)
    written = []
    for session, (chapter, half) in sessions.items():
        if chapter not in executed:
            continue
        glue_file = executed[chapter].with_suffix(".glue.json")
        glued = json.loads(glue_file.read_text("utf-8")) if glue_file.is_file() else {}
        deck = session_notebook(nbformat.read(executed[chapter], as_version=4), half, glued,
                                book, executed[chapter].stem)
        title = next((c.source.split("\n", 1)[0][2:] for c in deck.cells
                      if c.cell_type == "markdown" and c.source.startswith("# ")), chapter)
        deck.metadata["title"] = f"Session {session}: {title}"
        html, _ = exporter.from_notebook_node(deck)
        path = out / deck_name(session)
        path.write_text(html, encoding="utf-8")
        written.append(path)
    return written
