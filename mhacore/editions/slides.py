"""Lecture slides: one reveal.js deck per course session, written by hand, with every figure,
equation, theorem statement and number pulled from the executed chapter. No network at all.

Sources
-------
``book/slides/session-N.md`` is the deck of session N of ``book/course.md``, which names the
session's chapter and its lecture minutes; ``book/locales/zh_CN/slides/session-N.md`` is its
Chinese version. A source is Markdown (CommonMark, pipe tables, ``$...$`` and ``$$...$$``
math) with a few additions, and nothing in it is copied from the chapter by hand::

    # Kernel smoothing                      the session's title (the first line)

    ## Averaging nearby responses           a slide, with this title
    - Too small a bandwidth follows the noise.
    {figure}`fig-nw-three-bandwidths`       pulled: the chapter's glued figure (its :name:)

    ## The estimator
    {statement}`def-nw`                     pulled: the statement of a {prf:...} directive
    {equation}`eq-nw-hstar`                 pulled: a labelled equation, with its number
    Slope {glue}`key` at {glue}`key2:.3f`   a glued number, as the chapter's text formats it
    By {prf:ref}`thm-nw-rate`, see {numref}`fig-x`, {eq}`eq-y`, {doc}`chapter 2 <02-...>`,
    {cite}`wand1995`: "Theorem 1.1", "Figure 1.2", "(1.3)", "chapter 2", "(Wand and Jones, 1995)"

    ::: notes
    What to say; shown in reveal's speaker view (key s).
    :::

- ``{figure}``, ``{equation}`` and ``{statement}`` stand alone on their line. A figure is the
  glued image with its number ("Figure 1.2") under it, and takes the room the slide's text
  leaves; an equation is a labelled ``$$ ... $$ (label)``, ``{math}`` or ``{glue:math}`` of
  the chapter, tagged with its number; a statement is the directive's title and body
  (theorem, definition, proposition, remark...), never its proof.
- ``{glue}`key``` writes what ``{glue:text}`key:fmt``` writes in the chapter (myst-nb's
  formatting, so no quotes around a glued string); a format given in the slide must be the
  chapter's.
- Everything else is the slide's own text: short bullets, written for the slide. A long
  statement (over :data:`LONG_STATEMENT` characters of prose) is set in smaller type.
- A label, glue key or page the chapter or the book does not have, a glued number asked
  for as a figure, a role the slides do not know: each raises ``ValueError`` naming the
  deck, the slide (as reveal numbers it, the title slide being 1) and the label.

Every deck opens with a title slide: the session's number and title, its chapter's number
and title, the lecture's minutes, and the package version and git commit of the build.

Chinese decks use the same syntax and the same labels. Statements, chapter
titles and figure and theorem names come out in Chinese: the statement's paragraphs and
titles from the chapter's gettext catalog (``book/locales/zh_CN/LC_MESSAGES/book/NN-slug.po``;
an untranslated paragraph stays English, as on the Chinese site), the names as the Chinese
site prints them ("定理 1.1", "图 1.2").

:func:`write_decks` writes the decks, with reveal.js (from the pinned PyPI package
``sphinx-revealjs``) and MathJax (``django-static-mathjax``) beside them; the site's build
calls it once the chapters are executed (``book/_ext/course_slides.py``), in both languages.
"""

from __future__ import annotations

import base64
import html
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .common import MATHJAX, build_provenance, mathjax_file, proof_kind_names

REPOSITORY = Path(__file__).resolve().parents[2]  # a clone's root (the sources live there)
SOURCE_DIRS = {"en": Path("book") / "slides",
               "zh_CN": Path("book") / "locales" / "zh_CN" / "slides"}
CATALOG_DIR = Path("book") / "locales" / "zh_CN" / "LC_MESSAGES" / "book"
COURSE_PAGE = Path("book") / "course.md"
REVEAL_FILES = ("dist/reveal.js", "dist/reveal.css", "dist/theme/white.css",
                "dist/theme/fonts/source-sans-pro", "plugin/notes/notes.js")
SLIDE_WIDTH, SLIDE_HEIGHT = 1280, 720  # reveal's slide, in CSS pixels

