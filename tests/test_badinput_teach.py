"""Bad-input battery, class 6: ``teach`` and files (issues 12 and 27).

``teach`` writes only into a new or empty folder, or one it made before (it leaves a
marker file there with the hash of each file it wrote); otherwise it refuses, naming
``--force``. Even with ``--force`` it never overwrites or deletes a file it did not write
or that changed since; it stages its files and moves them in only when all are written,
and a lock keeps two runs apart. It never packs stale or foreign files into its zip,
names the archive after the folder, and never overwrites an archive it did not make
without ``--force``. A two-chapter toy book keeps this fast.
"""

import zipfile
from pathlib import Path

import pytest

from mhacore.editions.teach import generate, main

MARKER = ".mhacore-teach"  # the marker file teach leaves in folders it wrote

CHAPTER = """---
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# Chapter {n}

```{{code-cell}} ipython3
x = {n}
```
"""


def _book(root: Path, chapters=(1, 2)) -> Path:
    (root / "book").mkdir(parents=True, exist_ok=True)
    files = []
    for n in chapters:
        (root / "book" / f"0{n}-toy.md").write_text(CHAPTER.format(n=n), encoding="utf-8")
        files.append(f"      - file: book/0{n}-toy")
    (root / "book" / "index.md").write_text("# Toy\n", encoding="utf-8")
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/index\nparts:\n  - caption: c\n"
                                   "    chapters:\n" + "\n".join(files) + "\n", encoding="utf-8")
    return root


@pytest.fixture
def book(tmp_path):
    return _book(tmp_path / "repo")


def test_new_folder_is_written_with_a_marker(book, tmp_path):
    from mhacore.editions import outdir as _outdir

    assert _outdir.MARKER == MARKER
    out = generate("student", tmp_path / "new", book)
    assert (out / "01-toy.ipynb").is_file() and (out / MARKER).is_file()


def test_empty_folder_is_accepted(book, tmp_path):
    (tmp_path / "empty").mkdir()
    generate("student", tmp_path / "empty", book)
    assert (tmp_path / "empty" / "02-toy.ipynb").is_file()


@pytest.mark.parametrize("kind", ["student", "instructor"])
def test_a_folder_with_other_files_is_refused(book, tmp_path, kind):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    with pytest.raises(ValueError, match=r"--out .*mine.* holds files teach did not write.*--force"):
        generate(kind, out, book)
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_the_repository_itself_is_refused(book, monkeypatch, capsys):
    readme = book / "README.md"
    readme.write_text("the project's README")
    monkeypatch.chdir(book)
    assert main(["student", "--out", ".", "--book", "."]) == 2
    assert readme.read_text() == "the project's README"
    assert "--force" in capsys.readouterr().err


def test_a_file_as_out_is_refused(book, tmp_path):
    target = tmp_path / "file.ipynb"
    target.write_text("x")
    with pytest.raises(ValueError, match=r"--out .* is a file"):
        generate("student", target, book)
    assert target.read_text() == "x"


