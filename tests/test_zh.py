"""The Chinese edition: its catalogs, its build, and the site a reader sees.

The catalogs (``book/locales/zh_CN``) must compile, keep every role, formula, code span and
number of the English, and be in step with the English pages. The zh site is built from the
English build's executed notebooks into a folder ``zh/`` beside the English site (as the two
are published), and must pass the English site's strict-build and browser checks, show
Chinese, draw it with a CJK font, find Chinese words in its search, and show the same glued
numbers, formulas and outputs as the English pages.
"""

import collections
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from browser import (broken_links, chromium_path, non_loopback, platform_fonts, search_results,
                     serve, site_pages, visit_site)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import debian_packages as debian  # noqa: E402  (is each Debian package the build opens listed?)
from language_switch import counterpart_href  # noqa: E402
from translations import glue_from_page, has_prose  # noqa: E402

from tools.i18n import CATALOG_DIR, catalog_stats, markup, markup_differences  # noqa: E402
from mhacore.editions.reader import page_title, toc_pages  # noqa: E402

# Pages whose English is still changing; they are translated once it settles. Each is an
# expected failure of the completeness test, strict: a page that becomes complete fails the
# run until it is removed from here, so every translated page is really tested.
NOT_YET_TRANSLATED: set[str] = set()
CATALOGS = sorted(CATALOG_DIR.rglob("*.po"))
PAGES = sorted(catalog_stats())
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")

needs_chromium = pytest.mark.skipif(
    chromium_path() is None, reason="Chromium is not installed (Debian package: chromium)")


def page_id(path: Path) -> str:
    return path.relative_to(CATALOG_DIR).with_suffix("").as_posix()


# --- catalogs ------------------------------------------------------------------------------

@pytest.mark.parametrize("po", CATALOGS, ids=page_id)
def test_every_catalog_compiles(po):
    import gettext
    import io

    import polib
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    polib.pofile(str(po))  # a strict reader: raises on any syntax error
    with po.open("rb") as handle:
        catalog = read_po(handle, abort_invalid=True)
    # babel's python-format checker reads "2 % in" in prose as a placeholder; book messages
    # are never %-formatted (numref's %s is kept by the markup test), so only plural forms
    # are checked here
    from babel.messages.checkers import num_plurals
    from babel.messages.catalog import TranslationError

    errors = []
    for message in catalog:
        try:
            num_plurals(catalog, message)
        except TranslationError as error:
            errors.append((message.id, str(error)))
    assert not errors
    buffer = io.BytesIO()
    write_mo(buffer, catalog, use_fuzzy=False)
    buffer.seek(0)
    translations = gettext.GNUTranslations(buffer)
    translated = [m for m in catalog if m.id and m.string and not m.fuzzy]
    assert all(translations.gettext(m.id) == m.string for m in translated)


@pytest.mark.parametrize("po", CATALOGS, ids=page_id)
def test_translations_keep_roles_math_code_and_numbers(po):
    import polib

    entries = [e for e in polib.pofile(str(po)) if e.translated() and not e.obsolete]
    damaged = {e.msgid[:80]: markup_differences(e.msgid, e.msgstr) for e in entries}
    assert not {k: v for k, v in damaged.items() if v}


def test_markup_check_catches_a_typed_or_dropped_item():
    english = "At $n = 200$ see {numref}`fig-a`, `x` and 21 queries."
    assert markup_differences(english, "在 $n = 200$ 处见 {numref}`fig-a`、`x` 与 21 个查询。") == []
    assert markup_differences(english, "在 $n=200$ 处见 {numref}`fig-b`、`x` 与 20 个查询。")
    assert markup("{numref}`图 %s <fig-a>`") == markup("{numref}`Figure %s <fig-a>`")


@pytest.mark.parametrize("page", [
    pytest.param(page, marks=pytest.mark.xfail(
        strict=True, reason="translated after the English of chapters 4-8, the course and "
                            "the ledger settles"))
    if page in NOT_YET_TRANSLATED else page
    for page in PAGES])
def test_page_is_fully_translated(page):
    row = catalog_stats()[page]
    assert row["messages"] > 0
    assert (row["fuzzy"], row["untranslated"]) == (0, 0), row


def test_catalogs_are_in_step_with_the_english_pages(html_dir, tmp_path, book_cache):
    """Every message of the English pages is in its catalog, and nothing else is: after an
    English change, ``make translations`` has been run (a changed message is then fuzzy).
    The extraction reads the strict build's executed chapters (it used to execute them all
    again, about three minutes)."""
    import polib

    pot_dir = tmp_path / "gettext"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "i18n.py"), "pot",
                           "--pot-dir", str(pot_dir), "--english-root",
                           str(html_dir.parent.parent)],
                          cwd=ROOT, capture_output=True, text=True, timeout=1500,
                          env=dict(os.environ, MHACORE_BOOK_CACHE=str(book_cache)))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "Executing notebook" not in proc.stdout + proc.stderr, "a chapter ran again"
    templates = {page_id_from(p, pot_dir): {e.msgid for e in polib.pofile(str(p))}
                 for p in pot_dir.rglob("*.pot")}
    catalogs = {page_id(p): {e.msgid for e in polib.pofile(str(p)) if not e.obsolete}
                for p in CATALOGS}
    assert set(templates) == set(catalogs)
    out_of_step = {page: {"new": len(templates[page] - catalogs[page]),
                          "gone": len(catalogs[page] - templates[page])}
                   for page in templates if templates[page] != catalogs[page]}
    assert not out_of_step, "run `make translations`"


def page_id_from(pot: Path, pot_dir: Path) -> str:
    return pot.relative_to(pot_dir).with_suffix("").as_posix()


# --- small pieces --------------------------------------------------------------------------

def test_language_switch_targets():
    assert counterpart_href("index", "en") == ("zh/index.html", "中文", "zh-CN")
    assert counterpart_href("book/notation", "zh_CN") == ("../../book/notation.html",
                                                         "English", "en")


