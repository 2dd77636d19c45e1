"""Book-level checks: the strict build passes, its printed outputs fit the page, and a
failing cell fails both commands."""

import json
import re
import shutil
import subprocess
import sys
import textwrap

import pytest


CHAPTER_HEADER = textwrap.dedent("""\
    ---
    jupytext:
      text_representation:
        extension: .md
        format_name: myst
        format_version: 0.13
        jupytext_version: 1.19.6
    kernelspec:
      display_name: Python 3 (ipykernel)
      language: python
      name: python3
    ---
    """)


def test_strict_build_has_no_warnings(strict_build):
    proc, html = strict_build
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    assert "WARNING:" not in log, [line for line in log.splitlines() if "WARNING:" in line]
    assert (html / "index.html").is_file()
    assert (html / "_static" / "mathjax" / "tex-chtml.js").is_file()


def test_every_toc_page_is_built(strict_build, book_tools):
    proc, html = strict_build
    ROOT, _, _ = book_tools
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [c["file"] for part in toc["parts"] for c in part["chapters"]]
    missing = [f for f in files if not (html / f"{f}.html").is_file()]
    assert not missing


OUTPUT_WIDTH = 80  # what the PDF and the page show without wrapping a line
# the warnings module's format: "path:line: SomeWarning: message"
WARNING = re.compile(r"\b[A-Z]\w*Warning: ")


def printed_outputs(notebook):
    """``(cell index, text)`` of every stream and ``text/plain`` output of an executed
    notebook (a dict read from its JSON)."""
    for i, cell in enumerate(notebook["cells"]):
        for out in cell.get("outputs", []):
            text = (out.get("text") if out["output_type"] == "stream"
                    else out.get("data", {}).get("text/plain"))
            if text is not None:
                yield i, "".join(text) if isinstance(text, list) else text


def output_faults(notebook):
    """Lines wider than ``OUTPUT_WIDTH`` and Python warnings in a notebook's outputs."""
    faults = []
    for i, text in printed_outputs(notebook):
        faults += [f"cell {i}: {len(line)} columns: {line}" for line in text.splitlines()
                   if len(line) > OUTPUT_WIDTH]
        faults += [f"cell {i}: a warning: {line}" for line in text.splitlines()
                   if WARNING.search(line)]
    return faults


def test_output_faults_finds_long_lines_and_warnings():
    def notebook(*outputs):
        return {"cells": [{"cell_type": "code", "outputs": list(outputs)}]}

    fine = notebook({"output_type": "stream", "name": "stdout", "text": "x" * 80 + "\n"},
                    {"output_type": "execute_result",
                     "data": {"text/plain": ["(1,\n", " 2)"]}})
    assert output_faults(fine) == []
    wide = notebook({"output_type": "display_data", "data": {"text/plain": "y" * 81}})
    assert output_faults(wide) == [f"cell 0: 81 columns: {'y' * 81}"]
    warned = notebook({"output_type": "stream", "name": "stderr", "text":
                       "/x/_methods.py:219: RuntimeWarning: Degrees of freedom <= 0\n"})
    assert len(output_faults(warned)) == 1 and "a warning" in output_faults(warned)[0]


def test_printed_outputs_fit_the_page_and_carry_no_warnings(html_dir):
    """Every executed page of the strict build: no printed line over 80 columns (the
    PDF breaks longer ones with continuation marks), and no Python warning."""
    executed = sorted((html_dir.parent / "jupyter_execute").rglob("*.ipynb"))
    assert len(executed) >= 10, executed  # 8 chapters, environment, ledger
    faults = [f"{path.name} {fault}" for path in executed
              for fault in output_faults(json.loads(path.read_text(encoding="utf-8")))]
    assert not faults, "\n".join(faults)


SELF_CHECK = re.compile(r"""check\(\s*["'](ex-\d+-\d+)["']\s*,\s*answer""")


def self_checks_shown(html, root):
    """``{chapter: (labels self-checked, page text)}`` of a built site's chapters."""
    from bs4 import BeautifulSoup

    from mhacore.editions.reader import chapter_sources

    shown = {}
    for source in chapter_sources(root):
        page = html / "book" / f"{source.stem}.html"
        text = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser").get_text(" ")
        shown[source.stem] = (set(SELF_CHECK.findall(source.read_text("utf-8"))), text)
    return shown


