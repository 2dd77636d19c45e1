"""The package outside a clone: a wheel with the runtime dependencies only and extras for
the rest, no exercise answer inside it, and chapter 1's reader notebook running from it
outside the repository (tests/builds.py builds and runs it in the background)."""

import json
import zipfile
from email.parser import Parser

import nbformat
import pytest

from mhacore import __version__
from mhacore.editions.reader import INSTALL_CELL, READER_KEY

RUNTIME = {"numpy", "scipy", "threadpoolctl", "torch", "tqdm"}


@pytest.fixture(scope="module")
def wheel_run():
    from builds import BUILDS

    return BUILDS.result("wheel_run")


def metadata(wheel) -> "email.message.Message":  # noqa: F821
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return Parser().parsestr(archive.read(name).decode())


def test_the_wheel_needs_the_runtime_only_and_offers_extras(wheel_run):
    meta = metadata(wheel_run["wheel"])
    requires = meta.get_all("Requires-Dist")
    plain = {r.split(";")[0].strip() for r in requires if "extra ==" not in r}
    assert plain == RUNTIME
    assert set(meta.get_all("Provides-Extra")) == {"exercises", "book", "course"}
    book = {r.split(";")[0].strip() for r in requires if 'extra == "book"' in r}
    assert {"sympy", "matplotlib", "scikit-learn", "statsmodels"} <= book
    assert meta["Version"] == __version__
    assert {"LICENSE", "LICENSE-TEXT.md"} <= set(meta.get_all("License-File"))
    size = wheel_run["wheel"].stat().st_size
    print(f"{wheel_run['wheel'].name}: {size / 1024:.0f} KiB; Requires-Dist: {requires}")
    with zipfile.ZipFile(wheel_run["wheel"]) as archive:
        names = archive.namelist()
    assert "mhacore/exercise_seals.json" in names
    assert not [n for n in names if n.startswith(("tests/", "tools/", "book/"))]


def test_no_answer_is_in_the_wheel(wheel_run):
    from test_exercises import BY_LABEL, _answer_texts

    texts = {t for answer in BY_LABEL.values()
             for value in [answer.reference] + [w for w, _ in answer.mistakes]
             for t in _answer_texts(value)}
    with zipfile.ZipFile(wheel_run["wheel"]) as archive:
        found = [(name, t) for name in archive.namelist()
                 for content in [archive.read(name).decode("utf-8", "replace")]
                 for t in texts if t in content]
    assert not found, found[:5]


def test_chapter_1_runs_from_the_wheel_outside_the_repository(wheel_run):
    proc = wheel_run["process"]
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    nb = nbformat.read(wheel_run["executed"], as_version=4)
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    assert first_code.metadata.get(READER_KEY)
    assert first_code.source == INSTALL_CELL.format(version=__version__)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"], \
        [o for o in outputs if o.output_type == "error"][:1]
    assert not first_code.get("outputs")  # mhacore was found: nothing was installed
    where = nb.cells[-1].outputs[0]["text"]
    assert where.startswith("mhacore from " + str(wheel_run["site"])), where
    assert "Your turn (ex-1-1)" in json.dumps(outputs)
    print(f"chapter 1's reader notebook from the wheel: {wheel_run['seconds']:.0f} s")
