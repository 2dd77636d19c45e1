"""The course as an instructor and a student meet it: the built course page, exercise
titles, measured cost lines, slides, the student edition, the instructor pack, make lab."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))

from exercise_titles import link_text  # noqa: E402
from exec_time import FillExecTime, exec_time_role, run_time_text  # noqa: E402

from mhacore.exercises import EXERCISES  # noqa: E402
from mhacore.editions.reader import chapter_sources  # noqa: E402

COURSE = ROOT / "book" / "course.md"
EXERCISE_TITLE = re.compile(r"^`{3,}\{exercise\} (.*)$", re.M)


def _html_text(path: Path) -> str:
    from bs4 import BeautifulSoup

    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser").get_text(" ")


# --- sources ---------------------------------------------------------------------------

def test_exercise_titles_read_cleanly():
    titles = [t for s in chapter_sources(ROOT)
              for t in EXERCISE_TITLE.findall(s.read_text(encoding="utf-8"))]
    assert len(titles) == 27
    for title in titles:
        kinds = "derivation|computation|conceptual"
        assert re.fullmatch(rf"\d+\.\d+ — [^()]+ ★{{1,3}} \(({kinds})\)", title), title
        assert link_text(title).startswith("Exercise ")
    assert link_text("1.1 — The Epanechnikov constants ★ (derivation)") == \
        "Exercise 1.1 (The Epanechnikov constants)"
    assert link_text("no number") is None


def test_course_homework_names_existing_exercises():
    text = COURSE.read_text(encoding="utf-8")
    labels = set(re.findall(r"\{ref\}`(ex-\d+-\d+)`", text))
    in_book = {m for s in chapter_sources(ROOT)
               for m in re.findall(r":label: (ex-\d+-\d+)", s.read_text(encoding="utf-8"))}
    assert labels == in_book  # every exercise is homework in some session, none invented
    assert text.count("- **Slides.**") == text.count("- **Homework.**") == 10


def test_course_page_sets_students_up_without_solutions():
    text = COURSE.read_text(encoding="utf-8")
    setup = text[text.index("## Getting set up"):text.index("**Instructors**")]
    assert "git clone" not in setup and "make lab" in setup
    assert "_build/student-notebooks" in setup and "make lab-instructor" in text
    nbgrader = text[text.index("## Grading with nbgrader"):text.index("## Grading\n")]
    for words in ("nbgrader collect week1", "nbgrader zip_collect week1",
                  "submitted/<student>/week1/", "jupyter/nbgrader#1961", "checksum"):
        assert words in nbgrader, words


def test_exec_time_names_the_chapter_even_in_the_assembled_pdf():
    """The LaTeX builder post-transforms the whole book under the root page; the role keeps
    the page it was written on, so each chapter still shows its own cached run time."""
    from types import SimpleNamespace

    from docutils import nodes
    from docutils.utils import new_document

    def read_on(page, text):
        env = SimpleNamespace(docname=page)
        inliner = SimpleNamespace(document=SimpleNamespace(settings=SimpleNamespace(env=env)))
        return exec_time_role("exec-time", f"{{exec-time}}`{text}`", text, 1, inliner)[0][0]

    para = nodes.paragraph()
    para += [read_on("book/01-a", "this"), read_on("book/01-a", "02-b")]
    book = new_document("book.tex")
    book += para
    env = SimpleNamespace(docname="intro", nb_metadata={  # the root page was not executed
        "book/01-a": {"exec_data": {"runtime": 12.34, "succeeded": True, "method": "cache"}},
        "book/02-b": {"exec_data": {"runtime": 90.0, "succeeded": True, "method": "cache"}}})
    book.settings.env = env  # SphinxTransform.env reads it there
    FillExecTime(book).run()
    assert para.astext() == "12.3 s1.5 min"


def test_run_time_text():
    assert run_time_text({"runtime": 19.84, "succeeded": True}) == "19.8 s"
    assert run_time_text({"runtime": 75.0, "succeeded": True}) == "1.2 min"
    assert run_time_text(None).startswith("(not measured")
    assert run_time_text({"runtime": 3.0, "succeeded": False}).startswith("(not measured")


def test_no_chapter_types_its_own_cost():
    for source in chapter_sources(ROOT):
        cost = re.search(r"^\*\*Cost\.\*\*.*?(?=\n\n)", source.read_text("utf-8"), re.M | re.S)
        assert cost and "{exec-time}`this`" in cost.group(0), source.name
        assert not re.search(r"about \d+", cost.group(0)), source.name


def test_lab_has_jupytext_and_myst_pinned_and_installed():
    pins = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    for name in ("jupyterlab", "jupyterlab_myst", "jupytext", "nbgrader"):
        assert re.search(rf"^{name}==\S+$", pins, re.M | re.I), name
    proc = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"],
                          capture_output=True, text=True, timeout=300)
    listing = proc.stdout + proc.stderr
    assert "jupyterlab-jupytext" in listing and "jupyterlab-myst" in listing, listing
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    lab = make[make.index("\nlab:"):]
    assert "pytest" not in lab.split("\n\n")[0]


def _make_dry_run(target):
    # --no-print-directory: under `make test` this make is nested and would otherwise end
    # its output with "Leaving directory"
    proc = subprocess.run(["make", "--no-print-directory", "-n", "-W", "requirements.txt",
                           target], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().split("\n")[-1], proc.stdout


def test_make_lab_opens_the_student_notebooks_not_the_chapters():
    last, commands = _make_dry_run("lab")
    assert "-m mhacore teach student --out _build/student-notebooks" in commands
    assert "Jupytext Notebook" in last and "jupyter lab" in last
    assert last.endswith("--ServerApp.root_dir=" + str(ROOT / "_build/student-notebooks"))
    assert ("--allow-root" in last) == (os.getuid() == 0)  # Jupyter refuses root without it
    assert "nbgrader.server_extensions.formgrader': False" in last  # no config warning
    last, commands = _make_dry_run("lab-instructor")  # the chapters, solutions included
    assert "teach student" not in commands and last.endswith(f"root_dir={ROOT} book")


# --- the instructor pack ---------------------------------------------------------------

@pytest.fixture(scope="module")
def instructor_pack(tmp_path_factory):
    """The instructor pack, its slides made by a stand-in for ``write_decks`` that makes
    every session's deck but session 9's (the real decks need the build's executed
    chapters: test_instructor_pack_holds_the_decks_of_the_build)."""
    from mhacore.editions import slides
    from mhacore.editions.teach import generate

    executed = tmp_path_factory.mktemp("executed")
    (executed / "01-nadaraya-watson.ipynb").write_text("{}", encoding="utf-8")

    def write_decks(out, executed_dir, sessions=None, book=None, **options):
        (session,) = sessions
        if session == 9:
            raise ValueError("session 9 has no slides: book/slides/session-9.md does not exist")
        Path(out).mkdir(parents=True, exist_ok=True)
        deck = Path(out) / f"session-{session}.slides.html"
        deck.write_text(f"<section>session {session}</section>", encoding="utf-8")
        return [deck]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(slides, "write_decks", write_decks)
        return generate("instructor", tmp_path_factory.mktemp("pack"), ROOT, executed=executed)


def test_answer_key_has_every_exercise_and_solution(instructor_pack):
    page = instructor_pack / "answer-key.html"
    text = _html_text(page)
    for source in chapter_sources(ROOT):
        titles = EXERCISE_TITLE.findall(source.read_text("utf-8"))
        for label, title in zip(re.findall(r":label: (ex-\d+-\d+)", source.read_text("utf-8")),
                                titles, strict=True):
            assert f"Exercise {title}" in text, label  # the heading, as on the site
            assert f"Solution to {link_text(title)}" in text, label
    assert not re.search(r"\bex-\d+-\d+\b|\{(?:prf:ref|numref|cite|ref)\}", text)
    assert "The choice of kernel\nmatters far less" in text  # the written solution of 1.1
    assert "Exercise 1.2 — Find h* for a new sample size" in text  # the * is not emphasis
    assert "answer=float(np.exp(ch01_nw.argmin_log_bandwidth" in "".join(text.split())
    html = page.read_text(encoding="utf-8")
    assert not re.findall(r"""(?:src|href)=["']https?://""", html)  # offline
    assert (instructor_pack / "answer-key_files" / "tex-svg-full.js").is_file()


