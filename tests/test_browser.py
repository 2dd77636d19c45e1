"""The built site in a real browser: math is typeset offline, nothing leaves loopback."""

import re

import pytest

from browser import chromium_path, non_loopback, render, serve

pytestmark = pytest.mark.skipif(chromium_path() is None,
                                reason="Chromium is not installed (Debian package: chromium)")

# Pages with inline and display math, and the home page.
PAGES = ["book/notation.html", "book/index.html"]


@pytest.fixture(scope="module")
def site(strict_build):
    proc, html = strict_build
    if proc.returncode != 0:
        pytest.fail("the strict build failed; see test_strict_build_has_no_warnings")
    with serve(html) as base:
        yield base


@pytest.mark.parametrize("page", PAGES)
def test_math_is_typeset_and_requests_stay_local(site, page):
    dom, urls, _ = render(f"{site}/{page}")
    assert "<html" in dom, "Chromium returned no DOM"
    assert any(u.startswith(site) for u in urls), "the net log recorded no request to the site"
    assert non_loopback(urls) == []
    if page == "book/notation.html":
        assert dom.count("<mjx-container") >= 10, "MathJax did not typeset the math"
        body = re.sub(r"<script.*?</script>", "", dom, flags=re.S)
        assert "\\(" not in body and "\\[" not in body, "raw TeX delimiters left on the page"


def test_non_loopback_detection():
    urls = {"http://127.0.0.1:8000/a.js", "https://cdn.example.org/mathjax.js",
            "http://localhost/x", "data:text/plain,hi"}
    assert non_loopback(urls) == ["https://cdn.example.org/mathjax.js"]


def test_an_outside_request_is_caught(tmp_path):
    """The detector itself: a page that loads a script from a CDN is reported."""
    (tmp_path / "index.html").write_text(
        '<html><head><script src="https://cdn.example.org/x.js"></script></head>'
        '<body><p>hello</p></body></html>')
    with serve(tmp_path) as base:
        dom, urls, _ = render(f"{base}/index.html", wait_ms=2000)
    assert "hello" in dom
    assert non_loopback(urls) == ["https://cdn.example.org/x.js"]
