"""The student edition of the site: ``MHACORE_EDITION=student`` removes every solution.

``make book-student`` builds with this variable set. The configuration is otherwise the
site's own (same chapters, same execution settings, so a shared execution cache serves
both builds); this only switches on sphinx-exercise's ``hide_solutions`` and drops what
would carry solutions out another way:

- the page sources (``_sources``) and the download button, which offers the chapters with
  their answer cells;
- the launch (Binder) buttons and the repository, issue and edit buttons, which all lead
  to the full sources with the solutions;
- the switch to the Chinese pages (there is no Chinese student edition, and the Chinese
  site beside the full one shows the solutions; ``language_switch.py`` asks
  :func:`is_student_edition`);
- the passages written for the full site only: a page marks them with a container of
  class ``full-edition`` (``:::{container} full-edition``), or a whole section with a
  label that starts with ``full-edition-``. Passages for students only (class
  ``student-edition``, labels ``student-edition-...``) appear in the student build alone.
  :class:`EditionPassages` cuts them, before the table of contents is collected, so a cut
  section leaves no entry behind. This keeps the course page's instructor notes and every
  pointer to the repository (which holds the solutions) out of the student site.

Every edition (the reader's site, the PDF, the Chinese pages, and the student site) shows
the self-checks as a reader meets them: the build ran each chapter with its hidden
solution cells, so every check said "Correct". ``YourTurnOutputs`` replaces each such
output by the reply a reader sees before answering, ``check(label, None)`` ("Your turn
..."), which is also what the downloaded notebooks print.
"""

import os

from docutils import nodes
from sphinx.transforms import SphinxTransform

from mhacore.editions.common import FULL_ONLY, STUDENT_ONLY  # classes and label prefixes
from mhacore.editions.common import SELF_CHECK as _SELF_CHECK  # check("ex-1-2", answer)

EDITION_VARIABLE = "MHACORE_EDITION"
_REPOSITORY_BUTTONS = ("use_repository_button", "use_issues_button", "use_edit_page_button",
                       "use_source_button", "use_download_button")


def is_student_edition() -> bool:
    return os.environ.get(EDITION_VARIABLE, "") == "student"


def _student_config(app, config):
    if not is_student_edition():
        return
    config.hide_solutions = True
    config.html_copy_source = False
    config.html_show_sourcelink = False
    options = dict(config.html_theme_options or {})
    for button in _REPOSITORY_BUTTONS:
        options[button] = False
    options["launch_buttons"] = {}
    options.pop("repository_url", None)
    config.html_theme_options = options
    config.html_title = f"{config.html_title or config.project} (student edition)"


def your_turn_nodes(label: str) -> list:
    """The "Your turn" reply of exercise ``label`` as docutils nodes (code in backticks)."""
    from mhacore.exercises import check

    paragraph = nodes.paragraph()
    for i, part in enumerate(check(label, None).message.split("`")):
        paragraph += nodes.literal(part, part) if i % 2 else nodes.Text(part)
    return [paragraph]


def cut_passages(document, drop: str) -> int:
    """Remove every element of class ``drop`` and every section with a label ``drop-...``.

    Returns the number of elements removed.

    >>> from docutils import nodes
    >>> doc = nodes.document(None, None)
    >>> kept, cut = nodes.section(names=["intro"]), nodes.section(names=["full-edition-x"])
    >>> doc += [kept, cut, nodes.container(classes=["full-edition"])]
    >>> cut_passages(doc, "full-edition"), [c["names"] for c in doc.children]
    (2, [['intro']])
    """
    cut = [node for node in document.findall(nodes.Element)
           if drop in node.get("classes", ())
           or (isinstance(node, nodes.section)
               and any(name.startswith(drop + "-") for name in node["names"]))]
    for node in cut:
        if node.parent is not None:
            node.parent.remove(node)
    return len(cut)


class EditionPassages(SphinxTransform):
    """Keep each edition's own passages (module docstring): the student build cuts the
    ``full-edition`` ones, every other build the ``student-edition`` ones."""

    default_priority = 500  # after docutils moves a label onto its section (260)

    def apply(self):
        cut_passages(self.document, FULL_ONLY if is_student_edition() else STUDENT_ONLY)


class YourTurnOutputs(SphinxTransform):
    """In every edition, show each self-check cell's "Your turn" reply, not the verdict on
    the hidden solution."""

    default_priority = 900

    def apply(self):
        for cell in list(self.document.findall(nodes.container)):
            if cell.get("nb_element") != "cell_code":
                continue
            source = "".join(n.astext() for n in cell.findall(nodes.literal_block)
                             if n.parent.get("nb_element") == "cell_code_source")
            match = _SELF_CHECK.search(source)
            if not match:
                continue
            for output in [c for c in cell.children
                           if c.get("nb_element") == "cell_code_output"]:
                output.children = []
                output += your_turn_nodes(match.group(1))


def setup(app):
    app.connect("config-inited", _student_config, priority=900)
    app.add_transform(YourTurnOutputs)
    app.add_transform(EditionPassages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
