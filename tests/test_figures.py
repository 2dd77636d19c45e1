"""The book's figures in every language (mhacore.figures): translated words, the font
that draws them, the copies glued for the other editions, and bad input."""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from mhacore import figures, i18n  # noqa: E402

needs_cjk_font = pytest.mark.skipif(
    figures._font("zh_CN") is None,
    reason="needs the Noto Sans CJK SC font (Debian: fonts-noto-cjk)")


@pytest.fixture
def drawn():
    """A figure with a word in each place a chapter writes one."""
    fig, (ax, bars) = plt.subplots(1, 2)
    line, = ax.plot([1, 2], [3, 4], label="data")
    ax.plot([1, 2], [4, 3], label="$h^*$")
    ax.set(xlabel="bandwidth h", ylabel="MSE (conditional on the design)",
           title="HDI per layer")
    ax.legend()
    ax.text(1, 3, "best head alone")
    image = bars.imshow([[0, 1], [1, 0]])
    fig.colorbar(image, ax=bars, label="squared overlap")
    bars.set_ylabel("weight $w_i(q)$")
    bars.set_xticks([0, 1], ["uniform", "geometric\nr=0.5"])
    bars.set_title("not in the catalog")
    yield fig
    plt.close(fig)


def words(fig) -> list[str]:
    fig.canvas.draw()
    from matplotlib.text import Text

    return [t.get_text() for t in fig.findobj(Text) if t.get_text() and t.get_visible()]


@needs_cjk_font
def test_every_kind_of_text_is_translated_and_restored(drawn):
    before = words(drawn)
    with figures.translated(drawn, "zh_CN") as record:
        during = words(drawn)
        families = {t.get_text(): t.get_fontfamily() for t in drawn.findobj(
            matplotlib.text.Text)}
    for chinese in ("数据", "带宽 h", "MSE（以设计为条件）", "各层的 HDI", "单用最好的头",
                    "重叠的平方", "均匀", "几何\nr=0.5"):
        assert chinese in during, chinese
    assert "$h^*$" in during  # a formula is its own translation
    assert families["带宽 h"][-1] == figures.FONTS["zh_CN"]  # after the figure's own
    assert families["权重 $w_i(q)$"][0] == figures.FONTS["zh_CN"]  # around a formula: first
    assert record["untranslated"] == ["not in the catalog"]
    assert record["translated"]["bandwidth h"] == "带宽 h"
    assert words(drawn) == before  # as it was after the block


def test_english_is_the_figure_as_drawn(drawn):
    before = words(drawn)
    with figures.translated(drawn, "en") as record:
        assert words(drawn) == before
    assert record == {"language": "en", "translated": {}, "untranslated": []}


@needs_cjk_font
def test_a_reader_notebook_shows_the_figure_in_its_language(drawn):
    shown = []

    def glue(key, value):  # a reader notebook's glue shows what it is given
        shown.append((key, value.axes[0].get_xlabel()))

    figures.glue_figure(glue, "fig-a", drawn)
    with i18n.language("zh_CN"):
        figures.glue_figure(glue, "fig-a", drawn)
    assert shown == [("fig-a", "bandwidth h"), ("fig-a", "带宽 h")]
    assert drawn.axes[0].get_xlabel() == "bandwidth h"


