"""Translations of the book (``book/locales``): what is a message, and glue inside one.

**What is a message.**

Sphinx offers every text node for translation. This book's editions translate prose only:
what a notebook cell printed (its outputs, glued equations included) is computed, the same
in every language, and display math is notation, not prose. A table cell or paragraph made
only of inline math, inline code and punctuation has nothing to translate either. All of
these are marked ``translatable = False`` before Sphinx extracts or translates messages, so
they never enter a catalog and always show the computed or written original.

**Toctree captions.** sphinx-external-toc inserts the table of contents (with the part
captions of ``_toc.yml``) after Sphinx has translated the page, so the captions, which the
root page's catalog holds, are translated here once they are in place.

**Glued numbers in a translation.** Sphinx parses each translated message as a small
document of its own, which has no access to the notebook's glue data, so a
``{glue:text}`key``` in a translation would find nothing. Before such a message is parsed,
its glue roles are pointed explicitly at the page's own notebook (``page.md::key``); myst-nb
resolves those from the same executed outputs as the English page. The translator writes
the role exactly as the English text has it.

**Page chrome.** What the theme and ``editions.py`` write around the pages (the search
box, the version footer, the download menu) is set in English by the shared configuration;
a translated build replaces those words with the edition's (:data:`CHROME`). The author and
the copyright line are set by ``tools/i18n.py`` and the templates of ``book/_assets``; the
provenance line and the licence by ``editions.py``, in the build's language.
"""

import re
from pathlib import Path

import sphinx.transforms.i18n
from docutils import nodes
from sphinx import addnodes
from sphinx.locale import init as init_locale
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.i18n import docname_to_domain

# inline math ($...$), inline code (`...`) and MyST roles ({role}`...`) carry no prose,
# except the text a role is given to show ({doc}`chapter 2 <02-one-head-is-nw>`)
_NOT_PROSE = re.compile(r"\{[\w:.-]+\}`[^`]*`|`[^`]*`|\$[^$]*\$")
_ROLE_TEXT = re.compile(r"\{[\w:.-]+\}`([^`<]*)<[^`]*>`")


def has_prose(source: str) -> bool:
    """True when ``source`` has a letter outside inline math, code and roles, or in the
    text a role shows instead of its target's title.

    >>> has_prose("$W_Q^h, W_K^h$"), has_prose("`n_heads`, `d_head`"), has_prose("head $h$")
    (False, False, True)
    >>> has_prose("{doc}`02-one-head-is-nw`"), has_prose("$h$ ({doc}`chapter 2 <02-x>`)")
    (False, True)
    """
    shown = _ROLE_TEXT.sub(r" \1 ", source)
    return any(ch.isalpha() for ch in _NOT_PROSE.sub("", shown))


def _in_cell_output(node: nodes.Node) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.get("nb_element") == "cell_code_output" or "cell_output" in parent.get(
                "classes", []):
            return True
        parent = parent.parent
    return False


class MarkUntranslatable(SphinxTransform):
    """Keep outputs, display math and prose-free text out of the catalogs."""

    default_priority = 10  # before sphinx.transforms.i18n.Locale (20)

    def apply(self, **kwargs):
        for node in self.document.findall(nodes.TextElement):
            # Inline nodes are never messages of their own; and Sphinx unwraps any inline
            # that carries a "translatable" key (moving its text to the end of the paragraph)
            if "translatable" in node or isinstance(node, nodes.Inline):
                continue
            if (isinstance(node, nodes.math_block) or _in_cell_output(node)
                    or not has_prose(node.rawsource or node.astext())):
                node["translatable"] = False


class TranslateTocCaptions(SphinxTransform):
    """Translate the part captions that sphinx-external-toc inserted (priority 100)."""

    default_priority = 101

    def apply(self, **kwargs):
        if not self.config.language or self.config.language == "en":
            return
        toctrees = [t for t in self.document.findall(addnodes.toctree) if t.get("caption")]
        if not toctrees:
            return
        dirs = [str(Path(self.env.srcdir, d)) for d in self.config.locale_dirs]
        domain = docname_to_domain(self.env.docname, self.config.gettext_compact)
        catalog, has_catalog = init_locale(dirs, self.config.language, domain)
        if has_catalog:
            for toctree in toctrees:
                toctree["caption"] = catalog.gettext(toctree["caption"])


_GLUE_ROLE = re.compile(r"(\{glue(?::\w*)?\}`)([^`]+)(`)")


def glue_from_page(msgstr: str, source_path: str) -> str:
    """Point the glue roles of a translated message at the page ``source_path`` itself.

    >>> glue_from_page("比值为 {glue:text}`ratio:.2f`。", "/book/06-heads-and-width.md")
    '比值为 {glue:text}`06-heads-and-width.md::ratio:.2f`。'
    >>> glue_from_page("{glue:text}`ratio`", "/book/a.md")  # myst-nb needs a format here
    '{glue:text}`a.md::ratio:s`'
    >>> glue_from_page("{glue}`other.md::x`", "/book/a.md")
    '{glue}`other.md::x`'
    """
    name = Path(str(source_path).split(":", 1)[0]).name

    def explicit(match):
        role, target = match[1], match[2]
        if "::" in target:
            return match[0]
        if role == "{glue:text}`" and ":" not in target:
            target += ":s"  # the default format, which a pending reference must spell out
        return f"{role}{name}::{target}{match[3]}"

    return _GLUE_ROLE.sub(explicit, msgstr)