# What a deck says around the pulled content, in each language; kinds as each site names them
WORDS = {
    "en": {"session": "Session {n}", "chapter": "Chapter {n}: {title}", "colon": ": ",
           "lecture": "Lecture, {minutes} min", "figure": "Figure",
           "built": "mhacore {version} · commit {commit}",
           "kinds": {f"prf:{k.lower()}": name for k, name in proof_kind_names("en").items()}},
    "zh_CN": {"session": "第 {n} 次课", "chapter": "第 {n} 章　{title}", "colon": "：",
              "lecture": "讲授 {minutes} 分钟", "figure": "图",
              "built": "mhacore {version} · 提交 {commit}",
              "kinds": {f"prf:{k.lower()}": name
                        for k, name in proof_kind_names("zh_CN").items()}},
}

_PULL = re.compile(r"^\{(?P<kind>figure|equation|statement)\}`(?P<label>[^`]+)`\s*$")
_ROLE = re.compile(r"\{(?P<name>[\w:-]+)\}`(?P<body>[^`]*)`")
_SESSION = re.compile(r"^###\s.*?\bsession (?P<n>\d+)\b.*?\{doc\}`(?:[^`<]*<)?(?P<page>[\w-]+)>?`")
_LECTURE = re.compile(r"\*\*Lecture \((?P<minutes>\d+) min\)\.\*\*")
_DOLLAR_LABEL = re.compile(r"^\$\$\s*\((?P<label>[^)\s]+)\)\s*$")
_MATH_SPAN = re.compile(r"\$\$.*?\$\$|\$[^$]*\$", re.S)
# a statement whose prose (math aside) is longer than this many characters is set smaller
LONG_STATEMENT = 900
_ITEM = re.compile(r"^(\d+\.|[-*+])\s+(.*\S)\s*$")  # a top-level list item


# --- the course's sessions -------------------------------------------------------------

@dataclass(frozen=True)
class Session:
    """A session of ``book/course.md``: its number, its chapter (file stem) and the
    minutes of its lecture."""

    number: int
    chapter: str
    minutes: int


def course_sessions(course: str) -> dict[int, Session]:
    """The sessions of the course page's text ``course``, by number.

    Each ``### ... session N — ... ({doc}`chapter`)`` heading opens a session; the
    ``**Lecture (M min).**`` line below it gives the lecture's minutes.

    Examples
    --------
    >>> page = "### Week 1, session 1 — x ({doc}`01-a`)\\n- **Lecture (45 min).** Why."
    >>> course_sessions(page)[1]
    Session(number=1, chapter='01-a', minutes=45)
    >>> course_sessions(page.replace("`01-a`", "`chapter 1 <01-a>`"))[1].chapter
    '01-a'
    """
    sessions = {}
    for part in re.split(r"^(?=### )", course, flags=re.M):
        heading = _SESSION.match(part)
        if not heading:
            continue
        lecture = _LECTURE.search(part)
        if lecture is None:
            raise ValueError(f"course page: session {heading['n']} has no "
                             "'**Lecture (N min).**' line")
        sessions[int(heading["n"])] = Session(int(heading["n"]), heading["page"],
                                              int(lecture["minutes"]))
    return sessions


# --- a deck's source -------------------------------------------------------------------

@dataclass
class Slide:
    """One ``##`` slide of a source: its title, its lines, its speaker notes, and its
    number as reveal shows it (the title slide is 1)."""

    title: str
    number: int
    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class DeckSource:
    """A parsed source: its name (for messages), the session's title and the slides."""

    name: str
    title: str
    slides: list[Slide]


