"""The book's pages in another language, as MyST, and the reader notebooks made from them.

The Chinese site is made by Sphinx from gettext catalogs
(``book/locales/zh_CN/LC_MESSAGES/book/<page>.po``): each message Sphinx extracts from a
page (a paragraph, a heading, a list item, a table cell, a glossary term, the title of an
admonition, a theorem or an exercise, a caption, an image's alt text) is the MyST source
of that piece with its line breaks made spaces, and the build shows the piece's msgstr
in its place. A message with no translation, or a fuzzy one (its English changed since),
shows in English.

:func:`translate_myst` does the same to the MyST source itself, with the parser the book
is built with (myst-parser's markdown-it and the extensions of ``_config.yml``): each
piece Sphinx extracts becomes its msgstr, on one line after the piece's own prefix
(``## ``, ``- ``, ``> ``, a table row's cells); code cells, math blocks and directive
options other than ``:alt:`` are kept byte for byte. It reports which translations it
put in and which pieces it left in English, so a piece the matching misses is seen, not
silently shown in English.

:func:`translated_notebooks` runs the book's one converter
(:func:`mhacore.editions.reader.edition_notebook`) on the translated pages, with the
converter's own words ("Theorem 3.1", "Figure 6.2", the note, the comments of the cells
it adds) in the same language (:data:`WORDS`), and a first code cell that sets
``mhacore``'s language, so the self-checks answer in it too. They are the Chinese site's
``.ipynb`` downloads (``book/_ext/editions.py``).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from .common import proof_kind_names
from .reader import (Book, chapter_sources, edition_notebook, read_book, read_source,
                     toc_pages)

LOCALES = "book/locales"  # <language>/LC_MESSAGES/book/<page>.po under it
# The Markdown extensions of _config.yml (parse: myst_enable_extensions), used when the
# book's configuration does not say
MYST_EXTENSIONS = ("amsmath", "dollarmath", "colon_fence", "deflist", "substitution",
                   "linkify")
# Directives whose body is not Markdown: kept as they are (their arguments too)
_VERBATIM = {"code-cell", "code", "code-block", "sourcecode", "math", "glue:math", "glue",
             "glue:any", "glue:text", "raw", "eval-rst", "toctree", "bibliography",
             "tabularcolumns", "literalinclude", "nb-exec-table", "tableofcontents"}
# Directives whose argument is a title, a message in parentheses for sphinx-proof's
# ("(Nadaraya–Watson estimator)") and maybe sphinx-exercise's, as it is for the others
_TITLED = ("admonition", "prf:", "exercise", "table", "topic", "sidebar")
_OPTION = re.compile(r"^(?P<key>:[\w-]+:|[\w-]+:)(?P<space>\s*)(?P<value>.*)$")
_DIRECTIVE = re.compile(r"^\{(?P<name>[\w:-]+)\}\s*(?P<arg>.*)$")
_PARENS = (("(", ")"), ("（", "）"))
# inline math, inline code and roles carry no prose (book/_ext/translations.py: a piece
# with no letter outside them is no message, and shows as it is in every language)
_NOT_PROSE = re.compile(r"\{[\w:.-]+\}`[^`]*`|`[^`]*`|\$[^$]*\$")

# The converter's own words (mhacore.editions.reader: the English text or template is the
# key), as the Chinese site prints them: sphinx-proof's names from its own catalog,
# sphinx-exercise's zh_CN names,
# Sphinx's 图, and book/locales/zh_CN/glossary.md.
WORDS = {"zh_CN": {
    **proof_kind_names("zh_CN"),  # "Theorem": "定理", ...
    "Figure": "图", "Equation": "式", "Exercise": "练习", "the equation": "该式",
    " ({title})": "（{title}）", "**{title}.**": "**{title}**", "*Proof.*": "*证明。*",
    "Exercise {number}: {title}": "练习 {number}：{title}",
    "Exercise {title}": "练习 {title}", "**Solution to {name}.**": "**{name} 的解答**",
    "Exercise {number} ({name})": "练习 {number}（{name}）",  # book/_ext/exercise_titles.py
    "**Figure {number}.**": "**图 {number}**", "**Figure.**": "**图**",
    "drawn by the code cell above": "由上方的代码单元绘制", "*({where})*": "*（{where}）*",
    "*Equation ({number}) is shown in the output of the code cell above.*":
        "*式 ({number}) 显示在上方代码单元的输出中。*",
    "*The equation is shown in the output of the code cell above.*":
        "*该式显示在上方代码单元的输出中。*",
    "*(`{key}` is shown in the output of the code cell above.)*":
        "*（`{key}` 显示在上方代码单元的输出中。）*",
    "*(The table of execution times is on the book's website.)*":
        "*（各章运行时间表在本书网站上。）*",
    "the time its page on the website shows": "网站上本页注明的时长",
    "## References": "## 参考文献",
    "Reader": "读者", "Student": "学生", "Instructor": "教师", "Nbgrader": "nbgrader ",
    "*{edition} edition, for `mhacore` {version}.* Run the cells from the top. Figures and "
    "equations appear in the output of the cell that computes them; numbers the book "
    "prints in its text are printed as `key = value`. Each exercise with a self-check "
    "has a cell `answer = None`: put your answer there, then run the check.":
        "*{edition}版，适用于 `mhacore` {version}。* 请从头依次运行各单元。图与公式显示在"
        "计算它们的单元的输出中；书中正文给出的数字打印为 `key = value`。每道带自我检查的"
        "练习都有一个 `answer = None` 单元：把你的答案填在那里，再运行检查。",
    # comments of the code cells the editions add (reader.INSTALL_CELL, common.STUB,
    # common.GLUE_CELL)
    "# Runs anywhere: where mhacore is missing (e.g. on Colab), install the release this\n"
    "# notebook was made for; where it is installed, this cell does nothing.":
        "# 在任何环境都能运行：缺少 mhacore 时（例如在 Colab 上），安装本笔记本所对应的版本；\n"
        "# 已安装时，本单元只设置语言。",
    "# Your turn: define what you need (e.g. symbols with sp.symbols), compute your\n"
    "# answer, replace None with it, then run the self-check below.":
        "# 轮到你了：定义所需的量（例如用 sp.symbols 定义符号），算出答案，\n"
        "# 用它替换 None，再运行下面的自我检查。",
    "# Notebook edition: in the book, glue() hands a figure, equation or number to the text,\n"
    "# which shows it there. A notebook cannot, so here glue() shows it in the output of the\n"
    "# cell that calls it (numbers as `key = value`, the key being how the text names them).":
        "# 笔记本版：在书中，glue() 把图、公式或数字交给正文显示。笔记本做不到，\n"
        "# 所以这里 glue() 把它显示在调用它的单元的输出中（数字打印为 `key = value`，\n"
        "# key 即正文称呼它的名字）。",
    "# The formats the text gives glued numbers.": "# 正文给所粘贴数字的格式。",
    # the line that sets the language, after the install cell (reader.edition_notebook)
    "# mhacore's messages (the self-checks' replies) in this language":
        "# mhacore 的消息（自我检查的回复）用中文",
    "# and what the cells print and display, as the book's pages show it":
        "# 各单元打印和显示的内容也用中文，与本书页面上一致",
}}


@dataclass
class Translation:
    """A page translated by :func:`translate_myst`.

    ``text`` is the translated MyST; ``used`` the msgids put in; ``english`` the pieces
    left in English that have prose (no translation, or a fuzzy one: a gap of the catalog,
    or of the matching); ``prose_free`` those without (no message: shown as written)."""

    text: str
    used: set[str] = field(default_factory=set)
    english: list[str] = field(default_factory=list)
    prose_free: list[str] = field(default_factory=list)


def read_catalog(po: Path) -> dict[str, str]:
    """``{msgid: msgstr}`` of the translated messages of the catalog ``po``: not fuzzy,
    not obsolete, not empty (the others show in English, as on the site); ``{}`` when
    there is no catalog."""
    import polib

    if not Path(po).is_file():
        return {}
    return {e.msgid: e.msgstr for e in polib.pofile(str(po))
            if e.msgid and e.translated() and not e.obsolete}


@functools.lru_cache(maxsize=4)
def _parser(extensions: tuple[str, ...]):
    from myst_parser.config.main import MdParserConfig
    from myst_parser.mdit_to_docutils.base import DocutilsRenderer
    from myst_parser.parsers.mdit import create_md_parser

    return create_md_parser(MdParserConfig(enable_extensions=set(extensions)),
                            DocutilsRenderer)


def translate_myst(text: str, messages: dict[str, str],
                   extensions: tuple[str, ...] = MYST_EXTENSIONS) -> Translation:
    """``text`` (a MyST page) with every piece Sphinx makes a message replaced by its
    translation in ``messages`` (``{msgid: msgstr}``, :func:`read_catalog`).

    Examples
    --------
    >>> page = ("# Title\\n\\nOne *line*\\nand two.\\n\\n```{code-cell} python\\nx = 1\\n```\\n"
    ...         "\\n:::{prf:theorem} Big\\n:label: thm-b\\n\\n- Holds $x$\\n  always.\\n:::\\n")
    >>> done = translate_myst(page, {"Title": "标题", "One *line* and two.": "一*行*两行。",
    ...                              "(Big)": "（大）", "Holds $x$ always.": "$x$ 总成立。"})
    >>> print(done.text)
    # 标题
    <BLANKLINE>
    一*行*两行。
    <BLANKLINE>
    ```{code-cell} python
    x = 1
    ```
    <BLANKLINE>
    :::{prf:theorem} 大
    :label: thm-b
    <BLANKLINE>
    - $x$ 总成立。
    :::
    <BLANKLINE>
    >>> sorted(done.used), done.english
    (['(Big)', 'Holds $x$ always.', 'One *line* and two.', 'Title'], [])
    """
    done = Translation("")
    done.text = _translate(text, messages, extensions, done)
    return done


def _look_up(source: str, messages: dict[str, str], done: Translation,
             parenthesised: bool = False) -> str | None:
    """The translation of the piece ``source`` (None: it stays English, and is counted)."""
    msgid = source.replace("\n", " ").strip()
    if not msgid:
        return None
    keys = [f"({msgid})", msgid] if parenthesised else [msgid]
    for key in keys:
        if key in messages:
            done.used.add(key)
            found = messages[key]
            if key != msgid:  # "(title)" -> "（标题）" -> "标题": the converter adds its own
                found = found.strip()
                for left, right in _PARENS:
                    if found.startswith(left) and found.endswith(right):
                        found = found[len(left):-len(right)].strip()
                        break
            return found
    has_prose = any(ch.isalpha() for ch in _NOT_PROSE.sub("", msgid))
    (done.english if has_prose else done.prose_free).append(msgid)
    return None


def _translate(text: str, messages: dict[str, str], extensions: tuple[str, ...],
               done: Translation) -> str:
    lines = text.split("\n")
    tokens = _parser(extensions).parse(text)
    edits = {}  # first line -> (end line, new lines)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.type in ("fence", "colon_fence") and token.map \
                and _DIRECTIVE.match(token.info.strip()):
            start, end = token.map
            edits[start] = (end, _directive(lines[start:end], token, messages,
                                            extensions, done))
        elif token.type == "inline" and token.map and i and tokens[i - 1].type in (
                "paragraph_open", "heading_open", "dt_open"):
            start, end = token.map
            found = _look_up(token.content, messages, done)
            first = token.content.split("\n")[0]
            at = lines[start].find(first)
            if found is not None and at >= 0:
                edits[start] = (max(end, start + 1), [lines[start][:at] + found])
            elif found is not None:  # the piece is not where the parser says: count it
                done.used.discard(token.content.replace("\n", " ").strip())
                done.english.append(token.content)
        elif token.type == "tr_open" and token.map:
            row = token.map[0]
            cells = []
            while tokens[i].type != "tr_close":
                if tokens[i].type == "inline":
                    cells.append(tokens[i].content)
                i += 1
            edits[row] = (row + 1, [_table_row(lines[row], cells, messages, done)])
        i += 1
    for start in sorted(edits, reverse=True):
        end, new = edits[start]
        lines[start:end] = new
    return "\n".join(lines)


def _table_row(line: str, cells: list[str], messages: dict[str, str],
               done: Translation) -> str:
    """A table row with each cell's text translated in place."""
    out, at = [], 0
    for cell in cells:
        found = _look_up(cell, messages, done) if cell.strip() else None
        where = line.find(cell, at) if cell else -1
        if found is None or where < 0:
            continue
        out.append(line[at:where] + found)
        at = where + len(cell)
    return "".join(out) + line[at:]