def test_glue_roles_in_a_translation_point_at_their_own_page():
    text = "比值为 {glue:text}`r:.2f`，差为 {glue:text}`d`，图 {glue}`other.md::f`。"
    assert glue_from_page(text, "/x/book/06-heads-and-width.md:12:<translated>") == (
        "比值为 {glue:text}`06-heads-and-width.md::r:.2f`，差为 "
        "{glue:text}`06-heads-and-width.md::d:s`，图 {glue}`other.md::f`。")


def test_prose_free_text_is_not_a_message():
    assert not has_prose("$W_Q^h, W_K^h \\in \\mathbb{R}^{p\\times d_k}$")
    assert not has_prose("`n_heads`, `d_head`")
    assert has_prose("number of heads $H$")


# --- the zh build --------------------------------------------------------------------------

# the fixtures `editions` and `zh_html` are the session's (tests/conftest.py)


def test_zh_build_is_strict(editions, html_dir):
    proc, site = editions
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    assert "WARNING:" not in log, [line for line in log.splitlines() if "WARNING:" in line]
    assert site_pages(site / "zh") == site_pages(html_dir)
    assert (site / "zh" / "_static" / "mathjax" / "tex-chtml.js").is_file()


def test_zh_build_executes_nothing(editions):
    import yaml

    proc, _ = editions
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    if config["execute"]["execute_notebooks"] != "cache":
        pytest.xfail("the English build does not fill a jupyter-cache yet "
                     "(execute_notebooks is not 'cache'), so the zh build executes")
    assert "Executing notebook" not in proc.stdout + proc.stderr


