"""The package's messages in the reader's language: gettext, with mhacore's own catalog.

What a reader meets from the package is written in English in the code and translated
through the catalog ``locale/<language>/LC_MESSAGES/mhacore.po`` (compiled to ``mhacore.mo``
beside it, shipped with the package): the self-checks' replies (:mod:`mhacore.exercises`,
with the book's exercise prompts and hints), the texts of the registered theorem checks
(claim, symbolic check, caveat, power), their verdicts and summaries, the theorem
ledger's tables (:mod:`mhacore.theorems`), and the words of the book's figures
(:mod:`mhacore.figures`). English is the source: in English every message
is its ``msgid``, byte for byte.

The language is a setting of the process, English unless changed:

- ``MHACORE_LANG`` (``zh_CN``), read when this module is imported, sets the default (an
  unknown value is reported with a warning and English is kept);
- :func:`set_language` changes it: a Chinese notebook calls ``mhacore.set_language("zh_CN")``
  in its first cell, and every reply from then on is in Chinese;
- :func:`language` changes it for the length of a ``with`` block.

Code marks a message with ``_()`` (translated now, in the current language) or ``N_()``
(marked only, translated where it is shown). Placeholders are ``str.format`` names, filled
after translation: ``_("Correct ({label}).").format(label=label)``. A placeholder is a
lowercase ASCII name in braces (``{label}``, ``{sig_figs}``), never right after ``^`` or ``_``
(there braces group a superscript or subscript of a formula: ``e^{az}``).

Text already written in English (a notebook output saved by the book's one execution) is
translated by :func:`translate_rendered`: each line that is a message, or an instance of
a message with placeholders, becomes its translation, with the values put back (and
themselves translated when they are messages); the rows of a Markdown table whose every
header is a message are translated cell by cell. The Chinese edition of the book shows its
chapters' outputs through it (``book/_ext/localized_outputs.py``).

Maintenance: ``python tests/test_i18n.py`` brings the catalogs in step with the code
(babel: new messages are added untranslated, stale ones dropped) and compiles them;
``tests/test_i18n.py`` fails while a message has no translation or a shipped ``.mo`` is
not compiled from its ``.po``.

Examples
--------
>>> from mhacore import i18n
>>> with i18n.language("zh_CN"):
...     print(i18n._("holds"))
成立
>>> i18n.get_language()
'en'
>>> print(i18n.translate_rendered("19 checks, 19 hold", "zh_CN"))
19 个检验，19 个成立
"""

from __future__ import annotations

import contextlib
import gettext as _gettext
import os
import re
import sys
import warnings
from pathlib import Path

__all__ = ["DOMAIN", "ENGLISH", "ENVIRONMENT_VARIABLE", "LANGUAGES", "LOCALE_DIR", "N_", "_",
           "get_language", "gettext", "language", "set_language", "translate",
           "translate_outputs", "translate_phrase", "translate_rendered"]

DOMAIN = "mhacore"
LOCALE_DIR = Path(__file__).with_name("locale")
ENGLISH = "en"
ENVIRONMENT_VARIABLE = "MHACORE_LANG"
#: The languages the package speaks: English (its source) and every shipped catalog.
LANGUAGES = (ENGLISH, *sorted(p.parent.parent.name
                              for p in LOCALE_DIR.glob(f"*/LC_MESSAGES/{DOMAIN}.mo")))

_catalogs: dict[str, _gettext.NullTranslations] = {}


def _checked(value, name: str = "language") -> str:
    if not isinstance(value, str) or value not in LANGUAGES:
        raise ValueError(f"{name} must be one of {LANGUAGES}; got {value!r}")
    return value


def _catalog(code: str) -> _gettext.NullTranslations:
    if code not in _catalogs:
        _catalogs[code] = (_gettext.NullTranslations() if code == ENGLISH else
                           _gettext.translation(DOMAIN, LOCALE_DIR, languages=[code]))
    return _catalogs[code]


