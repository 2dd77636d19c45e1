"""Write the course's per-session reveal.js slides into the HTML output (``slides/``).

Once the site is built, :func:`mhacore.editions.slides.write_decks` renders the slide
sources of ``book/slides/`` (the Chinese build: ``book/locales/zh_CN/slides/``) with the
figures, equations, statements and numbers of the chapters this build executed (myst-nb's
``jupyter_execute`` folder), one deck per session of the course page, which links to them.
Cross-references read with the numbers the site gives ("Theorem 3.1", "Figure 6.2"), from
the book's sources (:func:`mhacore.editions.reader.read_book`); the title slides carry the
version and commit of this build (``book/_ext/editions.py``). Everything the decks load is
copied beside them: they work offline.
"""

from pathlib import Path

from sphinx.util import logging

LOGGER = logging.getLogger(__name__)


def _write_slides(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    from mhacore.editions.reader import read_book
    from mhacore.editions.slides import SOURCE_DIRS, write_decks

    executed = Path(app.outdir).parent / "jupyter_execute" / "book"
    if not executed.is_dir():
        return
    root = Path(app.confdir)
    language = app.config.language if app.config.language in SOURCE_DIRS else "en"
    written = write_decks(Path(app.outdir) / "slides", executed, book=read_book(root),
                          language=language, root=root,
                          provenance=getattr(app, "mhacore_provenance", None))
    LOGGER.info(f"slides: {len(written)} decks ({language}) in {Path(app.outdir) / 'slides'}")


def setup(app):
    app.connect("build-finished", _write_slides)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
