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


def setup(app):
    app.connect("config-inited", _preamble, priority=810)
    app.connect("builder-inited", _proof_titles_in_language)
    app.connect("env-get-updated", _site_numbers, priority=900)
    app.add_post_transform(PartNumbering)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