def _directive(lines: list[str], token, messages, extensions, done) -> list[str]:
    """A directive block (its opening line to its closing fence) with its title, its alt
    text and its Markdown body translated; the body of code, math and other verbatim
    directives is kept as it is."""
    match = _DIRECTIVE.match(token.info.strip())
    name, arg = match.group("name"), match.group("arg").strip()
    if name in _VERBATIM:
        return lines
    opening = lines[0]
    indent = opening[:len(opening) - len(opening.lstrip())]
    closed = len(lines) > 1 and lines[-1].strip().startswith(token.markup) \
        and not lines[-1].strip().strip(token.markup[0])
    if arg and name.startswith(_TITLED):
        found = _look_up(arg, messages, done, parenthesised=True)
        if found is not None:
            head = opening.rstrip()
            opening = head[:len(head) - len(arg)] + found
    body = token.content.split("\n")
    if body and body[-1] == "":
        body.pop()
    options, rest = _options(body)
    for k, option in enumerate(options):
        parsed = _OPTION.match(option.strip())
        if parsed and parsed.group("key").strip(":") == "alt":
            found = _look_up(parsed.group("value"), messages, done)
            if found is not None:
                lead = option[:option.index(parsed.group("key"))]
                options[k] = lead + parsed.group("key") + parsed.group("space") + found
    if name == "glossary":
        rest = _glossary(rest, messages, extensions, done)
    else:
        rest = _translate("\n".join(rest), messages, extensions, done).split("\n")
    inner = [indent + line if line else line for line in options + rest]
    return [opening, *inner, *([lines[-1]] if closed else [])]