def parse_deck(text: str, name: str) -> DeckSource:
    """The title and slides of a deck's source ``text`` (``name`` is said in errors).

    Examples
    --------
    >>> deck = parse_deck("# Smoothing\\n\\n## One\\n- a\\n::: notes\\nsay\\n:::\\n## Two\\n", "d")
    >>> deck.title, [(s.number, s.title, s.lines, s.notes) for s in deck.slides]
    ('Smoothing', [(2, 'One', ['- a'], ['say']), (3, 'Two', [], [])])
    """
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines or not lines[0].startswith("# "):
        raise ValueError(f"{name}: the first line must be the session's title, '# Title'")
    title, slides, in_notes = lines[0][2:].strip(), [], False
    for at, line in enumerate(lines[1:], start=2):
        if line.startswith("## "):
            if in_notes:
                raise ValueError(f"{name}: line {at}: a '::: notes' block is not closed")
            slides.append(Slide(line[3:].strip(), len(slides) + 2))
        elif not slides:
            if line.strip():
                raise ValueError(f"{name}: line {at}: text before the first slide "
                                 f"('## Title'): {line.strip()[:60]!r}")
        elif line.strip() == "::: notes":
            in_notes = True
        elif in_notes and line.strip() == ":::":
            in_notes = False
        else:
            (slides[-1].notes if in_notes else slides[-1].lines).append(line)
    if in_notes:
        raise ValueError(f"{name}: a '::: notes' block is not closed")
    if not slides:
        raise ValueError(f"{name}: no slide ('## Title')")
    for slide in slides:
        while slide.lines and not slide.lines[-1].strip():
            slide.lines.pop()
    return DeckSource(name, title, slides)


# --- what a chapter offers: figures, equations, statements, numbers --------------------

@dataclass
class Chapter:
    """What slides may pull from an executed chapter, by label."""

    stem: str
    number: int
    title: str
    glued: dict
    formats: dict
    figures: dict  # label -> Block of a {glue:figure}
    equations: dict  # label -> LaTeX
    statements: dict  # label -> Block of a {prf:...} directive (not a proof)
    catalog: dict = field(default_factory=dict)  # English message -> translation


def _walk_blocks(lines: list[str]):
    """Every directive of ``lines``, nested ones included, and every plain line."""
    from .reader import Block, split_blocks

    for item in split_blocks(lines):
        yield item
        if isinstance(item, Block) and item.name and item.name != "code-cell":
            yield from _walk_blocks(item.body)


def _latex(glued: dict, key: str) -> str | None:
    """The LaTeX of a glued equation (``$\\displaystyle ...$`` as IPython writes it)."""
    latex = glued.get(key, {}).get("data", {}).get("text/latex")
    if latex is None:
        return None
    latex = latex.strip().strip("$").strip()
    return latex.removeprefix("\\displaystyle").strip()


def read_chapter(markdown: str, stem: str, number: int, glued: dict) -> Chapter:
    """The pullable content of a chapter: its MyST ``markdown`` (the executed notebook's
    Markdown cells) and its ``glued`` outputs (myst-nb's ``.glue.json``)."""
    from .common import glue_formats
    from .reader import Block, page_title

    figures, equations, statements, math = {}, {}, {}, []
    for item in _walk_blocks(markdown.split("\n")):
        if not isinstance(item, Block):
            closing = _DOLLAR_LABEL.match(item.strip())
            if item.strip().startswith("$$") and math:  # "$$ (label)" closes the formula
                if closing:
                    equations[closing["label"]] = "\n".join(math[1:]).strip()
                math = []
            elif item.strip().startswith("$$"):
                math = [item]
            elif math:
                math.append(item)
            continue
        label = item.options.get("label") or item.options.get("name")
        if not label:
            continue
        if item.name == "glue:figure":
            figures[label] = item
        elif item.name == "glue:math":
            equations[label] = _latex(glued, item.arg)
        elif item.name == "math":
            equations[label] = "\n".join(item.body).strip()
        elif item.name and item.name.startswith("prf:") and item.name != "prf:proof":
            statements[label] = item
    return Chapter(stem, number, page_title(markdown), glued, glue_formats(markdown),
                   figures, equations, statements)


def glued_text(value: str, fmt: str = "") -> str:
    """A glued ``text/plain`` value as myst-nb's ``{glue:text}`key:fmt``` shows it.

    Examples
    --------
    >>> glued_text("'-0.087'"), glued_text("0.123456", ".3f"), glued_text("'1.7'", ".2f")
    ('-0.087', '0.123', '1.70')
    """
    import ast

    try:
        value = ast.literal_eval(value)
    except (SyntaxError, ValueError):
        pass
    if not fmt:
        return str(value)
    kind = fmt[-1]
    if kind == "s":
        value = str(value)
    elif kind in "bcdoxX":
        value = int(value)
    elif kind in "eEfFgGn%":
        value = float(value)
    return format(value, fmt)