def article_text(path: Path) -> str:
    """The prose of a page: its article without math, code, outputs and the switch."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    article = soup.select_one("article") or soup.select_one("main")
    for node in article.select(".math, code, pre, .cell_output, script, style, "
                               ".language-switch, .headerlink"):
        node.decompose()
    return article.get_text(" ")


def test_zh_index_is_mostly_chinese(zh_html):
    text = article_text(zh_html / "book" / "index.html")
    cjk = len(CJK.findall(text))
    latin = len(re.findall(r"[A-Za-z]", text))
    assert cjk > 500
    assert cjk > 0.6 * (cjk + latin), (cjk, latin)


def pasted_and_computed(path: Path, language: str | None = None
                        ) -> dict[str, collections.Counter]:
    """Glued numbers, formulas and cell outputs of a page, as multisets of their text;
    with ``language``, each output as the package's catalog renders it in that language
    (the zh build translates the package's own printed lines and the chapters' lines
    and tables made of its catalog's messages, nothing else)."""
    from bs4 import BeautifulSoup

    from mhacore.i18n import translate_phrase, translate_rendered

    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")

    def texts(selector, render=None):
        return collections.Counter(" ".join((render(n) if render else n.get_text()).split())
                                   for n in soup.select(selector))

    def rendered(node):
        """The output's text in ``language``: inline code goes back into backticks (as the
        package wrote it, so its messages match) and out again once translated. A table
        a cell displayed (Markdown) is read as the zh build reads its Markdown: cell by
        cell when every header cell is a message, else left as it is."""
        for code in node.select("code"):
            code.replace_with(f"`{code.get_text()}`")
        tables = []
        for table in node.select("table"):
            cells = [c.get_text().strip() for c in table.select("th, td")]
            if all(translate_phrase(c.get_text().strip(), language) is not None
                   for c in table.select("th")):
                cells = [translate_phrase(c, language) or c for c in cells]
            tables.append(" ".join(cells))
            table.replace_with(f"\0{len(tables) - 1}\0")
        text = translate_rendered(node.get_text(), language)
        return re.sub(r"\0(\d+)\0", lambda m: tables[int(m[1])], text).replace("`", "")

    outputs = texts(".cell_output", None if language is None else rendered)
    return {"glued text": texts(".pasted-text, .pasted-inline"),
            "math": texts(".math"), "outputs": outputs}


def test_glued_numbers_formulas_and_outputs_equal_the_english(zh_html, html_dir):
    chapters = sorted(p.relative_to(html_dir) for p in html_dir.glob("book/0*.html"))
    assert len(chapters) >= 8
    glued = 0
    for chapter in chapters:
        english = pasted_and_computed(html_dir / chapter, language="zh_CN")
        chinese = pasted_and_computed(zh_html / chapter)
        assert chinese == english, chapter
        glued += sum(english["glued text"].values())
    assert glued >= 10  # chapters 6 and 8 glue numbers into their text


def figure_images(path: Path) -> list[str]:
    """The image files of a page's figures, in order."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    return [img["src"] for img in soup.select("figure img")]


def test_figures_are_drawn_in_chinese_and_say_nothing_in_english(zh_html, html_dir):
    """Every figure of a chapter is, on the Chinese page, the copy the book's one execution
    drew in Chinese (:mod:`mhacore.figures`): another image than the English page's, in
    the same place. Each copy's words are the catalog's translations as they stand now (a
    translation changed since the chapter ran would leave the old one drawn), and what
    it leaves in English passes the site's rules (names such as HDI, formulas, numbers)."""
    import json

    from mhacore import figures

    names = bibliography_names() | ENGLISH_NAMES
    executed = html_dir.parent / "jupyter_execute" / "book"
    copies, problems = 0, []
    for page in sorted(html_dir.glob("book/0*.html")):
        english, chinese = figure_images(page), figure_images(zh_html / "book" / page.name)
        assert len(chinese) == len(english) and not set(english) & set(chinese), page.name
        # what the chapter glued, as myst-nb keeps it beside the executed notebook
        glued = json.loads((executed / f"{page.stem}.glue.json").read_text(encoding="utf-8"))
        for key in (k for k in glued if k.startswith("fig-") and "." not in k):
            copy = glued.get(f"{key}.zh_CN")
            if copy is None:
                problems.append(f"{page.stem}: {key} has no Chinese copy")
                continue
            copies += 1
            record = copy["metadata"][figures.METADATA_KEY]
            for text, drawn in record["translated"].items():
                if figures.translate_text(text, "zh_CN") != drawn:
                    problems.append(f"{key}: {text!r} drawn as {drawn!r}, an old translation")
            if record["missing_glyphs"]:
                problems.append(f"{key}: drawn without a glyph: {record['missing_glyphs']}")
            left = english_words(" ".join([*record["untranslated"],
                                           *record["translated"].values()]), names)
            if left:
                problems.append(f"{key}: English left in the figure: {left}")
    assert copies >= 15 and not problems, problems


def test_every_zh_page_offers_the_chinese_pdf(zh_html):
    """The download menu of a Chinese page offers book-zh.pdf, which `make pdf-zh` puts at
    the site's root beside book.pdf, one folder above the zh pages."""
    pages = sorted(zh_html.glob("book/*.html"))
    assert len(pages) >= 16
    for page in pages:
        links = re.findall(r'href="((?:\.\./)*book(?:-zh)?\.pdf)"',
                           page.read_text(encoding="utf-8"))
        assert links == ["../../book-zh.pdf"], (page.name, links)


def test_every_page_links_to_its_counterpart(editions, html_dir):
    from bs4 import BeautifulSoup

    _, site = editions
    pages = [p for p in site_pages(html_dir) if p.startswith("book/")]  # the toc's pages
    assert len(pages) >= 16
    for page in pages:
        for edition, other in ((site, site / "zh"), (site / "zh", site)):
            soup = BeautifulSoup((edition / page).read_text(encoding="utf-8"), "html.parser")
            switch = soup.select_one(".language-switch a[hreflang]")
            assert switch is not None, (edition, page)
            target = os.path.normpath(edition / Path(page).parent / switch["href"])
            assert target == os.path.normpath(other / page), (edition, page)


def test_internal_links_and_anchors_resolve_across_editions(editions, html_dir):
    _, site = editions
    pages = site_pages(html_dir)
    assert not broken_links(site, pages + [f"zh/{page}" for page in pages],
                            other_edition=True)


@pytest.fixture(scope="module")
def zh_visits(editions, zh_html):
    if chromium_path() is None:
        pytest.skip("Chromium is not installed (Debian package: chromium)")
    _, site = editions
    return visit_site(site, "zh")


def test_every_chapter_mention_is_a_link_in_chinese(zh_html):
    """Every "第 N 章" of the Chinese prose is a cross-reference, as in English."""
    from test_book import unlinked_chapter_mentions

    assert not unlinked_chapter_mentions(zh_html)


@needs_chromium
def test_sidebars_open_and_close_in_the_chinese_edition(zh_html):
    """tests/test_navigation.py's check, on the Chinese pages."""
    from test_navigation import toggle_runs

    faults = toggle_runs(zh_html)
    assert not faults, "\n".join(faults)


@needs_chromium
def test_zh_pages_load_without_console_errors_or_outside_requests(zh_visits):
    assert len(zh_visits) >= 5
    assert not {page: v.errors for page, v in zh_visits.items() if v.errors}
    assert all(v.requests for v in zh_visits.values()), "the crawl recorded no request"
    assert not {p: non_loopback(v.requests) for p, v in zh_visits.items()
                if non_loopback(v.requests)}


@needs_chromium
def test_zh_math_is_typeset(zh_visits):
    with_math = {p: v.facts for p, v in zh_visits.items() if v.facts["math_nodes"]}
    assert not {p: f for p, f in with_math.items()
                if f["mjx"] == 0 or f["raw_tex"] or f["mathjax_errors"]}
    assert zh_visits["book/notation.html"].facts["mjx"] >= 20


@needs_chromium
def test_chinese_is_drawn_with_a_cjk_font(editions):
    """What Chromium really drew the Chinese title with: a CJK font, not boxes."""
    _, site = editions
    page = site / "zh" / "book" / "01-nadaraya-watson.html"
    selector = "article.bd-article h1"
    with serve(site) as base:
        fonts = platform_fonts(f"{base}/zh/book/01-nadaraya-watson.html", selector)
    from bs4 import BeautifulSoup

    heading = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser").select_one(
        selector).get_text()
    cjk_glyphs = sum(f["glyphCount"] for f in fonts if "CJK" in f["familyName"])
    assert cjk_glyphs >= len(CJK.findall(heading)) > 0, fonts


@needs_chromium
@pytest.mark.parametrize("word, page", [
    ("带宽", "01-nadaraya-watson"),  # a Chinese word is found
    ("多头注意力", "book/index"),  # a glossary term is one search word (jieba has them)
])
def test_search_finds_chinese_words_and_keeps_glossary_terms_whole(editions, word, page):
    _, site = editions
    with serve(site) as base:
        hits = search_results(f"{base}/zh/search.html?q={word}")
    assert any(page in hit for hit in hits), hits


