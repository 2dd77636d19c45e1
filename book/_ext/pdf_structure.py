"""The PDF numbers what the website numbers, and nothing else.

The website numbers the eight chapters (the ``numbered: true`` parts of ``_toc.yml``) and,
inside them, figures, equations and theorems as ``chapter.k`` (``Fig. 6.1``, ``(6.2)``,
``Proposition 6.1``). The reader notebooks follow it (:func:`mhacore.editions.reader.page_labels`).
Left alone, the LaTeX build would differ in three ways, each fixed here:

- every page is a LaTeX chapter, so the three "Getting started" pages would be chapters
  1-3 and the book's chapter 1 would print as chapter 4. Parts whose pages the site does
  not number get ``secnumdepth`` -2 (no part, chapter or section numbers, and the chapter
  counter does not move); the numbered parts get LaTeX's usual depth back.
- sphinx-jupyterbook-latex sets ``numfig_secnum_depth`` to 2 for books with parts, which
  LaTeX needs to restart its figure and equation counters at each chapter, but which
  Sphinx also uses for the numbers it writes itself (sphinx-proof's "Proposition 6.3.1").
  Those numbers are assigned again at depth 1, as on the site.
- the bibliography page is empty in LaTeX (its entries move to the end of the book):
  the page is left out, and links to it land on the bibliography.

And it names theorems in the book's language: sphinx-proof titles a theorem, definition or
remark in LaTeX with its English kind ("Theorem 1.1"), where the site translates it
(`定理 1.1`); the PDF takes the same translation from sphinx-proof's catalog.
"""

from __future__ import annotations

from docutils import nodes
from sphinx import addnodes
from sphinx.builders.latex.nodes import thebibliography
from sphinx.transforms.post_transforms import SphinxPostTransform

WEB_ONLY = ("book/bibliography",)  # pages whose content the PDF shows elsewhere
PREAMBLE = r"""
\newcounter{mhacoresecnumdepth}
\AtBeginDocument{\setcounter{mhacoresecnumdepth}{\value{secnumdepth}}}
"""


def _raw(latex: str) -> nodes.raw:
    return nodes.raw("", latex, format="latex")


def _site_numbers(app, env):
    """Sphinx's own figure, equation and theorem numbers at the site's depth (1)."""
    if app.builder.format != "latex":
        return []
    from sphinx.environment.collectors.toctree import TocTreeCollector

    depth = app.config.numfig_secnum_depth
    app.config.numfig_secnum_depth = 1
    try:
        return TocTreeCollector.assign_figure_numbers(None, env)
    finally:
        app.config.numfig_secnum_depth = depth


class PartNumbering(SphinxPostTransform):
    """Unnumbered front and back matter; web-only pages out of the PDF."""

    default_priority = 800  # after sphinx-jupyterbook-latex has built the parts (700)
    formats = ("latex",)

    def run(self, **kwargs) -> None:
        env = self.env
        for start in list(self.document.findall(addnodes.start_of_file)):
            docname = start.get("docname")
            if docname in WEB_ONLY:
                self._leave_out(start)
            elif docname not in env.all_docs:  # a part made from a toctree caption
                numbered = any(env.toc_secnumbers.get(s.get("docname"))
                               for s in start.findall(addnodes.start_of_file))
                depth = r"\value{mhacoresecnumdepth}" if numbered else "-2"
                start.insert(0, _raw(rf"\setcounter{{secnumdepth}}{{{depth}}}" + "\n"))

    def _leave_out(self, start) -> None:
        docname = start["docname"]
        ids = [f"{docname}::doc"] + [f"{docname}:{i}" for section in
                                     start.findall(nodes.section) for i in section["ids"]]
        start.parent.remove(start)
        labels = "".join(rf"\label{{\detokenize{{{i}}}}}" for i in ids)
        bibliography = next(iter(self.document.findall(thebibliography)), None)
        if bibliography is not None:
            parent = bibliography.parent
            parent.insert(parent.index(bibliography), _raw(r"\phantomsection" + labels + "\n"))


