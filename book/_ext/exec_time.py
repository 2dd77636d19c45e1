"""``{exec-time}`this```: how long a page took to execute in the build that made the site.

``{exec-time}`this``` gives the current page's time, ``{exec-time}`01-nadaraya-watson```
another page's (a document name, relative to the current page's folder).

The number comes from myst-nb's execution report, the same data as the table on the build
status page (``{nb-exec-table}``), so a chapter's cost line is measured, never typed. With
jupyter-cache it is the run time recorded when the cached execution was made. A page that
was not executed in this build says so.
"""

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform


class exec_time(nodes.Inline, nodes.TextElement):
    """Placeholder for the page's run time, filled in once every page has executed."""


def exec_time_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    node = exec_time(rawtext, "")
    node["target"] = text.strip()
    return [node], []


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

        from sphinx.util import docname_join

        for node in list(self.document.findall(exec_time)):
            target = node["target"]
            docname = (self.env.docname if target == "this"
                       else docname_join(self.env.docname, target))
            data = NbMetadataCollector.get_doc_data(self.env).get(docname, {}).get("exec_data")
            node.replace_self(nodes.Text(run_time_text(data)))


def setup(app):
    app.add_node(exec_time)
    app.add_role("exec-time", exec_time_role)
    app.add_post_transform(FillExecTime)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