# --- rendering ---------------------------------------------------------------------------

@dataclass
class Context:
    """What rendering one deck needs: where it is (for errors), its chapter, the book's
    labels and references, and the language."""

    deck: str
    chapter: Chapter
    book: object  # mhacore.editions.reader.Book
    language: str = "en"
    slide: Slide | None = None

    def fail(self, what: str) -> ValueError:
        where = f"slide {self.slide.number} ({self.slide.title!r})" if self.slide else "title"
        return ValueError(f"{self.deck}, {where}: {what}")

    def words(self, key: str):
        return WORDS[self.language][key]


def _markdown():
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    md = MarkdownIt("commonmark", {"html": False}).use(dollarmath_plugin).enable("table")

    def inline(self, tokens, idx, options, env):
        return f'<span class="math">\\({html.escape(tokens[idx].content)}\\)</span>'

    def block(self, tokens, idx, options, env):
        return f'<div class="math">\\[{html.escape(tokens[idx].content)}\\]</div>\n'

    md.add_render_rule("math_inline", inline)
    md.add_render_rule("math_block", block)
    md.add_render_rule("math_block_label", block)
    return md


def _name(ctx: Context, label: str) -> str:
    """How the deck's language names what ``label`` points at: "Theorem 1.1", "图 1.2"."""
    target = ctx.book.labels.get(label)
    if target is None:
        raise ctx.fail(f"no label {label!r} in the book")
    if target.kind == "equation":
        return f"({target.number})"
    word = (ctx.words("kinds").get(target.kind) if target.kind.startswith("prf:")
            else ctx.words("figure") if target.kind == "figure" else None)
    if word and target.number:
        return f"{word} {target.number}"
    return target.title or label


def _number(ctx: Context, body: str) -> str:
    key, _, fmt = body.partition(":")
    key = key.strip()
    data = ctx.chapter.glued.get(key, {}).get("data")
    if data is None:
        raise ctx.fail(f"no glued number {key!r} in chapter {ctx.chapter.stem}")
    if set(data) != {"text/plain"}:
        raise ctx.fail(f"{key!r} of chapter {ctx.chapter.stem} is a figure or an equation, "
                       "not a number: pull it with {figure} or {equation}")
    chapter_fmt = ctx.chapter.formats.get(key, "")
    if fmt and fmt != chapter_fmt:
        raise ctx.fail(f"{{glue}}`{body}` formats {key!r} as {fmt!r}; chapter "
                       f"{ctx.chapter.stem} formats it as {chapter_fmt!r}")
    return glued_text(data["text/plain"], chapter_fmt)


def _role(ctx: Context, name: str, body: str) -> str:
    from .reader import _explicit, cite
    from .references import escape_markdown

    explicit = _explicit(body)
    text, key = explicit if explicit else (None, body.strip())
    if name in ("glue", "glue:text"):
        return escape_markdown(_number(ctx, body))
    if name in ("prf:ref", "numref", "eq", "ref"):
        named = _name(ctx, key)
        if text and name == "numref":
            number = ctx.book.labels[key].number or ""
            return text.replace("%s", number).replace("{number}", number)
        return text or named
    if name == "doc":
        stem = key.rstrip("/").split("/")[-1]
        if stem not in ctx.book.titles:
            raise ctx.fail(f"no page {stem!r} in the book")
        return text or f"*{ctx.book.titles[stem]}*"
    if name.startswith("cite"):
        keys = [k.strip() for k in key.split(",")]
        missing = [k for k in keys if k not in ctx.book.references]
        if missing:
            raise ctx.fail(f"no reference {missing[0]!r} in the bibliography")
        return cite(keys, ctx.book, textual=name in ("cite:t", "cite:ts"))
    if name == "math":
        return f"${body}$"
    raise ctx.fail(f"the slides know no role {{{name}}} (in {{{name}}}`{body}`)")


