"""The test session's long builds, run one after another on a background thread.

The strict build, the student site, the two PDFs, the Chinese site and the executed
reader notebooks are subprocesses that keep one core busy for minutes each. As soon as
collection shows that a test needs one of them, ``tests/conftest.py`` starts it here,
after the builds it reads from (the strict build fills the execution cache the others
reuse), and moves the tests that read the builds to the end of the run. The unit tests
and the chapters under nbval run on the main thread meanwhile, so two cores stay busy.

A fixture asks for a build with ``BUILDS.result(name)``: it waits for a build already
under way, or starts it (with what it needs) when the session did not. A build that
raises makes every fixture that asks for it raise the same error.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
BUILD_COMMAND = ["build", "-W", "-n", "--keep-going", "--all"]
CACHE_ENV = "MHACORE_BOOK_CACHE"  # read by book/_ext/editions.py


class Builds:
    """Named builds that run in the order they are asked for, on one worker thread."""

    def __init__(self):
        self._jobs = {}  # name -> (function, names of the builds it reads)
        self._futures: dict[str, Future] = {}
        self._lock = threading.RLock()
        self._executor = None
        self._processes = set()
        self._folder = None
        self.stopped = False
        self.timings: dict[str, tuple[float, float]] = {}  # name -> (start, end), monotonic

    def job(self, name, *, after=()):
        """Register a build: ``@BUILDS.job("pdf", after=["strict_build"])``."""
        def register(function):
            self._jobs[name] = (function, tuple(after))
            return function
        return register

    def start(self, name) -> Future:
        """The build's future; starts it (after what it reads) if it is not started."""
        with self._lock:
            if name not in self._futures:
                function, after = self._jobs[name]
                for earlier in after:
                    self.start(earlier)
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(1, thread_name_prefix="build")
                self._futures[name] = self._executor.submit(self._timed, name, function)
            return self._futures[name]

    def _timed(self, name, function):
        start = time.monotonic()
        try:
            return function()
        finally:
            self.timings[name] = start, time.monotonic()

    def result(self, name):
        return self.start(name).result()

    def folder(self, name) -> Path:
        """A new empty folder for a build's output, removed when the session ends."""
        with self._lock:
            if self._folder is None:
                self._folder = Path(tempfile.mkdtemp(prefix="mhacore-builds-"))
            path = self._folder / name
            path.mkdir()
            return path

    def run(self, args, *, timeout, env=None, cwd=None) -> subprocess.CompletedProcess:
        """``subprocess.run(args, capture_output=True, text=True)`` that ``stop`` can
        end: the command runs in a process group of its own (its kernels included)."""
        if self.stopped:
            raise RuntimeError("the test session ended before this build started")
        proc = subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
                                start_new_session=True, preexec_fn=_die_with_parent)
        with self._lock:
            self._processes.add(proc)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.communicate()
            raise
        finally:
            with self._lock:
                self._processes.discard(proc)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def stop(self):
        """End the session's builds: drop those not started, kill those running, and
        remove their folders."""
        self.stopped = True
        with self._lock:
            if self._executor is not None:
                self._executor.shutdown(wait=False, cancel_futures=True)
            for proc in list(self._processes):
                _kill_group(proc)
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)


def _die_with_parent():
    """In the child, before it runs: be killed when the thread that started it goes, so
    a test run that is killed (SIGTERM, a CI timeout) leaves no build behind; its kernels
    notice their parent is gone and exit too."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: stop() still ends what it can
        pass


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


BUILDS = Builds()


def jupyter_book(*args, cwd=None, timeout=1500, cache=None, env=None):
    """Run the venv's ``jupyter-book`` with ``args``; return the completed process.

    ``cache`` is the jupyter-cache folder the build executes into and reads from."""
    exe = Path(sys.executable).with_name("jupyter-book")
    env = dict(os.environ, **(env or {}))
    if cache is not None:
        env[CACHE_ENV] = str(cache)
    return BUILDS.run([exe, *args], cwd=cwd, timeout=timeout, env=env)


# --- the builds, in the order the tests at the end of the run read them -----------------

@BUILDS.job("book_cache")
def book_cache():
    """The one jupyter-cache of the session: the strict build executes every chapter
    into it, and every other edition the tests build reads it."""
    return BUILDS.folder("jupyter-cache")


@BUILDS.job("strict_build", after=["book_cache"])
def strict_build():
    """The whole book, built strictly: ``(process, html folder)``."""
    out = BUILDS.folder("strict-build")
    proc = jupyter_book(*BUILD_COMMAND, "--path-output", out, ROOT,
                        cache=BUILDS.result("book_cache"))
    return proc, out / "_build" / "html"


def built_html():
    """The strict build's HTML folder; raises when that build failed."""
    proc, html = BUILDS.result("strict_build")
    if proc.returncode != 0:
        raise RuntimeError("the strict build failed; see test_strict_build_has_no_warnings")
    return html


@BUILDS.job("student_site", after=["strict_build"])
def student_site():
    """``make book-student``'s build from the session's execution cache."""
    out = BUILDS.folder("student-build")
    proc = jupyter_book(*BUILD_COMMAND, "--path-output", out, ROOT, cwd=ROOT, timeout=1800,
                        cache=BUILDS.result("book_cache"), env={"MHACORE_EDITION": "student"})
    return proc, out / "_build" / "html"