def test_instructor_readme_speaks_to_instructors(instructor_pack):
    readme = (instructor_pack / "README.md").read_text(encoding="utf-8")
    assert "for you, the instructor" in readme and "answer-key.html" in readme
    assert "your instructor" not in readme and "make test" not in readme
    # the slides are in the pack; a session without a deck is named, with the way to add it
    assert "- `slides/`: the slides, one reveal.js deck per session" in readme
    assert ("Some sessions have no deck in this pack:\n\n"
            "- session 9: book/slides/session-9.md does not exist\n") in readme
    assert "`--executed DIR`" in readme and "`make book`" in readme
    assert "written working\nin a cell graded by hand" in readme  # the nbgrader course


def test_teaching_plan_names_chapters_exercises_and_slides(instructor_pack):
    plan = (instructor_pack / "teaching-plan.md").read_text(encoding="utf-8")
    assert not re.findall(r"\bex-\d+-\d+\b(?!-test)", plan)  # no bare labels
    assert "Exercise 1.1 (The Epanechnikov constants)" in plan
    assert r"Exercise 1.2 (Find h\* for a new sample size)" in plan  # escaped: no emphasis
    # chapters by their titles, linked to their notebooks beside the plan in the pack
    links = re.findall(r"\]\(([^)\s]+)\)", plan)
    assert links and all((instructor_pack / link).is_file() for link in links), links
    for source in chapter_sources(ROOT):
        assert f"({source.stem}.ipynb)" in plan, source.stem
        assert source.stem not in plan.replace(f"({source.stem}.ipynb)", ""), source.stem
    assert ("- **Read before.** [Kernel smoothing and the Nadaraya–Watson estimator]"
            "(01-nadaraya-watson.ipynb).") in plan
    # session headings name the chapter by number and title, never by its file name
    assert ("\n### Week 1, session 1 — kernel smoothing (Chapter 1, *Kernel smoothing and "
            "the Nadaraya–Watson estimator*)\n") in plan
    headings = re.findall(r"^###.*\bsession \d+\b.*$", plan, re.M)
    assert len(headings) == 10 and all(re.search(r"\(Chapter [1-9], \*[^*]+\*", h)
                                       for h in headings), headings
    # slides: the decks in the pack, the missing one in the built site
    assert "../slides/" not in plan and "session-9.slides.html` of the built site" in plan
    for n in [*range(1, 9), 10]:
        assert f"[session {n} (reveal.js)](slides/session-{n}.slides.html)" in plan, n
    assert "\n| week | session | date | topic | read before | homework due |\n" in plan
    assert "**Table**" not in plan and "tabularcolumns" not in plan  # plain tables
    assert "{exec-time}" not in plan and "build status page" not in plan