def _from_environment() -> str:
    """The language ``MHACORE_LANG`` names (``zh_CN``, ``zh-CN`` or ``zh_CN.UTF-8``);
    English when it is unset or empty, or, with a warning, names no shipped language."""
    raw = os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
    code = raw.split(".")[0].replace("-", "_")
    if not code:
        return ENGLISH
    if code not in LANGUAGES:
        warnings.warn(f"{ENVIRONMENT_VARIABLE} must be one of {LANGUAGES}; got {raw!r}: "
                      "the package speaks English", RuntimeWarning, stacklevel=2)
        return ENGLISH
    return code


_current = _from_environment()


def set_language(language: str) -> None:
    """Speak ``language`` from now on: the package's replies and texts, in this process.

    Parameters
    ----------
    language : str
        One of :data:`LANGUAGES`: ``"en"`` or ``"zh_CN"``.

    Raises
    ------
    ValueError
        If ``language`` is not one of :data:`LANGUAGES`.

    Examples
    --------
    >>> from mhacore import i18n
    >>> i18n.set_language("zh_CN"); i18n.get_language()
    'zh_CN'
    >>> i18n.set_language("en")
    """
    global _current
    _catalog(_checked(language))
    _current = language


def get_language() -> str:
    """The language the package speaks now (``"en"`` unless set)."""
    return _current


@contextlib.contextmanager
def language(language: str):
    """Speak ``language`` inside a ``with`` block, then the language before it.

    The setting is the process's (as :func:`set_language`), not a thread's.

    Raises
    ------
    ValueError
        If ``language`` is not one of :data:`LANGUAGES`.

    Examples
    --------
    >>> from mhacore import i18n
    >>> with i18n.language("zh_CN"):
    ...     i18n._("verdict")
    '结论'
    """
    global _current
    before = _current
    set_language(language)
    try:
        yield language
    finally:
        _current = before


def gettext(message: str) -> str:
    """``message`` in the current language (itself when no translation is held; the
    empty string stays empty)."""
    return _catalog(_current).gettext(message) if message else message


_ = gettext


def N_(message: str) -> str:
    """Mark ``message`` for the catalog; it is translated where it is shown."""
    return message


def translate(message: str, language: str) -> str:
    """``message`` in ``language``, whatever the current language.

    >>> translate("FAILS", "zh_CN"), translate("FAILS", "en")
    ('不成立', 'FAILS')
    """
    return _catalog(_checked(language)).gettext(message) if message else message


# --- text written in English, read back in another language ------------------------------

_PLACEHOLDER = re.compile(r"(?<![\^_])\{([a-z][a-z0-9_]*)\}")
_TABLE_RULE = re.compile(r"^\|(?:\s*:?-+:?\s*\|)+$")
_MAX_SPLITS = 200  # ways of cutting one line into a template's values that are tried
_MAX_DEPTH = 4  # values inside values


