"""Each chapter as a plain Jupyter notebook that runs anywhere, in every edition.

The book's chapters are MyST notebooks: their Markdown holds directives (``{exercise}``,
``{prf:theorem}``, ``{glue:figure}``, ...) and roles (``{numref}``, ``{cite}``, ...) that
only the book's build understands. :func:`plain_markdown` is the one converter from that
MyST to the Markdown any notebook front end shows, with the numbers the website gives:

- admonitions, theorems, definitions and proofs become block quotes with a bold title;
- exercises become numbered headings; solutions are dropped, or kept as ordinary text;
- cross-references become their numbers (``Figure 6.2``, ``Theorem 6.1``, ``(6.3)``) or titles;
- citations become author–year, and a references cell closes the notebook;
- glued figures and equations are announced where the site shows them; the cell that
  computes them displays them (:func:`mhacore.editions.common.show_glued`).

Every edition made from the chapters goes through it, with the :class:`Book` read once
(:func:`read_book`): the reader, student, instructor and nbgrader notebooks
(:func:`edition_notebook`), the answer key, the teaching plan and the slides. The editions
differ only in what they keep (:data:`EDITIONS`), never in their numbers.

``python -m mhacore teach reader --out DIR`` writes the reader edition: every chapter,
solutions removed, an empty ``answer = None`` cell before each self-check (which then
says "Your turn"). The website's ``.ipynb`` download of a chapter is the same file.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import references as _references
from .common import STUDENT_ONLY
from .references import escape_markdown, exercise_name

# Numbered directives and the word the site prints before their number.
KIND_NAMES = {
    "figure": "Figure", "equation": "Equation", "exercise": "Exercise",
    "prf:theorem": "Theorem", "prf:definition": "Definition", "prf:remark": "Remark",
    "prf:proposition": "Proposition", "prf:lemma": "Lemma", "prf:corollary": "Corollary",
    "prf:example": "Example", "prf:conjecture": "Conjecture", "prf:axiom": "Axiom",
    "prf:algorithm": "Algorithm", "prf:criterion": "Criterion", "prf:property": "Property",
    "prf:observation": "Observation", "prf:assumption": "Assumption",
}
_FIGURES = ("glue:figure", "figure")
_EQUATIONS = ("glue:math", "math")
_OPEN = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|:{3,})(?P<info>.*)$")
_DIRECTIVE_INFO = re.compile(r"^\{(?P<name>[\w:-]+)\}\s*(?P<arg>.*)$")
_OPTION = re.compile(r"^:(?P<key>[\w-]+):\s*(?P<value>.*)$")
_ROLE = re.compile(r"\{(?P<name>[\w:-]+)\}`(?P<body>[^`]*)`")
_TARGET = re.compile(r"^\((?P<label>[^)\s]+)\)=\s*$")
_EQUATION = re.compile(r"^\$\$\s*\((?P<label>[^)\s]+)\)\s*$")
_HEADING = re.compile(r"^#{1,6}\s")  # the title is the rest, stripped (_heading_title)
READER_KEY = "mhacore_reader"  # metadata flag of the cells an edition adds (note, references)
# {exec-time}`this`: a page's run time, which only the site's build measures
# (book/_ext/exec_time.py)
EXEC_TIME_TEXT = "the time its page on the website shows"
# What each edition keeps: the written solutions and the instructor-only cells; the code
# of the answer cells (else an empty ``answer = None`` cell); a note opening the notebook.
EDITIONS = {"reader": (False, False, True), "student": (False, False, True),
            "instructor": (True, True, False), "nbgrader": (False, True, False)}
EDITION_NOTE = (
    "*{edition} edition, for `mhacore` {version}.* Run the cells from the top. Figures and "
    "equations appear in the output of the cell that computes them; numbers the book "
    "prints in its text are printed as `key = value`. Each exercise with a self-check "
    "has a cell `answer = None`: put your answer there, then run the check.")

# The reader notebook's first code cell: a notebook downloaded from the site runs where
# mhacore is installed (a clone's environment: the cell does nothing) and where it is not
# (Colab, a fresh Jupyter): there it installs the release the notebook was made for.
INSTALL_CELL = (
    "# Runs anywhere: where mhacore is missing (e.g. on Colab), install the release this\n"
    "# notebook was made for; where it is installed, this cell does nothing.\n"
    "import importlib.util\n"
    "import subprocess\n"
    "import sys\n"
    "\n"
    "if importlib.util.find_spec(\"mhacore\") is None:\n"
    "    subprocess.run([sys.executable, \"-m\", \"pip\", \"install\", \"--quiet\",\n"
    "                    \"mhacore[book]=={version}\"], check=True)")


@dataclass(frozen=True)
class Target:
    """What a label points at: its kind, its number (None if unnumbered), its page (the
    chapter's file stem) and a title."""

    kind: str
    number: str | None
    page: str
    title: str

    def name(self, words: dict | None = None) -> str:
        """The words the site prints for the reference, e.g. ``Theorem 2``, ``(3)`` or
        ``Exercise 1.1 (The Epanechnikov constants)``; with ``words`` (:attr:`Book.words`)
        in another language (``定理 2``)."""
        words = words or {}
        if self.kind == "equation":
            return f"({self.number})" if self.number else words.get("the equation",
                                                                    "the equation")
        word = KIND_NAMES.get(self.kind)
        word = words.get(word, word)
        if word and self.number:
            return f"{word} {self.number}"
        if self.kind == "exercise":  # numbered by hand in its title, as on the site
            name = exercise_name(self.title)
            if name and words:  # "Exercise 1.1 (Name)" in the words' language
                number, rest = name.removeprefix("Exercise ").split(" ", 1)
                name = words.get("Exercise {number} ({name})", "Exercise {number} ({name})"
                                 ).format(number=number, name=rest[1:-1])
            return name or self.title or word
        return self.title or word or self.kind


@dataclass
class Book:
    """What the converter needs to know about the whole book: every label, every page's
    title, which pages have a notebook of their own, and the bibliography."""

    labels: dict[str, Target] = field(default_factory=dict)
    titles: dict[str, str] = field(default_factory=dict)
    notebooks: set[str] = field(default_factory=set)
    references: dict[str, dict] = field(default_factory=dict)
    prose_words: dict[str, int] = field(default_factory=dict)  # page -> words of prose
    # the language of the pages read, and the converter's own words in it: English text
    # (a word, a template) -> its translation (mhacore.editions.translated.WORDS)
    language: str = "en"
    words: dict[str, str] = field(default_factory=dict)


def _say(book: Book, text: str, **fields) -> str:
    """The converter's English ``text`` (a template of ``fields``) in the book's language.

    >>> _say(Book(), "**Figure {number}.**", number="1.2")
    '**Figure 1.2.**'
    >>> _say(Book(words={"**Figure {number}.**": "**图 {number}**"}), "**Figure {number}.**",
    ...      number="1.2")
    '**图 1.2**'
    """
    text = book.words.get(text, text)
    return text.format(**fields) if fields else text


# --- walking MyST text ------------------------------------------------------------------

@dataclass
class Block:
    """A fenced block: a directive (``name`` set) or a plain code fence (``name`` None)."""

    fence: str
    name: str | None
    arg: str
    options: dict
    body: list[str]
    info: str


def split_blocks(lines: list[str]) -> list:
    """``lines`` as a list of plain lines (str) and fenced :class:`Block` s (top level).

    A directive left open raises ``ValueError`` (it would swallow the rest of the text,
    in the student edition silently); a plain code fence left open runs to the end, as
    in CommonMark."""
    out, i = [], 0
    while i < len(lines):
        match = _OPEN.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        fence, info = match.group("fence"), match.group("info").strip()
        end = _closing(lines, i, fence, directive=info.startswith("{"))
        directive = _DIRECTIVE_INFO.match(info)
        if directive and end == len(lines):
            raise ValueError(f"markdown has an unclosed {{{directive.group('name')}}} "
                             f"block (fence {fence!r}) at line {i + 1}")
        if directive:
            options, body = _split_options(lines[i + 1:end])
            out.append(Block(fence, directive.group("name"), directive.group("arg").strip(),
                             options, body, info))
        else:
            out.append(Block(fence, None, "", {}, lines[i + 1:end], info))
        i = end + 1
    return out


def _closing(lines: list[str], start: int, fence: str, directive: bool) -> int:
    """The line closing the fence opened at ``start`` (or the end of ``lines``).

    Inside a directive, fences of the same character that open blocks of their own
    (``` ```python ``` in an exercise) are skipped as a whole."""
    j = start + 1
    while j < len(lines):
        stripped = lines[j].strip()
        if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
            return j
        inner = _OPEN.match(lines[j])
        if directive and inner and inner.group("info").strip():
            j = _closing(lines, j, inner.group("fence"),
                         inner.group("info").strip().startswith("{")) + 1
            continue
        j += 1
    return len(lines)


def _split_options(body: list[str]) -> tuple[dict, list[str]]:
    options = {}
    if body and body[0].strip() == "---":  # options as a YAML block
        end = next((k for k in range(1, len(body)) if body[k].strip() == "---"), 0)
        for line in body[1:end]:
            key, _, value = line.partition(":")
            options[key.strip()] = value.strip()
        return options, body[end + 1:]
    i = 0
    while i < len(body) and _OPTION.match(body[i].strip()):
        match = _OPTION.match(body[i].strip())
        options[match.group("key")] = match.group("value")
        i += 1
    return options, body[i:]


# --- numbering: the labels of one page ---------------------------------------------------

def page_labels(text: str, page: str, chapter: int | None = None) -> dict[str, Target]:
    """The labels ``text`` defines, numbered per kind in document order, as every edition
    numbers them: ``chapter.k`` on a numbered chapter (``Theorem 6.1``, ``(6.2)``; Sphinx
    ``numfig`` under a numbered toctree, and the PDF), plain ``k`` on other pages.

    Examples
    --------
    >>> text = "(sec-a)=\\n## Start\\n\\n$$\\nx\\n$$ (eq-x)\\n\\n```{prf:theorem} Big\\n:label: thm-b\\n\\nT\\n```"
    >>> labels = page_labels(text, "06-x", chapter=6)
    >>> labels["sec-a"].name(), labels["eq-x"].name(), labels["thm-b"].name()
    ('Start', '(6.1)', 'Theorem 6.1')
    >>> page_labels(text, "notes")["thm-b"].name()
    'Theorem 1'
    """
    labels, counters = {}, {}
    prefix = f"{chapter}." if chapter is not None else ""

    def add(label, kind, options, title):
        number = None
        if "nonumber" not in options and (kind != "figure" or label):
            counters[kind] = counters.get(kind, 0) + 1
            number = f"{prefix}{counters[kind]}"
        if label:
            labels[label] = Target(kind, number, page, title)

    def walk(lines):
        pending = []
        for item in split_blocks(lines):
            if isinstance(item, Block):
                pending = []
                if item.name is None:
                    continue
                label = item.options.get("label") or item.options.get("name")
                if item.name in _FIGURES:
                    add(label, "figure", item.options, _caption(item.body))
                elif item.name in _EQUATIONS:
                    if label:
                        add(label, "equation", item.options, "")
                elif item.name in KIND_NAMES:
                    add(label, item.name, item.options, item.arg)
                elif label:
                    labels[label] = Target(item.name, None, page, item.arg)
                if item.name != "code-cell":
                    walk(item.body)
                continue
            target, heading = _TARGET.match(item.strip()), _heading_title(item)
            equation = _EQUATION.match(item.strip())
            if target:
                pending.append(target.group("label"))
            elif heading:
                for label in pending:
                    labels[label] = Target("section", None, page, heading)
                pending = []
            elif equation:
                add(equation.group("label"), "equation", {}, "")
            elif item.strip():
                pending = []

    walk(text.split("\n"))
    return labels


def _heading_title(line: str) -> str | None:
    """The title of a Markdown heading line (``## Title``), or None if it is none.

    String operations, not a backtracking pattern: a long run of spaces in a line
    (``"# a" + " " * 10**5 + "b"``) costs linear time."""
    if not _HEADING.match(line):
        return None
    return line.lstrip("#").strip() or None


def _caption(body: list[str]) -> str:
    return " ".join(line.strip() for line in body if line.strip())


def page_title(text: str) -> str:
    """The first top-level heading of a page (its title), or ``""``."""
    in_front_matter = text.startswith("---")
    for k, line in enumerate(text.split("\n")):
        if k and in_front_matter and line.strip() == "---":
            in_front_matter = False
            continue
        if not in_front_matter and line.startswith("# "):
            return line[2:].strip()
    return ""


# --- rendering ---------------------------------------------------------------------------

# --- a page's length (the course page's reading times) -----------------------------------

WORDS_PER_MINUTE = 120

_PROSE_FENCE = re.compile(r"^(`{3,}|:{3,})")
_PROSE_SKIPPED = ("{code-cell}", "{math}", "{glue:figure}", "{figure}", "{bibliography}")
_PROSE_NOISE = re.compile(r"^\s*(:[\w-]+:.*|\([^)\s]+\)=\s*|<!--.*-->|\+\+\+.*)$")
_PROSE_INLINE = re.compile(r"\$[^$]+\$|`[^`]*`|\{[\w:-]+\}|<[^>]+>|https?://\S+")
_PROSE_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_PROSE_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
#: The pace of a Chinese reader of the same careful kind, in characters a minute (about
#: half an everyday reading pace, as WORDS_PER_MINUTE is for English)
CHARACTERS_PER_MINUTE = 200


def _prose_lines(markdown: str):
    """The lines of a MyST page a reader reads as prose, with inline math, code, roles'
    names, tags and links blanked."""
    text = re.sub(r"\A---\n.*?\n---\n", "", markdown, flags=re.S)  # front matter
    skipping, in_math = None, False
    for line in text.splitlines():
        stripped = line.strip()
        if skipping:
            if stripped == skipping:
                skipping = None
            continue
        if in_math:  # a displayed formula, until the line that closes it
            in_math = not stripped.endswith("$$")
            continue
        if stripped.startswith("$$"):  # "$$", "$$ (label)" open one; "$$ x $$" is whole
            in_math = "$$" not in stripped[2:]
            continue
        fence = _PROSE_FENCE.match(stripped)
        if fence and any(stripped[len(fence.group(1)):].startswith(b) for b in _PROSE_SKIPPED):
            skipping = fence.group(1)
            continue
        if fence or _PROSE_NOISE.match(line):
            continue
        yield _PROSE_INLINE.sub(" ", line)


def prose_words(markdown: str) -> int:
    """The number of prose words in a MyST page.

    >>> prose_words("# Title\\n\\nTwo words $x^2$ here.\\n\\n```{code-cell} python\\nx = 1\\n```\\n")
    4
    >>> prose_words("---\\nkernelspec: x\\n---\\n$$\\na + b\\n$$\\n(label)=\\nOne `code` {doc}`Page title`.")
    1
    """
    return sum(len(_PROSE_WORD.findall(line)) for line in _prose_lines(markdown))


def prose_characters(markdown: str) -> int:
    """The length of a Chinese MyST page's prose: its Chinese characters, and each Latin
    word (a name, an abbreviation: NW, MSE) as one.

    >>> prose_characters("# 标题\\n\\n带宽 $h$ 的 NW 估计器。\\n\\n```{code-cell} python\\nx = 1\\n```\\n")
    9
    """
    return sum(len(_PROSE_CJK.findall(line)) + len(_PROSE_WORD.findall(line))
               for line in _prose_lines(markdown))


def reading_minutes(words: int, per_minute: int = WORDS_PER_MINUTE) -> int:
    """Minutes to read ``words`` at ``per_minute`` (default :data:`WORDS_PER_MINUTE`),
    rounded up to 5.

    >>> reading_minutes(1), reading_minutes(600), reading_minutes(601)
    (5, 5, 10)
    >>> reading_minutes(2000, CHARACTERS_PER_MINUTE)
    10
    """
    return 5 * max(1, math.ceil(words / per_minute / 5))


def plain_markdown(markdown: str, book: Book | None = None, page: str = "",
                   solutions: bool = False) -> str:
    """MyST Markdown as plain notebook Markdown: no directive or role left.

    Parameters
    ----------
    markdown : str
        MyST text (a Markdown cell of a chapter, or a whole page).
    book : Book, optional
        The book's labels, titles and references (:func:`read_book`); without it,
        references print their label and citations their key.
    page : str
        The file stem of the page the text comes from (numbers of labels on other pages
        name their chapter).
    solutions : bool
        Keep the ``{solution}`` blocks (as text after the exercise); the reader edition
        drops them.

    Examples
    --------
    >>> text = ":::{prf:theorem} Rate\\n:label: thm-r\\n\\nIt holds {cite}`k`.\\n:::"
    >>> print(plain_markdown(text, Book(labels=page_labels(text, "01-a")), "01-a"))
    > **Theorem 1 (Rate).**
    >
    > It holds (k).
    >>> print(plain_markdown("Before\\n::::{solution} ex-1\\nhidden\\n::::\\nAfter"))
    Before
    After
    """
    book = book or Book()
    text = "\n".join(_render(markdown.split("\n"), book, page, solutions))
    text = _ROLE.sub(lambda m: _role(m.group("name"), m.group("body"), book, page), text)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n")


def _quote(lines: list[str]) -> list[str]:
    return [f"> {line}".rstrip() for line in lines]


def _number_of(block: Block, book: Book, kind: str, page: str) -> str | None:
    label = block.options.get("label") or block.options.get("name")
    target = book.labels.get(label) if label else None
    return target.number if target and target.kind == kind and target.page == page else None


def _render(lines: list[str], book: Book, page: str, solutions: bool) -> list[str]:
    """Plain Markdown of ``lines``; a section labelled ``student-edition-...`` is left out
    (the converter makes the full editions' notebooks and packs)."""
    out = []
    cut_below = None  # the level of a student-edition section being left out
    labelled = False  # a student-edition label was just seen: its heading comes next
    for item in split_blocks(lines):
        heading = re.match(r"(#{1,6})\s", item) if isinstance(item, str) else None
        if cut_below is not None:
            if not heading or len(heading.group(1)) > cut_below:
                continue
            cut_below = None
        if isinstance(item, str) and item.strip():
            target = _TARGET.match(item.strip())
            if target and target.group("label").startswith(STUDENT_ONLY + "-"):
                labelled = True
                continue
            if labelled and heading:
                cut_below = len(heading.group(1))
                labelled = False
                continue
            labelled = False
        if isinstance(item, str):
            out += _render_line(item, book, page)
        elif item.name is None:
            out += [item.fence + item.info, *item.body, item.fence]
        else:
            out += _render_directive(item, book, page, solutions)
    return out


def _render_line(line: str, book: Book, page: str) -> list[str]:
    stripped = line.strip()
    if _TARGET.match(stripped) or stripped.startswith("% "):
        return []
    equation = _EQUATION.match(stripped)
    if equation:
        target = book.labels.get(equation.group("label"))
        number = target.number if target else equation.group("label")
        return [f"\\tag{{{number}}}", "$$"]
    return [line]


def _render_directive(block: Block, book: Book, page: str, solutions: bool) -> list[str]:
    name, arg = block.name, block.arg
    body = _render(block.body, book, page, solutions)
    while body and not body[0].strip():
        body.pop(0)
    while body and not body[-1].strip():
        body.pop()
    if name in KIND_NAMES and name.startswith("prf:"):
        number = _number_of(block, book, name, page)
        title = _say(book, KIND_NAMES[name]) + (f" {number}" if number else "")
        title += _say(book, " ({title})", title=arg) if arg else ""
        return ["", *_quote([_say(book, "**{title}.**", title=title), "", *body]), ""]
    if name == "prf:proof":
        return ["", *_quote([_say(book, "*Proof.*"), "", *body, "", "∎"]), ""]
    if name == "exercise":
        number = _number_of(block, book, "exercise", page)
        title = (_say(book, "Exercise {number}: {title}", number=number, title=arg) if arg
                 else f"{_say(book, 'Exercise')} {number}") if number \
            else _say(book, "Exercise {title}", title=arg).strip()
        return ["", f"### {title}", "", *body, ""]
    if name == "solution":
        if not solutions:
            return []
        label = book.labels.get(arg)
        words = escape_markdown(label.name(book.words)) if label else arg  # "h*": no emphasis
        return ["", *_quote([_say(book, "**Solution to {name}.**", name=words), "", *body]),
                ""]
    if name in _FIGURES:
        number = _number_of(block, book, "figure", page)
        where = (_say(book, "drawn by the code cell above") if name == "glue:figure"
                 else f"![{block.options.get('alt', '')}]({arg})")
        head = _say(book, "**Figure {number}.**", number=number) if number \
            else _say(book, "**Figure.**")
        return ["", f"{head} {_caption(body)} {_say(book, '*({where})*', where=where)}"
                if name == "glue:figure" else f"{where}\n\n{head} {_caption(body)}", ""]
    if name in _EQUATIONS:
        number = _number_of(block, book, "equation", page)
        if name == "math":
            tag = [f"\\tag{{{number}}}"] if number else []
            return ["", "$$", *body, *tag, "$$", ""]
        return ["", _say(book, "*Equation ({number}) is shown in the output of the code cell "
                               "above.*", number=number) if number else
                _say(book, "*The equation is shown in the output of the code cell above.*"), ""]
    if name in ("glue", "glue:any"):
        return ["", _say(book, "*(`{key}` is shown in the output of the code cell above.)*",
                         key=arg), ""]
    if name in ("code-block", "code", "sourcecode"):
        return ["```" + arg, *block.body, "```"]
    if name == "glossary":
        return _glossary(body)
    if name == "table":  # a Markdown table with options (widths) for the site and PDF
        return ["", *([f"**{arg}**", ""] if arg else []), *body, ""]
    if name == "nb-exec-table":
        return ["", _say(book, "*(The table of execution times is on the book's website.)*"),
                ""]
    if name in ("bibliography", "toctree", "tableofcontents", "tabularcolumns"):
        return []
    if name == "container":  # a class for the site's styling or editions
        return [] if STUDENT_ONLY in arg.split() else ["", *body, ""]
    title = arg or name.split(":")[-1].capitalize()
    return ["", *_quote([f"**{title}**", "", *body]), ""]


def _glossary(body: list[str]) -> list[str]:
    out = []
    for line in body:
        if line.strip() and not line[0].isspace():
            out.append(f"- **{line.strip()}**:")
        elif line.strip() and out:
            out[-1] += f" {line.strip()}"
    return ["", *out, ""]


def _explicit(body: str) -> tuple[str, str] | None:
    """``(text, target)`` of a role body written ``text <target>``, else None.

    The target runs from the first ``<`` after the body's last inner ``>`` to the final
    ``>``; the text is what comes before it, trailing whitespace dropped. Found with
    ``rfind``/``find`` in linear time (a pattern with a lazy ``.*?`` before ``\\s*<``
    took quadratic time on a long body of spaces or ``<``).

    >>> _explicit("the theorem <thm-a>"), _explicit("a <b <c>"), _explicit("plain")
    (('the theorem', 'thm-a'), ('a', 'b <c'), None)
    """
    inner = body.removesuffix("\n")  # "$" also matched before a final newline
    if not inner.endswith(">"):
        return None
    inner = inner[:-1]
    start = inner.find("<", inner.rfind(">") + 1)
    if start < 0 or start == len(inner) - 1:  # no "<", or an empty target
        return None
    return inner[:start].rstrip(), inner[start + 1:]


def _role(name: str, body: str, book: Book, page: str) -> str:
    explicit = _explicit(body)
    text, key = explicit if explicit else (None, body.strip())
    if name in ("numref", "ref", "prf:ref", "eq"):
        target = book.labels.get(key)
        if target is None:
            return text or key
        if name == "numref" and text:
            return text.replace("%s", target.number or "").replace("{number}",
                                                                  target.number or "")
        return text or escape_markdown(target.name(book.words))  # a title: "h*", "n_2"
    if name == "doc":
        stem = key.rstrip("/").split("/")[-1]
        words = text or escape_markdown(book.titles.get(stem, stem))
        return f"[{words}]({stem}.ipynb)" if stem in book.notebooks else f"*{words}*"
    if name.startswith("cite"):
        return cite([k.strip() for k in key.split(",")], book, textual=name in (
            "cite:t", "cite:ts", "cite:ct"))
    if name.startswith("glue"):
        return f"`{key.split(':')[0].strip()}`"
    if name == "exec-time":
        return _say(book, EXEC_TIME_TEXT)
    if name in ("prose-words", "reading-minutes"):  # book/_ext/reading_time.py
        words = book.prose_words.get(key.rstrip("/").split("/")[-1])
        if words is None:
            return "?"
        return f"{words if name == 'prose-words' else reading_minutes(words):,}"
    if name == "math":
        return f"${body}$"
    return text or key


# --- citations ----------------------------------------------------------------------------

def cite(keys: list[str], book: Book, textual: bool = False) -> str:
    """Author–year citation of ``keys``: ``(Watson, 1964)`` or, textual, ``Watson (1964)``
    (a key the bibliography lacks reads as itself)."""
    pairs = [(book.references[k]["who"], book.references[k]["year"])
             if k in book.references else (k, "") for k in keys]
    if textual:
        return "; ".join(f"{who} ({year})" if year else who for who, year in pairs)
    return "(" + "; ".join(f"{who}, {year}" if year else who for who, year in pairs) + ")"


def references_cell(markdown: str, book: Book) -> str:
    """A "References" section listing the works ``markdown`` cites (raw MyST), or ``""``."""
    keys = {k.strip() for m in _ROLE.finditer(markdown) if m.group("name").startswith("cite")
            for k in m.group("body").split(",")}
    entries = sorted(book.references[k]["entry"] for k in keys if k in book.references)
    return (_say(book, "## References") + "\n\n" + "\n".join(f"- {e}" for e in entries)
            if entries else "")


# --- the book and its reader notebooks ----------------------------------------------------

class SourceError(ValueError):
    """A source of the book (``_toc.yml``, ``_config.yml``, a page, the BibTeX file) that
    cannot be read; the message names the file and says what is wrong in one line.
    ``python -m mhacore teach`` reports it and exits with status 1 (bad data)."""


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error in one line, to follow "is not readable YAML": `` (line 4): while
    parsing a flow sequence from line 3: expected ',' or ']'``."""
    where, start = getattr(exc, "problem_mark", None), getattr(exc, "context_mark", None)
    at = f" (line {where.line + 1})" if where is not None else ""
    context = (f"{exc.context} from line {start.line + 1}: "
               if start is not None and getattr(exc, "context", None) else "")
    return f"{at}: {context}{getattr(exc, 'problem', None) or str(exc).splitlines()[0]}"


def read_source(path: Path, what: str) -> str:
    """The text of the book's file ``path`` (a ``what``: "page", "chapter", ...), or
    :class:`SourceError` naming it when it cannot be read as UTF-8."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{what} {path} is not UTF-8 text: {exc}") from None
    except OSError as exc:
        raise SourceError(f"{what} {path} cannot be read ({exc.strerror or exc})") from None