# --- the built site --------------------------------------------------------------------

def test_course_page_links_name_their_exercise(strict_build):
    proc, html = strict_build
    assert proc.returncode == 0
    from bs4 import BeautifulSoup

    page = BeautifulSoup((html / "book" / "course.html").read_text("utf-8"), "html.parser")
    links = [a for a in page.select("a") if "#ex-" in (a.get("href") or "")]
    assert len(links) == 28  # every {ref} to an exercise in book/course.md
    for link in links:
        text = " ".join(link.get_text().split())
        assert re.fullmatch(r"Exercise \d+\.\d+ \([^()]+\)", text), text  # never bare
    homework = [li for li in page.select("li") if li.get_text().startswith("Homework")]
    assert len(homework) == 10


def test_exercise_headings_have_no_nested_parentheses(strict_build):
    proc, html = strict_build
    text = _html_text(html / "book" / "01-nadaraya-watson.html")
    assert "Exercise 1.1 — The Epanechnikov constants ★ (derivation)" in text
    assert "Exercise (" not in text and "Solution to Exercise (" not in text


def test_cost_lines_are_measured(strict_build):
    proc, html = strict_build
    for source in chapter_sources(ROOT):
        text = " ".join(_html_text(html / "book" / f"{source.stem}.html").split())
        assert re.search(r"the chapter ran in \d+\.\d (s|min) \(", text), source.stem
    course = " ".join(_html_text(html / "book" / "course.html").split())
    assert len(re.findall(r"The chapter runs in \d+\.\d (s|min) on the build", course)) == 10


