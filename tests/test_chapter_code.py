"""Chapter code fits the page: every code cell of book/*.md has lines of at most 80
characters and is as `make format` (ruff, 80 columns) leaves it."""

import importlib.util
from pathlib import Path

import jupytext

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 80
spec = importlib.util.spec_from_file_location("format_chapters",
                                              ROOT / ".ci" / "format_chapters.py")
format_chapters = importlib.util.module_from_spec(spec)
spec.loader.exec_module(format_chapters)


def chapters():
    return sorted(p for p in (ROOT / "book").glob("*.md")
                  if "kernelspec:" in p.read_text(encoding="utf-8")[:3000])


def test_code_lines_fit_in_80_columns():
    long_lines, cells = [], 0
    for path in chapters():
        for cell in jupytext.read(path).cells:
            if cell.cell_type != "code":
                continue
            cells += 1
            long_lines += [f"{path.name}: {len(line)}: {line}" for line in
                           cell.source.splitlines() if len(line) > LIMIT]
    assert cells > 50
    assert not long_lines, "\n".join(long_lines)


def test_chapters_are_formatted():
    unformatted = [p.name for p in chapters()
                   if format_chapters.format_chapter(p.read_text(encoding="utf-8"))[0]
                   != p.read_text(encoding="utf-8")]
    assert not unformatted, "run `make format`"


def test_formatter_changes_only_code():
    text = ("# Title\n\nSome  text,  kept.\n\n```{code-cell} ipython3\n:tags: [hide-input]\n\n"
            "x=[1,\n 2]\n```\n\nMore text.\n")
    new, skipped = format_chapters.format_chapter(text)
    assert new == text.replace("x=[1,\n 2]\n", "x = [1, 2]\n") and not skipped
    bad = "```{code-cell} ipython3\n%timeit f()\n```\n"
    assert format_chapters.format_chapter(bad) == (bad, [": %timeit f()"])


def test_long_comments_and_strings_are_fitted_without_changing_the_code():
    import ast

    long_words = " ".join(["word"] * 30)
    code = (f"# {long_words}\n"
            f"x = 1  # {long_words}\n"
            f'print(\n    f"{{x}} {long_words}",\n)\n')
    fitted = format_chapters.fit_long_lines(code)
    assert max(len(line) for line in fitted.splitlines()) <= LIMIT
    assert ast.dump(ast.parse(fitted)) == ast.dump(ast.parse(code))
    assert fitted.count("x = 1") == 1 and fitted.count("word") == 90
