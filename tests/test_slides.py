"""The lecture decks (:mod:`mhacore.editions.slides`): written by hand, one per session, with
figures, equations, statements and numbers pulled from the executed chapters.

In a browser (Playwright driving Debian's Chromium, at 1280 x 720) every slide of every
deck, English and Chinese, keeps its content inside the slide, splits no word across two
lines and draws its figure large enough to read; the checker is shown to catch each fault.
Without a browser: no deck has more slides than its lecture has minutes, every session has
its source, a label that does not exist stops the build with a message naming the deck,
the slide and the label, glued numbers read as the chapter writes them (never in quotes),
and the title slide carries the version and the commit.
"""

import re
import sys
from pathlib import Path

import pytest

from browser import has_playwright, playwright_page, serve

from mhacore.editions import slides
from mhacore.editions.reader import Book, page_labels

ROOT = Path(__file__).resolve().parents[1]
needs_browser = pytest.mark.skipif(
    not has_playwright(),
    reason="needs Chromium (Debian package chromium) and playwright (requirements.txt)")
VIEWPORT = {"width": slides.SLIDE_WIDTH, "height": slides.SLIDE_HEIGHT}
MIN_FIGURE_HEIGHT = 250  # px of a 720 px slide: a figure smaller than that cannot be read

# Steps through the deck with Reveal's API once MathJax, the fonts and the images are in;
# on each slide: content below or beside the slide, a figure drawn smaller than
# MIN_FIGURE_HEIGHT, and a word (a run of letters and digits: no space, CJK character or
# dash, where a line may legitimately break) whose characters lie on two lines.
DECK_FAULTS_JS = """
async (minFigure) => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  if (!Reveal.isReady()) { await new Promise(resolve => Reveal.on("ready", resolve)); }
  await document.fonts.ready;
  await Promise.all(Array.from(document.images, img => img.decode().catch(() => null)));
  const frame = () => new Promise(resolve => requestAnimationFrame(() => resolve()));
  const word = /[^\\s\\u2e80-\\u9fff\\u3000-\\u303f\\uff00-\\uffef\\-\\u2010-\\u2014\\/]+/g;
  const faults = [];
  const total = Reveal.getHorizontalSlides().length;
  for (let index = 0; index < total; index++) {
    Reveal.slide(index);
    await frame();
    const slide = Reveal.getCurrentSlide();
    const box = slide.getBoundingClientRect();
    const scale = Reveal.getScale();
    const heading = slide.querySelector("h1, h2");
    const name = `slide ${index + 1} (${heading ? heading.textContent : ""})`;
    let low = box.top, right = box.right, left = box.left;
    for (const el of slide.querySelectorAll("*")) {
      if (el.closest("aside.notes, mjx-assistive-mml")) { continue; }
      const r = el.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) { continue; }
      low = Math.max(low, r.bottom);
      right = Math.max(right, r.right);
      left = Math.min(left, r.left);
    }
    if (low > box.bottom + 1) {
      faults.push(`${name}: content ${Math.round((low - box.top) / scale)} px tall in a ` +
                  `${Math.round(box.height / scale)} px slide`);
    }
    if (right > box.right + 1 || left < box.left - 1) {
      faults.push(`${name}: content ${Math.round((right - left) / scale)} px wide in a ` +
                  `${Math.round(box.width / scale)} px slide`);
    }
    for (const img of slide.querySelectorAll("figure img")) {
      const r = img.getBoundingClientRect();  // object-fit: contain draws it inside r
      const drawn = Math.min(r.height, r.width * img.naturalHeight / img.naturalWidth) / scale;
      if (!(drawn >= minFigure)) {
        faults.push(`${name}: a figure drawn ${Math.round(drawn)} px tall`);
      }
    }
    const walker = document.createTreeWalker(slide, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (node.parentElement.closest("aside.notes, mjx-container, script, style")) {
        continue;
      }
      for (const match of node.data.matchAll(word)) {
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const tops = Array.from(range.getClientRects(), r => r.top);
        if (tops.length > 1 && Math.max(...tops) - Math.min(...tops) > 2) {
          faults.push(`${name}: the word ${JSON.stringify(match[0])} is split across lines`);
        }
      }
    }
  }
  return {slides: total, faults: faults};
}
"""