def _assert_slides_read_cleanly(name, page):
    """No exercises or self-check verdicts, no raw labels, roles or citation keys, no
    number in quotes, no filler slide ("Cost ..."), a title on every slide."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page, "html.parser")
    for node in soup.select("script, style, .math"):
        node.decompose()
    text = " ".join(soup.get_text(" ").split())
    assert not re.search(r"Exercise \d+\.\d+|Correct \(ex-|Your turn \(ex-", text), name
    assert not re.search(r"\b(?:thm|fig|def|prop|lem|rem|eq|ex)-[a-z][\w-]*", text), name
    assert not re.search(r"\[[a-z]+\d{4}[a-z]*\]|\{[\w:-]+\}`", text), name  # keys, roles
    assert not re.search(r"""['"‘’][−+-]?\d[\d.,]*['"‘’]""", text), name  # '-0.087'
    slides = soup.select("div.slides > section")
    assert slides[0].select_one("h1") and all(s.select_one("h2") for s in slides[1:]), name
    assert not [s for s in slides[1:] if s.h2.get_text().strip().startswith("Cost")], name


def test_slides_are_built_offline(strict_build):
    proc, html = strict_build
    decks = sorted((html / "slides").glob("session-*.slides.html"))
    assert len(decks) == 10
    for deck in decks:
        page = deck.read_text(encoding="utf-8")
        assert not re.findall(r"""(?:src|href)=["']https?://|import\(["']https?://""", page)
        assert "reveal.js/dist/reveal.js" in page and '<section class="deck-slide' in page
        assert "BEGIN SOLUTION" not in page and "{solution}" not in page
        _assert_slides_read_cleanly(deck.name, page)
    assert (html / "slides" / "reveal.js" / "dist" / "reveal.js").is_file()
    assert (html / "slides" / "tex-svg-full.js").is_file()
    course = (html / "book" / "course.html").read_text("utf-8")
    for n in range(1, 11):
        assert f'href="../slides/session-{n}.slides.html"' in course


# --- the student edition ---------------------------------------------------------------

@pytest.fixture(scope="module")
def student_site():
    """``make book-student``'s build (the site's configuration with MHACORE_EDITION=student)
    into a temporary folder, from the session's execution cache (tests/builds.py)."""
    from builds import BUILDS

    return BUILDS.result("student_site")


def test_student_site_has_no_solution_text(student_site):
    from test_teach import solution_texts

    proc, html = student_site
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    assert not (html / "_sources").exists()
    pages = {p: p.read_text(encoding="utf-8", errors="replace")
             for p in html.rglob("*") if p.is_file()
             and p.suffix in (".html", ".ipynb", ".md", ".txt", ".js")
             and "_static" not in p.parts}
    for source in chapter_sources(ROOT):
        page = _html_text(html / "book" / f"{source.stem}.html")
        assert "Exercise 1.1" in page or not source.stem.startswith("01")
        for line in solution_texts(source):
            for path, text in pages.items():
                assert line not in text, f"{source.stem}: {line!r} in {path.name}"
    for path, text in pages.items():
        assert 'class="solution' not in text, path.name
    course = _html_text(html / "book" / "course.html")
    assert "Exercise 1.1 (The Epanechnikov constants)" in course
    for source in chapter_sources(ROOT):
        page = (html / "book" / f"{source.stem}.html").read_text(encoding="utf-8")
        # no way back to the full sources: no Binder/launch, repository or issue buttons
        assert "mybinder" not in page and "launch-buttons" not in page, source.stem
        assert "github.com/mhacore" not in page, source.stem
        # the self-checks show what a student sees before answering, not the verdict on
        # the hidden solution the build ran
        text = _html_text(html / "book" / f"{source.stem}.html")
        assert "Correct (ex-" not in text and "Not yet (ex-" not in text, source.stem
        labels = set(re.findall(r"""check\(\s*["'](ex-\d+-\d+)["']\s*,\s*answer""",
                                source.read_text(encoding="utf-8")))
        for label in labels:
            assert f"Your turn ({label})" in text, (source.stem, label)


