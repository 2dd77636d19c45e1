"""Serve MathJax 3 from the build itself, so math renders with no network.

Sphinx loads MathJax from a CDN by default.  The PyPI package ``django-static-mathjax``
(pinned in ``requirements.txt``) ships MathJax 3.2.2; this extension copies its ``es5``
bundle into ``_static/mathjax`` of the HTML output and points ``mathjax_path`` at it.
"""

from pathlib import Path
import shutil

from sphinx.errors import ExtensionError

MATHJAX_SUBDIR = "mathjax"
ENTRY_POINT = "tex-chtml.js"


def mathjax_source() -> Path:
    """The ``es5`` folder of the installed MathJax 3 distribution."""
    try:
        import mathjax  # provided by django-static-mathjax
    except ImportError as exc:  # pragma: no cover - exercised only on a broken install
        raise ExtensionError(
            "offline MathJax needs the package django-static-mathjax; "
            "install requirements.txt"
        ) from exc
    es5 = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (es5 / ENTRY_POINT).is_file():
        raise ExtensionError(f"MathJax entry point not found: {es5 / ENTRY_POINT}")
    return es5


def _set_path(app, config):
    config.mathjax_path = f"{MATHJAX_SUBDIR}/{ENTRY_POINT}"


def _copy_bundle(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / "_static" / MATHJAX_SUBDIR
    shutil.copytree(mathjax_source(), target, dirs_exist_ok=True)


def setup(app):
    mathjax_source()  # fail early, with a clear message, when MathJax is missing
    app.connect("config-inited", _set_path, priority=900)
    app.connect("build-finished", _copy_bundle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
