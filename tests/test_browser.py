"""The built site in a real browser: every page loads, math is typeset offline, no console
errors, nothing leaves loopback, and a page prints to PDF. Internal links and anchors are
checked over the built HTML (no browser needed for that part)."""

import pytest

from browser import (broken_links, chromium_path, crawl, non_loopback, print_to_pdf, serve,
                     site_pages, visit_site)

needs_chromium = pytest.mark.skipif(
    chromium_path() is None, reason="Chromium is not installed (Debian package: chromium)")


@pytest.fixture(scope="module")
def visits(html_dir):
    if chromium_path() is None:
        pytest.skip("Chromium is not installed (Debian package: chromium)")
    return visit_site(html_dir)


@needs_chromium
def test_every_page_loads_without_console_errors(visits):
    assert len(visits) >= 5
    broken = {page: v.errors for page, v in visits.items() if v.errors}
    assert not broken
    assert all(v.facts["main"] for page, v in visits.items() if page != "index.html")


@needs_chromium
def test_math_is_typeset_on_every_page_that_has_math(visits):
    pages_with_math = {p: v.facts for p, v in visits.items() if v.facts["math_nodes"]}
    assert "book/notation.html" in pages_with_math
    untypeset = {p: f for p, f in pages_with_math.items()
                 if f["mjx"] == 0 or f["raw_tex"] or f["mathjax_errors"]}
    assert not untypeset
    assert visits["book/notation.html"].facts["mjx"] >= 20


@needs_chromium
def test_no_page_requests_anything_outside_loopback(visits):
    assert all(v.requests for v in visits.values()), "the crawl recorded no request"
    outside = {p: non_loopback(v.requests) for p, v in visits.items() if non_loopback(v.requests)}
    assert not outside


@needs_chromium
def test_a_page_prints_to_pdf(html_dir, tmp_path):
    with serve(html_dir) as base:
        pdf = print_to_pdf(f"{base}/book/notation.html", tmp_path / "notation.pdf")
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF")
    assert data.count(b"/Type /Page") - data.count(b"/Type /Pages") >= 1


@needs_chromium
def test_the_detectors_catch_an_outside_request_and_a_console_error(tmp_path):
    (tmp_path / "index.html").write_text(
        '<html><head><script src="https://cdn.example.org/x.js"></script></head>'
        '<body><main>hello</main><script>console.error("boom")</script></body></html>')
    with serve(tmp_path) as base:
        (visit,) = crawl([f"{base}/index.html"])
    assert non_loopback(visit.requests) == ["https://cdn.example.org/x.js"]
    assert any("boom" in e for e in visit.errors)


def test_non_loopback_filter():
    urls = {"http://127.0.0.1:8000/a.js", "https://cdn.example.org/mathjax.js",
            "http://localhost/x", "data:text/plain,hi"}
    assert non_loopback(urls) == ["https://cdn.example.org/mathjax.js"]


def test_internal_links_and_anchors_resolve(html_dir):
    pages = site_pages(html_dir)
    assert len(pages) >= 5
    assert not broken_links(html_dir, pages)


def test_language_switch_links_to_the_same_page_of_the_other_edition(html_dir):
    """Each English page links to its counterpart under ``zh/`` (followed in test_zh.py)."""
    from bs4 import BeautifulSoup

    page = "book/01-nadaraya-watson.html"
    soup = BeautifulSoup((html_dir / page).read_text(encoding="utf-8"), "html.parser")
    switch = soup.select_one(".language-switch a[hreflang]")
    assert switch is not None and switch["hreflang"] == "zh-CN"
    assert switch["href"] == "../zh/book/01-nadaraya-watson.html"
