"""Author–year labels in the bibliography, matching the text's author–year citations.

sphinxcontrib-bibtex cites in the text as "Breiman, 2001" (``bibtex_reference_style:
author_year``), but its default bibliography style labels entries "[Bre01]". This registers
a pybtex style, ``authoryear``, whose labels are "Breiman, 2001", "Krogh and Vedelsby,
1995" or "Hastie et al., 2009", sorted by author and year; ``_config.yml`` selects it with
``bibtex_default_style``.
"""

from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle


def _surname(person):
    return Text.from_latex(" ".join(person.prelast_names + person.last_names)).render_as("text")


def author_year_label(entry):
    """``Surname, Year`` / ``A and B, Year`` / ``A et al., Year`` of a pybtex entry."""
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [_surname(p) for p in people]
    if len(names) > 2:
        who = f"{names[0]} et al."
    else:
        who = " and ".join(names) or entry.fields.get("title", "Anonymous")
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearLabelStyle(BaseLabelStyle):
    def format_labels(self, sorted_entries):
        for entry in sorted_entries:
            yield author_year_label(entry)


class AuthorYearStyle(UnsrtStyle):
    default_label_style = "authoryear"
    default_sorting_style = "author_year_title"


register_plugin("pybtex.style.labels", "authoryear", AuthorYearLabelStyle)
register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)


def setup(app):
    return {"parallel_read_safe": True, "parallel_write_safe": True}