def fill_roles(ctx: Context, text: str) -> str:
    """``text`` with every role replaced (numbers, references, citations)."""
    return _ROLE.sub(lambda m: _role(ctx, m["name"], m["body"]), text)


def _figure(ctx: Context, label: str) -> str:
    block = ctx.chapter.figures.get(label)
    if block is None:
        raise ctx.fail(f"no figure labelled {label!r} in chapter {ctx.chapter.stem}")
    key = block.arg.split()[0]
    # the copy the book drew in the deck's language (mhacore.figures), else the figure
    glued = ctx.chapter.glued
    key = next((k for k in (f"{key}.{ctx.language}", key) if k in glued), key)
    data = glued.get(key, {}).get("data", {})
    image = data.get("image/png")
    if image is None:
        raise ctx.fail(f"figure {label!r} of chapter {ctx.chapter.stem} has no image "
                       "in the executed notebook")
    image = "".join(image.split())
    base64.b64decode(image, validate=True)
    alt = html.escape(block.options.get("alt", ""), quote=True)
    caption = html.escape(_name(ctx, label))
    return (f'<figure class="pulled-figure"><img src="data:image/png;base64,{image}" '
            f'alt="{alt}"><figcaption>{caption}</figcaption></figure>')


def _equation(ctx: Context, label: str) -> str:
    latex = ctx.chapter.equations.get(label)
    if not latex:
        raise ctx.fail(f"no equation labelled {label!r} in chapter {ctx.chapter.stem}")
    target = ctx.book.labels.get(label)
    tag = f"\\tag{{{target.number}}}" if target and target.number else ""
    return (f'<div class="math pulled-equation">\\[{html.escape(latex)}{tag}\\]</div>')


def _translated(ctx: Context, message: str) -> str:
    """``message`` (one paragraph of the chapter, joined into one line) in the deck's
    language: the catalog's translation, or the English when it has none."""
    return ctx.chapter.catalog.get(message, message) if ctx.language != "en" else message


def _statement_markdown(ctx: Context, block) -> str:
    """The body of a ``{prf:...}`` directive as slide Markdown: paragraphs translated,
    display math kept, a labelled formula tagged with its number."""
    paragraphs, current, math, marker = [], [], None, ""

    def flush():
        if current:
            text = _translated(ctx, " ".join(current))
            paragraphs.append(f"{marker} {text}" if marker else text)
            current.clear()

    for line in block.body + [""]:
        stripped = line.strip()
        if math is not None:
            if not stripped.startswith("$$"):
                math.append(line)
                continue
            closing = _DOLLAR_LABEL.match(stripped)
            target = ctx.book.labels.get(closing["label"]) if closing else None
            tag = [f"\\tag{{{target.number}}}"] if target and target.number else []
            paragraphs.append("\n".join(math + tag + ["$$"]))
            math = None
        elif stripped.startswith("$$"):
            flush()
            if stripped.count("$$") >= 2:  # "$$ x $$" on one line
                paragraphs.append(stripped)
            else:
                math = ["$$", stripped[2:]] if stripped[2:] else ["$$"]
        elif _ITEM.match(line):  # a list item is a message of its own
            flush()
            marker, text = _ITEM.match(line).groups()
            current.append(text)
        elif stripped:
            current.append(stripped)
        else:
            flush()
            marker = ""
    return "\n\n".join(fill_roles(ctx, p) for p in paragraphs)


def _statement(ctx: Context, label: str, md) -> str:
    block = ctx.chapter.statements.get(label)
    if block is None:
        raise ctx.fail(f"no theorem, definition or remark labelled {label!r} in chapter "
                       f"{ctx.chapter.stem}")
    name = _name(ctx, label)
    if block.arg:
        title = _translated(ctx, f"({block.arg})")
        name += ("" if title.startswith("（") else " ") + fill_roles(ctx, title)
    heading = md.renderInline(name + ("" if ctx.language != "en" else "."))
    text = _statement_markdown(ctx, block)
    size = " long" if len(_MATH_SPAN.sub(" ", text)) > LONG_STATEMENT else ""
    return (f'<div class="statement{size}"><p class="statement-name"><strong>{heading}'
            f'</strong></p>{md.render(text)}</div>')


