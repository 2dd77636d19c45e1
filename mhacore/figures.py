"""The book's figures in the reader's language: drawn once, shown in every language.

A chapter draws a figure with matplotlib, writing its words (axis labels, titles, legend
entries, colorbar labels, annotations, named ticks) in English and marking each for the
catalog with ``N_`` (:mod:`mhacore.i18n`), and hands it to the text with
:func:`glue_figure`:

- in the book's one execution (myst-nb's ``glue``), the figure is glued under its key as
  drawn, and, for every other language the package speaks, a copy with its words
  translated through the package's catalog under ``<key>.<language>``
  (``fig-nw-three-bandwidths.zh_CN``); the Chinese pages show that copy
  (``book/_ext/localized_outputs.py``), so nothing is executed twice;
- in a reader notebook, whose ``glue`` shows what it is given, the figure is shown in the
  language the package speaks there (a Chinese notebook sets ``zh_CN`` in its first
  cell).

A translated text is drawn with the language's font (:data:`FONTS`) after the figure's own,
which keeps its Latin letters, digits and signs as in the English figure; a text with a
formula (``"带宽 $h$"``) has the language's font first, since matplotlib draws the words
around a formula in a text's first font only. Numbers, formulas (``$...$``) and words
with no translation stay as they are; each translated copy records in its output's
metadata (:data:`METADATA_KEY`) what it translated and which texts it left with letters in
them, so a test can find a word missing from the catalog, or a translation changed since
the chapter was executed.

Examples
--------
>>> import matplotlib
>>> matplotlib.use("Agg")
>>> import matplotlib.pyplot as plt
>>> from mhacore.figures import translated
>>> fig, ax = plt.subplots()
>>> _ = ax.set(xlabel="number of heads H", ylabel="$h^*$")
>>> with translated(fig, "zh_CN") as record:
...     print(ax.get_xlabel())
头数 H
>>> ax.get_xlabel(), record["untranslated"]
('number of heads H', [])
>>> plt.close(fig)
"""

from __future__ import annotations

import contextlib
import re
import warnings

from . import i18n

__all__ = ["FONTS", "METADATA_KEY", "glue_figure", "translate_text", "translated"]

#: The font a language's words are drawn in (Debian's fonts-noto-cjk for Chinese).
FONTS = {"zh_CN": "Noto Sans CJK SC"}
#: Where a translated copy's output metadata records what was translated.
METADATA_KEY = "mhacore_figure"

_MATH = re.compile(r"\$[^$]*\$")
_WORD = re.compile(r"[A-Za-z]{2,}")


def _check_figure(fig):
    from matplotlib.figure import Figure

    if not isinstance(fig, Figure):
        raise TypeError(f"fig must be a matplotlib Figure; got {type(fig).__name__}")


def _font(language: str) -> str | None:
    """The font for ``language``'s words, or None when this machine lacks it."""
    from matplotlib import font_manager

    name = FONTS.get(language)
    if name is None:
        return None
    try:
        font_manager.findfont(font_manager.FontProperties(family=name),
                              fallback_to_default=False)
    except ValueError:
        return None
    return name


def _wordy(text: str) -> bool:
    """Whether ``text`` has a word of letters outside its formulas."""
    return bool(_WORD.search(_MATH.sub(" ", text)))


def translate_text(text: str, language: str) -> str | None:
    """A figure's ``text`` in ``language``, as a whole or else line by line, or None when
    a line with words has no translation (a line of numbers and formulas is its own).

    >>> translate_text("softmax head,\\nequal key norms", "zh_CN")
    'softmax 头，\\n键的范数相等'
    >>> translate_text("$h^*$ = 0.05", "zh_CN"), translate_text("qwerty", "zh_CN")
    ('$h^*$ = 0.05', None)
    """
    i18n._checked(language)
    whole = i18n.translate_phrase(text.strip(), language) if _wordy(text) else text
    if whole is not None:
        return text.replace(text.strip(), whole) if text.strip() else text
    lines = []
    for line in text.split("\n"):
        if not _wordy(line):
            lines.append(line)
            continue
        translated = i18n.translate_phrase(line.strip(), language)
        if translated is None:
            return None
        lines.append(line.replace(line.strip(), translated))
    return "\n".join(lines)


def _families(text: str, family: list, font: str) -> list:
    """The fonts a translated ``text`` is drawn in: ``font`` first when the text has a
    formula, else after the figure's own ``family``."""
    return [font, *family] if _MATH.search(text) else [*family, font]


def _tick_texts(fig) -> set:
    """The tick labels and offset texts of ``fig``'s axes: the axes redraw them from their
    formatters, which :func:`translated` translates instead."""
    owned = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            owned.add(axis.offsetText)
            for tick in (*axis.get_major_ticks(), *axis.get_minor_ticks()):
                owned.update((tick.label1, tick.label2))
    return owned


