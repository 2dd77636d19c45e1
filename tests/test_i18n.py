"""The package speaks the reader's language (mhacore.i18n): its catalog, its API, its replies.

The catalog ``mhacore/locale/<language>/LC_MESSAGES/mhacore.po`` must hold a translation of
every message the package shows a reader: each string the code marks with ``_()`` or
``N_()`` (read from the source by babel's extractor), each string a chapter's code marks
with ``N_()`` (the words of the book's figures, which :mod:`mhacore.figures` draws, and
the lines and table headers and labels the chapters print, which the Chinese pages show
through :func:`mhacore.i18n.translate_rendered`), the claim, symbolic check, caveat and
power of every registered theorem check, and the prompt and hints of every sealed exercise
of the book. Every translation keeps its placeholders, formulas, code and numbers; the
shipped ``.mo`` is the ``.po`` compiled. English stays byte for byte what it was.

Run as a script (``python tests/test_i18n.py``), this file brings the catalogs in step with
the code (babel's merge: a changed message becomes fuzzy, a new one untranslated, a stale
one is dropped) and compiles each ``.mo``.
"""

from __future__ import annotations

import io
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mhacore import i18n  # noqa: E402

PACKAGE = ROOT / "mhacore"
CATALOGS = sorted(i18n.LOCALE_DIR.glob(f"*/LC_MESSAGES/{i18n.DOMAIN}.po"))
KEYWORDS = {"_": None, "N_": None, "gettext": None}
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


# --- what the catalog must hold --------------------------------------------------------------

def code_messages() -> dict[str, str]:
    """Each message the package's code marks, with the file that marks it (the editions
    wing, which writes notebooks and translates through the book's catalogs, is not read)."""
    from babel.messages.extract import extract_from_file

    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("mhacore/editions/"):
            continue
        for _line, message, _comments, _context in extract_from_file(
                "python", str(path), keywords=KEYWORDS):
            if isinstance(message, str) and message:
                found.setdefault(message, relative)
    return found


_CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.S | re.M)


def chapter_messages() -> dict[str, str]:
    """Each string a chapter's code marks with ``N_``: the words of the book's figures
    (an axis label, a title, a legend entry), which :func:`mhacore.figures.glue_figure`
    translates when it draws the figure in another language, and what the chapters print:
    a line's message or template (``N_("z against -1/4: {z}").format(z=...)``), a
    table's header and labels (displayed as Markdown), which the Chinese pages show
    translated (:func:`mhacore.i18n.translate_rendered`)."""
    from babel.messages.extract import extract

    found = {}
    for page in sorted((ROOT / "book").glob("[0-9][0-9]-*.md")):
        code = "\n".join(_CODE_CELL.findall(page.read_text(encoding="utf-8")))
        for _line, message, _comments, _context in extract(
                "python", io.BytesIO(code.encode("utf-8")), keywords={"N_": None}):
            if isinstance(message, str) and message:
                found.setdefault(message, f"book/{page.name}: a figure or an output")
    return found


def data_messages() -> dict[str, str]:
    """The texts of the registered theorem checks and of the book's sealed exercises (data,
    not code), each with what it is."""
    from mhacore import theorems
    from mhacore.exercises import SEALS, load_seals

    found = {}
    for t in theorems.REGISTRY.values():
        for field in ("claim", "symbolic", "caveat", "power"):
            if getattr(t, field):
                found.setdefault(getattr(t, field), f"theorem {t.id}: {field}")
    for ex in load_seals(SEALS):
        found.setdefault(ex.prompt, f"exercise {ex.label}: prompt")
        found.setdefault(ex.hint, f"exercise {ex.label}: hint")
        for _hashes, hint in ex.mistakes:
            found.setdefault(hint, f"exercise {ex.label}: hint for a common mistake")
    return found


def required_messages() -> dict[str, str]:
    return {**code_messages(), **data_messages(), **chapter_messages()}


def read_catalog(po: Path):
    from babel.messages.pofile import read_po

    with po.open("rb") as handle:
        return read_po(handle, abort_invalid=True)


