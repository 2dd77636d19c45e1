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

In a Chinese build both count the page as the Chinese reader reads it: the page
translated through its catalog (:func:`mhacore.editions.translated.translate_page`), its
Chinese characters plus its Latin words (:func:`~mhacore.editions.reader.prose_characters`),
at ``CHARACTERS_PER_MINUTE``.
"""

import functools
from pathlib import Path

from docutils import nodes

from mhacore.editions.reader import (CHARACTERS_PER_MINUTE, WORDS_PER_MINUTE,  # noqa: F401
                                     prose_characters, prose_words, reading_minutes)


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
        language = inliner.document.settings.env.config.language or "en"
        if language.startswith("zh"):
            words = prose_characters(_translated(inliner, path, language))
            return [nodes.Text(f"{count(words, CHARACTERS_PER_MINUTE):,}")], []
        words = prose_words(path.read_text(encoding="utf-8"))
        return [nodes.Text(f"{count(words, WORDS_PER_MINUTE):,}")], []
    return role


def _translated(inliner, path: Path, language: str) -> str:
    """The MyST text of the page ``path`` in ``language``, as its catalog translates it."""
    from mhacore.editions.translated import catalog_path

    env = inliner.document.settings.env
    root = Path(env.app.confdir)
    locales = next((Path(root, d) for d in env.config.locale_dirs
                    if Path(root, d, language).is_dir()), None)
    catalog = catalog_path(root, path, language, locales)
    env.note_dependency(str(catalog))  # and with its translation
    return _translate(str(root), str(path), language, str(locales) if locales else None,
                      catalog.stat().st_mtime_ns if catalog.is_file() else 0)


@functools.lru_cache(maxsize=32)
def _translate(root: str, path: str, language: str, locales: str | None, _stamp: int) -> str:
    from mhacore.editions.translated import translate_page

    return translate_page(Path(root), Path(path), language,
                          Path(locales) if locales else None).text


def setup(app):
    app.add_role("prose-words", _role(lambda words, per_minute: words))
    app.add_role("reading-minutes", _role(reading_minutes))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