def test_student_site_keeps_its_word(student_site, html_dir):
    """Every page of the student site, crawled: no link that leads nowhere, to the Chinese
    pages (there is no Chinese student edition; the Chinese site shows the solutions) or to
    the repository (it holds them), and no instructor notes; the full site keeps them and
    shows none of the student edition's own passages (issue 26, item 2)."""
    from browser import broken_links

    _, html = student_site
    pages = sorted(str(p.relative_to(html)) for p in html.rglob("*.html")
                   if "_static" not in p.parts and "slides" not in p.parts)
    assert len(pages) > 10
    assert broken_links(html, pages) == []
    repository = re.search(r"^repository:\n\s+url:\s*(\S+)", (ROOT / "_config.yml").read_text(),
                           re.M).group(1)
    for name in pages:
        page = (html / name).read_text(encoding="utf-8")
        assert "hreflang" not in page and "/zh/" not in page, name
        assert repository not in page and "github.com" not in page, name
        assert 'class="full-edition' not in page, name  # no passage of the full site
    course = _html_text(html / "book" / "course.html")
    for note in ("What a student can find out", "How solutions stay hidden", "Grading with nbgrader",
                 "Running on lab machines", "exercise_answers", "lab-instructor"):
        assert note not in course, note
    assert "Before session 1" in course and "Week 1, session 1" in course and "Mini-project" in course
    run = _html_text(html / "book" / "run-it-yourself.html")
    assert "Your notebooks" in run and "clone" not in run.lower() and "Route 2" not in run
    assert "This is the student edition" in _html_text(html / "book" / "index.html")
    for name in ("book/course.html", "book/run-it-yourself.html", "book/index.html"):
        assert 'class="student-edition' not in (html_dir / name).read_text(encoding="utf-8"), name
    full_course = _html_text(html_dir / "book" / "course.html")
    assert "Grading with nbgrader" in full_course and "Before session 1" not in full_course
    assert "Your notebooks" not in _html_text(html_dir / "book" / "run-it-yourself.html")


# --- slides and the nbgrader command, without a build ----------------------------------

def _executed_chapter():
    """A tiny executed chapter: a glued figure and number, a theorem with its proof, a
    solution, exercises with a self-check output; with a course page and a deck source."""
    import nbformat

    new_md, new_code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    cells = [new_md("# Title\n\nIntro."),
             new_md("## One\n\nText {glue:text}`rho:.2f`.\n\n```{glue:figure} fig-a\n"
                    ":name: fig-a\n\nA caption.\n```"),
             new_md(":::{prf:theorem} Big\n:label: thm-a\n\nIt holds.\n:::\n\n"
                    ":::{prf:proof}\nA secret argument.\n:::"),
             new_md("## Exercises\n\n```{exercise} 1.2 — Next ★\n:label: ex-1-2\n\nMore.\n```"
                    "\n\n```{solution} ex-1-2\nhidden answer\n```"),
             new_code("check('ex-1-2', answer)", outputs=[nbformat.v4.new_output(
                 "display_data", data={"text/plain": "Correct (ex-1-2)."})])]
    glued = {"rho": {"output_type": "display_data", "metadata": {},
                     "data": {"text/plain": "'0.123456'"}},
             "fig-a": {"output_type": "display_data", "metadata": {},
                       "data": {"text/plain": "<Figure>", "image/png": "iVBORw0KGgo="}}}
    course = "## Sessions\n\n### Week 1, session 1 — x ({doc}`01-x`)\n\n- **Lecture (30 min).**\n"
    deck = ("# Smoothing\n\n## Why\n- Rho is {glue}`rho`, by {prf:ref}`thm-a`.\n"
            "{figure}`fig-a`\n\n## The statement\n{statement}`thm-a`\n")
    return nbformat.v4.new_notebook(cells=cells), glued, course, deck