def _translated_kind(depart):
    """sphinx-proof's LaTeX ``depart``, then its English kind translated (as on the site)."""
    from sphinx_proof.nodes import _, latex_admonition_start, list_rindex

    def depart_translated(self, node):
        depart(self, node)
        english = node.attributes.get("realtype", "").title()
        at = list_rindex(self.body, latex_admonition_start) + 2
        if english and self.body[at].startswith(english):
            self.body[at] = _(english) + self.body[at][len(english):]

    return depart_translated


def _proof_titles_in_language(app):
    """Wrap the LaTeX departs that sphinx-proof registered for its nodes."""
    from sphinx_proof import nodes as proof

    handlers = app.registry.translation_handlers.get("latex", {})
    english = (proof.depart_enumerable_node, proof.depart_unenumerable_node)
    for name, (visit, depart) in list(handlers.items()):
        if depart in english:
            handlers[name] = (visit, _translated_kind(depart))


def _preamble(app, config):
    config.latex_elements = {**config.latex_elements, "preamble": config.latex_elements.get(
        "preamble", "") + PREAMBLE}


#: A table holding more text than this (characters) may not fit on a page
LONG_TABLE_TEXT = 1500
#: The widest cell of a column of short cells, in Latin characters
SHORT = 16
#: The width of a long column, in Latin characters, relative to the others
LONG = 40


def _width(text: str) -> int:
    """``text``'s width in Latin characters: a Chinese character counts two."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def column_widths(rows: list[list[str]]) -> list[int]:
    """Relative widths of a table's columns from their cells' text (:func:`_width`, plus
    2 for a cell's padding): a column of short cells (a term, a verdict: each at most
    ``SHORT`` wide) as wide as its widest; any other as its cells' mean width, at most
    ``LONG`` (a long column takes the room that is left); every column at least 6.

    >>> column_widths([["C0", "One attention head is a kernel smoother of its values, "
    ...                 "which the book calls an NW estimator", "holds"],
    ...                ["C1", "Many heads are an ensemble", "mixed"]])
    [6, 40, 7]
    >>> column_widths([["C0", "成立"], ["C1", "仅在模型中成立"]])
    [6, 16]
    """
    widths = []
    for column in zip(*rows):
        sizes = [_width(cell) + 2 for cell in column]
        wide = max(sizes) if max(sizes) <= SHORT + 2 else min(LONG, sum(sizes) / len(sizes))
        widths.append(max(6, round(wide)))
    return widths


class LongTablesBreakAcrossPages(SphinxPostTransform):
    """In the PDF, a table with more text than a page holds (the theorem ledger's claims)
    is a ``longtable``, which breaks across pages, with columns as wide as their text
    needs (:func:`column_widths`): Sphinx sets a short table as a ``tabulary``, which
    cannot break, and the ledger's last rows ran off the page."""

    default_priority = 10
    formats = ("latex",)

    def run(self, **kwargs):
        for table in list(self.document.findall(nodes.table)):
            rows = [[entry.astext() for entry in row.findall(nodes.entry)]
                    for row in table.findall(nodes.row)]
            if sum(len(cell) for row in rows for cell in row) <= LONG_TABLE_TEXT or \
                    "longtable" in table["classes"] or len({len(r) for r in rows}) != 1:
                continue
            colspecs = list(table.findall(nodes.colspec))
            for colspec, width in zip(colspecs, column_widths(rows)):
                colspec["colwidth"] = width
            table["classes"] += ["longtable", "colwidths-given"]


def setup(app):
    app.add_post_transform(LongTablesBreakAcrossPages)
    app.connect("config-inited", _preamble, priority=810)
    app.connect("builder-inited", _proof_titles_in_language)
    app.connect("env-get-updated", _site_numbers, priority=900)
    app.add_post_transform(PartNumbering)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