def _read_yaml(path: Path, what: str):
    """The parsed YAML file ``path``, or :class:`SourceError` saying where it is malformed."""
    text = read_source(path, what)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SourceError(f"{path} is not readable YAML{_yaml_problem(exc)}") from None


def _read_toc(book_root: Path) -> dict:
    """The parsed ``_toc.yml`` of ``book_root``: ``ValueError`` when there is none (a
    wrong ``book_root``), :class:`SourceError` saying what is wrong with it."""
    toc_file = Path(book_root) / "_toc.yml"
    if not toc_file.is_file():
        raise ValueError(f"book_root must hold the book's _toc.yml; not found: {toc_file}")
    toc = _read_yaml(toc_file, "table of contents")
    if not isinstance(toc, dict):
        raise SourceError(f"{toc_file} must be a mapping with a root page; got {type(toc).__name__}")
    if not isinstance(toc.get("root"), str):
        raise SourceError(f"{toc_file} must name its root page (root: a file name); got root "
                          f"{toc.get('root')!r:.100}")
    parts = toc.get("parts", [])
    if not isinstance(parts, list) or not all(
            isinstance(part, dict) and isinstance(part.get("chapters", []), list)
            and all(isinstance(c, dict) and isinstance(c.get("file"), str)
                    for c in part.get("chapters", []))
            for part in parts):
        raise SourceError(f"{toc_file}: every part must list chapters, each with a file; "
                         f"got parts {parts!r:.200}")
    return toc