def test_session_deck_pulls_from_the_chapter_and_shows_no_solution(tmp_path):
    import json

    import nbformat

    from mhacore.editions.reader import Book, Target
    from mhacore.editions.slides import deck_name, write_decks

    chapter, glued, course, deck = _executed_chapter()
    root, executed, out = tmp_path / "repo", tmp_path / "executed", tmp_path / "slides"
    (root / "book" / "slides").mkdir(parents=True)
    executed.mkdir()
    (root / "book" / "course.md").write_text(course, encoding="utf-8")
    (root / "book" / "slides" / "session-1.md").write_text(deck, encoding="utf-8")
    nbformat.write(chapter, executed / "01-x.ipynb")
    (executed / "01-x.glue.json").write_text(json.dumps(glued), encoding="utf-8")
    book = Book(labels={"thm-a": Target("prf:theorem", "1.1", "01-x", "Big"),
                        "fig-a": Target("figure", "1.2", "01-x", "")},
                titles={"01-x": "Title"})
    provenance = {"version": "1.2.3", "commit": "abcdef0"}
    written = write_decks(out, executed, book=book, root=root, provenance=provenance)
    assert written == [out / deck_name(1)]
    page = written[0].read_text(encoding="utf-8")
    _assert_slides_read_cleanly(deck_name(1), page)
    assert "Rho is 0.12, by Theorem 1.1." in page and "<figcaption>Figure 1.2</figcaption>" in page
    assert "Theorem 1.1 (Big)." in page and "It holds." in page
    assert "secret" not in page and "hidden answer" not in page and "Correct" not in page
    assert "Chapter 1: Title" in page and "Lecture, 30 min" in page
    assert "mhacore 1.2.3 · commit abcdef0" in page and page.count("<section") == 3
    assert (out / "reveal.js" / "dist" / "reveal.js").is_file()
    with pytest.raises(ValueError, match="session 1 has no slides: .*zh_CN/slides/session-1.md"):
        write_decks(out, executed, book=book, root=root, provenance=provenance,
                    language="zh_CN")


def test_teach_nbgrader_command_writes_one_assignment_per_week(tmp_path):
    from mhacore.editions.grading import WEEKS
    from mhacore.editions.teach import main

    assert main(["nbgrader", "--out", str(tmp_path / "course")]) == 0
    weeks = sorted(p.name for p in (tmp_path / "course" / "source").iterdir())
    assert weeks == sorted(WEEKS)
    config = (tmp_path / "course" / "nbgrader_config.py").read_text(encoding="utf-8")
    assert "answer = None" in config
    assert main(["nbgrader", "--out", str(tmp_path / "course")]) == 0  # its own folder again
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine", encoding="utf-8")
    assert main(["nbgrader", "--out", str(foreign)]) == 2  # refused: teach did not write it
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]


