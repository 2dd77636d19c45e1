"""Pages that fit: no code, output or math block of the main column scrolls sideways, on
screen at 1280 px or printed on A4 paper (print media, 794 px: A4's 210 mm at 96 px per
inch). Playwright drives Debian's Chromium; the test is skipped when either is missing."""

import pytest

from browser import chromium_path, serve, site_pages

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - requirements.txt installs it
    sync_playwright = None

needs_browser = pytest.mark.skipif(
    chromium_path() is None or sync_playwright is None,
    reason="needs Chromium (Debian package chromium) and playwright (requirements.txt)")

SCREEN = {"width": 1280, "height": 900}
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


def overflowing(urls: list[str], viewport: dict, media: str) -> dict[str, list[str]]:
    """``{url: [description of each overflowing block]}`` for the pages that have any."""
    found = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        try:
            page = browser.new_page(viewport=viewport)
            page.emulate_media(media=media)
            for url in urls:
                page.goto(url, wait_until="load")
                wide = page.evaluate(OVERFLOW_JS, list(BLOCKS))
                if wide:
                    found[url.rsplit("/", 2)[-1]] = wide
        finally:
            browser.close()
    return found


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
