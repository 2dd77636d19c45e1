"""Pages that fit: no code, output or math block of the main column scrolls sideways, on
screen at 1280 px or printed on A4 paper (print media, 794 px: A4's 210 mm at 96 px per
inch), and on a phone (390 px) no printed result wraps: it scrolls inside its box.
Playwright drives Debian's Chromium; the test is skipped when either is missing."""

import pytest

from browser import has_playwright, playwright_page, serve, site_pages

needs_browser = pytest.mark.skipif(
    not has_playwright(),
    reason="needs Chromium (Debian package chromium) and playwright (requirements.txt)")

SCREEN = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
PRINT = {"width": 794, "height": 1123}  # A4 at 96 px per inch
BLOCKS = ("pre", "div.cell_output", "mjx-container[display='true']", "div.math")
# Every block of the main column wider than its box (one pixel of rounding allowed),
# once MathJax has typeset the page.
OVERFLOW_JS = """
async (selectors) => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  const main = document.querySelector(".bd-article") || document.body;
  const wide = [];
  for (const el of main.querySelectorAll(selectors.join(","))) {
    if (el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1) {
      const section = el.closest("section[id]");
      const tex = el.querySelector("mjx-assistive-mml math");
      wide.push(`${el.tagName.toLowerCase()}.${el.className || ""} in #${
        section ? section.id : "?"}: ${el.scrollWidth} > ${el.clientWidth} px: ${
        (el.innerText || (tex && tex.textContent) || "").trim().slice(0, 70)}`);
    }
  }
  return wide;
}
"""


def page_faults(urls: list[str], viewport: dict, media: str, script: str, *args) -> dict:
    """``{page: faults}`` for the pages where ``script`` (run with ``args``) finds any."""
    found = {}
    with playwright_page(viewport, media) as page:
        for url in urls:
            page.goto(url, wait_until="load")
            faults = page.evaluate(script, *args)
            if faults:
                found[url.rsplit("/", 2)[-1]] = faults
    return found


def overflowing(urls: list[str], viewport: dict, media: str) -> dict[str, list[str]]:
    """``{page: [description of each overflowing block]}`` for the pages that have any."""
    return page_faults(urls, viewport, media, OVERFLOW_JS, list(BLOCKS))


@pytest.fixture(scope="module")
def served(strict_build):
    proc, html = strict_build
    if proc.returncode != 0:
        pytest.fail("the strict build failed; see test_strict_build_has_no_warnings")
    with serve(html) as base:
        yield [f"{base}/{page}" for page in site_pages(html)]


@needs_browser
@pytest.mark.parametrize("viewport, media", [(SCREEN, "screen"), (PRINT, "print")],
                         ids=["screen-1280px", "print-A4"])
def test_no_block_scrolls_sideways(served, viewport, media):
    assert len(served) >= 5
    wide = overflowing(served, viewport, media)
    assert not wide, "\n".join(f"{page}: {w}" for page, ws in wide.items() for w in ws)


@needs_browser
def test_the_detector_catches_a_wide_block(tmp_path):
    line = "x = " + "1 + " * 80 + "1"
    (tmp_path / "index.html").write_text(
        f'<html><body><div class="bd-article"><pre style="overflow:auto">{line}</pre>'
        f"<pre>short</pre></div></body></html>")
    with serve(tmp_path) as base:
        wide = overflowing([f"{base}/index.html"], SCREEN, "screen")
    assert list(wide) == ["index.html"] and len(wide["index.html"]) == 1


# Every output block of the main column whose text takes more lines on screen than it
# has (the distinct tops of its text's line boxes): a line wrapped at the box's edge.
WRAPPED_JS = """
() => {
  const main = document.querySelector(".bd-article") || document.body;
  const wrapped = [];
  for (const pre of main.querySelectorAll("div.cell_output pre")) {
    if (pre.clientWidth === 0) continue;
    const lines = pre.textContent.replace(/\\n+$/, "").split("\\n").length;
    const range = document.createRange();
    range.selectNodeContents(pre);
    const tops = new Set();
    for (const box of range.getClientRects()) {
      if (box.width > 0) tops.add(Math.round(box.top));
    }
    if (tops.size > lines) {
      const section = pre.closest("section[id]");
      wrapped.push(`#${section ? section.id : "?"}: ${lines} lines shown in ${
        tops.size}: ${pre.textContent.trim().slice(0, 60)}`);
    }
  }
  return wrapped;
}
"""


def wrapped_outputs(urls: list[str], viewport: dict) -> dict[str, list[str]]:
    """``{page: [each output block whose lines wrap]}`` on screen at ``viewport``."""
    return page_faults(urls, viewport, "screen", WRAPPED_JS)


@needs_browser
def test_the_wrap_detector_catches_a_wrapped_output(tmp_path):
    line = "n = 100   MSE = 0.123 ± 0.004   " * 4
    cell = '<div class="cell_output"><pre style="white-space:{}">{}\nend</pre></div>'
    for white_space, expected in (("pre-wrap", 1), ("pre", 0)):
        (tmp_path / "index.html").write_text(
            f'<html><body><div class="bd-article">{cell.format(white_space, line)}'
            "</div></body></html>")
        with serve(tmp_path) as base:
            wrapped = wrapped_outputs([f"{base}/index.html"], PHONE)
        assert len(wrapped.get("index.html", [])) == expected, (white_space, wrapped)


@needs_browser
def test_results_scroll_inside_their_box_on_a_phone(served):
    """At 390 px a wide result table scrolls sideways inside its box; no line wraps."""
    chapters = [url for url in served if "/book/0" in url]
    assert len(chapters) >= 8
    wrapped = wrapped_outputs(chapters, PHONE)
    assert not wrapped, "\n".join(f"{page}: {w}" for page, ws in wrapped.items() for w in ws)