@contextlib.contextmanager
def translated(fig, language: str):
    """``fig`` with its words in ``language`` inside a ``with`` block; as it was after.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    language : str
        One of :data:`mhacore.i18n.LANGUAGES`.

    Yields
    ------
    dict
        ``{"language": ..., "translated": {english: translation}, "untranslated":
        [texts with words that the catalog does not hold]}``.

    Raises
    ------
    TypeError
        If ``fig`` is not a matplotlib Figure.
    ValueError
        If ``language`` is not one the package speaks.
    RuntimeError
        If this machine lacks the font of ``language`` (:data:`FONTS`).
    """
    from matplotlib.text import Text
    from matplotlib.ticker import FuncFormatter

    _check_figure(fig)
    i18n._checked(language)
    record = {"language": language, "translated": {}, "untranslated": []}
    if language == i18n.ENGLISH:
        yield record
        return
    font = _font(language)
    if font is None:
        raise RuntimeError(
            f"drawing a figure in {language} needs the font {FONTS.get(language)!r}, which "
            "matplotlib does not find (Debian: fonts-noto-cjk; then delete matplotlib's "
            "font cache, ~/.cache/matplotlib)")

    def say(text):
        new = translate_text(text, language)
        if new is None:
            if _wordy(text) and text not in record["untranslated"]:
                record["untranslated"].append(text)
            return text
        if new != text:
            record["translated"][text] = new
        return new

    undo = []
    ticks = _tick_texts(fig)
    for artist in fig.findobj(Text):
        text = artist.get_text()
        if artist in ticks or not text:
            continue
        new = say(text)
        if new != text:
            undo.append((artist, text, artist.get_fontfamily()))
            artist.set_text(new)
            artist.set_fontfamily(_families(new, artist.get_fontfamily(), font))
    formatters = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            formatter = axis.get_major_formatter()
            labels = formatter.format_ticks(axis.get_majorticklocs())
            if any(map(_wordy, labels)):  # named ticks: translate what they are named
                formatters.append((axis, formatter, axis.isDefault_majfmt,
                                   [(t, t.get_fontfamily()) for t in axis.get_ticklabels()]))
                axis.set_major_formatter(FuncFormatter(
                    lambda x, pos, named=formatter: say(named(x, pos))))
                for label in axis.get_ticklabels():
                    label.set_fontfamily([font, *label.get_fontfamily()])
    try:
        yield record
    finally:
        for artist, text, family in undo:
            artist.set_text(text)
            artist.set_fontfamily(family)
        for axis, formatter, default, families in formatters:
            axis.set_major_formatter(formatter)
            axis.isDefault_majfmt = default
            for label, family in families:
                label.set_fontfamily(family)


@contextlib.contextmanager
def _missing_glyphs():
    """The characters matplotlib drew without a glyph inside the block (it says so in a
    warning for text, in its log for text around a formula)."""
    import logging

    missing = []

    class Handler(logging.Handler):
        def emit(self, record):
            found = re.search(r"glyph for '(.)'", record.getMessage())
            if found:
                missing.append(found[1])

    handler, log = Handler(), logging.getLogger("matplotlib.mathtext")
    log.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield missing
        for warning in caught:
            found = re.search(r"^Glyph (\d+) .*missing", str(warning.message))
            if found:
                missing.append(chr(int(found[1])))
            else:
                warnings.warn_explicit(warning.message, warning.category, warning.filename,
                                       warning.lineno)
    finally:
        log.removeHandler(handler)


def _is_book_glue(glue) -> bool:
    return getattr(glue, "__module__", "").startswith("myst_nb")


def glue_figure(glue, key: str, fig) -> None:
    """Hand ``fig`` to the text under ``key``, in every language the package speaks.

    Parameters
    ----------
    glue : callable
        myst-nb's ``glue`` (the book's execution): ``fig`` is glued under ``key`` as
        drawn, and a translated copy under ``<key>.<language>`` for every other language
        the package speaks, its output metadata holding :func:`translated`'s record (a
        language whose font this machine lacks is left out, with a warning). Any other
        ``glue(key, value)`` (a reader notebook's, which shows the value) is given ``fig``
        in the language the package speaks now.
    key : str
        The figure's name in the text (``{glue:figure} key``).
    fig : matplotlib.figure.Figure

    Raises
    ------
    TypeError
        If ``glue`` is not callable, ``key`` not a str or ``fig`` not a Figure.
    ValueError
        If ``key`` is empty.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from mhacore import i18n
    >>> fig, ax = plt.subplots()
    >>> _ = ax.set_xlabel("number of heads H")
    >>> shown = lambda key, value: print(key, value.axes[0].get_xlabel())
    >>> with i18n.language("zh_CN"):
    ...     glue_figure(shown, "fig-heads", fig)
    fig-heads 头数 H
    >>> plt.close(fig)
    """
    if not callable(glue):
        raise TypeError(f"glue must be callable; got {type(glue).__name__}")
    if not isinstance(key, str):
        raise TypeError(f"key must be a str; got {type(key).__name__}")
    if not key:
        raise ValueError("key must be a non-empty str; got ''")
    _check_figure(fig)
    current = i18n.get_language()
    if not _is_book_glue(glue):
        with translated(fig, current):
            glue(key, fig)
        return
    import IPython.core.formatters
    import IPython.display
    from myst_nb.ext.glue import GLUE_PREFIX

    glue(key, fig, display=False)
    for language in i18n.LANGUAGES:
        if language == current:
            continue
        if language != i18n.ENGLISH and _font(language) is None:
            warnings.warn(f"{key}: no {language} copy, for want of the font "
                          f"{FONTS.get(language)!r} (Debian: fonts-noto-cjk)",
                          RuntimeWarning, stacklevel=2)
            continue
        with translated(fig, language) as record, _missing_glyphs() as missing:
            # what myst-nb's glue writes, with the record beside it
            bundle, metadata = IPython.core.formatters.format_display_data(fig)
        record["missing_glyphs"] = sorted(set(missing))
        metadata["scrapbook"] = {"name": f"{key}.{language}", "mime_prefix": GLUE_PREFIX}
        metadata[METADATA_KEY] = record
        IPython.display.display({GLUE_PREFIX + k: v for k, v in bundle.items()},
                                raw=True, metadata=metadata)