def toc_pages(book_root: Path) -> list[Path]:
    """Every page of ``_toc.yml`` (root first), as paths to their ``.md`` sources.

    A page that ``_toc.yml`` names but that has no ``.md`` source (a typo) is a
    :class:`SourceError` naming the entry."""
    toc = _read_toc(book_root)
    files = [toc["root"]] + [c["file"] for part in toc.get("parts", [])
                             for c in part.get("chapters", [])]
    missing = [f for f in files if not (Path(book_root) / f"{f}.md").is_file()]
    if missing:
        raise SourceError(f"_toc.yml names {missing[0]!r}, but {Path(book_root) / missing[0]}.md "
                         "does not exist")
    return [Path(book_root) / f"{f}.md" for f in files]


def chapter_numbers(book_root: Path) -> dict[str, int]:
    """``{page stem: chapter number}`` for the pages of the ``numbered: true`` parts of
    ``_toc.yml``, counted on across parts (``use_multitoc_numbering``), as the site, the
    PDF and the reader notebooks number them; other pages have no chapter number."""
    numbers = {}
    for part in _read_toc(book_root).get("parts", []):
        if part.get("numbered"):
            for chapter in part.get("chapters", []):
                numbers[Path(chapter["file"]).stem] = len(numbers) + 1
    return numbers