def test_self_checks_say_your_turn_on_the_site(html_dir, book_tools):
    """The build runs the hidden solutions, but no page shows their verdict: every
    self-check shows the reply a reader gets before answering, as the notebooks do."""
    shown = self_checks_shown(html_dir, book_tools[0])
    assert sum(len(labels) for labels, _ in shown.values()) >= 10
    for stem, (labels, text) in shown.items():
        assert "Correct (ex-" not in text and "Not yet (ex-" not in text, stem
        for label in labels:
            assert f"Your turn ({label})" in text, (stem, label)


# "chapter 3", "Chapters 1 and 2", "chapters 1–5" in English; "第 3 章" in Chinese
CHAPTER_MENTION = re.compile(r"\b[Cc]hapters? \d|第\s*\d+\s*章")


def unlinked_chapter_mentions(html) -> dict[str, list[str]]:
    """``{page: [sentence]}``: a built page's prose that names a chapter by its number
    outside a link (code, math and headings aside)."""
    from bs4 import BeautifulSoup

    found = {}
    for page in sorted(html.glob("book/*.html")):
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        article = soup.select_one(".bd-article") or soup
        for node in article.select("a, code, pre, .math, script, style, h1, h2, h3, h4, "
                                   "mjx-container, .cell_output"):
            node.decompose()
        text = " ".join(article.get_text(" ").split())
        hits = [text[max(0, m.start() - 40):m.end() + 20]
                for m in CHAPTER_MENTION.finditer(text)]
        if hits:
            found[page.name] = hits
    return found


def test_the_mention_check_finds_an_unlinked_chapter(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "a.html").write_text(
        '<div class="bd-article"><p>As <a href="b.html">chapter 2</a> shows, and as '
        "chapter 3 does, <code>chapter 4</code> 第 5 章.</p></div>", encoding="utf-8")
    found = unlinked_chapter_mentions(tmp_path)
    assert [len(found["a.html"])] == [2] and "chapter 3" in found["a.html"][0]


def test_every_chapter_mention_is_a_link(html_dir):
    """Every "chapter N" in the book's prose is a cross-reference."""
    found = unlinked_chapter_mentions(html_dir)
    assert not found, found


@pytest.fixture
def failing_book(tmp_path, book_tools):
    """A throwaway book with the project's configuration and one chapter that raises."""
    ROOT, _, _ = book_tools
    shutil.copy(ROOT / "_config.yml", tmp_path)
    shutil.copy(ROOT / "conftest.py", tmp_path)
    (tmp_path / "book").mkdir()
    shutil.copytree(ROOT / "book" / "_ext", tmp_path / "book" / "_ext")
    shutil.copy(ROOT / "book" / "references.bib", tmp_path / "book")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/broken\n")
    (tmp_path / "book" / "broken.md").write_text(CHAPTER_HEADER + textwrap.dedent("""
        # A broken chapter

        ```{code-cell} ipython3
        x = 1
        ```

        ```{code-cell} ipython3
        raise RuntimeError("deliberate failure in a chapter cell")
        ```
        """))
    return tmp_path


def test_failing_cell_fails_the_build(failing_book, book_tools):
    _, build_command, jupyter_book = book_tools
    proc = jupyter_book(*build_command, failing_book, timeout=600)
    assert proc.returncode != 0
    assert "deliberate failure in a chapter cell" in proc.stdout + proc.stderr


def test_failing_cell_fails_the_test_run(failing_book):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env",
         "-p", "no:cacheprovider", "--rootdir", str(failing_book), "book/broken.md"],
        cwd=failing_book, capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 1, log[-3000:]
    assert "deliberate failure in a chapter cell" in log
    assert "1 failed, 1 passed" in log


# --- alt text: every figure described, in the sources and on the site (issue 26) -------

FILE_NAME = re.compile(r"^[\w./-]+\.(?:png|svg|jpe?g|gif|pdf|webp)$", re.I)
NO_DESCRIPTION = "No description has been provided"  # nbconvert's stand-in
_FIGURE_CELL = re.compile(r"^```\{code-cell\}.*?^```\s*$", re.M | re.S)


def is_description(alt: str | None) -> bool:
    """A real description of a figure: a few words, not a file name or a stand-in."""
    alt = (alt or "").strip()
    return (len(alt.split()) >= 5 and not FILE_NAME.match(alt)
            and NO_DESCRIPTION not in alt)


