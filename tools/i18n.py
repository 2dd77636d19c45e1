"""The Chinese edition: gettext catalogs and the zh build, through Jupyter Book's Sphinx config.

One source, many languages. The English pages are the source; every translatable message
(prose, headings, admonitions, theorem and exercise text, captions, alt text, table cells)
is extracted into ``.pot`` templates, and ``book/locales/zh_CN/LC_MESSAGES/book/*.po`` hold
the translations. A message whose English changed becomes fuzzy and is shown in English
until it is translated again, so the Chinese site never shows stale text.

Commands (run from the repository root with the project's Python)::

    python tools/i18n.py pot      # extract messages into _build/gettext/book/*.pot
    python tools/i18n.py update   # sphinx-intl: bring the .po catalogs in step with them
    python tools/i18n.py html     # build the Chinese site into _build/zh/html
    python tools/i18n.py pdf      # the Chinese book as one PDF, _build/pdf/book-zh.pdf
    python tools/i18n.py stats    # messages, translated, fuzzy, untranslated per page
    python tools/i18n.py fuzzy    # each fuzzy message: its new English and old Chinese

``make translations`` runs ``pot`` then ``update``; ``make book-zh`` runs ``html``;
``make pdf-zh`` runs ``pdf`` (XeLaTeX with xeCJK and the Noto CJK fonts).

No command executes a notebook that the English build has executed: both read the
notebook outputs from the English build's jupyter-cache (executing only what is missing
from it, into the same cache), so every edition shows the same numbers.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LANGUAGE = "zh_CN"
LOCALE_DIR = ROOT / "book" / "locales"
CATALOG_DIR = LOCALE_DIR / LANGUAGE / "LC_MESSAGES"
GLOSSARY = LOCALE_DIR / LANGUAGE / "glossary.md"
_CJK_WORD = re.compile(r"^[\u3400-\u4dbf\u4e00-\u9fff]{2,}$")

# Sphinx settings shared by the extraction and the translated build.
I18N_SETTINGS = {
    # the pages' catalogs, then the chrome's (book/_ext/locale: Sphinx's and the theme's
    # words their own zh_CN catalogs leave untranslated)
    "locale_dirs": [str(LOCALE_DIR), str(ROOT / "book" / "_ext" / "locale")],
    "gettext_compact": False,  # one catalog per page: book/01-nadaraya-watson.po, ...
    "gettext_location": False,  # no line numbers: an English edit elsewhere changes nothing
    "gettext_uuid": False,
}


# The page chrome that _config.yml writes in English (author; the theme's copyright line,
# replaced by the templates of ZH_TEMPLATES); book/_ext/translations.py translates the rest
ZH_AUTHOR = "mhacore 项目组"
ZH_TEMPLATES = ROOT / "book" / "_assets" / "templates" / LANGUAGE

CACHE_ENV = "MHACORE_BOOK_CACHE"  # where every edition reads the executed chapters


def english_cache(output_root: Path = ROOT) -> Path:
    """The jupyter-cache holding the English build's executed chapters.

    ``$MHACORE_BOOK_CACHE`` when it is set, else ``execute.cache`` of ``_config.yml``
    (relative to the repository), else myst-nb's default beside the English HTML:
    ``<output_root>/_build/.jupyter_cache``.
    """
    import os

    import yaml

    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).resolve()
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    path = (config.get("execute") or {}).get("cache") or ""
    if path:
        return (ROOT / path).resolve()
    return (Path(output_root) / "_build" / ".jupyter_cache").resolve()


def sphinx_build(builder: str, outdir: Path, overrides: dict, *, strict: bool = False) -> int:
    """Run Sphinx on the book with Jupyter Book's configuration plus ``overrides``."""
    from jupyter_book.sphinx import build_sphinx

    overrides = {"external_toc_path": str(ROOT / "_toc.yml"), "latex_individualpages": False,
                 **overrides}
    if strict:
        overrides["nitpicky"] = True
    result = build_sphinx(
        ROOT, outdir, noconfig=True, path_config=str(ROOT / "_config.yml"),
        confoverrides=overrides, builder=builder, warningiserror=strict,
        keep_going=strict, freshenv=True, doctreedir=Path(outdir).parent / f".doctrees-{builder}")
    if isinstance(result, Exception):
        return 1
    return int(result)


def execution_settings(english_output_root: Path) -> dict:
    """Read outputs from the English build's cache; never execute what it holds."""
    return {"nb_execution_mode": "cache",
            "nb_execution_cache_path": str(english_cache(english_output_root))}