def read_book(book_root: Path, texts: dict[str, str] | None = None, language: str = "en",
              words: dict[str, str] | None = None) -> Book:
    """Labels, titles and references of the whole book at ``book_root``.

    ``texts`` (``{page stem: MyST}``) stand for the pages' files, e.g. the pages in
    ``language``, whose converter words are ``words``
    (:func:`mhacore.editions.translated.translated_book`); the reading times are those of
    the files."""

    book_root = Path(book_root)
    book = Book(notebooks={p.stem for p in chapter_sources(book_root)}, language=language,
                words=dict(words or {}))
    chapters = chapter_numbers(book_root)
    for path in toc_pages(book_root):
        text = read_source(path, "page")
        book.prose_words[path.stem] = prose_words(text)
        text = (texts or {}).get(path.stem, text)
        book.titles[path.stem] = page_title(text)
        try:
            labels = page_labels(text, path.stem, chapters.get(path.stem))
        except ValueError as exc:  # a directive left open
            raise SourceError(f"{path}: {exc}") from None
        for label, target in labels.items():
            book.labels.setdefault(label, target)
    for bib in _bib_files(book_root):
        try:
            book.references.update(_references.read_references(bib))
        except ValueError as exc:
            raise SourceError(str(exc)) from None
    return book


def _bib_files(book_root: Path) -> list[Path]:
    """The BibTeX files that ``_config.yml`` lists (``bibtex_bibfiles``), or
    :class:`SourceError` saying what is wrong with the file."""
    config_file = Path(book_root) / "_config.yml"
    if not config_file.is_file():
        return []
    config = _read_yaml(config_file, "configuration")
    if config is None:
        return []
    if not isinstance(config, dict):
        raise SourceError(f"{config_file} must be a mapping of settings; got a "
                          f"{type(config).__name__}")
    bibs = config.get("bibtex_bibfiles", [])
    if not isinstance(bibs, list) or not all(isinstance(b, str) for b in bibs):
        raise SourceError(f"{config_file}: bibtex_bibfiles must be a list of file names; "
                          f"got {bibs!r:.200}")
    return [Path(book_root) / bib for bib in bibs]