def render_slide(ctx: Context, slide: Slide, md) -> str:
    """One slide as a reveal ``<section>``: its title, its text with the pulled figures,
    equations and statements in place, and its notes."""
    ctx.slide = slide
    parts, text, figures = [], [], 0

    def flush():
        if any(line.strip() for line in text):
            parts.append(md.render(fill_roles(ctx, "\n".join(text))))
        text.clear()

    for line in slide.lines:
        pull = _PULL.match(line.strip())
        if not pull:
            text.append(line)
            continue
        flush()
        kind, label = pull["kind"], pull["label"].strip()
        if kind == "figure":
            figures += 1
            parts.append(_figure(ctx, label))
        elif kind == "equation":
            parts.append(_equation(ctx, label))
        else:
            parts.append(_statement(ctx, label, md))
    flush()
    notes = (f'<aside class="notes">{md.render(fill_roles(ctx, chr(10).join(slide.notes)))}'
             "</aside>" if any(n.strip() for n in slide.notes) else "")
    classes = "deck-slide" + (" has-figure" if figures else "")
    title = md.renderInline(fill_roles(ctx, slide.title))
    ctx.slide = None
    return (f'<section class="{classes}" data-source-slide="{slide.number}">\n'
            f'<h2>{title}</h2>\n<div class="slide-body">{"".join(parts)}</div>{notes}\n'
            "</section>")


def title_slide(ctx: Context, deck: DeckSource, session: Session, provenance: dict) -> str:
    """The deck's first slide: session, chapter, lecture minutes, version and commit."""
    words = WORDS[ctx.language]
    chapter = words["chapter"].format(n=ctx.chapter.number, title=ctx.chapter.title)
    built = words["built"].format(**provenance)
    if provenance.get("date"):
        built += f" · {provenance['date']}"
    return ("<section class=\"deck-slide title-slide\">\n"
            f'<p class="session">{html.escape(words["session"].format(n=session.number))}</p>\n'
            f"<h1>{html.escape(deck.title)}</h1>\n"
            f'<p class="chapter">{html.escape(chapter)}</p>\n'
            f'<p class="lecture">{html.escape(words["lecture"].format(minutes=session.minutes))}'
            "</p>\n"
            f'<p class="provenance">{html.escape(built)}</p>\n</section>')


# Slide text never breaks inside a word (no hyphenation, no break-anywhere), and content
# keeps to the 1280 x 720 slide: a figure takes the room its slide's text leaves.
STYLE = """
.reveal { font-family: "Source Sans Pro", "Noto Sans CJK SC", Helvetica, sans-serif;
  font-size: 32px; }
.reveal *, .reveal pre, .reveal code, .reveal h1, .reveal h2 { overflow-wrap: normal;
  word-wrap: normal; word-break: normal; hyphens: manual; line-break: strict; }
.reveal h1, .reveal h2 { text-transform: none; font-weight: 600; }
.reveal h1 { font-size: 1.9em; margin-bottom: 0.4em; }
.reveal h2 { font-size: 1.35em; margin: 0 0 0.45em 0; }
.reveal .slides { text-align: left; }
.reveal .slides > section.deck-slide { height: 100%; box-sizing: border-box;
  padding: 0 0.5em; overflow: hidden; }
.reveal .slides > section.deck-slide.present { display: flex !important;
  flex-direction: column; }
.reveal .slide-body { flex: 1 1 auto; min-height: 0; display: flex; flex-direction: column; }
.reveal .slide-body > * { flex: 0 0 auto; }
.reveal p, .reveal li { line-height: 1.3; }
.reveal ul, .reveal ol { display: block; margin: 0 0 0 1.1em; }
.reveal li + li { margin-top: 0.25em; }
.reveal p { margin: 0.3em 0; }
.reveal div.math { margin: 0.3em 0; text-align: center; }
.reveal .slide-body > figure.pulled-figure { flex: 1 1 0; min-height: 0; margin: 0.2em 0 0 0;
  display: flex; flex-direction: column; align-items: center; }
.reveal figure.pulled-figure img { flex: 1 1 0; min-height: 0; width: 100%; max-width: 100%;
  max-height: none; object-fit: contain; object-position: 50% 100%; margin: 0; }
.reveal figure.pulled-figure figcaption { font-size: 0.6em; color: #555; margin-top: 0.2em; }
.reveal .statement { font-size: 0.82em; border-left: 6px solid #2a76dd; padding: 0.1em 0.6em;
  background: #f4f7fb; margin: 0.2em 0; }
.reveal .statement p { margin: 0.25em 0; }
.reveal .statement.long { font-size: 0.72em; }
.reveal table { font-size: 0.8em; margin: 0.3em 0; border-collapse: collapse; }
.reveal table th, .reveal table td { padding: 0.15em 0.6em; border-bottom: 1px solid #ccc; }
.reveal .title-slide { justify-content: center; text-align: center; }
.reveal .title-slide p { margin: 0.35em 0; }
.reveal .title-slide .session { font-size: 0.9em; color: #2a76dd; }
.reveal .title-slide .chapter { font-size: 0.95em; }
.reveal .title-slide .lecture { font-size: 0.8em; color: #555; }
.reveal .title-slide .provenance { font-size: 0.6em; color: #777; margin-top: 2em; }
@media print {  /* reveal prints the slides in the page's width (20 pt text): a formula
  that fits 1280 px at 32 px fits an A4 page at 0.7 x 20 pt */
  .reveal div.math { font-size: 0.7em; }
}
"""