def extract(pot_dir: Path, english_output_root: Path = ROOT) -> int:
    """Write the ``.pot`` templates of every page into ``pot_dir``."""
    # myst-nb renders figures as text for the gettext builder; keep the images, whose alt
    # texts are messages
    figures = {"nb_mime_priority_overrides": [("gettext", "image/png", 5),
                                              ("gettext", "image/svg+xml", 6)]}
    return sphinx_build("gettext", pot_dir,
                        {**I18N_SETTINGS, **execution_settings(english_output_root), **figures})


def update_catalogs(pot_dir: Path, catalog_dir: Path = CATALOG_DIR) -> list[str]:
    """Create or update the ``.po`` catalogs from the templates in ``pot_dir``.

    sphinx-intl's merge (babel's): a message whose English changed is matched to its old
    version and marked fuzzy, keeping the old translation for the translator; a new
    message is untranslated. A catalog is rewritten only when its messages changed (as
    ``sphinx-intl update`` does). Returns the pages whose catalogs were written. (The old
    English is not written beside a fuzzy message: babel wraps long ``#|`` lines into
    invalid syntax; ``git diff`` of the page shows it.)
    """
    from sphinx_intl.catalog import dump_po, load_po, update_with_fuzzy

    written = []
    for pot in sorted(Path(pot_dir).rglob("*.pot")):
        page = pot.relative_to(pot_dir).with_suffix("")
        po_path = Path(catalog_dir) / page.with_suffix(".po")
        template = load_po(str(pot))
        if po_path.exists():
            catalog = load_po(str(po_path))
            before = {m.id for m in catalog if m.id}
            update_with_fuzzy(catalog, template)
            if {m.id for m in catalog if m.id} == before:
                continue
        else:
            catalog, catalog.locale = template, LANGUAGE
        dump_po(str(po_path), catalog, width=88)
        written.append(page.as_posix())
    return written


def fuzzy_messages(catalog_dir: Path = CATALOG_DIR) -> list[dict[str, str]]:
    """Every fuzzy message: its page, its current English and its old translation."""
    import polib

    return [{"page": po.relative_to(catalog_dir).with_suffix("").as_posix(),
             "now": entry.msgid, "zh": entry.msgstr}
            for po in sorted(Path(catalog_dir).rglob("*.po"))
            for entry in polib.pofile(str(po)).fuzzy_entries()]


def translated_title(catalog_dir: Path = CATALOG_DIR) -> str | None:
    """The book's title as the root page's catalog translates it (None when it does not)."""
    import polib
    import yaml

    title = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["title"]
    root_page = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))["root"]
    entry = polib.pofile(str(catalog_dir / f"{root_page}.po")).find(title)
    return entry.msgstr if entry and entry.translated() else None


def glossary_words(glossary: Path = GLOSSARY) -> list[str]:
    """The Chinese words of the glossary table, for the search's word segmentation (jieba).

    >>> "头多样性指数" in glossary_words() and "协方差分解" in glossary_words()
    True
    """
    words = set()
    for line in glossary.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0] != "English":
            words.update(piece for piece in re.split(r"[\s/，,（）()、–-]+", cells[1])
                         if _CJK_WORD.match(piece))
    return sorted(words)


def build_html(outdir: Path, english_output_root: Path = ROOT, *, strict: bool = True) -> int:
    """Build the Chinese site into ``outdir``, reusing the English build's outputs."""
    outdir = Path(outdir)
    outdir.parent.mkdir(parents=True, exist_ok=True)
    search_words = outdir.parent / "search-words.zh.txt"  # jieba keeps these words whole
    search_words.write_text("\n".join(glossary_words()) + "\n", encoding="utf-8")
    title = translated_title()
    overrides = {
        **({"html_title": title} if title else {}),
        "author": ZH_AUTHOR,
        "templates_path": [str(ZH_TEMPLATES)],
        "html_search_options": {"dict": str(search_words)},
        # myst-nb's toggle of hidden cells (the book hides inputs only, never outputs)
        "nb_code_prompt_show": "显示代码", "nb_code_prompt_hide": "隐藏代码",
        # sphinx-togglebutton's hint on the solutions' drop-downs ("Click to show")
        "togglebutton_hint": "点击显示", "togglebutton_hint_hide": "点击隐藏",
        **I18N_SETTINGS,
        **execution_settings(english_output_root),
        "language": LANGUAGE,
        "html_search_language": "zh",  # jieba segments the Chinese text for the index
        "gettext_allow_fuzzy_translations": False,  # a changed message shows in English
    }
    return sphinx_build("html", outdir, overrides, strict=strict)


