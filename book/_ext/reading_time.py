"""``{prose-words}`01-nadaraya-watson``` and ``{reading-minutes}`...```: a page's length.

The course page gives each session's reading as a number of words and of minutes. Both
are counted from the page's source when the site is built, so they follow the chapters
as they change, never typed by hand. Prose words are the words a reader reads: code
cells, displayed and inline math, directive options, labels and comments are left out
(a formula takes longer to read than its word count says, so the minutes are a floor).
Minutes are words at ``WORDS_PER_MINUTE``, a pace for technical text read with care,
rounded up to 5 minutes. The counting is :func:`mhacore.editions.reader.prose_words`,
which the notebook editions' converter uses too. The target is a document name relative
to the current page, as in ``{exec-time}`` (``"this"``: the current page).
"""

from pathlib import Path

from docutils import nodes

from mhacore.editions.reader import WORDS_PER_MINUTE, prose_words, reading_minutes  # noqa: F401


def _source(inliner, text: str) -> Path:
    from exec_time import target_docname

    env = inliner.document.settings.env
    docname = target_docname(env.docname, text)
    path = Path(env.doc2path(docname))
    env.note_dependency(str(path))  # the count changes with the page it counts
    return path


def _role(count):
    def role(name, rawtext, text, lineno, inliner, options=None, content=None):
        path = _source(inliner, text)
        if not path.is_file():
            message = inliner.reporter.error(f"{name}: no page {text!r} ({path})", line=lineno)
            return [inliner.problematic(rawtext, rawtext, message)], [message]
        words = prose_words(path.read_text(encoding="utf-8"))
        return [nodes.Text(f"{count(words):,}")], []
    return role


def setup(app):
    app.add_role("prose-words", _role(lambda words: words))
    app.add_role("reading-minutes", _role(reading_minutes))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