def edition_notebook(source: Path, book: Book, edition: str = "reader",
                     text: str | None = None):
    """The chapter at ``source`` as a plain notebook of ``edition`` (nbformat).

    Markdown made plain (:func:`plain_markdown`) and glued values shown where they are
    computed (:func:`mhacore.editions.common.show_glued`), in every edition; a references cell at
    the end. What else each keeps is :data:`EDITIONS`: the instructor edition keeps the
    written solutions, the instructor-only cells and the answer cells' code; the nbgrader
    edition only the answer cells' code (still tagged ``solution``, for
    :mod:`mhacore.editions.grading`); the reader and student editions replace each answer cell by an
    empty ``answer = None`` cell and open with a note on how to use the notebook; the
    reader edition then has an install cell (:data:`INSTALL_CELL`), so that it runs
    outside a clone too.

    ``text`` stands for the file's MyST, e.g. the chapter in the language of ``book``
    (:func:`mhacore.editions.translated.translated_notebooks`): the words the edition
    adds are then in that language too, and its first code cell sets ``mhacore``'s
    (:data:`LANGUAGE_CELL`).
    """
    import nbformat

    from .common import GLUE_CELL_KEY, INSTRUCTOR_TAG, SOLUTION_TAG, STUB, show_glued

    if edition not in EDITIONS:
        raise ValueError(f"edition must be one of {sorted(EDITIONS)}; got {edition!r}")
    if not isinstance(book, Book):
        raise TypeError(f"book must be a Book (read_book); got {type(book).__name__}")
    solutions, answers, note = EDITIONS[edition]
    source = Path(source)
    raw = read_source(source, "chapter") if text is None else text
    nb = show_glued(_read_notebook(source, raw))
    describe_figures(nb, raw)  # alt text on the cells that draw the figures
    cells = []
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if INSTRUCTOR_TAG in tags and not solutions:
            continue
        if cell.cell_type == "markdown":
            try:
                cell.source = plain_markdown(cell.source, book, source.stem, solutions)
            except ValueError as exc:  # a directive left open
                raise SourceError(f"chapter {source}: {exc}") from None
            if not cell.source.strip():
                continue
        elif cell.cell_type == "code" and SOLUTION_TAG in tags and not answers:
            cell.source = _in_language(STUB, book)
            cell.metadata["tags"] = [t for t in tags if t not in (SOLUTION_TAG, "remove-cell")]
        elif cell.metadata.get(GLUE_CELL_KEY):
            cell.source = _in_language(cell.source, book)
        cells.append(cell)
    if cells and note:
        cell = nbformat.v4.new_markdown_cell(_say(
            book, EDITION_NOTE, edition=_say(book, edition.capitalize()), version=_version()))
        cell.metadata[READER_KEY] = True
        cells.insert(1, cell)
    if cells and edition == "reader":
        cell = nbformat.v4.new_code_cell(_in_language(INSTALL_CELL.format(
            version=_version()), book))
        cell.metadata[READER_KEY] = True
        cells.insert(2, cell)
    if cells and book.language != "en":
        _set_language(cells, book)
    refs = references_cell(raw, book)
    if refs:
        cell = nbformat.v4.new_markdown_cell(refs)
        cell.metadata[READER_KEY] = True
        cells.append(cell)
    for i, cell in enumerate(cells):
        cell.id = f"{source.stem[:40]}-{i:03d}"  # the same file from every run
    nb.cells = cells
    nb.metadata.pop("jupytext", None)
    nb.metadata["mhacore_edition"] = edition
    if book.language != "en":
        nb.metadata["mhacore_language"] = book.language
    return nb


