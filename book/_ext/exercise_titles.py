"""Exercise titles and references that read cleanly.

The book numbers its exercises by hand ("1.1 — The Epanechnikov constants ★ (derivation)")
and marks them ``:nonumber:``. sphinx-exercise then wraps that title in parentheses,
"Exercise (1.1 — ...)", and a ``{ref}`` to the exercise reads only "Exercise". This
extension

- drops the wrapping parentheses, in exercise and solution titles alike, so the heading
  reads "Exercise 1.1 — The Epanechnikov constants ★ (derivation)";
- gives each exercise label the link text "Exercise 1.1 (The Epanechnikov constants)", so
  ``{ref}`ex-1-1``` names the exercise it links to.
"""

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform

from mhacore.editions.references import exercise_name as link_text  # shared with the pack


def _label_exercises(app, doctree):
    from sphinx_exercise.nodes import exercise_subtitle, is_exercise_node

    domain = app.env.get_domain("std")
    for node in doctree.findall(is_exercise_node):
        subtitles = list(node.findall(exercise_subtitle))
        text = link_text(subtitles[0].astext()) if subtitles else None
        label = node.get("label")
        if text and label in domain.labels:
            docname, anchor, _ = domain.labels[label]
            domain.labels[label] = docname, anchor, text


class UnwrapExerciseTitles(SphinxPostTransform):
    """Turn "Exercise (T)" into "Exercise T" after sphinx-exercise builds its titles."""

    default_priority = 25  # after sphinx-exercise's title transforms (20 and 21)

    def run(self):
        from sphinx_exercise.nodes import is_exercise_node, is_solution_node

        for node in self.document.findall(lambda n: is_exercise_node(n) or
                                          is_solution_node(n)):
            title = node.children[0] if node.children else None
            if not isinstance(title, nodes.title):
                continue
            texts = [t for t in title.findall(nodes.Text)]
            opening = next((t for t in texts if str(t) == " ("), None)
            closing = next((t for t in reversed(texts) if str(t) == ")"), None)
            if opening is None or closing is None:
                continue
            opening.parent.replace(opening, nodes.Text(" "))
            closing.parent.remove(closing)


def setup(app):
    app.connect("doctree-read", _label_exercises, priority=600)  # after sphinx-exercise
    app.add_post_transform(UnwrapExerciseTitles)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
