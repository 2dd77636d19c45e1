"""The book can be cited and reused: licences for the code and for the text, a citation
file that cffconvert accepts, one version everywhere, and a DOI or arXiv link on every
reference that has one."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pybtex.database import parse_file

from mhacore import __version__

ROOT = Path(__file__).resolve().parents[1]
CFFCONVERT = Path(sys.executable).with_name("cffconvert")
# References with neither a DOI nor an arXiv number, and why
NO_LINK = {
    "watson1964": "Sankhyā, 1964: the journal's issues of then carry no DOI",
    "krogh1995": "NIPS 7 (1995): the proceedings carry no DOI",
    "wand1995": "a 1995 monograph whose reissue's DOI could not be checked offline",
    "fan1996": "a 1996 monograph whose reissue's DOI could not be checked offline",
}


def validate(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(CFFCONVERT), "--validate", "-i", str(path)],
                          capture_output=True, text=True, timeout=120)


def test_citation_file_is_valid_and_a_broken_one_is_not(tmp_path):
    proc = validate(ROOT / "CITATION.cff")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "valid" in proc.stdout
    broken = tmp_path / "CITATION.cff"
    text = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    broken.write_text(re.sub(r"(?ms)^authors:.*?(?=^\w)", "", text), encoding="utf-8")
    assert not re.search(r"^authors:", broken.read_text(encoding="utf-8"), re.M)
    assert validate(broken).returncode != 0  # the schema requires authors


def test_one_version_in_the_package_the_citation_and_the_book():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["version"] == __version__
    assert set(cff["license"]) == {"MIT", "CC-BY-4.0"}
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(rf'^version = "{re.escape(__version__)}"$', pyproject, re.M)
    home = (ROOT / "book" / "index.md").read_text(encoding="utf-8")
    bibtex = home[home.index("## Cite this book"):]
    assert re.search(rf"version = \{{{re.escape(__version__)}\}}", bibtex)


def test_licences_for_the_code_and_for_the_text():
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    text = (ROOT / "LICENSE-TEXT.md").read_text(encoding="utf-8")
    assert "CC BY 4.0" in text and "creativecommons.org/licenses/by/4.0/" in text
    assert 'license = {text = "MIT"}' in (ROOT / "pyproject.toml").read_text()


def test_every_reference_has_a_doi_or_an_arxiv_number_or_a_reason():
    entries = parse_file(str(ROOT / "book" / "references.bib")).entries
    linked = {key for key, e in entries.items()
              if e.fields.get("doi") or e.fields.get("eprint")}
    assert set(entries) - linked == set(NO_LINK)
    for key in linked:
        doi, eprint = entries[key].fields.get("doi"), entries[key].fields.get("eprint")
        assert doi is None or re.fullmatch(r"10\.\d{4,9}/\S+", doi), (key, doi)
        assert eprint is None or re.fullmatch(r"\d{4}\.\d{4,5}", eprint), (key, eprint)
    companions = {e.fields.get("eprint") for e in entries.values()}
    assert {"2603.20328", "2604.00038"} <= companions  # named in the chapters


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_the_install_step_brings_cffconvert():
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "--no-deps \\\n\t\t-r requirements-nodeps.txt" in make
    pins = (ROOT / "requirements-nodeps.txt").read_text(encoding="utf-8")
    assert re.search(r"^cffconvert==\S+$", pins, re.M)


def test_every_page_and_the_pdf_title_page_name_the_licences(html_dir):
    """The footer of every built page names both licences (the PDF's title page is
    checked in tests/test_pdf.py)."""
    pages = sorted(html_dir.glob("book/*.html"))  # the root index.html only redirects
    assert len(pages) >= 10
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert ('class="mhacore-licence">Text, figures and slides: <a href="https://'
                'creativecommons.org/licenses/by/4.0/">CC BY 4.0</a>; code: MIT.') in text, page
    bibliography = (html_dir / "book" / "bibliography.html").read_text(encoding="utf-8")
    assert "2603.20328" in bibliography and "2604.00038" in bibliography
    assert "doi.org/10.1023/A:1010933404324" in bibliography  # Breiman (2001), linked
