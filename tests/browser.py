"""Headless Chromium over a site served from 127.0.0.1, driven through the DevTools protocol.

One browser serves a whole crawl. For every page it records what the page requested
(``Network.requestWillBeSent``), what it logged as an error (console errors, uncaught
exceptions, failed loads) and a few facts read from the rendered DOM once MathJax has
finished typesetting. Chromium is started with the flags that keep its own background
traffic off the network; that traffic is not attached to the page, so only the page's own
requests are seen.

The DevTools websocket is spoken with tornado's client, which the Jupyter stack already
installs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import http.server
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--mute-audio",
]
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}

# Read from the page once MathJax (if any) has typeset it.
PAGE_FACTS_JS = """
(async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  const text = document.body ? document.body.innerText : "";
  return JSON.stringify({
    title: document.title,
    mjx: document.querySelectorAll("mjx-container").length,
    math_nodes: document.querySelectorAll(".math").length,
    raw_tex: /\\\\\\(|\\\\\\[/.test(text),
    mathjax_errors: document.querySelectorAll("mjx-merror").length,
    main: !!document.querySelector("main, article, .bd-article"),
  });
})()
"""


def has_playwright() -> bool:
    """Chromium and the playwright package are both installed."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:  # pragma: no cover - requirements.txt installs it
        return False
    return chromium_path() is not None


@contextlib.contextmanager
def playwright_page(viewport: dict, media: str = "screen"):
    """A Playwright page in Debian's Chromium, ``viewport`` wide, with ``media`` emulated
    (``"screen"`` or ``"print"``); the browser closes when the block ends."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=[
            flag for flag in CHROMIUM_FLAGS if flag != "--headless"])
        try:
            page = browser.new_page(viewport=viewport)
            page.emulate_media(media=media)
            yield page
        finally:
            browser.close()


def chromium_path() -> str | None:
    """The Chromium executable, or None when it is not installed."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the test output clean
        pass


@contextlib.contextmanager
def serve(directory: Path):
    """Serve ``directory`` on 127.0.0.1 at a free port; yield the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def non_loopback(urls) -> list[str]:
    """The http(s)/ws(s) URLs whose host is not a loopback address."""
    bad = []
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.hostname not in LOOPBACK_HOSTS:
            bad.append(url)
    return sorted(bad)


@dataclass
class PageVisit:
    """What one page did in the browser."""

    url: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    facts: dict = field(default_factory=dict)


class _DevTools:
    """A minimal DevTools client: commands with ids, events kept per session."""

    def __init__(self, connection):
        self.connection = connection
        self.ids = itertools.count(1)
        self.events: list[dict] = []

    async def call(self, method, session=None, timeout=60.0, **params):
        call_id = next(self.ids)
        message = {"id": call_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        await self.connection.write_message(json.dumps(message))
        while True:
            raw = await asyncio.wait_for(self.connection.read_message(), timeout)
            if raw is None:
                raise RuntimeError("the DevTools connection closed")
            reply = json.loads(raw)
            if reply.get("id") == call_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    async def drain(self, seconds):
        """Collect events for ``seconds`` (requests and logs that arrive late)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while (left := end - loop.time()) > 0:
            try:
                raw = await asyncio.wait_for(self.connection.read_message(), left)
            except asyncio.TimeoutError:
                return
            if raw is None:
                return
            self.events.append(json.loads(raw))


def _record(visit: PageVisit, event: dict):
    method, params = event.get("method"), event.get("params", {})
    if method == "Network.requestWillBeSent":
        visit.requests.append(params["request"]["url"])
    elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
        args = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
        visit.errors.append(f"console.{params['type']}: {args}")
    elif method == "Runtime.exceptionThrown":
        details = params["exceptionDetails"]
        text = details.get("exception", {}).get("description") or details.get("text")
        visit.errors.append(f"uncaught exception: {text}")
    elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
        entry = params["entry"]
        visit.errors.append(f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}")
    elif method == "Network.loadingFailed" and not params.get("canceled"):
        visit.errors.append(f"failed load: {params.get('errorText')}")


async def _attach(ws_url: str):
    """Open a blank tab over the DevTools websocket; return ``(tools, session)``."""
    from tornado.websocket import websocket_connect

    connection = await websocket_connect(ws_url, max_message_size=64 * 2**20)
    tools = _DevTools(connection)
    target = await tools.call("Target.createTarget", url="about:blank")
    session = (await tools.call("Target.attachToTarget", targetId=target["targetId"],
                                flatten=True))["sessionId"]
    for domain in ("Page", "Runtime", "Network", "Log"):
        await tools.call(f"{domain}.enable", session=session)
    return tools, session


async def _navigate(tools: _DevTools, session: str, url: str) -> None:
    """Load ``url`` in the tab and wait for its load event."""
    await tools.call("Page.navigate", session=session, url=url)
    loaded = False
    while not loaded:  # wait for the load event of this navigation
        await tools.drain(0.2)
        loaded = any(e.get("method") == "Page.loadEventFired" for e in tools.events)


async def _evaluate(tools: _DevTools, session: str, expression: str):
    """The JSON value that the (async) JavaScript ``expression`` returns as a string."""
    reply = await tools.call("Runtime.evaluate", session=session, expression=expression,
                             awaitPromise=True, returnByValue=True)
    return json.loads(reply["result"]["value"])


async def _crawl(ws_url: str, urls: list[str], settle: float) -> list[PageVisit]:
    tools, session = await _attach(ws_url)
    visits = []
    for url in urls:
        tools.events.clear()
        visit = PageVisit(url)
        await _navigate(tools, session, url)
        visit.facts = await _evaluate(tools, session, PAGE_FACTS_JS)
        await tools.drain(settle)
        for event in tools.events:
            if event.get("sessionId") == session:
                _record(visit, event)
        visits.append(visit)
    tools.connection.close()
    return visits


@contextlib.contextmanager
def _chromium():
    """Start headless Chromium with a fresh profile; yield its DevTools websocket URL."""
    exe = chromium_path()
    if exe is None:
        raise RuntimeError("Chromium is not installed (Debian package: chromium)")
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        proc = subprocess.Popen(
            [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            ws_url = None
            for line in proc.stderr:  # Chromium announces its DevTools endpoint on stderr
                match = re.search(r"DevTools listening on (ws://\S+)", line)
                if match:
                    ws_url = match.group(1)
                    break
            if ws_url is None:
                raise RuntimeError("Chromium did not start its DevTools endpoint")
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            yield ws_url
        finally:
            proc.kill()
            proc.wait()


def crawl(urls: list[str], *, settle: float = 0.3, timeout: float = 600.0) -> list[PageVisit]:
    """Visit ``urls`` in one headless Chromium; return what each page did."""
    with _chromium() as ws_url:
        return asyncio.run(asyncio.wait_for(_crawl(ws_url, urls, settle), timeout))


async def _fonts(ws_url: str, url: str, selector: str) -> list[dict]:
    tools, session = await _attach(ws_url)
    await _navigate(tools, session, url)
    for domain in ("DOM", "CSS"):
        await tools.call(f"{domain}.enable", session=session)
    root = await tools.call("DOM.getDocument", session=session)
    node = await tools.call("DOM.querySelector", session=session,
                            nodeId=root["root"]["nodeId"], selector=selector)
    if not node.get("nodeId"):
        raise RuntimeError(f"no element matches {selector!r} on {url}")
    fonts = await tools.call("CSS.getPlatformFontsForNode", session=session,
                             nodeId=node["nodeId"])
    tools.connection.close()
    return fonts["fonts"]


def platform_fonts(url: str, selector: str, *, timeout: float = 120.0) -> list[dict]:
    """The fonts Chromium drew the text of the first ``selector`` element with.

    Each entry has ``familyName`` and ``glyphCount`` (DevTools ``CSS.getPlatformFontsForNode``):
    what was really rendered, fallback fonts included, not what the CSS asked for.
    """
    with _chromium() as ws_url:
        return asyncio.run(asyncio.wait_for(_fonts(ws_url, url, selector), timeout))


SEARCH_RESULTS_JS = """
(async () => {
  for (let i = 0; i < 400; i++) {  // Sphinx's search runs after load; wait for its summary
    const summary = document.querySelector("#search-results .search-summary");
    if (summary && summary.textContent.trim()) { break; }
    await new Promise(resolve => setTimeout(resolve, 50));
  }
  const links = document.querySelectorAll("#search-results ul.search li a");
  return JSON.stringify(Array.from(links, a => a.getAttribute("href")));
})()
"""


async def _search(ws_url: str, url: str) -> list[str]:
    tools, session = await _attach(ws_url)
    await _navigate(tools, session, url)
    hits = await _evaluate(tools, session, SEARCH_RESULTS_JS)
    tools.connection.close()
    return hits


def search_results(search_url: str, *, timeout: float = 120.0) -> list[str]:
    """The result links that the site's own search page lists for ``search.html?q=...``."""
    with _chromium() as ws_url:
        return asyncio.run(asyncio.wait_for(_search(ws_url, search_url), timeout))


def print_to_pdf(url: str, pdf: Path, timeout: float = 120.0) -> Path:
    """Print ``url`` to ``pdf`` with Chromium's own print path (as a reader's Print does)."""
    exe = chromium_path()
    if exe is None:
        raise RuntimeError("Chromium is not installed (Debian package: chromium)")
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                        "--virtual-time-budget=10000", "--no-pdf-header-footer",
                        f"--print-to-pdf={pdf}", url],
                       capture_output=True, text=True, timeout=timeout)
    return pdf


def visit_site(root: Path, folder: str = "") -> dict:
    """``{page: PageVisit}`` for every page of the site in ``root / folder``, served from
    ``root`` (so links to the other edition resolve) and loaded in Chromium."""
    pages = site_pages(root / folder)
    prefix = f"{folder}/" if folder else ""
    with serve(root) as base:
        result = crawl([f"{base}/{prefix}{page}" for page in pages])
    return dict(zip(pages, result))


# --- links over the built HTML (no browser needed) ----------------------------------------

def site_pages(html: Path) -> list[str]:
    """Every page of the site, as paths relative to its root (not the root's redirect to
    the first page, whose favicon request races the redirect)."""
    skip = {"_static", "_sources", "_images", "_sphinx_design_static"}
    return sorted(str(p.relative_to(html)) for p in html.rglob("*.html")
                  if not skip & set(p.relative_to(html).parts)
                  and 'http-equiv="refresh"' not in p.read_text(encoding="utf-8").lower())


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
                self.links.append((attrs[key], "hreflang" in attrs))


def _parse(path: str) -> _LinksAndIds:
    parser = _LinksAndIds()
    parser.feed(Path(path).read_text(encoding="utf-8", errors="replace"))
    return parser


def broken_links(site: Path, pages: list[str], *, other_edition: bool = False) -> list[str]:
    """Internal links and anchors on ``pages`` (relative to ``site``) that lead nowhere.

    Paths are joined as a browser joins them, without resolving symbolic links, so a site
    assembled from links (an edition in a sub-folder) is checked as it will be served.
    Links to the other language edition (``hreflang``) are followed only when
    ``other_edition`` is true, that is when the site holds both editions.
    """
    parsed: dict[str, _LinksAndIds] = {}

    def page(path: str) -> _LinksAndIds:
        if path not in parsed:
            parsed[path] = _parse(path)
        return parsed[path]

    broken = []
    for name in pages:
        path = os.path.join(str(site), name)
        for link, to_other_edition in page(path).links:
            parts = urlsplit(link)
            if (parts.scheme or link.startswith(("//", "mailto:", "javascript:"))
                    or (to_other_edition and not other_edition)):
                continue
            target = (os.path.normpath(os.path.join(os.path.dirname(path), unquote(parts.path)))
                      if parts.path else path)
            if os.path.isdir(target):
                target = os.path.join(target, "index.html")
            if target in {os.path.normpath(os.path.join(str(site), pdf))
                          for pdf in ("book.pdf", "book-zh.pdf")}:
                continue  # the whole-book PDFs: `make pdf` and `make pdf-zh` put them there
                # (tests/test_pdf.py, tests/test_zh.py)
            if not os.path.exists(target):
                broken.append(f"{name}: {link}")
            elif parts.fragment and target.endswith(".html"):
                if unquote(parts.fragment) not in page(target).ids:
                    broken.append(f"{name}: {link} (anchor)")
    return broken
