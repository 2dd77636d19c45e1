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
"""

import re
from pathlib import Path

import sphinx.transforms.i18n
from docutils import nodes
from sphinx import addnodes
from sphinx.locale import init as init_locale
from sphinx.transforms import SphinxTransform
from sphinx.util.i18n import docname_to_domain

# inline math ($...$), inline code (`...`) and MyST roles ({role}`...`) carry no prose
_NOT_PROSE = re.compile(r"\{[\w:.-]+\}`[^`]*`|`[^`]*`|\$[^$]*\$")


def has_prose(source: str) -> bool:
    """True when ``source`` has a letter outside inline math, code and roles.

    >>> has_prose("$W_Q^h, W_K^h$"), has_prose("`n_heads`, `d_head`"), has_prose("head $h$")
    (False, False, True)
    """
    return any(ch.isalpha() for ch in _NOT_PROSE.sub("", source))


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


def setup(app):
    app.add_transform(MarkUntranslatable)
    app.add_transform(TranslateTocCaptions)
    sphinx.transforms.i18n.publish_msgstr = _publish_msgstr_with_glue
    return {"parallel_read_safe": True, "parallel_write_safe": True}
