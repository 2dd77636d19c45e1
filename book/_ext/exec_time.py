"""``{exec-time}`this```: how long a page took to execute in the build that made the site.

``{exec-time}`this``` gives the current page's time, ``{exec-time}`01-nadaraya-watson```
another page's (a document name, relative to the current page's folder).

The number comes from myst-nb's execution report, the same data as the table on the build
status page (``{nb-exec-table}``), so a chapter's cost line is measured, never typed. With
jupyter-cache it is the run time recorded when the cached execution was made. A page that
was not executed in this build says so. The page is resolved when the role is read, so the
PDF (one document assembled under the root page) shows each chapter's own time.
"""

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform


class exec_time(nodes.Inline, nodes.TextElement):
    """Placeholder for the page's run time, filled in once every page has executed."""


def exec_time_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    node = exec_time(rawtext, "")
    node["docname"] = target_docname(inliner.document.settings.env.docname, text)
    return [node], []


def target_docname(current: str, target: str) -> str:
    """The page ``target`` names, seen from page ``current`` (``"this"``: ``current``).

    Resolved while the page is read: the LaTeX builder runs post-transforms on the whole
    book assembled under the root page, so ``env.docname`` there is not the chapter."""
    from sphinx.util import docname_join

    target = target.strip()
    return current if target == "this" else docname_join(current, target)


def run_time_text(exec_data) -> str:
    """``"19.8 s"`` from myst-nb's execution data, or a note when there is none."""
    runtime = (exec_data or {}).get("runtime")
    if runtime is None or not (exec_data or {}).get("succeeded", False):
        return "(not measured: the page was not executed in this build)"
    return f"{runtime:.1f} s" if runtime < 60 else f"{runtime / 60:.1f} min"


class FillExecTime(SphinxPostTransform):
    default_priority = 30

    def run(self):
        from myst_nb.sphinx_ import NbMetadataCollector

        for node in list(self.document.findall(exec_time)):
            docname = node.get("docname") or target_docname(self.env.docname,
                                                             node.get("target", "this"))
            data = NbMetadataCollector.get_doc_data(self.env).get(docname, {}).get("exec_data")
            node.replace_self(nodes.Text(run_time_text(data)))


def setup(app):
    app.add_node(exec_time)
    app.add_role("exec-time", exec_time_role)
    app.add_post_transform(FillExecTime)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
