"""Write the course's per-session reveal.js slides into the HTML output (``slides/``).

Once the site is built, :func:`mhacore.slides.write_decks` turns the chapters this build
executed (myst-nb's ``jupyter_execute`` folder) into one deck per session; the course
page links to them. References read as on the built pages ("Theorem 3", "Fig. 4") and
citations as author–year labels from the site's bibliography. Everything the decks load is copied beside them: they work offline.
"""

from pathlib import Path


def _write_slides(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    from mhacore._references import citation_labels
    from mhacore.slides import names_from_site, write_decks

    executed = Path(app.outdir).parent / "jupyter_execute" / "book"
    if executed.is_dir():
        citations = {}
        for bibfile in app.config.bibtex_bibfiles:
            citations.update(citation_labels(Path(app.srcdir) / bibfile))
        write_decks(Path(app.outdir) / "slides", executed,
                    names=names_from_site(Path(app.outdir) / "book"), citations=citations)


def setup(app):
    app.connect("build-finished", _write_slides)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
