"""Write the course's per-session reveal.js slides into the HTML output (``slides/``).

Once the site is built, :func:`mhacore.editions.slides.write_decks` turns the chapters this build
executed (myst-nb's ``jupyter_execute`` folder) into one deck per session; the course
page links to them. References read with the numbers the site gives ("Theorem 3.1",
"Figure 6.2") and citations author–year, from the book's sources
(:func:`mhacore.editions.reader.read_book`). Everything the decks load is copied beside them: they
work offline.
"""

from pathlib import Path


def _write_slides(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    from mhacore.editions.reader import read_book
    from mhacore.editions.slides import write_decks

    executed = Path(app.outdir).parent / "jupyter_execute" / "book"
    if executed.is_dir():
        write_decks(Path(app.outdir) / "slides", executed, book=read_book(Path(app.confdir)))


def setup(app):
    app.connect("build-finished", _write_slides)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