# xeCJK (which Sphinx loads for Chinese under XeLaTeX) sets the Chinese text in these
CJK_FONTS = r"""
\setCJKmainfont{Noto Serif CJK SC}
\setCJKsansfont{Noto Sans CJK SC}
\setCJKmonofont{Noto Sans Mono CJK SC}
"""
# LaTeX's own headings in Chinese (set after the language package's English captions):
# "第 3 章" over a chapter (fncychap's Sonny style, which prints "CHAPTER 3"), "第 I 部分"
# over a part ("Part I"; the roman number as in the table of contents; report.cls's \@part,
# which nameref and hyperref wrap, is patched where it is), and "第 3 章" in
# the running footer ("Chapter 3."; fancyhdr sets its \chaptermark each time the page style
# is applied, so the Chinese one is applied after it)
CJK_CAPTIONS = r"""
\usepackage{etoolbox}
\AfterEndPreamble{\renewcommand{\contentsname}{目录}\renewcommand{\bibname}{参考文献}}
\makeatletter
\renewcommand{\DOCH}{\raggedleft\CNV\FmN{第}\nobreakspace\CNoV\thechapter
  \nobreakspace\CNV\FmN{章}\par\nobreak\vskip 40\p@}
\def\mhacore@parthead#1{\patchcmd#1{\partname\nobreakspace\thepart}%
  {第\nobreakspace\thepart\nobreakspace 部分}}
\AtBeginDocument{\mhacore@parthead\NR@part{}{\mhacore@parthead\H@old@part{}%
  {\mhacore@parthead\@part{}{\PackageWarning{mhacore}{the part heading stays in English}}}}}
\def\mhacore@chaptermark{\def\chaptermark##1{\markboth{\ifnum\c@secnumdepth>\m@ne
  第\nobreakspace\thechapter\nobreakspace 章\quad\fi ##1}{}}}
\AtBeginDocument{\apptocmd{\ps@normal}{\mhacore@chaptermark}{}
  {\PackageWarning{mhacore}{the running footer stays in English}}}
\makeatother
"""


def build_pdf(outdir: Path, pdf: Path, english_output_root: Path = ROOT) -> int:
    """Build the Chinese book as one PDF ``pdf``: Sphinx's LaTeX in ``outdir``, then
    latexmk with XeLaTeX, reading the English build's outputs."""
    import shutil
    import subprocess

    outdir = Path(outdir)
    outdir.parent.mkdir(parents=True, exist_ok=True)
    overrides = {
        **I18N_SETTINGS,
        **execution_settings(english_output_root),
        "language": LANGUAGE,
        "gettext_allow_fuzzy_translations": False,
        "latex_engine": "xelatex",
        # no index: makeindex splits the UTF-8 of a Chinese term's first character
        # (its group headings printed as "�"); the glossary page lists the terms
        "latex_elements": {"preamble": CJK_FONTS + CJK_CAPTIONS, "printindex": "",
                           "releasename": "版本"},
    }
    # Jupyter Book sets the title page's title and author from _config.yml after Sphinx
    # starts (over any override); give it the translated ones there
    import jupyter_book.sphinx
    from unittest import mock

    title = translated_title()
    chinese = {"author": ZH_AUTHOR, **({"title": title} if title else {})}
    english = jupyter_book.sphinx.update_latex_documents
    with mock.patch.object(jupyter_book.sphinx, "update_latex_documents",
                           lambda documents, changes: english(documents,
                                                              {**changes, **chinese})):
        status = sphinx_build("latex", outdir, overrides)
    if status:
        return status
    tex = outdir / "book.tex"
    make = subprocess.run(["latexmk", "-xelatex", "-interaction=nonstopmode",
                           "-halt-on-error", tex.name], cwd=outdir, check=False)
    if make.returncode:
        return make.returncode
    Path(pdf).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(outdir / "book.pdf", pdf)
    print(f"The Chinese book as a PDF: {pdf}")
    return 0