_publish_msgstr = sphinx.transforms.i18n.publish_msgstr


def _publish_msgstr_with_glue(app, source, source_path, *args, **kwargs):
    return _publish_msgstr(app, glue_from_page(source, source_path), source_path,
                           *args, **kwargs)


# language -> the page chrome's words in that edition
CHROME = {
    "zh": {
        "search": "搜索本书……",
        # editions.py's print button in the download menu: (text, tooltip)
        "print": ("打印本页", "打印本页"),
        # the source download is the English MyST page (the translation lives in catalogs)
        "source": (".md（英文原稿）", "下载本页的英文原稿"),
        # myst-nb's table of executed pages (the build status page): headers, method
        "exec_table": {"Document": "文档", "Modified": "修改时间", "Method": "执行方式",
                       "Run Time (s)": "运行时间（秒）", "Status": "状态", "cache": "缓存"},
    },
}


def _chrome(app):
    language = (app.config.language or "en").split("_")[0]
    return CHROME.get(language)


def _translate_chrome(app, config):
    """The search box in the edition's language (``editions.py`` writes the footer's
    provenance line and the release in it)."""
    words = _chrome(app)
    if words is None:
        return
    config.html_theme_options["search_bar_text"] = words["search"]


def _translate_buttons(app, pagename, templatename, context, doctree):
    """The download menu's print button in the edition's language (editions.py, 600)."""
    words = _chrome(app)
    for group in context.get("header_buttons", []) if words else []:
        for button in group.get("buttons", []):
            if button.get("label") == "download-pdf-button":
                button["text"], button["tooltip"] = words["print"]
            elif button.get("label") == "download-source-button":
                button["text"], button["tooltip"] = words["source"]


class TranslateExecutionTable(SphinxPostTransform):
    """myst-nb's table of executed pages (``{nb-exec-table}``, made at priority 8) in the
    edition's language: its headers and the execution method."""

    default_priority = 9

    def run(self, **kwargs):
        words = _chrome(self.app)
        if not words:
            return
        table_words = words["exec_table"]
        for table in self.document.findall(nodes.table):
            header = [entry.astext() for entry in table.findall(nodes.entry)][:5]
            if header != ["Document", "Modified", "Method", "Run Time (s)", "Status"]:
                continue
            for text in list(table.findall(nodes.Text)):
                if str(text) in table_words:
                    text.parent.replace(text, nodes.Text(table_words[str(text)]))


# Chinese punctuation that may not start a line (the closing and pausing marks)
_NO_LINE_START = "，。、；：！？）」』》〉”’…"


class KeepPunctuationWithMath(SphinxPostTransform):
    """In a Chinese page, the punctuation right after inline math stays on its line: the
    browser may break between a formula and a following "，" (it sees two boxes), which
    starts the next line with a comma; the pair goes into a ``nowrap`` span
    (``mhacore-nobreak``, editions.css). XeLaTeX's xeCJK keeps them together by itself."""

    default_priority = 10
    formats = ("html",)

    def run(self, **kwargs):
        if not (self.config.language or "en").startswith("zh"):
            return
        for math in list(self.document.findall(nodes.math)):
            parent = math.parent
            index = parent.index(math)
            after = parent[index + 1] if index + 1 < len(parent) else None
            if not isinstance(after, nodes.Text) or not after or after[0] not in _NO_LINE_START:
                continue
            mark, rest = str(after)[0], str(after)[1:]
            pair = nodes.inline(classes=["mhacore-nobreak"])
            parent.replace(math, pair)
            pair += [math, nodes.Text(mark)]
            if rest:
                parent.replace(after, nodes.Text(rest))
            else:
                parent.remove(after)


#: A table cell at most this long (a term, a verdict: "恒等式", "部分成立") keeps its words whole
SHORT_CELL = 6


class KeepShortCellsWhole(SphinxPostTransform):
    """In a Chinese page, a short table cell breaks lines only at spaces and punctuation
    (``mhacore-words``, editions.css: ``word-break: keep-all``): a narrow column (the
    ledger's kind and verdict) would otherwise break its words character by character
    ("成/立"), since Chinese text may break anywhere. Longer cells wrap as prose does."""

    default_priority = 10
    formats = ("html",)

    def run(self, **kwargs):
        if not (self.config.language or "en").startswith("zh"):
            return
        for entry in self.document.findall(nodes.entry):
            text = entry.astext().strip()
            if text and len(text) <= SHORT_CELL and "\n" not in text:
                entry["classes"].append("mhacore-words")


def setup(app):
    app.add_post_transform(KeepPunctuationWithMath)
    app.add_post_transform(KeepShortCellsWhole)
    app.add_post_transform(TranslateExecutionTable)
    app.connect("config-inited", _translate_chrome, priority=850)
    app.connect("html-page-context", _translate_buttons, priority=700)
    app.add_transform(MarkUntranslatable)
    app.add_transform(TranslateTocCaptions)
    sphinx.transforms.i18n.publish_msgstr = _publish_msgstr_with_glue
    return {"parallel_read_safe": True, "parallel_write_safe": True}