def test_a_changed_english_message_becomes_fuzzy_and_shows_in_english(tmp_path):
    """``make translations`` after an English edit: the old translation is kept but marked
    fuzzy, and the compiled catalog leaves it out, so the
    zh site shows the new English instead of a stale translation."""
    import gettext
    import io

    from babel.messages.mofile import write_mo
    import polib
    from sphinx_intl.catalog import load_po

    from tools.i18n import fuzzy_messages, update_catalogs

    def po_text(entries):
        header = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        return header + "".join(f'msgid "{k}"\nmsgstr "{v}"\n\n' for k, v in entries)

    templates, catalogs = tmp_path / "gettext", tmp_path / "locales"
    (templates / "book").mkdir(parents=True)
    (catalogs / "book").mkdir(parents=True)
    (catalogs / "book" / "p.po").write_text(po_text(
        [("The bandwidth sets the scale of the weights.", "带宽决定权重的尺度。"),
         ("Kernel smoothing", "核平滑")]), encoding="utf-8")
    (templates / "book" / "p.pot").write_text(po_text(
        [("The bandwidth sets the scale of all the weights.", ""), ("Kernel smoothing", ""),
         ("A new paragraph.", "")]), encoding="utf-8")
    assert update_catalogs(templates, catalogs) == ["book/p"]
    assert update_catalogs(templates, catalogs) == []  # nothing changed: nothing written
    polib.pofile(str(catalogs / "book" / "p.po"))  # valid for every gettext reader
    (changed,) = fuzzy_messages(catalogs)
    assert changed == {"page": "book/p", "now": "The bandwidth sets the scale of all the weights.",
                       "zh": "带宽决定权重的尺度。"}
    buffer = io.BytesIO()
    write_mo(buffer, load_po(str(catalogs / "book" / "p.po")), use_fuzzy=False)
    buffer.seek(0)
    zh = gettext.GNUTranslations(buffer)
    assert zh.gettext("Kernel smoothing") == "核平滑"
    assert zh.gettext(changed["now"]) == changed["now"]  # shown in English
    assert zh.gettext("A new paragraph.") == "A new paragraph."


# --- the Chinese PDF -----------------------------------------------------------------------

needs_tex_cjk = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("xelatex", "latexmk", "pdftotext", "pdffonts"))
    or subprocess.run(["kpsewhich", "xeCJK.sty"], capture_output=True,
                      check=False).returncode != 0
    if shutil.which("kpsewhich") else True,
    reason="needs TeX Live with xeCJK and poppler-utils (`.ci/install-debian pdf pdf-zh`)")


@pytest.fixture(scope="module")
def zh_pdf(html_dir):
    """The Chinese book as one PDF, from the strict English build's executed notebooks;
    returns its path and its text, one string per page."""
    from builds import BUILDS

    proc, path = BUILDS.result("zh_pdf")
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    assert "Executing notebook" not in log, "the Chinese PDF executed a chapter again"
    text = subprocess.run(["pdftotext", "-layout", str(path), "-"],
                          capture_output=True, text=True, check=True).stdout
    return path, text.split("\f")


def chinese_titles() -> list[str]:
    """Every page's title as its catalog translates it, in the order of the book."""
    import polib

    titles = []
    for page in toc_pages(ROOT):
        english = page_title(page.read_text(encoding="utf-8"))
        po = CATALOG_DIR / page.relative_to(ROOT).with_suffix(".po")
        entry = polib.pofile(str(po)).find(english)
        assert entry is not None and entry.msgstr, (page, english)
        titles.append(entry.msgstr)
    return titles


@needs_tex_cjk
def test_zh_pdf_has_every_chinese_title_every_font_embedded_and_chinese_pages(zh_pdf):
    path, pages = zh_pdf
    flat = "".join("".join(page.split()) for page in pages)
    titles = chinese_titles()
    assert not [t for t in titles if "".join(t.split()) not in flat]
    assert "??" not in flat  # an unresolved reference or a glyph the fonts lack
    fonts = subprocess.run(["pdffonts", str(path)], capture_output=True, text=True,
                           check=True).stdout.splitlines()[2:]
    assert fonts and all(line.split()[-5] == "yes" for line in fonts), fonts
    assert any("NotoSerifCJK" in line for line in fonts), fonts
    # the first chapter: its pages whose running head names it (and not the next one)
    at = next(k for k, page in enumerate(toc_pages(ROOT)) if page.stem.startswith("01-"))
    first, second = ("".join(t.split()) for t in titles[at:at + 2])
    chapter = [p for p in pages if first in "".join(p.split())
               and second not in "".join(p.split())]
    assert len(chapter) >= 3
    text = "".join(chapter)
    # code, outputs and names stay English: count Chinese characters against English words
    cjk, words = len(CJK.findall(text)), len(re.findall(r"[A-Za-z]+", text))
    assert cjk > 2 * words, (cjk, words)
    print(f"book-zh.pdf: {len(pages) - 1} pages")


@needs_tex_cjk
@pytest.mark.skipif(not debian.have_dpkg(), reason="needs Debian's dpkg")
def test_every_debian_package_the_chinese_pdf_uses_is_listed(zh_pdf, tmp_path):
    """Every file the Chinese PDF's TeX runs opened, and every font it embeds, comes
    from a package of .ci/debian-packages.txt or one they depend on. Without
    texlive-lang-chinese (its ctexhook.sty, which xeCJK loads) the check says so: that
    package was missing once, and the PDF then built only where it was installed by
    hand."""
    path, _ = zh_pdf
    latex = path.parent / "latex"
    files = debian.pdf_build_files(path, latex)
    assert not debian.unlisted(files, allowed_dirs=[latex])
    problems = debian.unlisted(files, allowed_dirs=[latex],
                               package_list=debian.without("texlive-lang-chinese", tmp_path))
    assert any(p.startswith("texlive-lang-chinese ") for p in problems), problems


@needs_chromium
@pytest.mark.skipif(not debian.have_dpkg(), reason="needs Debian's dpkg")
def test_every_debian_package_the_browser_uses_is_listed(editions, tmp_path):
    """Chromium, and every font it draws the English and Chinese pages with (headings,
    prose, code), come from listed packages or their dependencies; without
    fonts-noto-cjk the Chinese text's font is named."""
    _, site = editions
    selectors = ("article.bd-article h1", "article.bd-article p", "article.bd-article pre")
    families = set()
    with serve(site) as base:
        for page in ("book/01-nadaraya-watson.html", "zh/book/01-nadaraya-watson.html"):
            for selector in selectors:
                families |= {f["familyName"] for f in platform_fonts(f"{base}/{page}",
                                                                     selector)}
    fonts = debian.font_files(families)
    assert any("CJK" in family for family in fonts), families
    exe = shutil.which(chromium_path())
    files = {exe, os.path.realpath(exe), *fonts.values()}
    assert not debian.unlisted(files)
    problems = debian.unlisted(files, package_list=debian.without("fonts-noto-cjk", tmp_path))
    assert any(p.startswith("fonts-noto-cjk ") for p in problems), problems


