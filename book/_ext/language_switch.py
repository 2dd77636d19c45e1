"""A link on every page to the same page in the other edition (English <-> 中文).

The editions are published side by side: the English site at the root, the Chinese one in
its ``zh/`` folder (``make book-zh`` links ``_build/html/zh`` to ``_build/zh/html``). The
links are relative, so they work offline from the build folder and wherever the two sites
are copied together. Each link carries ``hreflang``; the English build's own link checks
skip such links, and the Chinese edition's tests follow them. The student edition has no
Chinese counterpart, so its pages carry no switch.
"""

from html import escape

from student_edition import is_student_edition

EDITIONS = {  # language -> (label of the *other* edition, its language tag, its root)
    "en": ("中文", "zh-CN", "zh/"),
    "zh_CN": ("English", "en", "../"),
}


def counterpart_href(pagename: str, language: str | None) -> tuple[str, str, str]:
    """``(href, label, hreflang)`` of the counterpart of ``pagename`` in the other edition.

    >>> counterpart_href("book/01-nadaraya-watson", "en")[0]
    '../zh/book/01-nadaraya-watson.html'
    >>> counterpart_href("index", "zh_CN")[:2]
    ('../index.html', 'English')
    """
    label, hreflang, other_root = EDITIONS.get(language or "en", EDITIONS["en"])
    up = "../" * pagename.count("/")
    return f"{up}{other_root}{pagename}.html", label, hreflang


def _add_switch(app, pagename, templatename, context, doctree):
    if doctree is None or "body" not in context or is_student_edition():  # genindex, search:
        return  # no counterpart link; the student edition: no Chinese student edition
    href, label, hreflang = counterpart_href(pagename, app.config.language)
    link = (f'<p class="language-switch" style="text-align: right; margin: 0">'
            f'<a class="reference external" href="{escape(href)}" hreflang="{hreflang}" '
            f'lang="{hreflang}">{escape(label)}</a></p>\n')
    context["body"] = link + context["body"]


def setup(app):
    app.connect("html-page-context", _add_switch)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
