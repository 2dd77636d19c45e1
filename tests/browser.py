"""Headless Chromium over a site served from 127.0.0.1, for the browser tests.

Chromium is started with the flags that keep it off the network by itself, dumps the DOM
after MathJax has had time to typeset, and writes a net log: every URL the page
requested, which the tests check stays on loopback.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlsplit

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--mute-audio",
]
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}


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


def requested_urls(netlog: Path) -> set[str]:
    """Every URL that a page on loopback requested, read from a Chromium net log (JSON).

    Chromium's own background requests (update checks, account probes) carry a network
    isolation key that is not the page's site; they are not the page's doing, and are
    left out.  The page's requests, to any host, carry the loopback site in their key.
    """
    text = netlog.read_text(encoding="utf-8", errors="replace").rstrip().rstrip(",")
    if not text.endswith("}"):  # a log cut short at exit lacks its closing brackets
        text += "]}"
    log = json.loads(text)
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = set()
    for event in log.get("events", []):
        params = event.get("params") or {}
        key = params.get("network_isolation_key", "")
        if event.get("type") == start_job and any(h in key for h in LOOPBACK_HOSTS):
            urls.add(params["url"])
    return urls


def non_loopback(urls) -> list[str]:
    """The http(s)/ws(s) URLs whose host is not a loopback address."""
    bad = []
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.hostname not in LOOPBACK_HOSTS:
            bad.append(url)
    return sorted(bad)


def render(url: str, *, wait_ms: int = 15000, timeout: float = 120.0) -> tuple[str, set[str], str]:
    """Load ``url`` in headless Chromium; return ``(dom, requested urls, console log)``."""
    exe = chromium_path()
    if exe is None:
        raise RuntimeError("Chromium is not installed (Debian package: chromium)")
    with tempfile.TemporaryDirectory() as profile:
        netlog = Path(profile) / "netlog.json"
        proc = subprocess.run(
            [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}/user",
             f"--log-net-log={netlog}", "--enable-logging=stderr", "--v=0",
             f"--virtual-time-budget={wait_ms}", "--dump-dom", url],
            capture_output=True, text=True, timeout=timeout)
        urls = requested_urls(netlog) if netlog.exists() else set()
    return proc.stdout, urls, proc.stderr