def test_force_writes_but_keeps_and_does_not_pack_foreign_files(book, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    archive = generate("student", out, book, make_zip=True, force=True)
    assert (out / "notes.txt").read_text() == "my notes"
    names = zipfile.ZipFile(archive).namelist()
    assert "mine/01-toy.ipynb" in names and not any("notes.txt" in n for n in names)


def test_rewriting_its_own_folder_removes_stale_files(book, tmp_path):
    out = tmp_path / "pack"
    generate("student", out, book)
    _book(book, chapters=(1,))  # the book loses chapter 2
    (book / "book" / "02-toy.md").unlink()
    archive = generate("student", out, book, make_zip=True)
    assert not (out / "02-toy.ipynb").exists()
    names = zipfile.ZipFile(archive).namelist()
    assert "pack/01-toy.ipynb" in names and not any("02-toy" in n for n in names)


def test_instructor_then_student_leaves_no_teaching_plan(book, tmp_path):
    (book / "book" / "course.md").write_text("# Plan\n")
    out = tmp_path / "pack"
    generate("instructor", out, book)
    assert (out / "teaching-plan.md").is_file()
    generate("student", out, book)
    assert not (out / "teaching-plan.md").exists()


def test_files_added_to_its_folder_are_kept_but_not_packed(book, tmp_path):
    out = tmp_path / "pack"
    generate("student", out, book)
    (out / "answers.txt").write_text("student work")
    archive = generate("student", out, book, make_zip=True)
    assert (out / "answers.txt").read_text() == "student work"
    assert not any("answers" in n for n in zipfile.ZipFile(archive).namelist())


@pytest.mark.parametrize("name", ["pack.v2", "week 4", "pack"])
def test_zip_is_named_after_the_folder(book, tmp_path, name):
    archive = generate("student", tmp_path / name, book, make_zip=True)
    assert archive == tmp_path / f"{name}.zip" and archive.is_file()


def test_zip_of_dot_is_named_after_the_folder(book, tmp_path, monkeypatch):
    out = tmp_path / "handout"
    out.mkdir()
    monkeypatch.chdir(out)
    archive = generate("student", Path("."), book, make_zip=True)
    assert archive.resolve() == (tmp_path / "handout.zip").resolve()


def test_zip_of_a_link_is_named_after_the_link_and_put_beside_it(book, tmp_path):
    """``--out handout`` where handout links to a folder elsewhere: the archive is
    handout.zip beside the link, as --help says, not named after the link's target."""
    (tmp_path / "store").mkdir()
    real = tmp_path / "store" / "week-3-files"
    real.mkdir()
    (tmp_path / "handout").symlink_to(real, target_is_directory=True)
    archive = generate("student", tmp_path / "handout", book, make_zip=True)
    assert archive == tmp_path / "handout.zip" and archive.is_file()
    assert not (tmp_path / "store" / "week-3-files.zip").exists()
    names = zipfile.ZipFile(archive).namelist()
    assert names and all(n.startswith("handout/") for n in names)


def test_an_existing_foreign_zip_is_not_overwritten(book, tmp_path):
    (tmp_path / "pack.zip").write_bytes(b"someone else's archive")
    with pytest.raises(ValueError, match=r"pack\.zip already exists.*--force"):
        generate("student", tmp_path / "pack", book, make_zip=True)
    assert (tmp_path / "pack.zip").read_bytes() == b"someone else's archive"


def test_force_overwrites_a_foreign_zip(book, tmp_path):
    (tmp_path / "pack.zip").write_bytes(b"old")
    archive = generate("student", tmp_path / "pack", book, make_zip=True, force=True)
    assert zipfile.is_zipfile(archive)


def test_its_own_zip_is_replaced(book, tmp_path):
    generate("student", tmp_path / "pack", book, make_zip=True)
    archive = generate("instructor", tmp_path / "pack", book, make_zip=True)
    assert zipfile.is_zipfile(archive)


def test_cli_force_flag(book, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "x.txt").write_text("x")
    assert main(["student", "--out", str(out), "--book", str(book)]) == 2
    assert main(["student", "--out", str(out), "--book", str(book), "--force"]) == 0
    assert (out / "01-toy.ipynb").is_file()


# --- teach writes only files it created, and only while they are as it wrote them -------

def test_force_never_overwrites_a_file_teach_did_not_write(book, tmp_path):
    """``teach student --out . --force`` in a repository used to replace its README.md
    (and record it as teach's, so a later run deleted it)."""
    out = tmp_path / "repo-like"
    out.mkdir()
    (out / "README.md").write_text("the project's README")
    with pytest.raises(ValueError, match=r"would overwrite \['README.md'\].*nothing was written"):
        generate("student", out, book, force=True)
    assert (out / "README.md").read_text() == "the project's README"
    assert sorted(p.name for p in out.iterdir()) == ["README.md"]
    generate("reader", out, book, force=True)  # the reader edition has no README: allowed
    generate("reader", out, book)
    assert (out / "README.md").read_text() == "the project's README"


def test_a_generated_file_that_was_edited_is_never_overwritten(book, tmp_path):
    out = tmp_path / "pack"
    generate("student", out, book)
    notebook = out / "01-toy.ipynb"
    notebook.write_text(notebook.read_text().replace("x = 1", "x = 1  # my answer"))
    edited = notebook.read_text()
    with pytest.raises(ValueError, match=r"would overwrite \['01-toy.ipynb'\]"):
        generate("student", out, book)
    assert notebook.read_text() == edited and (out / "02-toy.ipynb").is_file()
    # losing a chapter does not delete the edited notebook either
    (book / "book" / "01-toy.md").unlink()
    _book(book, chapters=(2,))
    generate("student", out, book)
    assert notebook.read_text() == edited


@pytest.mark.parametrize("record", [
    {"written": ["README.md"]},  # an older marker: names without hashes
    {"written": {"README.md": "0" * 64}},  # a hash that is not the file's
])
def test_a_marker_is_not_trusted_blindly(book, tmp_path, record):
    import json

    out = tmp_path / "pack"
    out.mkdir()
    (out / "README.md").write_text("mine")
    (out / MARKER).write_text(json.dumps(record))
    with pytest.raises(ValueError, match="would overwrite"):
        generate("student", out, book)
    generate("reader", out, book)  # does not write README.md, and does not delete it
    assert (out / "README.md").read_text() == "mine"


def test_an_interrupted_run_leaves_the_previous_files(book, tmp_path, monkeypatch):
    from mhacore.editions import outdir, teach

    out = tmp_path / "pack"
    generate("student", out, book)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real, calls = teach.edition_notebook, []

    def fail_on_the_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(teach, "edition_notebook", fail_on_the_second)
    with pytest.raises(KeyboardInterrupt):
        generate("instructor", out, book)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    monkeypatch.undo()
    (out / outdir.STAGE).mkdir()  # as a killed run would leave it
    (out / outdir.STAGE / outdir._SENTINEL).write_text("teach's")
    (out / outdir.STAGE / "01-toy.ipynb").write_text("half")
    generate("student", out, book)
    assert not (out / outdir.STAGE).exists()
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_folder_in_the_way_of_the_stage_is_kept(book, tmp_path):
    """A folder of the staging folder's name that teach did not make is not deleted."""
    from mhacore.editions import outdir

    out = tmp_path / "pack"
    (out / outdir.STAGE).mkdir(parents=True)
    (out / outdir.STAGE / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="teach did not make it; move it away"):
        generate("student", out, book)
    assert (out / outdir.STAGE / "keep.txt").read_text() == "mine"


@pytest.mark.parametrize("bookkeeping", ["..mhacore-teach.lock", ".mhacore-teach"])
def test_links_among_teachs_bookkeeping_files_are_not_followed(book, tmp_path, bookkeeping):
    """A link planted as the lock or the marker must not let teach write to its target."""
    from mhacore.editions import outdir

    assert bookkeeping in (outdir._LOCK, outdir.MARKER)
    out = tmp_path / "pack"
    generate("student", out, book)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (out / bookkeeping).unlink(missing_ok=True)
    (out / bookkeeping).symlink_to(victim)
    for force in (False, True):
        with pytest.raises(ValueError, match="lock file|would overwrite|did not write"):
            generate("student", out, book, force=force)
        assert victim.read_text() == "precious"
    generate("reader", tmp_path / "fresh", book)  # the same book still builds elsewhere


def test_a_file_edited_while_teach_runs_is_not_overwritten(book, tmp_path, monkeypatch):
    """The hashes are checked again just before the files move in."""
    from mhacore.editions import outdir

    out = tmp_path / "pack"
    generate("student", out, book)
    real_finish = outdir.finish

    def edit_then_finish(target):
        (out / "01-toy.ipynb").write_text("saved by Jupyter meanwhile")
        return real_finish(target)

    monkeypatch.setattr(outdir, "finish", edit_then_finish)
    with pytest.raises(ValueError, match=r"would overwrite \['01-toy.ipynb'\]"):
        generate("student", out, book)
    assert (out / "01-toy.ipynb").read_text() == "saved by Jupyter meanwhile"


def test_a_zip_made_and_then_left_alone_stays_teachs(book, tmp_path):
    """--zip, then a run without it, then --zip again: the archive is still teach's."""
    out = tmp_path / "pack"
    generate("student", out, book, make_zip=True)
    generate("student", out, book)
    assert zipfile.is_zipfile(generate("student", out, book, make_zip=True))
    (tmp_path / "pack.zip").write_bytes(b"the user's own archive now")
    with pytest.raises(ValueError, match="teach did not make it"):
        generate("student", out, book, make_zip=True)


def test_a_linked_subfolder_is_not_written_through(book, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "course"
    (out / "source").mkdir(parents=True)
    (out / "source" / "week1").symlink_to(elsewhere, target_is_directory=True)
    assert main(["nbgrader", "--out", str(out), "--book", str(book), "--force"]) == 2
    assert list(elsewhere.iterdir()) == []


def test_two_runs_on_one_folder_are_kept_apart(book, tmp_path):
    """Two interleaved runs used to both succeed, and the student zip then held the
    instructor's answer key."""
    import os

    from mhacore._report import report_lock
    from mhacore.editions import outdir

    out = tmp_path / "pack"
    generate("student", out, book)
    with report_lock(out / outdir.MARKER):
        with pytest.raises(ValueError, match=rf"another teach run \(process {os.getpid()}\)"):
            generate("instructor", out, book, make_zip=True)
    assert not (tmp_path / "pack.zip").exists() and not (out / "answer-key.html").exists()
    archive = generate("student", out, book, make_zip=True)
    assert not any("answer-key" in n for n in zipfile.ZipFile(archive).namelist())


@pytest.mark.parametrize("damage, message", [
    (lambda root: (root / "_toc.yml").write_text(
        (root / "_toc.yml").read_text().replace("book/02-toy", "book/02-tyo")),
     "_toc.yml names 'book/02-tyo', but"),
    (lambda root: (root / "book" / "02-toy.md").write_text(""),
     "02-toy.md is not an executable MyST notebook"),
    (lambda root: (root / "book" / "02-toy.md").write_text("# no front matter\n"),
     "02-toy.md is not an executable MyST notebook"),
    (lambda root: (root / "_toc.yml").write_text("root: book/index\nparts:\n  - caption: [x\n"),
     "_toc.yml is not readable YAML (line 4)"),
    (lambda root: (root / "_toc.yml").write_text("- just\n- a list\n"),
     "_toc.yml must be a mapping with a root page"),
    (lambda root: (root / "_toc.yml").write_text("root: book/index\nparts:\n  - chapters: [3]\n"),
     "every part must list chapters, each with a file"),
])
def test_a_table_of_contents_or_chapter_it_cannot_read_is_named(book, tmp_path, capsys, damage,
                                                                message):
    """A typo in _toc.yml or an emptied chapter used to be skipped without a word (the
    notebooks came out one short) or to end in a traceback. Bad data: exit 1."""
    damage(book)
    out = tmp_path / "out"
    assert main(["reader", "--out", str(out), "--book", str(book)]) == 1
    assert message in capsys.readouterr().err and not out.exists()


def _with_bibliography(root: Path, bib: str = "@misc{k, author = {Watson, G. S.}, "
                       "title = {T}, year = {1964}}\n", config: str | None = None) -> None:
    (root / "_config.yml").write_text(config if config is not None else
                                      "bibtex_bibfiles:\n  - book/references.bib\n")
    (root / "book" / "references.bib").write_text(bib)


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


@pytest.mark.parametrize("damage, message", [
    (lambda root: _with_bibliography(root, config="bibtex_bibfiles: [x\n"),
     "_config.yml is not readable YAML (line 2): while parsing a flow sequence from line 1"),
    (lambda root: _with_bibliography(root, config="- a\n- b\n"),
     "_config.yml must be a mapping of settings; got a list"),
    (lambda root: _with_bibliography(root, config="bibtex_bibfiles: book/references.bib\n"),
     "_config.yml: bibtex_bibfiles must be a list of file names; got 'book/references.bib'"),
    (lambda root: _with_bibliography(root, bib="@article{broken,\n  title = {unclosed\n"),
     "references.bib cannot be read: syntax error in line 2: premature end of file"),
    (lambda root: _with_bibliography(root, bib="@misc{k, title={a}}\n@misc{k, title={b}}\n"),
     "references.bib cannot be read: repeated bibliography entry: k"),
    (lambda root: _with_bibliography(root, bib="@misc{k, author = {A, B, C, D}, title={a}}\n"),
     "references.bib cannot be read: Too many commas in 'A, B, C, D'"),
    (lambda root: (_with_bibliography(root), (root / "book" / "references.bib").unlink()),
     "references.bib cannot be read: unable to open"),
    (lambda root: (root / "book" / "01-toy.md").write_text(
        CHAPTER.format(n=1).replace("kernelspec:\n", "kernelspec: [\n")),
     ("01-toy.md: its front matter is not readable YAML (line 4): while parsing a flow "
      "sequence from line 2")),
    (lambda root: _append(root / "book" / "01-toy.md", "\n```{code-cell} ipython3\n:tags: [a\nx\n```\n"),
     "01-toy.md is not a readable MyST notebook: Code cell"),
    (lambda root: _append(root / "book" / "01-toy.md", "\n+++ {\"tags\": [\n\ntext\n"),
     "01-toy.md is not a readable MyST notebook: Markdown cell"),
    (lambda root: _append(root / "book" / "index.md", "\n:::{note}\nnever closed\n"),
     "index.md: markdown has an unclosed {note} block (fence ':::') at line 3"),
    (lambda root: _append(root / "book" / "01-toy.md", "\n:::{note}\nnever closed\n"),
     "01-toy.md: markdown has an unclosed {note} block"),
    (lambda root: (root / "book" / "index.md").write_bytes(b"# Toy \xff\n"),
     "page " ),
])
def test_malformed_sources_are_named_in_one_line(book, tmp_path, capsys, damage, message):
    """Malformed YAML, BibTeX or cell metadata used to end in a traceback (some naming no
    file), and left an empty --out behind. Now: one line naming the file, exit 1 (bad
    data), and no --out."""
    damage(book)
    out = tmp_path / "out"
    assert main(["reader", "--out", str(out), "--book", str(book)]) == 1
    err = capsys.readouterr().err
    assert message in err and str(book) in err, err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


def test_the_teaching_plan_is_named_when_malformed(book, tmp_path, capsys):
    (book / "book" / "course.md").write_text("# Course\n\n:::{note}\nnever closed\n")
    assert main(["instructor", "--out", str(tmp_path / "out"), "--book", str(book)]) == 1
    err = capsys.readouterr().err
    assert "teaching plan" in err and "course.md: markdown has an unclosed {note}" in err
    assert not (tmp_path / "out").exists()


def _no_space(*args, **kwargs):
    import errno
    import os

    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_is_one_line_and_leaves_the_folder_as_it_was(book, tmp_path, capsys,
                                                                 monkeypatch):
    """A full disk while staging used to end in a traceback and leave an empty folder."""
    import nbformat

    monkeypatch.setattr(nbformat, "write", _no_space)
    new = tmp_path / "new"
    assert main(["reader", "--out", str(new), "--book", str(book)]) == 2
    err = capsys.readouterr().err
    assert f"--out '{new}' cannot be written (No space left on device)" in err
    assert len(err.strip().splitlines()) == 1 and not new.exists()
    monkeypatch.undo()
    old = generate("student", tmp_path / "old", book)
    before = {p.name: p.read_bytes() for p in old.iterdir()}
    monkeypatch.setattr(nbformat, "write", _no_space)
    assert main(["student", "--out", str(old), "--book", str(book)]) == 2
    assert {p.name: p.read_bytes() for p in old.iterdir()} == before


def test_a_marker_left_half_written_does_not_make_the_folder_foreign(book, tmp_path):
    """A run killed while writing its marker leaves ``.mhacore-teach.XXXX.tmp``; the
    next run used to refuse the folder as holding files teach did not write."""
    out = tmp_path / "pack"
    out.mkdir()
    (out / f"{MARKER}.abc123.tmp").write_text('{"writ')
    assert (generate("reader", out, book) / "01-toy.ipynb").is_file()


def test_a_lock_file_that_cannot_be_written_is_one_line(book, tmp_path, capsys, monkeypatch):
    """No space for the lock file's pid used to end in a traceback."""
    from mhacore import _report

    monkeypatch.setattr(_report.os, "ftruncate", _no_space)
    out = tmp_path / "new"
    assert main(["reader", "--out", str(out), "--book", str(book)]) == 2
    assert "cannot write the lock file" in capsys.readouterr().err and not out.exists()


# --- plain_markdown and the labels take linear time -------------------------------------------

@pytest.mark.parametrize("text", [
    "{numref}`" + " " * 30_000 + "`",  # took about 2 s (quadratic), 90 s at 200 000
    "{ref}`" + "<" * 30_000 + "`",
    "{ref}`a" + " " * 30_000 + "b <x>`",
    "(lab)=\n# a" + " " * 30_000 + "b",  # a heading's title
], ids=["spaces", "angles", "spaces-then-target", "heading"])
def test_plain_markdown_is_linear_on_long_role_bodies(text):
    import time

    from mhacore.editions.reader import Book, page_labels, plain_markdown

    start = time.perf_counter()
    plain_markdown(text, Book(labels=page_labels(text, "p")), "p")
    assert time.perf_counter() - start < 0.25


def test_exercise_names_are_linear_on_long_titles():
    """A title with a long run of spaces and no star took cubic time (100 s at 5000)."""
    import time

    from mhacore.editions.references import exercise_name

    start = time.perf_counter()
    assert exercise_name("1.1 -" + " " * 3000 + "x") is None
    assert exercise_name("1.1 - a" + " " * 3000 + "b ★ (x)") == f"Exercise 1.1 (a{' ' * 3000}b)"
    assert time.perf_counter() - start < 0.25