def _options(body: list[str]) -> tuple[list[str], list[str]]:
    """A directive's option lines (``:key: value``, or a ``---`` YAML block) and the rest."""
    if body and body[0].strip() == "---":
        end = next((k for k in range(1, len(body)) if body[k].strip() == "---"), 0)
        return body[:end + 1], body[end + 1:]
    k = 0
    while k < len(body) and body[k].strip().startswith(":") and _OPTION.match(body[k].strip()):
        k += 1
    return body[:k], body[k:]


def _glossary(lines: list[str], messages, extensions, done) -> list[str]:
    """A ``{glossary}`` body: each term (a line at the margin) and its indented
    definition, a Markdown text of its own."""
    out, k = [], 0
    while k < len(lines):
        line = lines[k]
        if not line.strip() or line[0].isspace():
            out.append(line)
            k += 1
            continue
        found = _look_up(line, messages, done)
        out.append(found if found is not None else line)
        end = k + 1
        while end < len(lines) and (not lines[end].strip() or lines[end][0].isspace()):
            end += 1
        while end > k + 1 and not lines[end - 1].strip():
            end -= 1
        definition = lines[k + 1:end]
        width = min((len(d) - len(d.lstrip()) for d in definition if d.strip()), default=0)
        translated = _translate("\n".join(d[width:] for d in definition), messages,
                                extensions, done)
        out += [" " * width + d if d else d for d in translated.split("\n")] if definition \
            else []
        k = end
    return out


