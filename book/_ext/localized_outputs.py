"""Outputs in the edition's language, from the book's one (English) execution.

Every chapter is executed once per build, into the jupyter-cache, and the Chinese edition
(``tools/i18n.py html``, ``language = zh_CN``) shows the outputs of that execution. What
the package wrote there (a theorem check's summary, the theorem ledger's tables and notes,
a self-check's reply) is made of the package's messages, which its own catalog translates
(:mod:`mhacore.i18n`). When the build's language is one the package speaks, this extension
shows them in it, and re-executes nothing:

1. **Cell outputs.** Before myst-nb renders a code cell's outputs, a copy of each (stdout,
   ``text/markdown``, ``text/plain``) goes through :func:`mhacore.i18n.translate_rendered`:
   every line that is a message of the catalog, or an instance of a message with
   placeholders (``estimate {estimate} ± {standard_error} (SE), ...``), becomes its
   translation with the executed values put back, and a Markdown table whose headers are
   all messages (the ledger's) is translated cell by cell. Any other output, every number
   and every glued value stays as executed. The catalog is read when the site is built, so
   a corrected translation shows without executing anything again.
2. **The package's replies.** The package speaks the edition's language in the build
   process (``mhacore.set_language``), so what the build asks of it there, such as the
   self-checks' "Your turn" replies that ``student_edition.YourTurnOutputs`` shows in place
   of the executed verdicts, comes in that language.

3. **Figures.** A chapter glues each figure once as drawn and once per other language the
   package speaks, its words translated (:func:`mhacore.figures.glue_figure`:
   ``fig-nw-three-bandwidths.zh_CN``); in the edition's language, every
   ``{glue:figure}`` of a page shows that copy (its ``:name:``, and so its number and
   references, unchanged). A figure without the copy stops the build (myst-nb's unknown
   key), rather than show English.

The build-status table (``{nb-exec-table}``) is translated with the rest of the page chrome
by ``translations.py`` (``TranslateExecutionTable``).

An English build is left exactly as it was. The switch is the build's ``language``, set by
``tools/i18n.py`` (the extension is listed in ``_config.yml`` for every edition).
"""

from __future__ import annotations

import functools
import re

from mhacore import i18n

_TRANSLATED_MIMES = ("text/markdown", "text/plain")


def spoken(language: str | None) -> str | None:
    """The package's language for a build's ``language`` (None for English or one it does
    not speak).

    >>> spoken("zh_CN"), spoken("en"), spoken(None), spoken("fr")
    ('zh_CN', None, None, None)
    """
    return language if language in i18n.LANGUAGES and language != i18n.ENGLISH else None


def translated_output(output: dict, language: str) -> dict:
    """A copy of a notebook output with the package's English in ``language``.

    >>> out = {"output_type": "stream", "name": "stdout", "text": "19 checks, 19 hold\\n"}
    >>> translated_output(out, "zh_CN")["text"], out["text"]
    ('19 个检验，19 个成立\\n', '19 checks, 19 hold\\n')
    """
    kind = output.get("output_type")
    if kind == "stream" and output.get("name") == "stdout":
        text = output.get("text", "")
        text = "".join(text) if isinstance(text, list) else text
        return type(output)({**output, "text": i18n.translate_rendered(text, language)})
    if kind in ("display_data", "execute_result"):
        data = dict(output.get("data", {}))
        for mime in _TRANSLATED_MIMES:
            value = data.get(mime)
            if isinstance(value, list):
                value = "".join(value)
            if isinstance(value, str):
                data[mime] = i18n.translate_rendered(value, language)
        return type(output)({**output, "data": type(output.get("data", {}))(data)})
    return output


def _translating(render_outputs):
    """Wrap myst-nb's rendering of a code cell's outputs: in a build whose language the
    package speaks, render translated copies of the outputs."""
    @functools.wraps(render_outputs)
    def render(self, token, outputs):
        language = spoken(self.sphinx_env.config.language)
        if language:
            outputs = [translated_output(output, language) for output in outputs]
        return render_outputs(self, token, outputs)

    render.localized_outputs = True
    return render


def _patch_renderer() -> None:
    from myst_nb.sphinx_ import SphinxNbRenderer

    current = SphinxNbRenderer._render_nb_cell_code_outputs
    if not getattr(current, "localized_outputs", False):
        SphinxNbRenderer._render_nb_cell_code_outputs = _translating(current)


_GLUE_FIGURE = re.compile(r"^(\s*(?:`{3,}|:{3,})\{glue:figure\}[ \t]+)([^\s:]+)[ \t]*$",
                          re.M)


def localized_figures(source: str, language: str) -> str:
    """A page's MyST ``source`` with its ``{glue:figure}`` directives showing the copies
    drawn in ``language``.

    >>> print(localized_figures("```{glue:figure} fig-a\\n:name: fig-a\\n```", "zh_CN"))
    ```{glue:figure} fig-a.zh_CN
    :name: fig-a
    ```
    """
    return _GLUE_FIGURE.sub(lambda m: f"{m[1]}{m[2]}.{language}", source)


def _figures_in_language(app, docname, source) -> None:
    language = spoken(app.config.language)
    if language:
        source[0] = localized_figures(source[0], language)


def _speak(app) -> None:
    app.mhacore_language_before = i18n.get_language()
    language = spoken(app.config.language)
    if language:
        i18n.set_language(language)


def _restore(app, exception) -> None:
    i18n.set_language(getattr(app, "mhacore_language_before", i18n.ENGLISH))


def setup(app):
    _patch_renderer()
    app.connect("builder-inited", _speak)
    app.connect("source-read", _figures_in_language)
    app.connect("build-finished", _restore, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