# --- English a reader meets in the Chinese edition ------------------------------------------
#
# Every page of the Chinese site, and every page of the Chinese PDF, is read for English
# words outside what stays English by design:
# - code, math, and the outputs a code cell prints (console text, computed; the chapters'
#   printed lines are read on their own, below), glued numbers and text (computed;
#   `pasted-text`), citations and the bibliography, URLs, and tokens that
#   are identifiers (with a digit, `_`, `/`, a dot before a letter, `::`, or two hyphens:
#   `0.1.0`, `ex-1-1`, `nw-bandwidth-rate`, `.ipynb`; the ids of mhacore's checks,
#   `bvc-identity`), and the language switch ("English");
# - names: people, places, species, software (ENGLISH_NAMES, and every person of
#   book/references.bib), abbreviations and names with a capital inside a word (NW, MSE,
#   HDI, SymPy, MiniLM, arXiv), single letters (variables, "(a)"), roman enumerators ("(ii)"),
#   and the names of math's functions (sin, log, Var, tr: MATH_OPERATORS), which the
#   ledger's tables also write in plain text;
# - English the Chinese text shows on purpose: a gloss (English in full-width parentheses
#   right after the Chinese term it glosses, "串联跑动（tandem run）", as the glossary asks
#   for a term's first use), a verbatim quote (“Close”, a program's message, “…” holding no
#   Chinese) and a title of a work in 《》.
# What a page may still show is ENGLISH_ALLOWANCE words: one or two words of a term with no
# settled Chinese name, and never a sentence, a title or a label. Rendered Markdown that a
# cell displays (the ledger's tables, the chapters' tables, the self-checks' replies) is
# counted: it is prose the reader reads, even though the package computes it.
# What the chapters' code cells print (stdout) is read too, by the same rules and with the
# same allowance per page, with the Markdown they display
# (test_zh_chapters_print_no_english_beyond_names): every line a chapter prints with words
# is a message of mhacore's catalog, or an instance of one with placeholders (`N_("z
# against -1/4: {z}")`), and every table with word labels is displayed as Markdown whose
# headers are messages, so the zh build shows it in Chinese (mhacore.i18n.translate_rendered)
# from the one English execution; numbers, identifiers and names stay as executed.
ENGLISH_ALLOWANCE = 3
ENGLISH_NAMES = frozenset("""
    Adam Bernoulli Binet Cauchy Dirichlet Epanechnikov Fatou Frobenius Gram Grassmann Haar
    Jensen Lagrange Lambert Mahalanobis Schmidt Schwarz Stiefel Student
    Temnothorax albipennis Leptothorax curvispinosus
    Binder Chromium Colab Debian Jupyter Linux Markdown Python Sphinx Transformer Triton
    Ubuntu cffconvert gettext gloo jupyterlab jupytext mhacore myst nbgrader nccl numpy
    statsmodels threadpoolctl torch torchrun tqdm formgrader Ctrl root umask
    softmax logit logits delta et al
""".split())
ENGLISH_NAME_PHRASES = ("scikit-learn", "jupyter-cache", "TeX Live", "GitHub Pages",
                        "Keep a Changelog", "Lambert-W")
# The names of math's functions, and the roman page numbers of the PDF's front matter
MATH_OPERATORS = frozenset("""
    sin cos tan tanh exp log ln max min lim inf sup arg argmin argmax det tr diag const
    arcsin arccos arctan Var Cov Corr ii iii iv vi vii viii ix xi xii xiii xiv
""".split())
_LATIN = "A-Za-zÀ-ÖØ-öø-ÿĀ-ſ"
_LATIN_WORD = re.compile(rf"[{_LATIN}]+(?:['’][{_LATIN}]+)*")
_TEX_MATH = re.compile(r"\\\(.*?\\\)|\\\[.*?\\\]|\$\$.*?\$\$|\$[^$\n]+\$", re.S)
_URL = re.compile(r"(?:https?://|www\.)\S+")
_IDENTIFIER = re.compile(r"\S*(?:[\d_/\\@=<>{}]|::|\.\w)\S*|\S*[a-z0-9]+(?:-[a-z0-9]+){2,}\S*")
_ENUMERATOR = re.compile(r"\((?:i{1,3}|iv|vi{0,3}|ix|x)\)")
_CJK_CHAR = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_ON_PURPOSE = re.compile(rf"《[^》]*》|“[^”{_CJK_CHAR}]*”"
                         rf"|(?<=[{_CJK_CHAR}])\s*（\s*[{_LATIN}][{_LATIN}\s'’-]*）")
# Chinese characters and punctuation end a token, as a space does in English
_CJK_OR_PUNCTUATION = re.compile(rf"[{_CJK_CHAR}\u3000-\u303f\uff00-\uffef]")
_NOT_READ = (
    "script, style, noscript, svg, .math, code, pre, kbd, samp, .cell_output .output, "
    ".pasted-text, .pasted-inline, .language-switch, .headerlink, .bibtex-citation, "
    ".citation-list, .citation")
_UPRIGHT_MATH = re.compile(r"\\(?:text|textrm|mathrm|operatorname|mbox)\{([^{}]*)\}"
                           r"|\{\\rm\s+([^{}]*)\}")


def bibliography_names() -> frozenset:
    """Every word of the names of the people in book/references.bib."""
    from pybtex.database import parse_file

    words = set()
    for entry in parse_file(str(ROOT / "book" / "references.bib")).entries.values():
        for person in (p for people in entry.persons.values() for p in people):
            for part in (*person.rich_first_names, *person.rich_middle_names,
                         *person.rich_prelast_names, *person.rich_last_names):
                words.update(_LATIN_WORD.findall(str(part)))
    return frozenset(words)


