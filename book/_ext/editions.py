"""One configuration, many editions: settings every build of the book shares.

Every edition (the website, the PDF, and any other Sphinx builder run over this
repository) goes through ``_config.yml`` and this extension, which reads a few
environment variables at build time:

``MHACORE_BOOK_CACHE``
    The jupyter-cache folder holding the executed chapters (else the path the build is
    given, else ``<repository>/_build/.jupyter_cache``, also for ``--path-output``). Each chapter is executed once per state of
    the code and every edition reads its outputs. The cache remembers a fingerprint of
    the package, ``requirements.txt`` and ``reports/``; when they change it is emptied,
    so no edition shows numbers computed by older code.
``MHACORE_REPOSITORY_URL``
    Publish from this repository: overrides ``repository.url`` of ``_config.yml`` and
    turns on the repository and issue buttons and, on every chapter, "Colab" and "Binder"
    buttons that open its reader notebook from the repository's ``notebooks`` branch; all
    are off by default (they point at a public repository, which a local or offline copy
    of the book may not have).

It also writes the package version, the short commit and the build date into every
page's footer and onto the PDF's title page, and makes the ``.ipynb`` download of each
chapter the reader notebook of :mod:`mhacore.editions.reader`; in a translation (the zh
build of ``tools/i18n.py``), the reader notebook made from the chapter as its catalog
translates it (:mod:`mhacore.editions.translated`), which speaks that language to its
reader (``mhacore.set_language``), and beside it that notebook with the build's outputs
as the page shows them (``localized_outputs.py``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

CACHE_ENV = "MHACORE_BOOK_CACHE"
REPOSITORY_ENV = "MHACORE_REPOSITORY_URL"
FINGERPRINT_FILE = "mhacore-fingerprint.txt"
PDF_NAME = "book.pdf"  # `make pdf` copies the whole-book PDF to the site's root
# (and `make pdf-zh` book-zh.pdf beside it); the download menu's words for it
PDF_BUTTON = {"en": ("book (.pdf)", "The whole book as one PDF"),
              "zh": ("全书 (.pdf)", "整本书的 PDF")}
HERE = Path(__file__).resolve().parent
# The licences (LICENSE, LICENSE-TEXT.md), named in every page's footer and on the PDF's
# title page, in the edition's language.
TEXT_LICENCE_URL = "https://creativecommons.org/licenses/by/4.0/"
LICENCE_LINE = {"en": "Text, figures and slides: {cc}; code: MIT.",
                "zh": "正文、图与幻灯片：{cc}；代码：MIT。"}
# The build's provenance in each edition's words: (footer line, release: the PDF's title
# page)
PROVENANCE = {
    "en": ("mhacore {version} · commit {commit} · built {date}",
           "{version}, commit {commit}, built {date}"),
    "zh": ("mhacore {version} · 提交 {commit} · 构建于 {date}",
           "{version}，提交 {commit}，构建于 {date}"),
}
# Characters the PDF's text and code fonts (FreeFont's Sans and Mono) lack, taken from
# FreeSerif, which has them (the PDF test fails on any missing glyph in the LaTeX log).
FALLBACK_CHARACTERS = "✅❌✓✗ᵀ"
LATEX_PREAMBLE = "\n".join([
    r"\usepackage{newunicodechar}", r"\newfontfamily\mhacoresymbols{FreeSerif}",
    *(rf'\newunicodechar{{{c}}}{{{{\mhacoresymbols\upshape\symbol{{"{ord(c):04X}}}}}}}'
      for c in FALLBACK_CHARACTERS)]) + "\n" + r"""
% The running header names the book only: Sphinx's adds the release, which here carries
% the commit and build date (the title page keeps them) and wrapped the header in two.
\makeatletter
\fancypagestyle{normal}{\fancyhf{}%
 \fancyfoot[RO]{{\py@HeaderFamily\thepage}}%
 \fancyfoot[LO]{{\py@HeaderFamily\nouppercase{\rightmark}}}%
 \fancyhead[RO]{{\py@HeaderFamily\@title}}%
 \if@twoside
  \fancyfoot[LE]{{\py@HeaderFamily\thepage}}%
  \fancyfoot[RE]{{\py@HeaderFamily\nouppercase{\leftmark}}}%
  \fancyhead[LE]{{\py@HeaderFamily\@title}}%
 \fi
 \renewcommand{\headrulewidth}{0.4pt}\renewcommand{\footrulewidth}{0.4pt}}