# Where the book is in another language, its notebooks' first code cell also sets
# mhacore's, so that the self-checks reply in it.
LANGUAGE_CELL = ("# mhacore's messages (the self-checks' replies) in this language\n"
                 "import mhacore\n\nmhacore.set_language(\"{language}\")\n"
                 "# and what the cells print and display, as the book's pages show it\n"
                 "mhacore.i18n.translate_outputs()")


def _in_language(code: str, book: Book) -> str:
    """Code a notebook edition adds, its comments in the book's language."""
    for english, words in book.words.items():
        if english.startswith("# "):
            code = code.replace(english, words)
    return code


def _set_language(cells: list, book: Book) -> None:
    """Make the first code cell of ``cells`` (the install cell, in the reader edition)
    set mhacore's language to the book's: :data:`LANGUAGE_CELL` after its code, or as a
    cell of its own before the chapter's first."""
    import nbformat

    code = _in_language(LANGUAGE_CELL.format(language=book.language), book)
    at = next((i for i, c in enumerate(cells) if c.cell_type == "code"), len(cells))
    if at < len(cells) and cells[at].metadata.get(READER_KEY):
        cells[at].source += "\n\n" + code
        return
    cell = nbformat.v4.new_code_cell(code)
    cell.metadata[READER_KEY] = True
    cells.insert(at, cell)