# --- the catalogs --------------------------------------------------------------------------

def test_there_is_a_chinese_catalog_and_the_package_offers_its_language():
    assert [po.parent.parent.name for po in CATALOGS] == ["zh_CN"]
    assert i18n.LANGUAGES == ("en", "zh_CN")


@pytest.mark.parametrize("po", CATALOGS, ids=lambda p: p.parent.parent.name)
def test_every_message_the_package_shows_is_translated(po):
    catalog = read_catalog(po)
    held = {m.id: m for m in catalog if m.id}
    missing = [m for m in required_messages() if m not in held]
    assert not missing, f"not in {po.name} (run python tests/test_i18n.py): {missing[:5]}"
    fuzzy = [m.id for m in held.values() if m.fuzzy]
    untranslated = [m.id for m in held.values() if not m.string]
    assert not fuzzy and not untranslated, (fuzzy[:3], untranslated[:3])
    stale = sorted(set(held) - set(required_messages()))
    assert not stale, f"messages no code or registry uses: {stale[:5]}"


_MATH = re.compile(r"\$[^$]+\$")
_CODE = re.compile(r"`[^`]*`")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")


def kept(text: str) -> Counter:
    """What a translation must keep: placeholders, inline math, inline code, numbers."""
    found = Counter(("placeholder", p) for p in i18n._PLACEHOLDER.findall(text))
    found.update(("math", m) for m in _MATH.findall(text))
    found.update(("code", c) for c in _CODE.findall(_MATH.sub(" ", text)))
    rest = _CODE.sub(" ", _MATH.sub(" ", i18n._PLACEHOLDER.sub(" ", text)))
    found.update(("number", n) for n in _NUMBER.findall(rest))
    return found


@pytest.mark.parametrize("po", CATALOGS, ids=lambda p: p.parent.parent.name)
def test_translations_keep_placeholders_math_code_and_numbers(po):
    broken = {}
    for message in read_catalog(po):
        if message.id and message.string:
            source, translation = kept(message.id), kept(message.string)
            if source != translation:
                broken[message.id[:60]] = (source - translation, translation - source)
    assert not broken, broken


def has_words(text: str) -> bool:
    """Whether ``text`` has an English word (4 letters or more, not part of a name such
    as ``d_head`` or a function such as ``exp(``), so that its translation needs Chinese.

    >>> has_words("E tr(P_h P_h') = d_head²/p"), has_words("the bound is 2/3")
    (False, True)
    """
    return bool(re.search(r"(?<![\w^])[A-Za-z]{4,}(?![\w(])",
                          i18n._PLACEHOLDER.sub(" ", text)))


@pytest.mark.parametrize("po", CATALOGS, ids=lambda p: p.parent.parent.name)
def test_translations_are_chinese(po):
    """Every translation of a message with words has Chinese in it (a formula alone is
    its own translation)."""
    english = [m.id for m in read_catalog(po)
               if m.id and m.string and has_words(m.id) and not CJK.search(m.string)]
    assert not english, english


def test_the_placeholders_are_plain_names_never_adjacent():
    """``{name}`` only (no format spec or index: numbers are formatted before they are put
    in, so a reply reads the same in every language), and never two in a row (a rendered
    line could not be cut back into its values)."""
    for message in {**code_messages(), **chapter_messages()}:
        assert not re.search(r"(?<![\^_])\{[^}]*[:!\[.][^}]*\}", message), message
        assert not re.search(r"\}\{", i18n._PLACEHOLDER.sub("{}", message)), message


@pytest.mark.parametrize("po", CATALOGS, ids=lambda p: p.parent.parent.name)
def test_the_shipped_mo_is_compiled_from_the_po(po):
    import gettext

    from babel.messages.mofile import write_mo

    buffer = io.BytesIO()
    write_mo(buffer, read_catalog(po), use_fuzzy=False)
    buffer.seek(0)
    fresh = gettext.GNUTranslations(buffer)._catalog
    assert po.with_suffix(".mo").is_file(), (
        f"{po.with_suffix('.mo').name} is missing: compile it (python tests/test_i18n.py) and "
        "commit it (.gitignore's *.mo must make an exception for mhacore/locale)")
    with po.with_suffix(".mo").open("rb") as handle:
        shipped = gettext.GNUTranslations(handle)._catalog
    assert shipped == fresh, "run python tests/test_i18n.py to compile the catalog"


