"""The built site in a real browser: every page loads, math is typeset offline, no console
errors, nothing leaves loopback, and a page prints to PDF. Internal links and anchors are
checked over the built HTML (no browser needed for that part)."""

from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from browser import chromium_path, crawl, non_loopback, print_to_pdf, serve

needs_chromium = pytest.mark.skipif(
    chromium_path() is None, reason="Chromium is not installed (Debian package: chromium)")


@pytest.fixture(scope="module")
def html_dir(strict_build):
    proc, html = strict_build
    if proc.returncode != 0:
        pytest.fail("the strict build failed; see test_strict_build_has_no_warnings")
    return html


def site_pages(html: Path) -> list[str]:
    """Every page of the site, as paths relative to its root."""
    skip = {"_static", "_sources", "_images", "_sphinx_design_static"}
    return sorted(str(p.relative_to(html)) for p in html.rglob("*.html")
                  if not skip & set(p.relative_to(html).parts))


@pytest.fixture(scope="module")
def visits(html_dir):
    if chromium_path() is None:
        pytest.skip("Chromium is not installed (Debian package: chromium)")
    pages = site_pages(html_dir)
    with serve(html_dir) as base:
        result = crawl([f"{base}/{page}" for page in pages])
    return {page: visit for page, visit in zip(pages, result)}


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


class _LinksAndIds(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        for key in ("href", "src"):
            if attrs.get(key) and (tag != "link" or key == "href"):
                self.links.append(attrs[key])


def test_internal_links_and_anchors_resolve(html_dir):
    parsed = {}
    for page in site_pages(html_dir):
        path = html_dir / page
        parser = _LinksAndIds()
        parser.feed(path.read_text(encoding="utf-8", errors="replace"))
        parsed[path.resolve()] = parser
    broken = []
    for page, parser in parsed.items():
        for link in parser.links:
            parts = urlsplit(link)
            if parts.scheme or link.startswith(("//", "mailto:", "javascript:")):
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(html_dir.resolve())}: {link}")
            elif parts.fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else set()
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{page.relative_to(html_dir.resolve())}: {link} (anchor)")
    assert len(parsed) >= 5
    assert not broken