def math_words() -> frozenset:
    """The words the English pages write upright in math (``\\text{bias}``,
    ``\\mathrm{eff}``): the PDF sets them in the text font, so the PDF's English is read
    without them (on the site, math is left out by its markup)."""
    words = set()
    for page in toc_pages(ROOT):
        for upright in _UPRIGHT_MATH.findall(page.read_text(encoding="utf-8")):
            words.update(_LATIN_WORD.findall(" ".join(upright)))
    return frozenset(words) | MATH_OPERATORS


_CHECK_IDS: list[str] = []


def check_ids() -> list[str]:
    """The ids of mhacore's registered checks (``bvc-identity``), longest first."""
    if not _CHECK_IDS:
        from mhacore.theorems import REGISTRY

        _CHECK_IDS.extend(sorted(REGISTRY, key=len, reverse=True))
    return _CHECK_IDS


def english_words(text: str, names: frozenset) -> list[str]:
    """The English words of ``text`` a Chinese reader meets (see the rules above), but
    for the words in ``names``."""
    for phrase in (*ENGLISH_NAME_PHRASES, *check_ids()):
        text = text.replace(phrase, " ")
    for pattern in (_ON_PURPOSE, _CJK_OR_PUNCTUATION, _TEX_MATH, _URL, _IDENTIFIER,
                    _ENUMERATOR):
        text = pattern.sub(" ", text)
    return [word for word in _LATIN_WORD.findall(text)
            if len(word) > 1 and word not in names and word not in MATH_OPERATORS
            and not any(c.isupper() for c in word[1:])]


def page_text(path: Path) -> str:
    """What a reader reads on a page of the site: its text without what is not read as
    prose (``_NOT_READ``), plus what the search box shows before one types."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    body = soup.body or soup
    for node in body.select(_NOT_READ):
        node.decompose()
    shown = [tag["placeholder"] for tag in body.select("[placeholder]")]
    return " ".join([body.get_text(" "), *shown])


def english_table(counts: dict[str, list[str]]) -> str:
    return "\n".join(f"{len(words):5}  {page}  "
                     + " ".join(f"{w}×{n}" if n > 1 else w
                                for w, n in collections.Counter(words).most_common(12))
                     for page, words in counts.items())


def test_english_word_count_keeps_to_its_rules(tmp_path):
    names = bibliography_names() | ENGLISH_NAMES
    assert "Nadaraya" in names and "Vedelsby" in names  # from references.bib
    html = ("<html><body><p>练习 1.1 — The Epanechnikov constants ★ (derivation)</p>"
            "<p>NW 估计器与 SymPy、softmax，见 ex-1-1、0.1.0、nw-bandwidth-rate、Fig. 6.1、与 "
            "https://example.org/a b；(ii) 与 (a)；串联跑动（tandem run）；“Close”；"
            "《Multi-Head Attention as Ensemble》。</p><span class='math'>x = \\sin y</span>"
            "<div class='cell_output'><div class='output stream'><pre>holds</pre></div>"
            "<p>Your turn (ex-1-1)</p></div><code>nw_estimate(q)</code>"
            "<input placeholder='Search this book...'></body></html>")
    page = tmp_path / "page.html"
    page.write_text(html, encoding="utf-8")
    assert english_words(page_text(page), names) == [
        "The", "constants", "derivation", "Fig", "Your", "turn", "Search", "this", "book"]
    assert english_words("max 与 min，bvc-identity", names) == []
    assert english_words("\\text{bias}：bias", names | math_words()) == []


def test_zh_pages_show_no_english_beyond_names_and_glosses(zh_html):
    """Every page of the Chinese site: at most ENGLISH_ALLOWANCE English words a reader
    meets (the rules above), page chrome included (author, copyright, version footer,
    buttons, search box)."""
    names = bibliography_names() | ENGLISH_NAMES
    counts = {page: english_words(page_text(zh_html / page), names)
              for page in site_pages(zh_html)}
    assert len(counts) >= 20
    print("English words per page of the Chinese site:\n" + english_table(counts))
    over = {page: words for page, words in counts.items() if len(words) > ENGLISH_ALLOWANCE}
    assert not over, "\n" + english_table(over)


# what a code cell shows that is not read as printed text: values (text/plain), LaTeX,
# errors and warnings, HTML, images; and inside what is read, math and code
_OUTPUT_NOT_READ = ".output:not(.stream), .math, code, script, style, img, svg"


def printed_text(path: Path) -> str:
    """What the code cells of a page print (stdout) and display as Markdown (a table, a
    self-check's reply), as a reader reads it: without math, code and other outputs."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    texts = []
    for output in soup.select(".cell_output"):
        for node in output.select(_OUTPUT_NOT_READ):
            node.decompose()
        texts.append(output.get_text(" "))
    return " ".join(texts)


def test_printed_text_keeps_to_the_rules(tmp_path):
    """printed_text reads stdout and displayed Markdown, and english_words counts them
    by the site's rules: names, abbreviations, identifiers, numbers and math excepted."""
    names = bibliography_names() | ENGLISH_NAMES
    html = ("<html><body><p>MSE by d_k, printed in the prose</p><div class='cell_output'>"
            "<div class='output stream'><pre>nw-bandwidth-rate:\n"
            "    估计值 -0.21 ± 0.005（SE），预测值 -0.2 -> 成立\n"
            "z against -1/4: 7.2\nall-MiniLM-L6-v2：6 层</pre></div>"
            "<div class='output stderr'><pre>RuntimeWarning: overflow</pre></div>"
            "<div class='output text_plain'><pre>array([1, 2])</pre></div>"
            "<table><tr><th>键</th><th>高斯核</th></tr><tr><td>sum</td><td>1.000</td></tr>"
            "<tr><td>mhacore softmax</td><td>NW (<span class='math'>\\sqrt{tau}</span>)"
            "</td></tr></table><p>正确（ex-1-1）：把 <code>answer</code> 设为</p></div>"
            "</body></html>")
    page = tmp_path / "page.html"
    page.write_text(html, encoding="utf-8")
    text = printed_text(page)
    assert "printed in the prose" not in text and "overflow" not in text
    assert "array" not in text and "answer" not in text and "sqrt" not in text
    assert english_words(text, names) == ["against", "sum"]


def test_zh_chapters_print_no_english_beyond_names(zh_html):
    """What the chapters' code cells print and display on the Chinese pages (the lines
    of stdout, the Markdown tables and replies) reads in Chinese: at most
    ENGLISH_ALLOWANCE English words per chapter by the rules above (identifiers, numbers,
    math, names and abbreviations excepted), although each chapter ran once, in English."""
    names = bibliography_names() | ENGLISH_NAMES
    counts = {page: english_words(printed_text(zh_html / page), names)
              for page in site_pages(zh_html) if re.match(r"book/\d\d-", page)}
    assert len(counts) >= 8
    print("English words printed per chapter of the Chinese site:\n" + english_table(counts))
    over = {page: words for page, words in counts.items() if len(words) > ENGLISH_ALLOWANCE}
    assert not over, "\n" + english_table(over)


def test_no_line_of_a_chinese_page_starts_with_the_punctuation_after_a_formula(zh_html):
    """Inline math followed by "，", "。", "）" ... is kept with it (translations.py): no
    formula is followed, outside such a pair, by punctuation that may not start a line."""
    from bs4 import BeautifulSoup, NavigableString

    loose, kept = [], 0
    for page in sorted(zh_html.glob("book/*.html")):
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        for math in soup.select("span.math"):
            after = math.next_sibling
            if math.parent.get("class") and "mhacore-nobreak" in math.parent["class"]:
                kept += 1
            elif isinstance(after, NavigableString) and after[:1] and after[0] in "，。、；：！？）":
                loose.append((page.name, math.get_text()[:30], after[:5]))
    assert kept >= 100 and not loose, (kept, loose[:5])


# In a short table cell (translations.SHORT_CELL characters at most: a term, a verdict),
# each run of Chinese characters ("成立", "恒等式") whose
# characters lie on more than one line
SPLIT_CHINESE_JS = """
(shortCell) => {
  const split = [];
  const run = /[\\u3400-\\u9fff]+/g;
  for (const cell of document.querySelectorAll("article table td, article table th")) {
    if (cell.textContent.trim().length > shortCell) { continue; }
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.data.matchAll(run)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set(Array.from(range.getClientRects(), r => Math.round(r.top)));
        if (tops.size > 1) { split.push(m[0]); }
      }
    }
  }
  return split;
}
"""


@needs_chromium
def test_table_cells_break_no_chinese_word(zh_html):
    """The theorem ledger's narrow columns, on a laptop and on a phone: no word of a short
    cell is broken between lines (translations.py's ``KeepShortCellsWhole``), and the
    page is no wider than the screen."""
    from playwright.sync_api import sync_playwright
    from translations import SHORT_CELL

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path())
        try:
            for width in (1280, 390):
                page = browser.new_page(viewport={"width": width, "height": 900})
                page.goto((zh_html / "book" / "ledger.html").as_uri())
                page.evaluate("document.fonts.ready")
                split = page.evaluate(SPLIT_CHINESE_JS, SHORT_CELL)
                assert not split, (width, split[:10])
                assert page.evaluate("document.documentElement.scrollWidth") <= width
        finally:
            browser.close()