# --- whole pages, the book, its notebooks ------------------------------------------------

def catalog_path(book_root: Path, page: Path, language: str,
                 locales: Path | None = None) -> Path:
    """The catalog of ``page`` (a ``.md`` of the book): ``<locales>/<language>/
    LC_MESSAGES/<page relative to the book, without suffix>.po``."""
    locales = Path(locales) if locales else Path(book_root) / LOCALES
    relative = Path(page).resolve().relative_to(Path(book_root).resolve()).with_suffix(".po")
    return locales / language / "LC_MESSAGES" / relative


def myst_extensions(book_root: Path) -> tuple[str, ...]:
    """The Markdown extensions the book is built with (``_config.yml``)."""
    import yaml

    config = Path(book_root) / "_config.yml"
    if config.is_file():
        found = ((yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get("parse")
                 or {}).get("myst_enable_extensions")
        if found:
            return tuple(sorted(found))
    return MYST_EXTENSIONS


def translate_page(book_root: Path, page: Path, language: str = "zh_CN",
                   locales: Path | None = None) -> Translation:
    """The page ``page`` of the book at ``book_root`` translated with its catalog."""
    messages = read_catalog(catalog_path(book_root, page, language, locales))
    return translate_myst(read_source(page, "page"), messages, myst_extensions(book_root))


def translated_pages(book_root: Path, language: str = "zh_CN",
                     locales: Path | None = None) -> dict[str, Translation]:
    """``{page stem: Translation}`` for every page of ``_toc.yml``.

    Raises ``ValueError`` when ``locales`` (default ``book/locales``) has no catalogs for
    ``language``."""
    folder = (Path(locales) if locales else Path(book_root) / LOCALES) / str(language)
    if not isinstance(language, str) or not (folder / "LC_MESSAGES").is_dir():
        raise ValueError(f"language must name a folder of catalogs ({folder.parent}/"
                         f"<language>/LC_MESSAGES); got {language!r}")
    return {page.stem: translate_page(book_root, page, language, locales)
            for page in toc_pages(book_root)}


def translated_book(book_root: Path, language: str = "zh_CN", pages: dict | None = None,
                    locales: Path | None = None) -> Book:
    """The book's labels, titles and references as the translated pages give them (section
    and theorem titles in ``language``), with the converter's words in it."""
    pages = pages or translated_pages(book_root, language, locales)
    return read_book(book_root, texts={stem: t.text for stem, t in pages.items()},
                     language=language, words=WORDS.get(language, {}))


def translated_notebooks(book_root: Path, language: str = "zh_CN", edition: str = "reader",
                         locales: Path | None = None) -> dict:
    """``{chapter stem: notebook}``: each numbered chapter's ``edition`` notebook, made by
    the converter from the chapter translated into ``language``."""
    pages = translated_pages(book_root, language, locales)
    book = translated_book(book_root, language, pages, locales)
    return {source.stem: edition_notebook(source, book, edition,
                                          text=pages[source.stem].text)
            for source in chapter_sources(book_root)}