@needs_cjk_font
def test_the_book_glues_the_figure_and_a_copy_in_every_other_language(drawn, monkeypatch):
    """With myst-nb's glue: the figure as drawn under its key, and a Chinese copy under
    ``key.zh_CN`` whose metadata records what was translated; both hidden (glued)."""
    import IPython.display
    import myst_nb.ext.glue as myst_glue
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.pylabtools import select_figure_formats
    from PIL import Image

    select_figure_formats(InteractiveShell.instance(), {"png"})  # as a kernel draws
    displayed = []

    def display(bundle, raw=False, metadata=None):
        displayed.append((bundle, metadata))

    monkeypatch.setattr(myst_glue, "ipy_display", display)
    monkeypatch.setattr(IPython.display, "display", display)
    figures.glue_figure(myst_glue.glue, "fig-a", drawn)
    names = [m["scrapbook"]["name"] for _, m in displayed]
    assert names == ["fig-a", "fig-a.zh_CN"]
    prefix = myst_glue.GLUE_PREFIX
    assert all(m["scrapbook"]["mime_prefix"] == prefix for _, m in displayed)
    pngs = [b[prefix + "image/png"] for b, _ in displayed]
    images = [Image.open(io.BytesIO(p if isinstance(p, bytes) else base64.b64decode(p)))
              for p in pngs]
    assert pngs[0] != pngs[1] and all(image.format == "PNG" for image in images)
    record = displayed[1][1][figures.METADATA_KEY]
    assert record["language"] == "zh_CN" and record["translated"]["data"] == "数据"
    assert record["missing_glyphs"] == []  # every Chinese character had its glyph
    assert figures.METADATA_KEY not in displayed[0][1]


def test_a_machine_without_the_font_glues_no_copy_and_says_why(drawn, monkeypatch):
    import IPython.display
    import myst_nb.ext.glue as myst_glue

    displayed = []
    monkeypatch.setattr(myst_glue, "ipy_display", lambda b, raw, metadata: displayed.append(
        metadata["scrapbook"]["name"]))
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: displayed.append("copy"))
    monkeypatch.setattr(figures, "_font", lambda language: None)
    with pytest.warns(RuntimeWarning, match="fig-a: no zh_CN copy.*fonts-noto-cjk"):
        figures.glue_figure(myst_glue.glue, "fig-a", drawn)
    assert displayed == ["fig-a"]
    with pytest.raises(RuntimeError, match="Noto Sans CJK SC.*fonts-noto-cjk"):
        with figures.translated(drawn, "zh_CN"):
            pass


@pytest.mark.parametrize("call, error, message", [
    (lambda fig: figures.glue_figure("glue", "fig-a", fig), TypeError,
     "glue must be callable; got str"),
    (lambda fig: figures.glue_figure(print, 3, fig), TypeError, "key must be a str; got int"),
    (lambda fig: figures.glue_figure(print, "", fig), ValueError, "key must be a non-empty"),
    (lambda fig: figures.glue_figure(print, "fig-a", fig.axes[0]), TypeError,
     "fig must be a matplotlib Figure; got Axes"),
    (lambda fig: figures.translated(fig, "fr").__enter__(), ValueError,
     r"language must be one of \('en', 'zh_CN'\); got 'fr'"),
    (lambda fig: figures.translate_text("data", "zh"), ValueError, "language must be one of"),
])
def test_bad_input_is_named(drawn, call, error, message):
    with pytest.raises(error, match=message):
        call(drawn)


@needs_cjk_font
def test_characters_drawn_without_a_glyph_are_recorded(drawn, monkeypatch):
    """A copy whose font lacks a character (here: the figure's own font put first, as a
    Chinese copy would be drawn without the language's font) records it."""
    import IPython.display
    import myst_nb.ext.glue as myst_glue
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.pylabtools import select_figure_formats

    select_figure_formats(InteractiveShell.instance(), {"png"})
    displayed = []
    monkeypatch.setattr(myst_glue, "ipy_display", lambda *a, **k: None)
    monkeypatch.setattr(IPython.display, "display",
                        lambda bundle, raw, metadata: displayed.append(metadata))
    monkeypatch.setitem(figures.FONTS, "zh_CN", "DejaVu Sans")
    drawn.axes[0].set_title("formula $h^*$ and words")
    figures.glue_figure(myst_glue.glue, "fig-a", drawn)
    assert {"数", "据", "带", "宽"} <= set(displayed[0][figures.METADATA_KEY]["missing_glyphs"])
