"""Navigation on every width: the chapter list (primary sidebar) and the page's contents
(secondary sidebar) open and close from their buttons on a phone (390 px), a tablet
(800 px) and a laptop (1280 px), a section link closes the contents drawer, and each page
shows one search control as it opens. Playwright drives
Debian's Chromium; the tests are skipped when either is missing."""

import pytest

from browser import has_playwright, playwright_page, serve

needs_browser = pytest.mark.skipif(
    not has_playwright(),
    reason="needs Chromium (Debian package chromium) and playwright (requirements.txt)")

WIDTHS = (390, 800, 1280)
PAGES = ("book/01-nadaraya-watson.html", "book/ledger.html")
# Whether a panel is on screen, and what the page offers to open it and to search.
STATE_JS = """
() => {
  const shown = (selector) => {
    const el = document.querySelector(selector);
    if (!el) return false;
    const box = el.getBoundingClientRect(), style = getComputedStyle(el);
    return style.display !== "none" && style.visibility !== "hidden"
      && parseFloat(style.opacity) > 0.1 && box.width > 0
      && box.right > 0 && box.left < innerWidth;
  };
  const visible = (el) => {  // drawn, and on screen as the page opens
    const box = el.getBoundingClientRect();
    return el.offsetParent !== null && getComputedStyle(el).visibility !== "hidden"
      && box.bottom > 0 && box.top < innerHeight;
  };
  return {
    primary: shown(".bd-sidebar-primary"),
    secondary: shown(".bd-sidebar-secondary"),
    toggles: [...document.querySelectorAll("button.sidebar-toggle")].length,
    searches: [...document.querySelectorAll(
      ".search-button-field, .search-button, input[type=search]")].filter(visible).length,
  };
}
"""
SETTLE_MS = 600  # the sidebars slide in and out in 0.25 s


def toggle_runs(site, pages=PAGES, widths=WIDTHS) -> list[str]:
    """What goes wrong when each sidebar button is pressed, at each width, on each page:
    a panel that does not appear or does not go away, a missing button, or a second
    search box. An empty list when everything works."""
    faults = []
    with serve(site) as base:
        for width in widths:
            with playwright_page({"width": width, "height": 900}) as page:
                for name in pages:
                    page.goto(f"{base}/{name}", wait_until="load")
                    faults += _toggle_faults(page, f"{name} at {width} px")
    return faults


def _toggle_faults(page, where) -> list[str]:
    faults = []
    state = page.evaluate(STATE_JS)
    if state["searches"] != 1:
        faults.append(f"{where}: {state['searches']} search boxes shown, not 1")
    if state["toggles"] != 2:
        faults.append(f"{where}: {state['toggles']} sidebar buttons, not 2")
    for panel in ("primary", "secondary"):
        button = page.locator(f".bd-header-article button.{panel}-toggle")
        shown = page.evaluate(STATE_JS)[panel]
        if not (button.count() and button.first.is_visible()):
            if not shown:  # no button is fine only where the panel is always shown
                faults.append(f"{where}: the {panel} sidebar is hidden and has no button")
            continue
        button.first.click()
        page.wait_for_timeout(SETTLE_MS)
        if page.evaluate(STATE_JS)[panel] == shown:
            faults.append(f"{where}: the {panel} button did nothing")
            continue
        # close again: a drawer (narrow screens) with Escape, a column with its button
        if shown:
            button.first.click()
        else:
            page.keyboard.press("Escape")
        page.wait_for_timeout(SETTLE_MS)
        if page.evaluate(STATE_JS)[panel] != shown:
            faults.append(f"{where}: the {panel} sidebar did not go back")
        elif panel == "secondary" and not shown:
            # a drawer: following one of its section links closes it
            button.first.click()
            page.wait_for_timeout(SETTLE_MS)
            page.locator("dialog[open] a[href*='#']").first.click()
            page.wait_for_timeout(SETTLE_MS)
            if page.evaluate(STATE_JS)[panel]:
                faults.append(f"{where}: a section link left the {panel} drawer open")
    return faults


@needs_browser
def test_the_check_finds_a_dead_button_and_a_second_search_box(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "p.html").write_text(
        '<html><body><div class="bd-header-article">'
        '<button class="sidebar-toggle primary-toggle">menu</button>'
        '<button class="sidebar-toggle secondary-toggle">contents</button></div>'
        '<div class="bd-sidebar-primary" style="display:none">chapters</div>'
        '<div class="bd-sidebar-secondary" style="display:none">sections</div>'
        '<button class="search-button">s</button><input type="search">'
        "</body></html>")
    faults = toggle_runs(tmp_path, pages=["book/p.html"], widths=[390])
    assert any("2 search boxes" in f for f in faults), faults
    assert any("primary button did nothing" in f for f in faults), faults
    assert any("secondary button did nothing" in f for f in faults), faults


@needs_browser
def test_sidebars_open_and_close_at_every_width(html_dir):
    faults = toggle_runs(html_dir)
    assert not faults, "\n".join(faults)