\makeatother
"""


# The package's editions wing writes editions and computes nothing a chapter shows.
EDITIONS_WING = "mhacore/editions/"


def code_fingerprint(root: Path) -> str:
    """A hash of everything a chapter's outputs depend on besides its own code cells."""
    digest = hashlib.sha256()
    files = sorted([*root.glob("mhacore/**/*.py"), *root.glob("mhacore/**/*.json"),
                    *root.glob("reports/**/*"), root / "requirements.txt"])
    files = [p for p in files if not p.relative_to(root).as_posix().startswith(EDITIONS_WING)]
    for path in files:
        if path.is_file():
            digest.update(path.relative_to(root).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def prepare_cache(cache: Path, fingerprint: str) -> Path:
    """Empty ``cache`` when it was filled by other code; return it."""
    stamp = cache / FINGERPRINT_FILE
    if cache.exists() and (not stamp.is_file() or stamp.read_text().strip() != fingerprint):
        shutil.rmtree(cache)
    cache.mkdir(parents=True, exist_ok=True)
    stamp.write_text(fingerprint + "\n")
    return cache


def provenance(root: Path) -> dict[str, str]:
    """The package version, the short commit and the build date
    (:func:`mhacore.editions.common.build_provenance`)."""
    from mhacore.editions.common import build_provenance

    return build_provenance(root)


def _configure(app, config):
    root = Path(app.confdir)
    # the variable, else a path given to this build (tools/i18n.py passes the English
    # build's), else the repository's _build/.jupyter_cache, whatever --path-output says
    cache = Path(os.environ.get(CACHE_ENV) or config.nb_execution_cache_path
                 or root / "_build" / ".jupyter_cache")
    if config.nb_execution_mode == "cache":
        config.nb_execution_cache_path = str(prepare_cache(cache.resolve(),
                                                           code_fingerprint(root)))
    facts = provenance(root)
    app.mhacore_provenance = facts
    language = (config.language or "en").split("_")[0]
    footer, release = PROVENANCE.get(language, PROVENANCE["en"])
    stamp = footer.format(**facts)
    config.release = config.version = release.format(**facts)
    theme = config.html_theme_options
    url = os.environ.get(REPOSITORY_ENV, "").strip()
    if url:
        theme["repository_url"] = url
        theme["use_repository_button"] = theme["use_issues_button"] = True
    licence = LICENCE_LINE.get(language, LICENCE_LINE["en"])
    # No header band: pydata-sphinx-theme 0.17 renders one whenever a navbar slot is
    # filled (its search button fills one by default), with a second, hidden pair of
    # sidebar toggles that its scripts bind instead of the visible ones in the article
    # header, so on a phone the chapter list never opened; it also doubled the search
    # box. Search stays in the primary sidebar and on Ctrl+K (tests/test_navigation.py).
    for slot in ("navbar_start", "navbar_center", "navbar_end", "navbar_persistent"):
        theme[slot] = []
    link = f'<a href="{TEXT_LICENCE_URL}">CC BY 4.0</a>'
    theme["extra_footer"] = (f'<p class="mhacore-provenance">{stamp}</p>'
                             f'<p class="mhacore-licence">{licence.format(cc=link)}</p>')
    config.html_static_path = [*config.html_static_path, str(HERE / "static")]
    # The PDF: makeindex instead of xindy (Debian's TeX Live ships no xindy by default;
    # the book has no index), a stand-in for the bbm package, and the preamble above.
    config.latex_use_xindy = False
    config.latex_additional_files = [*config.latex_additional_files,
                                     str(HERE / "latex" / "bbm.sty")]
    title_licence = licence.format(cc=rf"CC BY 4.0 (\url{{{TEXT_LICENCE_URL}}})")
    config.latex_elements = {**config.latex_elements, "preamble": config.latex_elements.get(
        "preamble", "") + LATEX_PREAMBLE + rf"\authoraddress{{{title_licence}}}" + "\n"}
    config.myst_substitutions = {**(config.myst_substitutions or {}),
                                 "repository_url": theme.get("repository_url", "")}


def _pdf_button(app, pagename, templatename, context, doctree):
    """Offer the whole-book PDF in every page's download menu, beside printing the page."""
    for group in context.get("header_buttons", []):
        if group.get("label") != "download-buttons":
            continue
        buttons = group["buttons"]
        at = next((i for i, b in enumerate(buttons) if b.get("label") == "download-pdf-button"),
                  len(buttons))
        if at < len(buttons):
            buttons[at].update(text="print this page", tooltip="Print this page")
        language = (app.config.language or "en").split("_")[0]
        text, tooltip = PDF_BUTTON.get(language, PDF_BUTTON["en"])
        if language == "en":
            url = context["pathto"](PDF_NAME, 1)
        else:  # a translation is published in a folder of the English site, its PDF beside
            url = "../" + context["pathto"](PDF_NAME.replace(".pdf", f"-{language}.pdf"), 1)
        buttons.insert(at, {"type": "link", "url": url, "text": text, "tooltip": tooltip,
                            "icon": "fas fa-file-pdf", "label": "download-book-pdf-button"})


def _exercise_targets(app, doctree, docname):
    """In the PDF, give every exercise the label that references to it point at.

    sphinx-exercise labels an exercise ``exercise:LABEL`` in LaTeX, while ``{ref}`` links
    to ``PAGE:LABEL``; without this every link to an exercise is broken in the PDF."""
    if app.builder.format != "latex":
        return
    from docutils import nodes
    from sphinx import addnodes
    from sphinx_exercise.nodes import exercise_enumerable_node, exercise_node

    for start in doctree.findall(addnodes.start_of_file):
        for node in list(start.findall(lambda n: isinstance(
                n, (exercise_node, exercise_enumerable_node)))):
            label = node.attributes.get("label")
            if label:
                target = rf"\phantomsection\label{{\detokenize{{{start['docname']}:{label}}}}}"
                node.parent.insert(node.parent.index(node), nodes.raw("", target,
                                                                      format="latex"))


NOTEBOOKS_BRANCH = "notebooks"  # the reader notebooks, published by the book workflow


def launch_links(repository_url: str, stem: str) -> list[dict]:
    """"Open in Colab" and "Binder" buttons for chapter ``stem``'s reader notebook, as
    published on the repository's ``notebooks`` branch (``.github/workflows/book.yml``);
    none for a repository that is not on GitHub.

    Examples
    --------
    >>> [b["url"] for b in launch_links("https://github.com/o/r", "01-x")]  # doctest: +NORMALIZE_WHITESPACE
    ['https://colab.research.google.com/github/o/r/blob/notebooks/01-x.ipynb',
     'https://mybinder.org/v2/gh/o/r/notebooks?labpath=01-x.ipynb']
    """
    parts = repository_url.rstrip("/").removesuffix(".git").split("/")
    if len(parts) < 5 or parts[2] != "github.com":
        return []
    owner, repo = parts[3], parts[4]
    notebook = f"{stem}.ipynb"
    return [
        {"type": "link", "text": "Colab", "tooltip": "Open the notebook in Colab",
         "icon": "_static/images/logo_colab.png", "label": "colab-button",
         "url": f"https://colab.research.google.com/github/{owner}/{repo}/blob/"
                f"{NOTEBOOKS_BRANCH}/{notebook}"},
        {"type": "link", "text": "Binder", "tooltip": "Open the notebook on Binder",
         "icon": "_static/images/logo_binder.svg", "label": "binder-button",
         "url": f"https://mybinder.org/v2/gh/{owner}/{repo}/{NOTEBOOKS_BRANCH}"
                f"?labpath={notebook}"},
    ]


def _launch_buttons(app, pagename, templatename, context, doctree):
    """When the book is published from a repository (``MHACORE_REPOSITORY_URL``), offer
    each chapter's reader notebook on Colab and Binder; off otherwise, as a local or
    offline copy has no published notebooks to open."""
    url = os.environ.get(REPOSITORY_ENV, "").strip()
    if not url or pagename not in getattr(app, "mhacore_readers", {}):
        return
    buttons = launch_links(url, pagename.rsplit("/", 1)[-1])
    if buttons:
        context.setdefault("header_buttons", []).insert(0, {
            "type": "group", "tooltip": "Run this chapter's notebook online",
            "icon": "fas fa-rocket", "buttons": buttons, "label": "launch-buttons"})


def _reader_download(app, pagename, templatename, context, doctree):
    """Serve the reader notebook as this chapter's ``.ipynb`` download."""
    notebook = app.mhacore_readers.get(pagename)
    if notebook is None:
        return
    import nbformat

    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


OUTPUTS_SUFFIX = "-outputs.ipynb"  # the reader notebook with the build's outputs
OUTPUTS_BUTTON = {"en": (".ipynb with outputs", "The notebook with the outputs the site shows"),
                  "zh": ("含输出的 .ipynb", "带有本站所示输出的笔记本")}


def _outputs_button(app, pagename, templatename, context, doctree):
    """Offer, beside the notebook to run, the same notebook with the build's outputs."""
    if pagename not in getattr(app, "mhacore_readers", {}):
        return
    for group in context.get("header_buttons", []):
        if group.get("label") == "download-buttons":
            at = next((i + 1 for i, b in enumerate(group["buttons"])
                       if b.get("label") == "download-notebook-button"), 0)
            text, tooltip = OUTPUTS_BUTTON.get(_language(app), OUTPUTS_BUTTON["en"])
            group["buttons"].insert(at, {
                "type": "link", "text": text, "tooltip": tooltip,
                "icon": "fas fa-file-code", "label": "download-outputs-button",
                "url": context["pathto"](f"_sources/{pagename}{OUTPUTS_SUFFIX}", 1)})


def _write_readers(app, exception):
    """Write the reader notebooks again once the build ends (the theme's launch buttons,
    when configured, copy the executed MyST notebook over the same file), and beside
    each the reader notebook with the outputs of the book's one execution, read from
    the execution cache (:func:`mhacore.editions.reader.with_outputs`)."""
    if exception is not None or app.builder.format != "html":
        return
    for pagename in app.mhacore_readers:
        _reader_download(app, pagename, None, {}, None)
    if app.config.nb_execution_mode != "cache" or not app.mhacore_readers:
        return
    import jupytext
    import nbformat
    from jupyter_cache import get_cache
    from localized_outputs import spoken, translated_output  # beside this one

    from mhacore import i18n
    from mhacore.editions.common import glue_formats
    from mhacore.editions.reader import with_outputs

    cache = get_cache(app.config.nb_execution_cache_path)
    language = spoken(app.config.language)  # None: English, or a language mhacore lacks
    # the self-checks' "Your turn" and the package's printed words in the page's language
    with i18n.language(language or i18n.ENGLISH):
        for pagename, reader in app.mhacore_readers.items():
            source = Path(app.srcdir) / f"{pagename}.md"
            _, executed = cache.merge_match_into_notebook(jupytext.read(source))
            notebook = with_outputs(reader, executed, glue_formats(source.read_text("utf-8")),
                                    language)
            for cell in notebook.cells if language else []:
                if cell.cell_type == "code":
                    cell.outputs = [translated_output(o, language) for o in cell.outputs]
            nbformat.write(notebook,
                           Path(app.outdir) / "_sources" / f"{pagename}{OUTPUTS_SUFFIX}")


def _language(app) -> str:
    """The build's language, ``en`` or a translation's (``zh``)."""
    return (app.config.language or "en").split("_")[0]


def _readers(app):
    app.mhacore_readers = {}
    theme = app.config.html_theme_options
    if app.builder.format != "html" or not app.config.html_copy_source \
            or not theme.get("use_download_button", True):
        return  # an edition without downloads (the student site) gets none from here
    root = Path(app.confdir)
    if _language(app) == "en":
        from mhacore.editions.reader import reader_notebooks

        notebooks = reader_notebooks(root)
    else:  # a translation offers the converter's notebooks of its own pages
        from mhacore.editions.translated import translated_notebooks

        language = app.config.language
        locales = next((Path(root, d) for d in app.config.locale_dirs
                        if Path(root, d, language).is_dir()), None)
        notebooks = translated_notebooks(root, language, locales=locales)
    app.mhacore_readers = {f"book/{stem}": nb for stem, nb in notebooks.items()}


def setup(app):
    app.add_css_file("editions.css")
    app.add_js_file("editions.js")
    app.connect("config-inited", _configure, priority=800)
    app.connect("builder-inited", _readers)
    app.connect("html-page-context", _reader_download, priority=500)
    app.connect("html-page-context", _pdf_button, priority=600)
    app.connect("html-page-context", _launch_buttons, priority=600)
    app.connect("html-page-context", _outputs_button, priority=600)
    app.connect("build-finished", _write_readers)
    app.connect("doctree-resolved", _exercise_targets)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