def undescribed_figures(markdown: str) -> list[str]:
    """What a MyST page shows without a description: every ``{figure}`` or
    ``{glue:figure}`` without a real ``:alt:``, Markdown or HTML image without alt text,
    figure glued by a code cell with no ``{glue:figure}`` that describes it, and figure a
    code cell draws without gluing it (``display=False``) and closing it (a bare output
    image has no alt text)."""
    from mhacore.editions.reader import GLUE_CALL, Block, figure_alt_texts, split_blocks

    found = []

    def walk(lines):
        for item in split_blocks(lines):
            if not isinstance(item, Block) or item.name in (None, "code-cell"):
                continue
            if item.name in ("figure", "glue:figure") and not is_description(
                    item.options.get("alt")):
                found.append(f"{{{item.name}}} {item.arg}")
            walk(item.body)

    walk(markdown.split("\n"))
    for alt, src in re.findall(r"!\[([^\]]*)\]\(([^)\s]*)", markdown):
        if not is_description(alt):
            found.append(f"image {src}")
    for tag in re.findall(r"<img\b[^>]*>", markdown):
        alt = re.search(r"""\balt=["']([^"']*)["']""", tag)
        if not is_description(alt and alt.group(1)):
            found.append(tag)
    described = figure_alt_texts(markdown)
    for cell in _FIGURE_CELL.findall(markdown):
        keys = [k for k in GLUE_CALL.findall(cell) if k.startswith("fig-")]
        found += [f"glued {key}" for key in keys if key not in described]
        if re.search(r"\bplt\.(?:subplots|figure)\(", cell) and not (
                re.search(r"\bglue(?:\([^)]*display=False|_figure\(glue,)", cell)
                and "plt.close(" in cell):
            found.append(f"a figure drawn in a cell: {cell.splitlines()[1][:60]}")
    return found


def test_the_alt_text_check_finds_undescribed_figures():
    good = ("```{code-cell} ipython3\nfig, ax = plt.subplots()\n"
            "glue(\"fig-a\", fig, display=False)\nplt.close(fig)\n```\n\n"
            "```{glue:figure} fig-a\n:name: fig-a\n:alt: A line rising from left to right.\n\n"
            "Caption.\n```\n")
    assert undescribed_figures(good) == []
    assert undescribed_figures(good.replace(":alt: A line rising from left to right.\n",
                                            "")) == ["{glue:figure} fig-a", "glued fig-a"]
    assert undescribed_figures(good.replace("A line rising from left to right.",
                                            "fig-a.png")) == ["{glue:figure} fig-a"]
    assert undescribed_figures(good.replace(", display=False", "")) == [
        "a figure drawn in a cell: fig, ax = plt.subplots()"]
    assert undescribed_figures("![](plot.png) and ![a plot](b.png)") == [
        "image plot.png", "image b.png"]
    assert undescribed_figures('<img src="x.png">') == ['<img src="x.png">']
    assert undescribed_figures("```{figure} x.png\n:alt: x.png\n```") == ["{figure} x.png"]


def test_every_figure_of_the_book_is_described_in_its_source(book_tools):
    """No build needed: every page of the book describes every figure it shows."""
    from mhacore.editions.reader import figure_alt_texts, toc_pages

    ROOT, _, _ = book_tools
    figures = 0
    for page in toc_pages(ROOT):
        text = page.read_text(encoding="utf-8")
        assert undescribed_figures(text) == [], page.name
        figures += len(figure_alt_texts(text))
    assert figures >= 15


def test_every_image_on_the_site_is_described(html_dir):
    """Every ``<img>`` the site shows (chapters, pages, slides) has alt text that
    describes it, and the notebooks it offers for download with their outputs describe
    every figure they show."""
    from bs4 import BeautifulSoup

    images = 0
    for page in sorted(html_dir.rglob("*.html")):
        if "_static" in page.parts or "reveal.js" in page.parts:
            continue
        soup = BeautifulSoup(page.read_text(encoding="utf-8", errors="replace"), "html.parser")
        for image in soup.find_all("img"):
            images += 1
            assert is_description(image.get("alt")), (str(page.relative_to(html_dir)),
                                                      image.get("alt"))
    assert images >= 15
    downloads = sorted((html_dir / "_sources").rglob("*-outputs.ipynb"))
    assert downloads
    for path in downloads:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        for cell in notebook["cells"]:
            for output in cell.get("outputs", []):
                for mime in output.get("data", {}):
                    if mime.startswith("image/"):
                        alt = output.get("metadata", {}).get(mime, {}).get("alt")
                        assert is_description(alt), (path.name, mime)