# --- alt text: what each figure shows, for readers who cannot see it ---------------------

ALT_KEY = "alt"  # cell metadata that nbconvert's classic HTML (nbgrader's formgrader and
# feedback) writes into the alt attribute of the cell's images
# a glue call's key: glue("key", ...), or glue_figure(glue, "key", ...) (mhacore.figures)
GLUE_CALL = re.compile(r"""\bglue(?:_figure\(\s*glue\s*,|\()\s*["']([^"']+)["']""")


def figure_alt_texts(markdown: str) -> dict[str, str]:
    """``{key: alt text}`` of the ``{glue:figure}`` directives of a MyST page (their
    ``:alt:`` option), at any depth.

    >>> figure_alt_texts("```{glue:figure} fig-a\\n:name: fig-a\\n:alt: A rising line.\\n```")
    {'fig-a': 'A rising line.'}
    """
    found = {}

    def walk(lines):
        for item in split_blocks(lines):
            if isinstance(item, Block) and item.name is not None:
                if item.name == "glue:figure" and item.options.get("alt", "").strip():
                    found[item.arg.split()[0]] = item.options["alt"].strip()
                if item.name != "code-cell":
                    walk(item.body)

    walk(markdown.split("\n"))
    return found


def describe_figures(notebook, markdown: str):
    """``notebook`` (changed in place and returned) with each code cell that glues a
    figure carrying that figure's alt text (:func:`figure_alt_texts` of the page's
    ``markdown``) in its metadata (:data:`ALT_KEY`): the cell's image output, which the
    notebook shows where the site shows the figure, is then described wherever the
    notebook is rendered to HTML (nbconvert's classic template; nbgrader's formgrader
    and feedback) or read with its outputs (:func:`with_outputs`)."""
    alts = figure_alt_texts(markdown)
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        texts = [alts[key] for key in GLUE_CALL.findall(cell.source) if key in alts]
        if texts:
            cell.metadata[ALT_KEY] = " ".join(texts)
    return notebook


def _alt_on_images(cell) -> None:
    """The image outputs of ``cell`` described by its alt text (output metadata, per
    MIME type, as nbconvert reads it)."""
    alt = cell.metadata.get(ALT_KEY)
    if not alt:
        return
    for output in cell.get("outputs", []):
        for mime in output.get("data", {}):
            if mime.startswith("image/"):
                output.setdefault("metadata", {}).setdefault(mime, {})["alt"] = alt


