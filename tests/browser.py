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
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

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


async def _crawl(ws_url: str, urls: list[str], settle: float) -> list[PageVisit]:
    from tornado.websocket import websocket_connect

    connection = await websocket_connect(ws_url, max_message_size=64 * 2**20)
    tools = _DevTools(connection)
    target = await tools.call("Target.createTarget", url="about:blank")
    session = (await tools.call("Target.attachToTarget", targetId=target["targetId"],
                                flatten=True))["sessionId"]
    for domain in ("Page", "Runtime", "Network", "Log"):
        await tools.call(f"{domain}.enable", session=session)
    visits = []
    for url in urls:
        tools.events.clear()
        visit = PageVisit(url)
        await tools.call("Page.navigate", session=session, url=url)
        loaded = False
        while not loaded:  # wait for the load event of this navigation
            await tools.drain(0.2)
            loaded = any(e.get("method") == "Page.loadEventFired" for e in tools.events)
        facts = await tools.call("Runtime.evaluate", session=session, expression=PAGE_FACTS_JS,
                                 awaitPromise=True, returnByValue=True)
        visit.facts = json.loads(facts["result"]["value"])
        await tools.drain(settle)
        for event in tools.events:
            if event.get("sessionId") == session:
                _record(visit, event)
        visits.append(visit)
    connection.close()
    return visits


def crawl(urls: list[str], *, settle: float = 0.3, timeout: float = 600.0) -> list[PageVisit]:
    """Visit ``urls`` in one headless Chromium; return what each page did."""
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
            return asyncio.run(asyncio.wait_for(_crawl(ws_url, urls, settle), timeout))
        finally:
            proc.kill()
            proc.wait()


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