def test_points_per_week_are_the_courses_own():
    """The course page's table of points per week is the nbgrader course's: one autograded
    point per self-checked exercise of the week's chapters, two points of working per
    exercise (issue 26, item 3): the nbgrader notebooks' hidden tests and working cells
    hold exactly these points."""
    from mhacore.editions.grading import WEEKS, assignment_notebook, manual_points
    from mhacore.editions.reader import read_book

    book = read_book(ROOT)

    text = (ROOT / "book" / "course.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d)(?: \(optional\))? \| ([\d, ]+) \| (\d+) \| (\d+) \| (\d+) \|$", text, re.M)
    assert len(rows) == len(WEEKS)
    for (week, chapters, auto, by_hand, working), (name, numbers) in zip(rows, WEEKS.items()):
        assert name == f"week{week}" and [int(c) for c in chapters.split(",")] == [int(n) for n in numbers]
        labels = [label for n in numbers
                  for label in re.findall(rf":label: (ex-{int(n)}-\d+)",
                                          next(ROOT.glob(f"book/{n}-*.md")).read_text(encoding="utf-8"))]
        assert int(auto) == sum(label in EXERCISES for label in labels), week
        assert int(by_hand) == len(labels) and int(working) == 2 * len(labels), week
        # and the nbgrader course's: its hidden tests, and its working cells graded by hand
        notebooks = [assignment_notebook(s, book)[0] for s in chapter_sources(ROOT)
                     if s.name[:2] in numbers]
        tests = [c.metadata.nbgrader.points for nb in notebooks for c in nb.cells
                 if c.metadata.get("nbgrader", {}).get("grade")
                 and not c.metadata.nbgrader.solution]
        manual = [p for nb in notebooks for p in manual_points(nb).values()]
        assert (len(tests), sum(tests)) == (int(auto), int(auto)), week
        assert (len(manual), sum(manual)) == (int(by_hand), int(working)), week


def test_reading_times_are_counted_from_the_chapters(html_dir):
    """Each session's reading time is the chapter's prose words at 120 a minute, counted
    when the site was built (book/_ext/reading_time.py); never typed by hand."""
    from reading_time import prose_words, reading_minutes

    assert prose_words("Two words $x^2$ `code` here.\n\n$$\nlong + formula\n$$\n") == 3
    assert reading_minutes(121) == 5 and reading_minutes(601) == 10
    course = _html_text(html_dir / "book" / "course.html")
    for source in chapter_sources(ROOT):
        words = prose_words(source.read_text(encoding="utf-8"))
        assert f"Reading: about {reading_minutes(words)} min for the whole chapter ({words:,} words" \
            in course, source.stem


def test_the_converter_keeps_the_full_editions_passages():
    """Notebooks and packs are full editions: a ``full-edition`` container's text stays
    (without the container), a ``student-edition`` container or section goes, and the
    reading-time roles print the counted numbers."""
    from mhacore.editions.reader import Book, plain_markdown

    text = ("Intro.\n\n::::{container} full-edition\nFor instructors.\n::::\n\n"
            "::::{container} student-edition\nFor students.\n::::\n\n"
            "(student-edition-x)=\n## Students only\n\nHidden.\n\n### Inside\n\nAlso hidden.\n\n"
            "(full-edition-y)=\n## Everyone in the full edition\n\n"
            "About {reading-minutes}`01-a` min ({prose-words}`01-a` words).")
    plain = plain_markdown(text, Book(prose_words={"01-a": 1234}), "course")
    assert "For instructors." in plain and "container" not in plain
    assert "full-edition" not in plain and "student-edition" not in plain
    for gone in ("For students", "Students only", "Hidden", "Also hidden"):
        assert gone not in plain, gone
    assert "## Everyone in the full edition" in plain
    assert "About 15 min (1,234 words)." in plain


# --- the instructor pack's slides and the plan's chapter names (issue 26, item 3) ------