def test_the_catalog_is_package_data():
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["mhacore"]
    for mo in i18n.LOCALE_DIR.rglob("*.mo"):
        relative = mo.relative_to(PACKAGE)
        assert any(relative.match(p) for p in patterns), (relative, patterns)


def test_every_reason_of_the_parser_has_a_template():
    """The parser (mhacore._parse) writes its reasons in English; a reply translates them
    through ``exercises.PARSER_REASONS``. Each message it can raise must be there."""
    import ast

    from mhacore.exercises import PARSER_REASONS

    def shape(node) -> str:
        if isinstance(node, ast.Constant):
            return str(node.value)
        if isinstance(node, ast.JoinedStr):
            return "".join(str(v.value) if isinstance(v, ast.Constant) else "{}"
                           for v in node.values)
        return "{}"

    tree = ast.parse((PACKAGE / "_parse.py").read_text(encoding="utf-8"))
    raised = {shape(node.args[0]) for node in ast.walk(tree)
              if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "UnsafeAnswer"}
    templates = {i18n._PLACEHOLDER.sub("{}", t) for t in PARSER_REASONS}
    # f-strings that join constants ({MAX_DEPTH} is a name: the shape shows "{}")
    assert raised and raised <= templates, raised - templates


# --- the language setting --------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["fr", "zh", "ZH_cn", "", None, 1, ["zh_CN"]])
def test_set_language_refuses_what_it_cannot_speak(bad):
    with pytest.raises(ValueError, match=r"language must be one of \('en', 'zh_CN'\); got"):
        i18n.set_language(bad)
    with pytest.raises(ValueError, match="language must be one of"):
        with i18n.language(bad):
            pass
    with pytest.raises(ValueError, match="language must be one of"):
        i18n.translate("holds", bad)
    if bad is not None:  # None: the current language
        with pytest.raises(ValueError, match="language must be one of"):
            i18n.translate_rendered("holds", bad)
    assert i18n.get_language() == "en"


def test_set_language_is_the_packages_and_the_context_restores_it():
    import mhacore

    assert mhacore.set_language is i18n.set_language
    try:
        mhacore.set_language("zh_CN")
        assert i18n.get_language() == "zh_CN" and i18n._("holds") == "成立"
        with i18n.language("en"):
            assert i18n._("holds") == "holds"
        assert i18n.get_language() == "zh_CN"
    finally:
        mhacore.set_language("en")
    with pytest.raises(RuntimeError):
        with i18n.language("zh_CN"):
            raise RuntimeError
    assert i18n.get_language() == "en" and i18n._("") == ""


@pytest.mark.parametrize("value, expected, warns", [
    ("zh_CN", "zh_CN", False), ("zh-CN", "zh_CN", False), ("zh_CN.UTF-8", "zh_CN", False),
    ("", "en", False), ("en", "en", False), ("klingon", "en", True)])