class _Reader:
    """A catalog's messages, and its templates (messages with placeholders), for
    :func:`translate_rendered`."""

    def __init__(self, catalog: _gettext.NullTranslations):
        held = getattr(catalog, "_catalog", {})  # GNUTranslations' msgid -> msgstr
        self.exact = {k: v for k, v in held.items() if isinstance(k, str) and k and v}
        self.templates = []
        for msgid, msgstr in self.exact.items():
            names = _PLACEHOLDER.findall(msgid)
            if names:
                self.templates.append((_PLACEHOLDER.split(msgid)[::2], names, msgstr))
        # the longest fixed text first: the most specific template wins a tie
        self.templates.sort(key=lambda t: -sum(map(len, t[0])))

    def value(self, text: str, depth: int = 0) -> tuple[str, bool]:
        """``text`` translated as a whole (a message or a template's instance), and
        whether it was."""
        if text in self.exact:
            return self.exact[text], True
        if depth >= _MAX_DEPTH:
            return text, False
        best = None
        for literals, names, msgstr in self.templates:
            if not (text.startswith(literals[0]) and text.endswith(literals[-1])):
                continue
            for values in _splits(text, literals):
                translated = [self.value(v, depth + 1) for v in values]
                score = sum(ok for _text, ok in translated)
                if best is None or score > best[0]:
                    mapping = {}
                    for name, (value, _ok) in zip(names, translated):
                        mapping.setdefault(name, value)
                    if any(mapping[n] != value for n, (value, _ok) in zip(names, translated)):
                        continue  # a name used twice must stand for one value
                    best = (score, _PLACEHOLDER.sub(lambda m: mapping.get(m[1], m[0]),
                                                    msgstr))
                    if score == len(values):
                        break
            if best is not None:
                return best[1], True
        return text, False

    def line(self, text: str) -> str:
        """A line of output: its indentation and trailing blanks kept, the rest
        translated when it is a message of more than one word or a template's instance."""
        core = text.strip()
        if not core:
            return text
        if core in self.exact and " " not in core:
            return text  # a lone word ("model", "s") is translated in a table or a value only
        translated, ok = self.value(core)
        if not ok:
            return text
        start = text.index(core)
        return text[:start] + translated + text[start + len(core):]

    def table(self, rows: list[str]) -> list[str]:
        """A Markdown table's lines, translated cell by cell when every header cell is a
        message (the package's own tables); any other table is left as it is."""
        cells = [_cells(row) for row in rows]
        if len(rows) < 2 or not _TABLE_RULE.match(rows[1].strip()) or not all(
                self.value(c)[1] for c in cells[0]):
            return rows
        out = []
        for row, row_cells in zip(rows, cells):
            if _TABLE_RULE.match(row.strip()):
                out.append(row)
                continue
            indent = row[:len(row) - len(row.lstrip())]
            out.append(indent + "| " + " | ".join(self.value(c)[0].replace("|", "\\|")
                                                  for c in row_cells) + " |")
        return out


def _cells(row: str) -> list[str]:
    """A Markdown table row's cells, stripped, with ``\\|`` (a pipe inside a cell) read as
    ``|``."""
    return [c.strip().replace("\\|", "|")
            for c in re.split(r"(?<!\\)\|", row.strip()[1:-1])]


def _splits(text: str, literals: list[str]):
    """Every way of reading ``text`` as ``literals[0] v1 literals[1] v2 ... literals[-1]``
    with non-empty values, shortest first values first (at most :data:`_MAX_SPLITS`)."""
    count = 0
    end = len(text) - len(literals[-1])

    def place(position: int, i: int):
        nonlocal count
        if i == len(literals) - 1:
            if end > position:
                count += 1
                yield [text[position:end]]
            return
        start = position + 1
        while count < _MAX_SPLITS:
            found = text.find(literals[i], start, end)
            if found < 0:
                return
            for rest in place(found + len(literals[i]), i + 1):
                yield [text[position:found], *rest]
            start = found + 1

    yield from place(len(literals[0]), 1)


_readers: dict[str, _Reader] = {}


def _reader(code: str) -> _Reader:
    if code not in _readers:
        _readers[code] = _Reader(_catalog(code))
    return _readers[code]


def translate_phrase(text: str, language: str | None = None) -> str | None:
    """``text`` translated as a whole, a message or an instance of a message with
    placeholders (a figure's axis label, a legend entry), or None when it is neither.

    Unlike :func:`translate_rendered`, a single word is translated too, and nothing is
    translated piecewise.

    Examples
    --------
    >>> translate_phrase("verdict", "zh_CN"), translate_phrase("x = 1.5", "zh_CN")
    ('结论', None)
    >>> translate_phrase("verdict", "en")
    'verdict'
    """
    code = _current if language is None else _checked(language)
    if not isinstance(text, str):
        raise ValueError(f"text must be a str; got {type(text).__name__}")
    if code == ENGLISH:
        return text
    translated, ok = _reader(code).value(text)
    return translated if ok else None