def deck_faults(folder: Path) -> dict[str, dict]:
    """``{deck: {"slides": n, "faults": [...]}}`` for every deck in ``folder``, each loaded
    once at 1280 x 720 and stepped through slide by slide."""
    found = {}
    with serve(folder) as base, playwright_page(VIEWPORT) as page:
        for deck in sorted(folder.glob("session-*.slides.html")):
            page.goto(f"{base}/{deck.name}", wait_until="load")
            found[deck.name] = page.evaluate(DECK_FAULTS_JS, MIN_FIGURE_HEIGHT)
    return found


def _assert_fits(folder: Path):
    found = deck_faults(folder)
    assert len(found) == len(course()), sorted(found)
    faults = [f"{deck}: {fault}" for deck, result in found.items()
              for fault in result["faults"]]
    assert not faults, "\n".join(faults)


def course() -> dict:
    return slides.course_sessions((ROOT / slides.COURSE_PAGE).read_text(encoding="utf-8"))


# --- the built decks, in both sites ------------------------------------------------------

@pytest.fixture(scope="module")
def zh_slides(zh_html):
    return zh_html / "slides"


@needs_browser
def test_english_slides_fit_and_split_no_word(html_dir):
    _assert_fits(html_dir / "slides")


@needs_browser
def test_chinese_slides_fit_and_split_no_word(zh_slides):
    _assert_fits(zh_slides)


def _title_slide(deck: Path) -> str:
    page = deck.read_text(encoding="utf-8")
    return re.search(r'<section class="deck-slide title-slide">(.*?)</section>', page, re.S)[1]


def test_title_slides_carry_version_and_commit(html_dir, zh_slides):
    from mhacore import __version__

    for folder, language in ((html_dir / "slides", "en"), (zh_slides, "zh_CN")):
        for number in course():
            title = _title_slide(folder / slides.deck_name(number))
            chinese = slides.source_path(ROOT, number, language).is_file() and language != "en"
            commit = "提交" if chinese else "commit"  # else the English deck stands in
            assert re.search(rf"mhacore {re.escape(__version__)} · {commit} "
                             r"(?:[0-9a-f]{7,}\+?|unknown)", title), (folder, number, title)


def test_chinese_decks_are_chinese(zh_slides):
    for number in course():
        if slides.source_path(ROOT, number, "zh_CN").is_file():
            title = _title_slide(zh_slides / slides.deck_name(number))
            assert f"第 {number} 次课" in title and "第 " in title and "章" in title, title


def test_built_decks_show_no_quoted_number_and_no_raw_label(html_dir):
    from bs4 import BeautifulSoup

    for deck in sorted((html_dir / "slides").glob("session-*.slides.html")):
        soup = BeautifulSoup(deck.read_text(encoding="utf-8"), "html.parser")
        for node in soup.select("script, style, .math"):
            node.decompose()
        text = " ".join(soup.get_text(" ").split())
        assert not re.search(r"""['"‘’][−+-]?\d[\d.,]*\b""", text), deck.name
        assert not re.search(r"\{[\w:-]+\}`|\b(?:thm|fig|def|prop|rem|eq)-[a-z][\w-]*",
                             text), deck.name


# --- the sources ---------------------------------------------------------------------------

def too_many_slides(sources: dict, sessions: dict) -> list[str]:
    """The decks with more slides (the title slide included) than their session's lecture
    has minutes: ``sources`` maps session numbers to parsed decks."""
    return [f"{deck.name}: {len(deck.slides) + 1} slides for a {sessions[n].minutes}-minute "
            "lecture" for n, deck in sources.items()
            if len(deck.slides) + 1 > sessions[n].minutes]


def _sources(language: str) -> dict:
    found = {}
    for number in course():
        path = slides.source_path(ROOT, number, language)
        if path.is_file():
            found[number] = slides.parse_deck(path.read_text(encoding="utf-8"), path.name)
    return found


def test_every_session_has_its_english_source_and_lecture_minutes():
    sessions = course()
    assert sorted(sessions) == list(range(1, 11))
    assert all(s.minutes >= 30 for s in sessions.values()), sessions
    assert sorted(_sources("en")) == sorted(sessions)


def test_every_session_has_its_chinese_source():
    assert sorted(_sources("zh_CN")) == sorted(course())


@pytest.mark.parametrize("language", ["en", "zh_CN"])
def test_no_deck_has_more_slides_than_its_lecture_minutes(language):
    sessions = course()
    sources = _sources(language)
    assert sources
    assert not too_many_slides(sources, sessions)
    english = _sources("en")
    for number, deck in sources.items():  # a translation keeps its English slides
        assert len(deck.slides) == len(english[number].slides), deck.name