def catalog_stats(catalog_dir: Path = CATALOG_DIR) -> dict[str, dict[str, int]]:
    """Per page: ``messages``, ``translated``, ``fuzzy`` and ``untranslated`` counts."""
    import polib

    stats = {}
    for po_path in sorted(catalog_dir.rglob("*.po")):
        catalog = polib.pofile(str(po_path))
        live = [e for e in catalog if not e.obsolete]
        fuzzy = sum(1 for e in live if e.fuzzy)
        translated = sum(1 for e in live if e.translated())
        stats[po_path.relative_to(catalog_dir).with_suffix("").as_posix()] = {
            "messages": len(live), "translated": translated, "fuzzy": fuzzy,
            "untranslated": len(live) - translated - fuzzy}
    return stats


_ROLE = re.compile(r"\{([\w:.-]+)\}`([^`]*)`")
_CODE = re.compile(r"`[^`]*`")
_MATH = re.compile(r"\$\$.*?\$\$|\$[^$]+\$", re.S)
_LINK_TARGET = re.compile(r"\]\(([^)\s]+)\)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def markup(text: str) -> Counter:
    """What a translation must keep: roles (name and target), math, code, links, numbers.

    A role's visible text may be translated (``{numref}`图 %s <fig-x>```), its target not.

    >>> sorted(markup("At $n = 200$, see {numref}`Figure %s <fig-a>` and `x`."))
    [('code', '`x`'), ('math', '$n = 200$'), ('role', 'numref', 'fig-a')]
    """
    found = Counter()
    for name, content in _ROLE.findall(text):
        target = re.search(r"<([^<>]+)>\s*$", content)
        found["role", name, target[1] if target else content] += 1
    rest = _ROLE.sub(" ", text)
    for math in _MATH.findall(rest):
        found["math", math] += 1
    rest = _MATH.sub(" ", rest)
    for code in _CODE.findall(rest):
        found["code", code] += 1
    rest = _CODE.sub(" ", rest)
    for url in _LINK_TARGET.findall(rest):
        found["link", url] += 1
    for number in _NUMBER.findall(_LINK_TARGET.sub(" ", rest)):
        found["number", number] += 1
    return found


def markup_differences(msgid: str, msgstr: str) -> list[str]:
    """Markup of ``msgid`` missing from ``msgstr`` and markup ``msgstr`` adds (empty: intact)."""
    source, translation = markup(msgid), markup(msgstr)
    missing = [f"missing {item}" for item in (source - translation)]
    added = [f"added {item}" for item in (translation - source)]
    return missing + added


def print_stats(stats: dict[str, dict[str, int]]) -> None:
    keys = ("messages", "translated", "fuzzy", "untranslated")
    width = max(map(len, stats), default=4)
    print(f"{'page':<{width}}  " + "  ".join(f"{k:>12}" for k in keys))
    for page, row in stats.items():
        print(f"{page:<{width}}  " + "  ".join(f"{row[k]:>12}" for k in keys))
    total = {k: sum(row[k] for row in stats.values()) for k in keys}
    print(f"{'total':<{width}}  " + "  ".join(f"{total[k]:>12}" for k in keys))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["pot", "update", "html", "pdf", "stats", "fuzzy"])
    parser.add_argument("--pot-dir", type=Path, default=ROOT / "_build" / "gettext")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "zh" / "html")
    parser.add_argument("--latex-out", type=Path, default=ROOT / "_build" / "zh" / "latex")
    parser.add_argument("--pdf", type=Path, default=ROOT / "_build" / "pdf" / "book-zh.pdf")
    parser.add_argument("--english-root", type=Path, default=ROOT,
                        help="the --path-output of the English build whose outputs to reuse")
    parser.add_argument("--cache", type=Path,
                        help=f"the English build's jupyter-cache (sets ${CACHE_ENV})")
    args = parser.parse_args(argv)
    if args.cache:
        import os

        os.environ[CACHE_ENV] = str(args.cache.resolve())
    if args.command == "pot":
        return extract(args.pot_dir, args.english_root)
    if args.command == "update":
        for page in update_catalogs(args.pot_dir):
            print(f"updated {CATALOG_DIR / page}.po")
        return 0
    if args.command == "fuzzy":
        for message in fuzzy_messages():
            print(f"== {message['page']}\nnow: {message['now']}\nzh:  {message['zh']}\n")
        return 0
    if args.command == "html":
        return build_html(args.out, args.english_root)
    if args.command == "pdf":
        return build_pdf(args.latex_out, args.pdf, args.english_root)
    print_stats(catalog_stats())
    return 0


if __name__ == "__main__":
    sys.exit(main())