def translate_rendered(text: str, language: str | None = None) -> str:
    """Text the package wrote in English, in ``language`` (default: the current one).

    Each line that is a message of the catalog (of more than one word), or an instance of
    a message with placeholders (``"Correct (ex-1-1)."`` of ``"Correct ({label})."``),
    becomes its translation, with the values put back, each translated in turn when it is
    a message itself. A Markdown table whose header cells are all messages is translated
    cell by cell. Any other line is left as it is. Indentation and line ends are kept.

    Parameters
    ----------
    text : str
        Lines of output (a print, a Markdown table, a self-check's reply).
    language : str, optional
        One of :data:`LANGUAGES`; English returns ``text`` unchanged.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If ``language`` is not one of :data:`LANGUAGES`, or ``text`` not a str.

    Examples
    --------
    >>> print(translate_rendered("nw-bandwidth-rate:\\n    estimate -0.2 ± 0.0052 (SE), "
    ...                          "prediction -0.2 -> holds", "zh_CN"))
    nw-bandwidth-rate:
        估计值 -0.2 ± 0.0052（SE），预测值 -0.2 -> 成立
    >>> translate_rendered("x = 1.5", "zh_CN")
    'x = 1.5'
    """
    code = _current if language is None else _checked(language)
    if not isinstance(text, str):
        raise ValueError(f"text must be a str; got {type(text).__name__}")
    if code == ENGLISH or not text:
        return text
    reader = _reader(code)
    lines = text.splitlines(keepends=True)
    out, block = [], []

    def flush():
        if block:
            bodies = [line.rstrip("\r\n") for line in block]
            ends = [line[len(body):] for line, body in zip(block, bodies)]
            out.extend(b + e for b, e in zip(reader.table(bodies), ends))
            block.clear()

    for line in lines:
        body = line.rstrip("\r\n").strip()
        if len(body) > 1 and body.startswith("|") and body.endswith("|"):
            block.append(line)
            continue
        flush()
        body = line.rstrip("\r\n")
        out.append(reader.line(body) + line[len(body):])
    flush()
    return "".join(out)


# --- a notebook's own outputs, as it runs --------------------------------------------------

class _TranslatedStream:
    """A text stream that writes each complete line translated (:func:`translate_rendered`),
    the rest of its work left to the stream it wraps."""

    def __init__(self, stream, language: str):
        self.stream, self.language, self._line = stream, language, ""

    def write(self, text):
        self._line += text
        *lines, self._line = self._line.split("\n")
        if lines:
            self.stream.write(translate_rendered("\n".join(lines) + "\n", self.language))
        return len(text)

    def flush(self):
        if self._line:
            self.stream.write(translate_rendered(self._line, self.language))
            self._line = ""
        self.stream.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)


def translate_outputs(language: str | None = None) -> None:
    """In a notebook, from now on: what the cells print, and the Markdown they display (the
    chapters' tables), in ``language``, as the book's pages in that language show the
    outputs of its English execution (:func:`translate_rendered`: the lines and tables
    that are the catalog's messages; numbers as computed).

    The book's Chinese notebooks call it in their first cell, after :func:`set_language`.

    Parameters
    ----------
    language : str, optional
        One of :data:`LANGUAGES` (default: the current language).

    Raises
    ------
    ValueError
        If ``language`` is not one of :data:`LANGUAGES`.
    RuntimeError
        Outside IPython (a notebook's kernel, or ``ipython``).
    """
    code = _current if language is None else _checked(language)
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("translate_outputs works in a notebook (an IPython kernel); "
                           "this Python has no IPython shell")
    from IPython.display import Markdown

    if isinstance(sys.stdout, _TranslatedStream):
        sys.stdout.language = code
    else:
        sys.stdout = _TranslatedStream(sys.stdout, code)
        shell.events.register("post_run_cell", lambda *args: sys.stdout.flush())
    shell.display_formatter.formatters["text/markdown"].for_type(
        Markdown, lambda shown: translate_rendered(shown.data or "", code))