def test_the_minutes_check_catches_a_long_deck():
    deck = slides.parse_deck("# T\n" + "".join(f"## S{k}\n- x\n" for k in range(30)), "long.md")
    sessions = {1: slides.Session(1, "01-x", 30)}
    assert too_many_slides({1: deck}, sessions) == ["long.md: 31 slides for a 30-minute lecture"]
    assert not too_many_slides({1: slides.parse_deck("# T\n## A\n", "short.md")}, sessions)


# --- the engine, without a build ----------------------------------------------------------

PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAA"
       "AABJRU5ErkJggg==")
CHAPTER = """# Smoothing things

```{glue:figure} fig-a
:name: fig-a
:alt: A curve that rises.

The caption.
```

:::{prf:theorem} Rate
:label: thm-a

It holds for $n \\ge 1$.

$$
x = 1
$$ (eq-in)
:::

:::{prf:proof}
A secret argument.
:::

```{glue:math} eq-b
:label: eq-b
```

The slope was {glue:text}`slope:.3f`, and rho {glue:text}`rho`.
"""


def _chapter():
    glued = {"fig-a": {"data": {"image/png": PNG, "text/plain": "<Figure>"}},
             "eq-b": {"data": {"text/latex": "$\\displaystyle y = 2$",
                               "text/plain": "<Math>"}},
             "slope": {"data": {"text/plain": "-0.087123"}},
             "rho": {"data": {"text/plain": "'0.33 ± 0.02'"}}}
    chapter = slides.read_chapter(CHAPTER, "01-x", 1, glued)
    book = Book(labels=page_labels(CHAPTER, "01-x", 1), titles={"01-x": "Smoothing things"},
                references={"wand1995": {"who": "Wand and Jones", "year": "1995"}})
    return chapter, book


PROVENANCE = {"version": "9.9.9", "commit": "abc1234"}


def _render(body: str, language: str = "en", chapter=None) -> str:
    own, book = _chapter()
    source = slides.parse_deck(f"# Kernel smoothing\n\n## Opening\n- a\n\n## Bad\n{body}\n",
                               "book/slides/session-1.md")
    return slides.render_deck(source, slides.Session(1, "01-x", 45), chapter or own, book,
                              PROVENANCE, language)


def test_a_deck_pulls_figure_equation_statement_and_numbers():
    page = _render("Slope {glue}`slope`, rho {glue}`rho`; by {prf:ref}`thm-a` "
                   "{cite}`wand1995`.\n{figure}`fig-a`\n{equation}`eq-b`\n{statement}`thm-a`")
    last = page.rsplit("<section", 1)[1]
    assert "Slope -0.087, rho 0.33 ± 0.02; by Theorem 1.1 (Wand and Jones, 1995)." in last
    assert f"data:image/png;base64,{PNG}" in last and 'alt="A curve that rises."' in last
    assert "<figcaption>Figure 1.1</figcaption>" in last
    assert "y = 2\\tag{1.2}" in last  # numbered as the book numbers it (eq-in is 1.1)
    assert "Theorem 1.1 (Rate)." in last and "It holds for" in last and "\\tag{1.1}" in last
    assert "secret" not in page.lower() and "'0.33" not in page and "'-0.087" not in page


def test_speaker_notes_go_to_reveals_notes():
    page = _render("- b\n::: notes\nSay the slope, {glue}`slope`.\n:::")
    assert '<aside class="notes"><p>Say the slope, -0.087.</p>' in page
    assert "Say the slope" not in page.split('<aside class="notes">')[0]


def test_the_title_slide_names_session_chapter_minutes_version_and_commit():
    page = _render("- b")
    title = re.search(r'title-slide">(.*?)</section>', page, re.S)[1]
    for words in ("Session 1", "Kernel smoothing", "Chapter 1: Smoothing things",
                  "Lecture, 45 min", "mhacore 9.9.9 · commit abc1234"):
        assert words in title, (words, title)
    assert page.count("<section") == 3  # the title slide and the source's two slides