def _read_notebook(source: Path, raw: str):
    """The MyST text ``raw`` of the chapter ``source`` as a notebook (jupytext), or
    :class:`SourceError` naming the chapter and saying where its front matter or a cell's
    metadata is malformed."""
    import jupytext
    from jupytext.myst import MystMetadataParsingError

    try:
        return jupytext.reads(raw, fmt="md:myst")
    except yaml.YAMLError as exc:  # the front matter (parsed from the file's first line)
        raise SourceError(f"chapter {source}: its front matter is not readable YAML"
                          f"{_yaml_problem(exc)}") from None
    except (MystMetadataParsingError, ValueError) as exc:  # a cell's metadata
        words = " ".join(str(exc).split()).split(' in "<unicode string>"')[0]
        raise SourceError(f"chapter {source} is not a readable MyST notebook: "
                          f"{words[:300]}") from None


def _version() -> str:
    from .._version import __version__

    return __version__


def reader_notebooks(book_root: Path, edition: str = "reader") -> dict:
    """``{chapter stem: notebook of edition}`` for every numbered chapter of the book."""

    book = read_book(book_root)
    return {s.stem: edition_notebook(s, book, edition) for s in chapter_sources(book_root)}


def chapter_sources(book_root: Path) -> list[Path]:
    """The numbered executable chapters (``book/NN-slug.md``) of ``_toc.yml``, in order.

    A numbered chapter that is not an executable MyST notebook (empty, unreadable, or with
    no ``kernelspec`` in its front matter) is a :class:`SourceError` naming it."""
    chapters = []
    for page in toc_pages(book_root):
        if not re.match(r"\d\d-", page.name):
            continue
        try:
            head = page.read_text("utf-8")[:3000]
        except (OSError, UnicodeDecodeError) as exc:
            raise SourceError(f"chapter {page} cannot be read: {exc}") from None
        if not (head.startswith("---") and "kernelspec:" in head):
            raise SourceError(f"chapter {page} is not an executable MyST notebook (no front matter "
                             "with a kernelspec); fix it or take it out of _toc.yml")
        chapters.append(page)
    return chapters



def _shown(output, formats: dict):
    """An output of the book's execution as the reader notebook shows it: a glued value
    (an output myst-nb records for the text, hidden in the notebook) displayed, as the
    reader notebook's ``glue`` does; any other output as it is."""
    import ast

    import nbformat

    record = output.get("metadata", {}).get("scrapbook")
    if not record:
        return output
    prefix, key = record.get("mime_prefix", ""), record.get("name", "")
    data = {k.removeprefix(prefix): v for k, v in output.get("data", {}).items()}
    if set(data) - {"text/plain"}:  # a figure, an equation
        data.pop("text/plain", None)
        return nbformat.v4.new_output("display_data", data=data)
    value = data.get("text/plain", "")
    try:
        value = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        pass
    if not isinstance(value, str):
        try:
            value = format(value, formats.get(key, ""))
        except (TypeError, ValueError):
            value = str(value)
    return nbformat.v4.new_output("stream", name="stdout", text=f"{key} = {value}\n")


def _outputs_in(outputs, language: str | None) -> list:
    """The outputs a notebook in ``language`` (None: English) shows: of a figure glued in
    every language (:func:`mhacore.figures.glue_figure`: ``key`` as drawn, ``key.zh_CN``
    translated), the copy in ``language``, else the one as drawn."""
    from mhacore import i18n

    def name(output):
        return output.get("metadata", {}).get("scrapbook", {}).get("name", "")

    names = {name(o) for o in outputs}
    shown = []
    for output in outputs:
        key = name(output)
        base, _, suffix = key.rpartition(".")
        if base and suffix in i18n.LANGUAGES:  # a copy in one of the languages
            if suffix == language:
                shown.append(output)
        elif not (key and language and f"{key}.{language}" in names):
            shown.append(output)
    return shown


def with_outputs(reader, executed, formats: dict | None = None,
                 language: str | None = None):
    """The reader notebook ``reader`` with the outputs of the book's one execution of its
    chapter, ``executed`` (nbformat notebooks; ``reader`` is not changed): what running
    the reader notebook shows, without running it again.

    Each code cell takes the outputs of the executed chapter cell with the same code;
    what the chapter glues into its text shows in the output of the cell that glues it,
    figures and equations displayed and numbers printed as ``key = value`` in the text's
    ``formats`` (:func:`mhacore.editions.common.glue_formats`), a figure in the notebook's
    ``language`` (None: English) where the book drew it in that language too; a
    self-check shows its "Your turn" reply, as on the site.
    """
    import copy

    import nbformat

    from mhacore.exercises import check

    from .common import GLUE_IMPORT, SELF_CHECK

    def code(source):
        return "\n".join(ln for ln in source.split("\n") if ln.strip() != GLUE_IMPORT).strip()

    pool = [c for c in executed.cells if c.cell_type == "code"]
    taken = [False] * len(pool)
    notebook = copy.deepcopy(reader)
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        cell.outputs, cell.execution_count = [], None
        match = next((i for i, c in enumerate(pool)
                      if not taken[i] and code(c.source) == code(cell.source)), None)
        if match is not None:
            taken[match] = True
            cell.outputs = [_shown(o, formats or {}) for o in
                            _outputs_in(pool[match].get("outputs", []), language)]
            _alt_on_images(cell)
        label = SELF_CHECK.search(cell.source)
        if label:
            reply = check(label.group(1), None)
            cell.outputs = [nbformat.v4.new_output(
                "display_data", data={"text/plain": repr(reply),
                                      "text/markdown": reply._repr_markdown_()})]
    notebook.metadata["mhacore_outputs"] = "from the book's build, not run again"
    return notebook
