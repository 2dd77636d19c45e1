"""Author–year labels in the bibliography, matching the text's author–year citations.

sphinxcontrib-bibtex cites in the text as "Breiman, 2001" (``bibtex_reference_style:
author_year``), but its default bibliography style labels entries "[Bre01]". This registers
a pybtex style, ``authoryear``, whose labels are "Breiman, 2001", "Krogh and Vedelsby,
1995" or "Hastie et al., 2009", sorted by author and year; ``_config.yml`` selects it with
``bibtex_default_style``.
"""

import collections
import string

from pybtex.plugin import register_plugin
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle

from mhacore.editions.references import author_year_label  # shared with the slides


class AuthorYearLabelStyle(BaseLabelStyle):
    """Author–year labels; works that share one get "a", "b", ... in the order listed
    ("Fokoué et al., 2026a"), as the labels of one bibliography must differ."""

    def format_labels(self, sorted_entries):
        labels = [author_year_label(entry) for entry in sorted_entries]
        shared = {label for label in labels if labels.count(label) > 1}
        seen = collections.Counter()
        for label in labels:
            if label in shared:
                seen[label] += 1
                label += string.ascii_lowercase[seen[label] - 1]
            yield label


class AuthorYearStyle(UnsrtStyle):
    default_label_style = "authoryear"
    default_sorting_style = "author_year_title"


register_plugin("pybtex.style.labels", "authoryear", AuthorYearLabelStyle)
register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)


def setup(app):
    return {"parallel_read_safe": True, "parallel_write_safe": True}