@pytest.mark.parametrize("body, message", [
    ("{figure}`fig-nope`", "no figure labelled 'fig-nope' in chapter 01-x"),
    ("{equation}`eq-nope`", "no equation labelled 'eq-nope' in chapter 01-x"),
    ("{statement}`thm-nope`", "no theorem, definition or remark labelled 'thm-nope'"),
    ("{statement}`fig-a`", "no theorem, definition or remark labelled 'fig-a'"),
    ("x {glue}`nope`", "no glued number 'nope' in chapter 01-x"),
    ("x {glue}`fig-a`", "'fig-a' of chapter 01-x is a figure or an equation"),
    ("x {glue}`slope:.2f`",
     "{glue}`slope:.2f` formats 'slope' as '.2f'; chapter 01-x formats it as '.3f'"),
    ("see {prf:ref}`thm-nope`", "no label 'thm-nope' in the book"),
    ("see {cite}`nobody2020`", "no reference 'nobody2020' in the bibliography"),
    ("see {doc}`09-nope`", "no page '09-nope' in the book"),
    ("see {term}`x`", "the slides know no role {term}"),
])
def test_a_missing_label_fails_naming_deck_slide_and_label(body, message):
    where = "book/slides/session-1.md, slide 3 ('Bad'): "
    with pytest.raises(ValueError, match=re.escape(where + message)):
        _render(body)


def test_a_source_without_title_or_slides_fails():
    with pytest.raises(ValueError, match=r"d\.md: the first line must be"):
        slides.parse_deck("## A\n", "d.md")
    with pytest.raises(ValueError, match=r"d\.md: line 2: text before the first slide"):
        slides.parse_deck("# T\nloose\n## A\n", "d.md")
    with pytest.raises(ValueError, match=r"d\.md: a '::: notes' block is not closed"):
        slides.parse_deck("# T\n## A\n::: notes\nsay\n", "d.md")


def test_a_chinese_deck_translates_statements_and_names():
    chapter, _ = _chapter()
    chapter.catalog = {"It holds for $n \\ge 1$.": "对 $n \\ge 1$ 成立。", "(Rate)": "（速率）"}
    chapter.title = "平滑"
    page = _render("{statement}`thm-a`\n{figure}`fig-a`", "zh_CN", chapter)
    assert "定理 1.1（速率）" in page and "对 " in page and "It holds" not in page
    assert "<figcaption>图 1.1</figcaption>" in page
    assert "第 1 次课" in page and "第 1 章　平滑" in page and "讲授 45 分钟" in page
    assert '<html lang="zh-CN">' in page


def test_write_decks_refuses_an_unknown_language_or_session(tmp_path):
    with pytest.raises(ValueError, match="language must be one of"):
        slides.write_decks(tmp_path, tmp_path, language="fr")
    with pytest.raises(ValueError, match="sessions must be sessions of book/course.md; got 12"):
        slides.write_decks(tmp_path, tmp_path, sessions=[12])


@needs_browser
def test_the_checker_catches_overflow_a_split_word_and_a_small_figure(tmp_path):
    long_word = "Nadaraya" * 6
    sections = [
        '<section class="deck-slide"><h2>Fine</h2><p>A short slide.</p></section>',
        '<section class="deck-slide"><h2>Tall</h2>'
        + "".join(f"<p>Line {k}.</p>" for k in range(40)) + "</section>",
        '<section class="deck-slide"><h2>Split</h2><p style="width: 300px; '
        f'word-break: break-all">{long_word}</p></section>',
        '<section class="deck-slide has-figure"><h2>Small</h2><div class="slide-body">'
        + "".join(f"<p>Text {k}.</p>" for k in range(12))
        + f'<figure class="pulled-figure"><img src="data:image/png;base64,{PNG}" alt="">'
        "</figure></div></section>",
    ]
    slides._copy_assets(tmp_path)
    page = slides.deck_page("Faults", "en", sections)
    (tmp_path / slides.deck_name(1)).write_text(page, encoding="utf-8")
    result = deck_faults(tmp_path)[slides.deck_name(1)]
    assert result["slides"] == 4
    faults = result["faults"]
    assert not [f for f in faults if f.startswith("slide 1 ")], faults
    assert any(re.match(r"slide 2 \(Tall\): content \d+ px tall in a 720 px slide", f)
               for f in faults), faults
    assert any(f.startswith(f'slide 3 (Split): the word "{long_word}" is split') for f in faults)
    assert any(re.match(r"slide 4 \(Small\): a figure drawn \d+ px tall", f) for f in faults)


if __name__ == "__main__":  # check decks written elsewhere: python tests/test_slides.py DIR
    for deck, result in deck_faults(Path(sys.argv[1])).items():
        print(deck, result["slides"], "slides", *result["faults"], sep="\n  ")