@BUILDS.job("pdf", after=["strict_build"])
def pdf():
    """The English PDF beside the strict build: ``(process, latex folder)``."""
    out = built_html().parent.parent
    proc = jupyter_book("build", "-W", "-n", "--keep-going", "--builder", "pdflatex",
                        "--path-output", out, ROOT, cache=BUILDS.result("book_cache"))
    return proc, out / "_build" / "latex"


@BUILDS.job("reader_runs")
def reader_runs():
    """``teach reader``'s notebooks, each executed in a plain kernel in a folder of its
    own (not the book's): ``(written folder, executed folder, process)``."""
    from mhacore.editions.teach import generate

    written = generate("reader", BUILDS.folder("reader"), ROOT)
    executed = BUILDS.folder("reader-executed")
    proc = BUILDS.run([sys.executable, TESTS / "run_notebooks.py", written, executed,
                       BUILDS.folder("reader-cwd")], timeout=1800)
    return written, executed, proc


@BUILDS.job("wheel_run")
def wheel_run():
    """The package as a reader installs it: the wheel built, installed without its
    dependencies into a folder of its own, and chapter 1's reader notebook run outside
    the repository with only that folder added to the environment's path.

    Returns ``{"wheel", "site", "executed", "process", "seconds"}``."""
    import time

    from mhacore.editions.teach import generate

    # from a copy of what the wheel is made of: setuptools writes build/ beside the source
    source = BUILDS.folder("wheel-source")
    for name in ("pyproject.toml", "README.md", "LICENSE", "LICENSE-TEXT.md"):
        shutil.copy(ROOT / name, source)
    shutil.copytree(ROOT / "mhacore", source / "mhacore",
                    ignore=shutil.ignore_patterns("__pycache__"))
    dist = BUILDS.folder("dist")
    build = BUILDS.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                        "--no-build-isolation", "--quiet", "-w", dist, source], timeout=600)
    if build.returncode != 0:
        raise RuntimeError("pip wheel failed:\n" + build.stdout + build.stderr)
    wheel = next(dist.glob("mhacore-*.whl"))
    site = BUILDS.folder("site-packages")
    install = BUILDS.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet",
                          "--target", site, wheel], timeout=600)
    if install.returncode != 0:
        raise RuntimeError("pip install failed:\n" + install.stdout + install.stderr)
    written = generate("reader", BUILDS.folder("wheel-reader"), ROOT)
    notebooks = BUILDS.folder("wheel-notebooks")
    chapter = next(written.glob("01-*.ipynb"))
    (notebooks / chapter.name).write_bytes(chapter.read_bytes())
    executed = BUILDS.folder("wheel-executed")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)  # before site-packages, where the clone's copy is
    start = time.perf_counter()
    proc = BUILDS.run([sys.executable, TESTS / "run_notebooks.py", notebooks, executed,
                       BUILDS.folder("wheel-cwd"), "--probe",
                       "import mhacore; print('mhacore from', mhacore.__file__)"],
                      timeout=1200, env=env, cwd=BUILDS.folder("wheel-outside"))
    return {"wheel": wheel, "site": site, "executed": executed / chapter.name,
            "process": proc, "seconds": time.perf_counter() - start}


@BUILDS.job("zh_site", after=["strict_build"])
def zh_site():
    """Both editions as published: the English site, and the Chinese one in its ``zh/``.

    Returns ``(process, site)``. The English pages are linked in, not copied; the zh build
    reads the strict English build's executed notebooks."""
    html = built_html()
    site = BUILDS.folder("editions")
    for entry in html.iterdir():
        (site / entry.name).symlink_to(entry)
    proc = BUILDS.run([sys.executable, ROOT / "tools" / "i18n.py", "html",
                       "--out", site / "zh", "--english-root", html.parent.parent],
                      cwd=ROOT, timeout=1500,
                      env=dict(os.environ, **{CACHE_ENV: str(BUILDS.result("book_cache"))}))
    return proc, site


@BUILDS.job("zh_pdf", after=["strict_build"])
def zh_pdf():
    """The Chinese book as one PDF: ``(process, pdf path)``."""
    html = built_html()
    out = BUILDS.folder("zh-pdf")
    proc = BUILDS.run([sys.executable, ROOT / "tools" / "i18n.py", "pdf",
                       "--latex-out", out / "latex", "--pdf", out / "book-zh.pdf",
                       "--english-root", html.parent.parent], cwd=ROOT, timeout=1500,
                      env=dict(os.environ, **{CACHE_ENV: str(BUILDS.result("book_cache"))}))
    return proc, out / "book-zh.pdf"


# fixture name -> the build it reads; a collected test that uses one of these fixtures
# starts its build at once and runs at the end of the session
FIXTURE_BUILDS = {
    "book_cache": "book_cache",
    "strict_build": "strict_build",
    "html_dir": "strict_build",
    "student_site": "student_site",
    "pdf": "pdf",
    "reader_runs": "reader_runs",
    "editions": "zh_site",
    "zh_pdf": "zh_pdf",
    "wheel_run": "wheel_run",
}