def test_instructor_pack_without_executed_chapters_says_so(tmp_path, monkeypatch, capsys):
    """No executed chapters where ``make book`` leaves them: the pack is written without
    slides, and its README, its plan and a note on stderr say how to add them; an
    ``--executed`` folder without executed chapters is a usage error."""
    from mhacore.editions import teach

    monkeypatch.setattr(teach, "EXECUTED", Path("_build") / "no-such-folder")
    assert teach.main(["instructor", "--out", str(tmp_path / "pack"), "--book", str(ROOT)]) == 0
    note = capsys.readouterr().err
    assert note.startswith("note: the pack has no slides: they are made from the executed")
    assert "--executed DIR" in note and "README.md" in note
    readme = (tmp_path / "pack" / "README.md").read_text(encoding="utf-8")
    assert "The slides are not in this pack: they are made from the executed" in readme
    assert "`--executed DIR`" in readme and "- `slides/`" not in readme
    assert not (tmp_path / "pack" / "slides").exists()
    plan = (tmp_path / "pack" / "teaching-plan.md").read_text(encoding="utf-8")
    assert plan.count(".slides.html` of the built site") == 10
    (tmp_path / "empty").mkdir()
    assert teach.main(["instructor", "--out", str(tmp_path / "other"), "--book", str(ROOT),
                       "--executed", str(tmp_path / "empty")]) == 2
    assert "executed must be a folder of executed chapters" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()
    with pytest.raises(ValueError, match="executed is for the instructor pack"):
        teach.generate("student", tmp_path / "student", ROOT, executed=tmp_path / "empty")


def test_plan_names_chapters_by_number_and_title_not_file_name():
    from mhacore.editions.reader import Book, chapter_numbers, read_book
    from mhacore.editions.teach import plan_markdown

    book = read_book(ROOT)
    course = COURSE.read_text(encoding="utf-8")
    sessions = re.findall(r"^###[^\n]*\bsession (\d+)\b[^\n]*\{doc\}`chapter \d <([\w-]+)>`",
                          course, re.M)
    assert len(sessions) == 10
    # on the site too: a bare {doc}`slug` in a heading shows the file name in "On this page"
    assert not re.search(r"^#.*\{doc\}`[\w-]+`", course, re.M)
    plan = plan_markdown(course, book, chapter_numbers(ROOT))
    numbers = chapter_numbers(ROOT)
    for session, stem in sessions:
        heading = next(line for line in plan.split("\n")
                       if re.match(rf"###.*\bsession {session}\b", line))
        assert f"(Chapter {numbers[stem]}, *{book.titles[stem]}*" in heading, heading
        assert stem not in heading, heading
    # without chapter numbers, the title alone; never the file name
    assert plan_markdown("## A ({doc}`01-x`)", Book(titles={"01-x": "X*"})) == r"## A (*X\**)"


def test_instructor_pack_holds_the_decks_of_the_build(html_dir, tmp_path):
    """The pack made from the chapters the build executed: every session's deck, with
    reveal.js beside them, each linked from the plan, and every figure described; and
    every deck in Chinese too, its figures the ones the book drew in Chinese."""
    from bs4 import BeautifulSoup

    from mhacore.editions.teach import generate

    executed = html_dir.parent / "jupyter_execute" / "book"
    pack = generate("instructor", tmp_path / "pack", ROOT, executed=executed)
    readme = (pack / "README.md").read_text(encoding="utf-8")
    assert "- `slides/`" in readme and "no deck" not in readme
    plan = (pack / "teaching-plan.md").read_text(encoding="utf-8")
    assert "of the built site" not in plan
    for n in range(1, 11):
        deck = pack / "slides" / f"session-{n}.slides.html"
        assert f"](slides/session-{n}.slides.html)" in plan and deck.is_file(), n
        images = BeautifulSoup(deck.read_text("utf-8"), "html.parser").find_all("img")
        for image in images:
            assert len((image.get("alt") or "").split()) >= 5, (n, image.get("alt"))
        chinese = BeautifulSoup((pack / "slides" / "zh_CN" / deck.name).read_text("utf-8"),
                                "html.parser").find_all("img")
        assert len(chinese) == len(images), n
        assert not {i["src"] for i in images} & {i["src"] for i in chinese}, n
    assert (pack / "slides" / "reveal.js" / "dist" / "reveal.js").is_file()
    assert (pack / "slides" / "zh_CN" / "reveal.js" / "dist" / "reveal.js").is_file()
    assert "`slides/zh_CN/` holds the same decks in\n  Chinese" in readme

