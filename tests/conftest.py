"""The unit tests' Hypothesis profile (DESIGN.md house rule 10: reproducible in CI), and
the session's long builds, started in the background (tests/builds.py)."""

import json
import os

from hypothesis import settings

# Triton kernels (mhacore.nw_triton) run through Triton's CPU interpreter in the test session
# (tests/test_nw_triton.py). Triton makes that choice when it is first imported, so it is set
# here, before any test module or doctest imports it; nw_estimate hands only CUDA tensors to
# Triton, so nothing else changes on the CPU. An explicit TRITON_INTERPRET=0 is respected.
os.environ.setdefault("TRITON_INTERPRET", "1")

# tools/exercise_answers.py holds the exercises' answers in the clear (not in the package)
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

settings.register_profile("ci", deadline=None, derandomize=True, database=None, max_examples=40)
settings.load_profile("ci")


# --- the long builds: started in the background, read at the end (tests/builds.py) ------

import time  # noqa: I001  (after the hypothesis profile above, as before)

import pytest

from builds import BUILD_COMMAND, BUILDS, FIXTURE_BUILDS, ROOT, built_html, jupyter_book


_SESSION_START = time.monotonic()
_READS_BUILD: dict[str, bool] = {}  # test id -> whether it reads a build
_EARLY_DONE: list[float] = []  # when the last test that reads no build finished


def _skipped(item) -> bool:
    return any(mark.args and mark.args[0] is True for mark in item.iter_markers("skipif"))


def _builds_read(item) -> list[str]:
    names = getattr(item, "fixturenames", ())
    return [FIXTURE_BUILDS[f] for f in names if f in FIXTURE_BUILDS]


def pytest_collection_modifyitems(session, config, items):
    """Tests that read a build go last, in their order; the rest run while it builds."""
    early = [item for item in items if not _builds_read(item)]
    _READS_BUILD.update({item.nodeid: bool(_builds_read(item)) for item in items})
    items[:] = early + [item for item in items if _builds_read(item)]


def pytest_collection_finish(session):
    if session.config.option.collectonly:
        return
    for item in session.items:
        if not _skipped(item):
            for name in _builds_read(item):
                BUILDS.start(name)


def pytest_runtest_logfinish(nodeid, location):
    if not _READS_BUILD.get(nodeid, True):
        _EARLY_DONE[:] = [time.monotonic()]


def pytest_sessionfinish(session):
    BUILDS.stop()


def pytest_terminal_summary(terminalreporter):
    """Where the run's time went: each background build's start and end, and when the
    tests that read no build were done (the two cores' timelines), in seconds from the
    start of the session."""
    if not BUILDS.timings:
        return
    write = terminalreporter.write_line
    terminalreporter.section("timeline (s from session start)")
    for name, (start, end) in sorted(BUILDS.timings.items(), key=lambda kv: kv[1][0]):
        write(f"build {name:<14} {start - _SESSION_START:7.0f} -> {end - _SESSION_START:7.0f}"
              f"  ({end - start:.0f} s)")
    if _EARLY_DONE:
        write(f"tests that read no build done at {_EARLY_DONE[0] - _SESSION_START:.0f}")
    write(f"session end {time.monotonic() - _SESSION_START:.0f}")


@pytest.fixture(scope="session")
def editions(html_dir):
    """Both editions as published: the English site, and the Chinese one in its ``zh/``
    (``tests/builds.py``). Returns ``(process, site)``."""
    return BUILDS.result("zh_site")


@pytest.fixture(scope="session")
def zh_html(editions):
    """The Chinese site's folder (``zh/`` of the published site)."""
    proc, site = editions
    if proc.returncode != 0:
        pytest.fail("the zh build failed; see tests/test_zh.py::test_zh_build_is_strict")
    return site / "zh"


@pytest.fixture(scope="session")
def book_result():
    """``theorems.run(theorem_id, scale="book")`` at the registered seed, run once per
    session however many tests read it (a result is a frozen record; patched runs call
    ``theorems.run`` themselves)."""
    from functools import cache

    from mhacore import theorems

    return cache(lambda theorem_id: theorems.run(theorem_id, scale="book"))


@pytest.fixture(scope="session")
def book_tools():
    """The repository root, the strict build's arguments and a ``jupyter-book`` runner."""
    return ROOT, BUILD_COMMAND, jupyter_book


@pytest.fixture(scope="session")
def book_cache():
    """The session's jupyter-cache folder (``tests/builds.py``)."""
    return BUILDS.result("book_cache")


@pytest.fixture(scope="session")
def strict_build():
    """``(process, html folder)`` of the whole book built strictly, once per session;
    the tests decide what counts as failure."""
    return BUILDS.result("strict_build")


@pytest.fixture(scope="session")
def html_dir(strict_build):
    """The strict build's HTML folder; fails the test when that build failed."""
    try:
        return built_html()
    except RuntimeError as error:
        pytest.fail(str(error))


@pytest.fixture(scope="session")
def reader_runs():
    """``(written, executed, process)``: ``teach reader``'s notebooks, and each executed
    in a plain kernel in a folder of its own; fails the test when one could not run."""
    written, executed, proc = BUILDS.result("reader_runs")
    if proc.returncode != 0:
        pytest.fail("running the reader notebooks failed:\n"
                    + (proc.stdout + proc.stderr)[-5000:])
    return written, executed, proc


@pytest.fixture
def refuses_spoiled_unit(tmp_path):
    """Check that ``run(out=..., resume=True)`` refuses a report whose unit ``key`` was
    spoiled by ``spoil``, with ``pattern``, and leaves the file as it was."""
    from mhacore import sweeps

    def check(run, key, spoil, pattern):
        out = tmp_path / "spoiled.json"
        run(out=out, log=None)
        report = json.loads(out.read_text())
        spoil(report["units"][key])
        out.write_text(json.dumps(report))
        before = out.read_bytes()
        with pytest.raises(sweeps.ResumeRefused, match=pattern):
            run(out=out, resume=True, log=None)
        assert out.read_bytes() == before

    return check
