"""Publishing: the workflow lints clean and runs the README's commands, the repository
address lives in one place, buttons that need a network are off unless publishing, and
every page names the version, commit and date it was built from."""

import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "book.yml"
RELEASE = ROOT / ".github" / "workflows" / "release.yml"
ACTIONLINT = shutil.which("actionlint", path=str(Path(sys.executable).parent)) \
    or shutil.which("actionlint")
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import editions  # noqa: E402  (the book's own Sphinx extension)

needs_actionlint = pytest.mark.skipif(ACTIONLINT is None,
                                      reason="actionlint is not installed (requirements.txt)")


@needs_actionlint
@pytest.mark.parametrize("workflow", [WORKFLOW, RELEASE], ids=["book", "release"])
def test_workflow_passes_actionlint(workflow):
    proc = subprocess.run([ACTIONLINT, str(workflow)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_version_tag_builds_checks_and_publishes_the_package():
    flow = yaml.safe_load(RELEASE.read_text(encoding="utf-8"))
    assert flow[True]["push"]["tags"] == ["v*"]  # YAML reads the key `on` as True
    build, publish = flow["jobs"]["build"], flow["jobs"]["publish"]
    runs = "\n".join(s.get("run", "") for s in build["steps"])
    assert "python -m build" in runs and "twine check --strict dist/*" in runs
    assert 'test "v${version}" = "${GITHUB_REF_NAME}"' in runs
    assert publish["needs"] == "build" and publish["permissions"] == {"id-token": "write"}
    assert any(s.get("uses", "").startswith("pypa/gh-action-pypi-publish")
               for s in publish["steps"])


@needs_actionlint
def test_actionlint_catches_a_broken_workflow(tmp_path):
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text("on: push\njobs:\n  x:\n    runs-on: ubuntu-24.04\n    steps:\n"
                   "      - run: echo ${{ github.nonexistent_context }}\n")
    proc = subprocess.run([ACTIONLINT, str(bad)], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0


def test_workflow_runs_the_readme_commands_and_publishes_site_and_pdf():
    flow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    steps = [s for job in flow["jobs"].values() for s in job.get("steps", [])]
    runs = [s.get("run", "") for s in steps]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for command in ("make test", "make book", "make pdf"):
        assert command in runs, command
        assert command in readme, f"the README does not name {command}"
    assert readme.index("make test") < readme.index("make pdf")
    upload = next(s for s in steps if "upload-pages-artifact" in s.get("uses", ""))
    assert upload["with"]["path"] == "_build/html"
    assert "_build/html/book.pdf" in (ROOT / "Makefile").read_text()  # the PDF rides along
    assert any("deploy-pages" in s.get("uses", "") for s in steps)


def test_repository_address_is_written_once():
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    url = config["repository"]["url"]
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True,
                             text=True).stdout.split()
    holders = [f for f in tracked if (ROOT / f).is_file() and not f.startswith("tests/")
               and url in (ROOT / f).read_text(encoding="utf-8", errors="ignore")]
    assert holders == ["_config.yml"]


def test_network_buttons_are_off_by_default():
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    html, launch = config["html"], config["launch_buttons"]
    assert not html["use_repository_button"] and not html["use_issues_button"]
    assert not launch.get("binderhub_url") and not launch.get("thebe")
    assert not launch.get("colab_url") and not launch.get("jupyterhub_url")
    assert html["use_download_button"]


def fake_app(tmp_path, mode="cache"):
    config = SimpleNamespace(nb_execution_mode=mode, nb_execution_cache_path="",
                             html_theme_options={"repository_url": "https://example.org/a/b",
                                                 "use_repository_button": False,
                                                 "use_issues_button": False},
                             myst_substitutions={}, release="", version="",
                             html_static_path=[], latex_elements={},
                             latex_additional_files=[], latex_use_xindy=True,
                             language=None)
    return SimpleNamespace(confdir=str(ROOT)), config


def test_colab_and_binder_open_the_reader_notebook_only_when_publishing(monkeypatch):
    app = SimpleNamespace(mhacore_readers={"book/01-x": object()})
    monkeypatch.delenv(editions.REPOSITORY_ENV, raising=False)
    context = {"header_buttons": []}
    editions._launch_buttons(app, "book/01-x", None, context, None)
    assert context["header_buttons"] == []  # off by default
    monkeypatch.setenv(editions.REPOSITORY_ENV, "https://github.com/someone/book")
    editions._launch_buttons(app, "book/01-x", None, context, None)
    urls = [b["url"] for b in context["header_buttons"][0]["buttons"]]
    assert urls == [
        "https://colab.research.google.com/github/someone/book/blob/notebooks/01-x.ipynb",
        "https://mybinder.org/v2/gh/someone/book/notebooks?labpath=01-x.ipynb"]
    other = {"header_buttons": []}
    editions._launch_buttons(app, "book/ledger", None, other, None)  # not a chapter
    assert other["header_buttons"] == []
    assert editions.launch_links("https://gitlab.com/someone/book", "01-x") == []
    # the workflow publishes what the buttons open: the reader notebooks on that branch
    flow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    job = flow["jobs"]["notebooks"]
    runs = "\n".join(s.get("run", "") for s in job["steps"])
    assert "mhacore teach reader --out notebooks" in runs
    assert f"git init -q -b {editions.NOTEBOOKS_BRANCH}" in runs
    assert job["permissions"] == {"contents": "write"} and "refs/heads/main" in job["if"]


def test_environment_overrides_repository_and_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(editions.REPOSITORY_ENV, "https://github.com/someone/book")
    monkeypatch.setenv(editions.CACHE_ENV, str(tmp_path / "cache"))
    app, config = fake_app(tmp_path)
    editions._configure(app, config)
    theme = config.html_theme_options
    assert theme["repository_url"] == "https://github.com/someone/book"
    assert theme["use_repository_button"] and theme["use_issues_button"]
    assert config.myst_substitutions["repository_url"] == "https://github.com/someone/book"
    assert config.nb_execution_cache_path == str((tmp_path / "cache").resolve())
    monkeypatch.delenv(editions.REPOSITORY_ENV)
    app, config = fake_app(tmp_path)
    editions._configure(app, config)
    assert not config.html_theme_options["use_repository_button"]
    assert re.fullmatch(r"\d+\.\d+\.\d+, commit \w+\+?, built \d{4}-\d\d-\d\d", config.release)


def test_cache_is_emptied_when_the_code_changes(tmp_path):
    cache = editions.prepare_cache(tmp_path / "c", "aaaa")
    (cache / "global.db").write_text("executed by code aaaa")
    assert (editions.prepare_cache(tmp_path / "c", "aaaa") / "global.db").exists()
    assert not (editions.prepare_cache(tmp_path / "c", "bbbb") / "global.db").exists()


def test_every_page_carries_version_commit_and_date(strict_build):
    from mhacore import __version__

    proc, html = strict_build
    assert proc.returncode == 0
    from mhacore.editions.reader import toc_pages

    pages = [html / p.relative_to(ROOT).with_suffix(".html") for p in toc_pages(ROOT)]
    stamp = re.compile(rf"mhacore {re.escape(__version__)} · commit \w+\+? · built "
                       r"\d{4}-\d\d-\d\d")
    assert len(pages) >= 5
    assert not [p.name for p in pages if not stamp.search(p.read_text(encoding="utf-8"))]
    pdf_link = re.compile(r'href="(?:\.\./)*book\.pdf"')  # the download menu's book PDF
    assert not [p.name for p in pages if not pdf_link.search(p.read_text(encoding="utf-8"))]
    assert (html / "CHANGELOG.html").is_file()
    changelog = (html / "CHANGELOG.html").read_text(encoding="utf-8")
    assert "Keep a Changelog" in changelog and "Unreleased" in changelog