MATHJAX_CONFIG = """window.MathJax = {
  tex: {inlineMath: [["\\\\(", "\\\\)"]], displayMath: [["\\\\[", "\\\\]"]],
        processEscapes: false, tags: "ams"},
  options: {processHtmlClass: "math", ignoreHtmlClass: "slides|notes"}
};"""

REVEAL_CONFIG = (f"{{hash: true, width: {SLIDE_WIDTH}, height: {SLIDE_HEIGHT}, "
                 "margin: 0.04, center: false, controls: true, progress: true, "
                 "slideNumber: 'c/t', transition: 'none', plugins: [RevealNotes]}")


def deck_page(title: str, language: str, sections: list[str]) -> str:
    """A whole deck: reveal.js and MathJax from beside it, and the slides."""
    lang = "zh-CN" if language == "zh_CN" else language
    return (f'<!DOCTYPE html>\n<html lang="{lang}">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{html.escape(title)}</title>\n"
            '<meta name="viewport" content="width=device-width, initial-scale=1.0">\n'
            '<link rel="icon" href="data:,">\n'
            '<link rel="stylesheet" href="reveal.js/dist/reveal.css">\n'
            '<link rel="stylesheet" href="reveal.js/dist/theme/white.css">\n'
            f"<style>{STYLE}</style>\n<script>{MATHJAX_CONFIG}</script>\n"
            f'<script src="{MATHJAX}"></script>\n</head>\n<body>\n'
            '<main class="reveal"><div class="slides">\n' + "\n".join(sections)
            + "\n</div></main>\n"
            '<script src="reveal.js/dist/reveal.js"></script>\n'
            '<script src="reveal.js/plugin/notes/notes.js"></script>\n'
            f"<script>Reveal.initialize({REVEAL_CONFIG});</script>\n</body>\n</html>\n")


def render_deck(source: DeckSource, session: Session, chapter: Chapter, book,
                provenance: dict, language: str = "en") -> str:
    """The HTML of one deck (see the module's docstring for what it holds)."""
    ctx = Context(source.name, chapter, book, language)
    md = _markdown()
    sections = [title_slide(ctx, source, session, provenance)]
    sections += [render_slide(ctx, slide, md) for slide in source.slides]
    heading = WORDS[language]["session"].format(n=session.number)
    return deck_page(heading + WORDS[language]["colon"] + source.title, language, sections)


# --- writing the decks ------------------------------------------------------------------

def deck_name(session: int) -> str:
    """The file name of a session's deck, e.g. ``session-1.slides.html``."""
    return f"session-{session}.slides.html"


def source_path(root: Path, session: int, language: str = "en") -> Path:
    """Where the source of ``session``'s deck in ``language`` lives under ``root``."""
    if language not in SOURCE_DIRS:
        raise ValueError(f"language must be one of {sorted(SOURCE_DIRS)}; got {language!r}")
    return Path(root) / SOURCE_DIRS[language] / f"session-{session}.md"