def test_the_environment_variable_sets_the_default(monkeypatch, value, expected, warns):
    import warnings

    monkeypatch.setenv("MHACORE_LANG", value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert i18n._from_environment() == expected
    assert bool(caught) == warns
    if warns:
        assert "MHACORE_LANG must be one of ('en', 'zh_CN'); got 'klingon'" in str(
            caught[0].message)


# --- the replies ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sealed():
    """Three quick exercises (10 PBKDF2 rounds): a number, an integer, a formula."""
    from mhacore.exercises import EXERCISES, register_exercise, seal_exercise

    # the book's own prompts and hints, which the catalog holds
    prompt_1_1 = "the ratio of the Gaussian's optimal AMSE to the Epanechnikov's (a float)"
    prompt_3_1 = ("the spread term sum_h alpha_h ||w^h - w_bar||^2 as a SymPy expression in "
                  "a, u, v")
    made = [seal_exercise("ex-i18n-num", "t", "number", prompt_1_1,
                          "Square the normalising denominator as well.", 2.0,
                          mistakes=[(3.0, "Both scouts must be recruited, each with "
                                          "probability p.")], iterations=10),
            seal_exercise("ex-i18n-int", "t", "number",
                          "the smallest number of scouts N within 10 % of the floor (an "
                          "integer)", "Square each weight and add; the denominator is (1 "
                          "+ r + r^2)^2.", 7, sig_figs=None, iterations=10),
            seal_exercise("ex-i18n-expr", "t", "expression", prompt_3_1,
                          "For two heads, w^1 - w_bar = (1 - a)(w^1 - w^2).", "a*u + v",
                          symbols=("a", "u", "v"), iterations=10)]
    for exercise in made:
        EXERCISES.pop(exercise.label, None)
        register_exercise(exercise)
    yield
    for exercise in made:
        EXERCISES.pop(exercise.label, None)


ANSWERS = [None, "", 2.0, 2.04, 2.3, 3.0, [1, 2], True, float("nan"), "__import__('os')",
           "1,5", "x**2", "a*u + v", "a*u"]


def test_english_replies_are_unchanged(sealed):
    from mhacore.exercises import check

    assert check("ex-i18n-num", 2.0).message == (
        "Correct (ex-i18n-num): it agrees to 3 significant figures.")
    assert check("ex-i18n-int", 7).message == "Correct (ex-i18n-int)."
    assert check("ex-i18n-num", 2.04).message == (
        "Close (ex-i18n-num): your answer agrees to 2 significant figures, but the exercise "
        "asks for 3. Give one more figure (or check the last one).")
    assert check("ex-i18n-num", None).message == (
        "Your turn (ex-i18n-num): set `answer` to the ratio of the Gaussian's optimal AMSE "
        "to the Epanechnikov's (a float), to 3 significant figures, then run this cell "
        "again.")
    assert check("ex-i18n-num", [1, 2]).message == (
        "Cannot read your answer to ex-i18n-num: this exercise expects one number, not a "
        "list or array; write it as a plain number (e.g. answer = 0.5).")
    assert check("ex-i18n-num", "1,5").message == (
        "Cannot read your answer to ex-i18n-num: it has a comma between digits (1,5); write "
        "decimals with a decimal point, e.g. 2.5, not 2,5. Nothing in it was run; write a "
        "plain number or formula.")


def test_replies_in_chinese(sealed):
    from mhacore.exercises import check

    with i18n.language("zh_CN"):
        replies = {(label, repr(a)): check(label, a).message
                   for label in ("ex-i18n-num", "ex-i18n-int", "ex-i18n-expr")
                   for a in ANSWERS}
        book = check("ex-1-1", None).message
    assert replies["ex-i18n-num", "2.0"] == "正确（ex-i18n-num）：保留 3 位有效数字时一致。"
    assert replies["ex-i18n-num", "3.0"] == (
        "还不对（ex-i18n-num）。提示：两只侦察蚁都必须被招募，各自的概率为 p。")
    assert replies["ex-i18n-expr", "None"] == (
        "轮到你了（ex-i18n-expr）：把 `answer` 设为离散项 sum_h alpha_h ||w^h - w_bar||^2，"
        "写成关于 a、u、v 的 SymPy 表达式，须为精确表达式，然后再次运行这个单元格。")
    for (label, answer), message in replies.items():
        assert CJK.search(message) and label in message, (label, answer, message)
        # words left in English: names from the answer or the parser, none of the reply's
        words = re.findall(r"(?<![\w'])[a-z]{4,}(?![\w'])", message.replace(label, ""))
        assert set(words) <= {"answer", "sqrt", "list", "bool", "float"}, message
    assert book == ("轮到你了（ex-1-1）：把 `answer` 设为高斯核的最优 AMSE 与 Epanechnikov "
                    "核的最优 AMSE 之比（浮点数），保留 3 位有效数字，然后再次运行这个单元格。")


def test_translate_rendered_round_trips_every_reply(sealed):
    from mhacore.exercises import check

    for label in ("ex-i18n-num", "ex-i18n-int", "ex-i18n-expr", "ex-1-1", "ex-3-1"):
        for answer in ANSWERS:
            english = check(label, answer).message
            with i18n.language("zh_CN"):
                chinese = check(label, answer).message
            assert i18n.translate_rendered(english, "zh_CN") == chinese, english


def test_a_line_that_is_no_message_is_left_alone():
    text = ("n = 200, h* = 0.031\nthe estimate holds\n  model\n| a | b |\n|---|---|\n"
            "| model | holds |\n")
    assert i18n.translate_rendered(text, "zh_CN") == text
    assert i18n.translate_rendered("holds", "en") == "holds"


def test_summaries_and_the_ledger_in_chinese():
    from mhacore import theorems

    passed = theorems.CheckResult(
        "nw-bandwidth-rate", "", "01-nadaraya-watson", "", -0.2066, -0.2, 0.0052, 0.0208,
        "|estimate - prediction| <= 4 SE", True, "book", "cpu", 1, 2.5, {}, "model", "C0", "4se")
    failed = theorems.CheckResult(
        "hdi-frame-bound", "", "04-head-diversity", "", 1e-13, 0.0, 0.0, 1e-12,
        "|estimate - prediction| <= atol and ordered", False, "book", "cpu", 1, 0.1,
        {"conditions": {"ordered": False}}, "identity", "C3", "atol")
    results = [passed, failed]
    english = "\n".join([*(r.summary() for r in results), theorems.ledger_tally(results),
                         _markdown(theorems.ledger_rows(results)),
                         theorems.ledger_notes(results)])
    assert "estimate -0.2066 ± 0.0052 (SE), prediction -0.2 -> holds" in english
    assert "gap 1e-13 <= tolerance 1.0e-12 -> FAILS" in english
    with i18n.language("zh_CN"):
        chinese = "\n".join([*(r.summary() for r in results), theorems.ledger_tally(results),
                             _markdown(theorems.ledger_rows(results)),
                             theorems.ledger_notes(results)])
    assert "估计值 -0.2066 ± 0.0052（SE），预测值 -0.2 -> 成立" in chinese
    assert "    未满足的条件：ordered" in chinese
    assert "| 检验 | 章 | 估计值 | 预测值 | SE 或容差 | 类型 | 结论 | 秒 |" in chinese
    assert "*符号检验*：" in chinese and "*限定条件*：" in chinese and "*功效*：" in chinese
    assert i18n.translate_rendered(english, "zh_CN") == chinese


def _markdown(rows: list[dict]) -> str:
    """The rows as a Markdown table, as the ledger's cells print them (one space a side)."""
    header = list(rows[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row.values()) + " |" for row in rows]
    return "\n".join(lines)


def test_every_theorem_text_reads_in_chinese():
    from mhacore import theorems

    with i18n.language("zh_CN"):
        for t in theorems.REGISTRY.values():
            for field in ("claim", "symbolic", "caveat", "power"):
                text = getattr(t, field)
                assert not has_words(text) or CJK.search(i18n._(text)), (t.id, field)


def test_the_calibration_table_with_an_escaped_pipe_is_translated():
    english = ("| check | kind | as reported | mean z | sd z | max \\|z\\| |\n"
               "|:---|:---|:---|---:|---:|:---|\n"
               "| head-is-nw | identity | 20/20 | | | gap/tol. ≤ 0.001 |\n")
    assert i18n.translate_rendered(english, "zh_CN") == (
        "| 检验 | 类型 | 一致 | z 均值 | z 标准差 | 最大 \\|z\\| |\n"
        "|:---|:---|:---|---:|---:|:---|\n"
        "| head-is-nw | 恒等式 | 20/20 |  |  | 差距/容差 ≤ 0.001 |\n")


# --- the Chinese pages (book/_ext/localized_outputs.py) ------------------------------------

@pytest.fixture(scope="module")
def localized_outputs():
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import localized_outputs

    return localized_outputs


def test_outputs_are_translated_in_copies(localized_outputs):
    import nbformat

    stream = nbformat.v4.new_output("stream", name="stdout",
                                    text="head-is-nw:\n    estimate 0, prediction 0\n")
    result = nbformat.v4.new_output("execute_result", data={
        "text/plain": "Your turn (ex-1-1): set `answer` to the ratio of the Gaussian's "
                      "optimal AMSE to the Epanechnikov's (a float), to 3 significant "
                      "figures, then run this cell again.",
        "image/png": "iVBORw0KGgo="})
    error = nbformat.v4.new_output("error", ename="E", evalue="holds", traceback=[])
    zh = [localized_outputs.translated_output(o, "zh_CN") for o in (stream, result, error)]
    assert zh[0]["text"] == "head-is-nw:\n    估计值 0，预测值 0\n"
    assert zh[1]["data"]["text/plain"].startswith("轮到你了（ex-1-1）：把 `answer` 设为高斯核")
    assert zh[1]["data"]["image/png"] == "iVBORw0KGgo=" and zh[2] is error
    assert stream["text"].startswith("head-is-nw:\n    estimate")  # the executed output
    assert localized_outputs.spoken("en") is None and localized_outputs.spoken("zh_CN")


# --- maintenance ------------------------------------------------------------------------------

def update_catalogs() -> None:
    """Bring every catalog in step with :func:`required_messages` and compile it."""
    from babel.messages.catalog import Catalog
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import write_po

    template = Catalog(domain=i18n.DOMAIN, project="mhacore", charset="utf-8")
    for message, origin in sorted(required_messages().items(), key=lambda m: (m[1], m[0])):
        template.add(message, auto_comments=[origin])
    for po in CATALOGS:
        catalog = read_catalog(po)
        created = catalog.creation_date
        catalog.update(template)
        catalog.creation_date = created  # a catalog whose messages did not change stays
        with po.open("wb") as handle:
            write_po(handle, catalog, width=88, ignore_obsolete=True, omit_header=False,
                     no_location=True)
        with po.with_suffix(".mo").open("wb") as handle:
            write_mo(handle, catalog, use_fuzzy=False)
        stats = Counter("fuzzy" if m.fuzzy else "translated" if m.string else "untranslated"
                        for m in catalog if m.id)
        print(f"{po.relative_to(ROOT)}: {dict(stats)}")


# --- a Chinese notebook's own outputs ------------------------------------------------------

def test_a_notebook_prints_and_displays_in_its_language(capsys):
    """``translate_outputs`` (the Chinese notebooks' first cell): printed lines and
    displayed Markdown tables that are catalog messages come out in Chinese as the cells
    run, numbers as computed, a line printed in pieces once it is whole; English otherwise."""
    import IPython.display as display
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    before, formatter = sys.stdout, shell.display_formatter.formatters["text/markdown"]
    try:
        with i18n.language("zh_CN"):
            i18n.translate_outputs()
        shell.run_cell("print('19 checks, 19 hold'); print('x = 1.5')\n"
                       "print('19 checks,', end=''); print(' 18 hold')")
        table = display.Markdown("| check | verdict |\n|---|---|\n| a | holds |")
        shown = shell.display_formatter.format(table)[0]["text/markdown"]
    finally:
        sys.stdout = before
        formatter.pop(display.Markdown, None)
        shell.events.callbacks["post_run_cell"].clear()
    assert capsys.readouterr().out == "19 个检验，19 个成立\nx = 1.5\n19 个检验，18 个成立\n"
    assert "| 检验 | 结论 |" in shown and "| a | 成立 |" in shown
    with pytest.raises(ValueError, match="language must be one of"):
        i18n.translate_outputs("fr")


def test_translate_outputs_needs_a_notebook(monkeypatch):
    import IPython

    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    with pytest.raises(RuntimeError, match="works in a notebook"):
        i18n.translate_outputs("zh_CN")


if __name__ == "__main__":
    update_catalogs()