CHROME_TOOLTIPS = {"a.headerlink": "title", ".primary-toggle": "title",
                   ".secondary-toggle": "title", ".theme-switch-button": "aria-label",
                   ".theme-switch[data-mode=auto]": "title"}


def test_zh_tooltips_are_chinese(zh_html):
    """What the page chrome says on hover and to a screen reader: the anchors ("链接到此
    标题"), the sidebar buttons and the colour-mode switch (book/_ext/locale's catalog and
    the zh templates). Left in English: the theme's landmark names ("Main", "Page") and
    sphinx-togglebutton's button label, which their code writes with no way to translate."""
    from bs4 import BeautifulSoup

    seen = collections.Counter()
    english = []
    for page in site_pages(zh_html):
        soup = BeautifulSoup((zh_html / page).read_text(encoding="utf-8"), "html.parser")
        for selector, attribute in CHROME_TOOLTIPS.items():
            for node in soup.select(selector):
                if node.get(attribute):
                    seen[selector] += 1
                    if not CJK.search(node[attribute]):
                        english.append((page, selector, node[attribute]))
    assert all(seen[s] for s in CHROME_TOOLTIPS), seen
    assert not english, english[:5]


def test_zh_exercises_are_named_in_chinese(zh_html):
    """An exercise's title and the text of a link to it are the catalog's Chinese: the
    course page's homework reads "练习 7.1（三个头的几何权重）", never "Exercise 7.1 (...)"."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup((zh_html / "book" / "course.html").read_text(encoding="utf-8"),
                         "html.parser")
    links = [a.get_text() for a in soup.select("article a.reference.internal")
             if re.search(r"#ex-\d+-\d+$", a.get("href", ""))]
    assert len(links) >= 20
    assert all(re.fullmatch(r"练习 \d+\.\d+（[^（）]+）", text) for text in links), links
    chapter = BeautifulSoup((zh_html / "book" / "07-structured-weights.html").read_text(
        encoding="utf-8"), "html.parser")
    titles = [" ".join(t.get_text(" ").split()) for t in chapter.select("p.admonition-title")]
    exercises = [t for t in titles if re.match(r"(解答 )?练习 7\.\d", t)]
    assert len(exercises) == 6, titles  # three exercises and their solutions
    assert all(CJK.search(t.split("—", 1)[1]) for t in exercises), exercises


_PDF_CITATION = re.compile(r"\[[^\[\]]*\d{4}[a-z]?\s*\]|\S+ and \S+(?=\s*\[\s*\d{4}[a-z]?\s*\])")


def pdf_pages_as_read(path: Path) -> tuple[list[str], int]:
    """The PDF's text, one string per page, without what is set in a monospaced font (code,
    outputs) or the math font; and the number of the page where the bibliography starts
    (from the PDF's outline), whose pages list the references' own titles."""
    from xml.etree import ElementTree

    xml = subprocess.run(["pdftohtml", "-xml", "-i", "-stdout", str(path)],
                         capture_output=True, text=True, check=True).stdout
    root = ElementTree.fromstring(xml.encode("utf-8"))
    fonts, pages = {}, []
    for page in root.iter("page"):
        fonts.update({spec.get("id"): spec.get("family") for spec in page.iter("fontspec")})
        pieces = [" ".join(text.itertext()) for text in page.iter("text")
                  if not re.search(r"Mono|Math", fonts[text.get("font")])]
        text = " ".join(pieces)
        # a check's id broken at its hyphens across the lines of a narrow table column
        # ("equicorrelated-" "weighted-" "variance") is still the id, not three words
        for check_id in check_ids():
            text = re.sub(r"-\s*".join(map(re.escape, check_id.split("-"))), check_id, text)
        # a word hyphenated at the end of a line ("Trans-" "former") is one word, and so
        # is a name ("all-" "MiniLM-L6-v2"); citations ("[Krogh and Vedelsby, 1995]",
        # "Krogh and Vedelsby [1995]") are names
        text = re.sub(rf"(?<=[{_LATIN}])- (?=[a-z])", "", text)
        text = re.sub(rf"(?<=[{_LATIN}])- (?=[A-Z0-9])", "-", text)
        pages.append(_PDF_CITATION.sub(" ", text))
    starts = [int(item.get("page")) for item in root.iter("item")
              if (item.text or "").strip() == "参考文献"]
    return pages, (starts[-1] if starts else len(pages) + 1)


@needs_tex_cjk
def test_zh_pdf_shows_no_english_beyond_names_and_glosses(zh_pdf):
    """The Chinese PDF, page by page, by the site's rules: LaTeX's own labels in Chinese
    ("第 3 章", "第 I 部分", "定理 1.1", the running footer, the title page) and at most
    ENGLISH_ALLOWANCE English words on a page before the bibliography."""
    path, _ = zh_pdf
    if shutil.which("pdftohtml") is None:
        pytest.skip("needs poppler's pdftohtml")
    pages, bibliography = pdf_pages_as_read(path)
    flat = "".join("".join(page.split()) for page in pages)
    for label in ("第1章", "第8章", "第I部分", "定理1.1", "定义1.1", "注记1.1", "mhacore项目组"):
        assert label in flat, label
    names = bibliography_names() | ENGLISH_NAMES | math_words()
    counts = {f"page {k}": english_words(text, names)
              for k, text in enumerate(pages[:bibliography - 1], start=1)}
    print("English words per page of the Chinese PDF:\n" + english_table(
        {page: words for page, words in counts.items() if words}))
    over = {page: words for page, words in counts.items() if len(words) > ENGLISH_ALLOWANCE}
    assert not over, "\n" + english_table(over)


# --- the package's own words on the Chinese pages (book/_ext/localized_outputs.py) ---------

def test_the_ledger_and_the_checks_speak_chinese(zh_html):
    """What the package printed in English when the book was executed (the ledger's tables,
    tallies and notes, a check's summary, a self-check's reply) reads in Chinese on the
    Chinese pages, through mhacore's own catalog (mhacore/locale), with the same numbers."""
    from bs4 import BeautifulSoup

    from mhacore import theorems

    def page(name):
        return BeautifulSoup((zh_html / "book" / name).read_text(encoding="utf-8"),
                             "html.parser")

    ledger = page("ledger.html")
    headers = [th.get_text(strip=True) for th in ledger.select(".cell_output th")]
    assert headers[:8] == ["检验", "章", "估计值", "预测值", "SE 或容差", "类型", "结论", "秒"]
    assert headers[8:] == ["检验", "类型", "一致", "z 均值", "z 标准差", "最大 |z|"]
    cells = [td.get_text(strip=True) for td in ledger.select(".cell_output td")]
    assert "成立" in cells and "模型" in cells and "恒等式" in cells
    assert not {"holds", "FAILS", "model", "identity", "empirical"} & set(cells)
    outputs = " ".join(" ".join(o.get_text(" ").split()) for o in ledger.select(".cell_output"))
    assert re.search(r"\d+ 个检验，\d+ 个成立", outputs)
    assert re.search(r"种子 1-\d+：\d+ 次运行中 \d+ 次与章节一致", outputs)
    notes = {p.strong.get_text(): p.get_text() for p in ledger.select(".cell_output p")
             if p.strong and p.strong.get_text() in theorems.REGISTRY}
    assert set(notes) == set(theorems.REGISTRY)
    for theorem_id, note in notes.items():
        assert "符号检验" in note and "限定条件" in note and "功效" in note, theorem_id
        assert not re.search(r"Symbolic check|Caveat|Power:|not measured", note), theorem_id
        assert len(CJK.findall(note)) > 20, (theorem_id, note[:200])
    chapter = " ".join(page("01-nadaraya-watson.html").get_text(" ").split())
    assert re.search(r"nw-bandwidth-rate: 估计值 -0\.2\d* ± 0\.00\d+（SE），预测值 -0\.2 -> 成立",
                     chapter)
    assert "轮到你了（ex-1-1）：把 answer 设为高斯核的最优 AMSE" in chapter