def _catalog(root: Path, stem: str) -> dict:
    """``{English message: translation}`` of a chapter's Chinese catalog (translated,
    not fuzzy, messages only; newlines of the English joined as the catalog joins them)."""
    import polib

    path = Path(root) / CATALOG_DIR / f"{stem}.po"
    if not path.is_file():
        return {}
    return {" ".join(e.msgid.split("\n")): e.msgstr for e in polib.pofile(str(path))
            if e.translated() and not e.obsolete}


def _chapter(executed: Path, root: Path, language: str) -> Chapter:
    """What the executed chapter ``executed`` offers to slides in ``language``."""
    import json

    import nbformat

    from .reader import chapter_numbers

    notebook = nbformat.read(executed, as_version=4)
    markdown = "\n\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
    glue_file = executed.with_suffix(".glue.json")
    glued = json.loads(glue_file.read_text("utf-8")) if glue_file.is_file() else {}
    numbers = chapter_numbers(root) if (Path(root) / "_toc.yml").is_file() else {}
    number = numbers.get(executed.stem) or int(executed.stem[:2])
    chapter = read_chapter(markdown, executed.stem, number, glued)
    if language != "en":
        chapter.catalog = _catalog(root, executed.stem)
        chapter.title = chapter.catalog.get(chapter.title, chapter.title)
    return chapter


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


def write_decks(out: Path, executed_dir: Path, sessions=None, book=None, *,
                language: str = "en", root: Path | None = None,
                provenance: dict | None = None) -> list[Path]:
    """Write the deck of each session into ``out``; return the decks written.

    Parameters
    ----------
    out : Path
        The folder of the decks (reveal.js and MathJax are copied into it).
    executed_dir : Path
        The executed chapters, ``NN-slug.ipynb`` with their ``.glue.json``.
    sessions : iterable of int, optional
        The sessions to write (a mapping's keys will do); default every session of
        ``book/course.md``.
    book : mhacore.editions.reader.Book, optional
        The book's labels and references; default :func:`~mhacore.editions.reader.read_book`
        of ``root``.
    language : {"en", "zh_CN"}
        Which sources to render (:data:`SOURCE_DIRS`).
    root : Path, optional
        The repository (sources, course page, catalogs); default this clone's.
    provenance : dict, optional
        ``version`` and ``commit`` (and ``date``) for the title slides; default
        :func:`build_provenance` of ``root``.

    Raises
    ------
    ValueError
        A session without a source or without its executed chapter, or a source that
        names a label, key or page the chapter or book does not have (the message names
        the deck, the slide and the label).
    """
    from .reader import read_book, read_source

    root = Path(root or REPOSITORY)
    source_path(root, 1, language)  # validates the language
    course = course_sessions(read_source(root / COURSE_PAGE, "course page"))
    wanted = sorted(course) if sessions is None else sorted(sessions)
    unknown = [n for n in wanted if n not in course]
    if unknown:
        raise ValueError(f"sessions must be sessions of {COURSE_PAGE}; got {unknown[0]!r}")
    book = book if book is not None and book.labels else read_book(root)
    provenance = provenance or build_provenance(root)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _copy_assets(out)
    written, chapters = [], {}
    for number in wanted:
        session = course[number]
        path, deck_language = source_path(root, number, language), language
        if not path.is_file():
            raise ValueError(f"session {number} has no slides: {path} does not exist")
        executed = Path(executed_dir) / f"{session.chapter}.ipynb"
        if not executed.is_file():
            raise ValueError(f"{path.relative_to(root)}: the executed chapter {executed} "
                             "does not exist")
        key = (session.chapter, deck_language)
        if key not in chapters:
            chapters[key] = _chapter(executed, root, deck_language)
        source = parse_deck(path.read_text(encoding="utf-8"), str(path.relative_to(root)))
        page = render_deck(source, session, chapters[key], book, provenance, deck_language)
        target = out / deck_name(number)
        target.write_text(page, encoding="utf-8")
        written.append(target)
    return written
