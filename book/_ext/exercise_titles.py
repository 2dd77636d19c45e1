"""Exercise titles and references that read cleanly, in every language of the book.

The book numbers its exercises by hand ("1.1 — The Epanechnikov constants ★ (derivation)")
and marks them ``:nonumber:``. sphinx-exercise then wraps that title in parentheses,
"Exercise (1.1 — ...)", and a ``{ref}`` to the exercise reads only "Exercise". This
extension

- makes each exercise's title a message of its page's catalog (sphinx-exercise gives the
  title node no source, so Sphinx neither extracts nor translates it): the Chinese edition
  reads "练习 1.1 — Epanechnikov 核的常数 ★（推导）";
- drops the wrapping parentheses, in exercise and solution titles alike, so the heading
  reads "Exercise 1.1 — The Epanechnikov constants ★ (derivation)";
- gives each exercise label the link text "Exercise 1.1 (The Epanechnikov constants)", so
  ``{ref}`ex-1-1``` names the exercise it links to; a translated edition builds it from the
  translated title, in its own words: "练习 1.1（Epanechnikov 核的常数）".
"""

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform

from mhacore.editions.references import exercise_name as link_text  # shared with the pack

# language -> the link text of an exercise from its number and name (English: link_text)
LINK_TEXT = {"zh": "练习 {number}（{name}）"}


def link_text_in(title: str, language: str | None) -> str | None:
    """The link text of the exercise titled ``title`` in the edition's ``language``.

    >>> link_text_in("7.1 — 三个几何头 ★（推导）", "zh_CN")
    '练习 7.1（三个几何头）'
    >>> link_text_in("7.1 — Three geometric heads ★ (derivation)", "en")
    'Exercise 7.1 (Three geometric heads)'
    >>> link_text_in("no number", "zh_CN") is None
    True
    """
    english = link_text(title)
    form = LINK_TEXT.get((language or "en").split("_")[0])
    if english is None or form is None:
        return english
    number, name = english.removeprefix("Exercise ").split(" ", 1)
    return form.format(number=number, name=name[1:-1])


def _title_directive():
    from sphinx_exercise.directive import ExerciseDirective
    from sphinx_exercise.nodes import exercise_subtitle

    class ExerciseWithTitleMessage(ExerciseDirective):
        """sphinx-exercise's directive, its title (the argument) a translatable message."""

        def run(self):
            result = super().run()
            for node in result:
                for subtitle in node.findall(exercise_subtitle):
                    subtitle.rawsource = self.arguments[0]
                    subtitle.source, subtitle.line = self.get_source_info()
            return result

    return ExerciseWithTitleMessage


class KeepTitleMessages(SphinxPostTransform):
    """Keep each exercise title a message through sphinx-exercise's title transform.

    That transform (priority 20) moves the title's text into a new title node that has no
    source, and the message catalog builder extracts messages only after it has run; the
    title's text is wrapped here in an inline that carries the message."""

    builders = ("gettext",)
    default_priority = 19

    def run(self):
        from sphinx_exercise.nodes import exercise_subtitle

        for subtitle in self.document.findall(exercise_subtitle):
            if not subtitle.rawsource or not hasattr(subtitle, "uid"):
                continue
            message = nodes.inline(subtitle.rawsource, "", *subtitle.children,
                                   translatable=True)
            message.source, message.line = subtitle.source, subtitle.line
            message.uid = subtitle.uid
            subtitle.children = []
            subtitle += message


def _label_exercises(app, doctree):
    from sphinx_exercise.nodes import exercise_subtitle, is_exercise_node

    domain = app.env.get_domain("std")
    registry = getattr(app.env, "sphinx_exercise_registry", {})
    for node in doctree.findall(is_exercise_node):
        label = node.get("label")
        # the directive kept a copy of the exercise, with its title as written, for the
        # titles of its solutions; the page's (translated) title replaces it
        if label in registry:
            registry[label]["node"] = node.deepcopy()
        subtitles = list(node.findall(exercise_subtitle))
        text = link_text_in(subtitles[0].astext(), app.config.language) if subtitles else None
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
    app.setup_extension("sphinx_exercise")  # its directive first, then the one above
    app.add_directive("exercise", _title_directive(), override=True)
    app.connect("doctree-read", _label_exercises, priority=600)  # after sphinx-exercise
    app.add_post_transform(KeepTitleMessages)
    app.add_post_transform(UnwrapExerciseTitles)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
