"""Cross-references, citations and exercise titles of the MyST chapters as plain text.

The site resolves ``{prf:ref}`thm-nw-rate```, ``{numref}`fig-bvc-stack``` and
``{cite}`breiman2001``` into "Theorem 1", "Fig. 2" and "Breiman, 2001"; a slide deck or a
Markdown file made from the sources must do the same, or the reader sees raw labels. The
helpers here give the author–year label of a bibliography entry (the site's own style,
``book/_ext/authoryear_bib.py``), the "Exercise 1.1 (title)" name of an exercise (the
site's link text, ``book/_ext/exercise_titles.py``), and substitute such names into MyST
text.
"""

from __future__ import annotations

import re
from pathlib import Path

# "1.1 — The Epanechnikov constants ★ (derivation)": the number, then the name
_EXERCISE_TITLE = re.compile(r"^(?P<number>\d+\.\d+)\s*[—-]\s*(?P<name>.*?)\s*★")
_EXERCISE_BLOCK = re.compile(r"^`{3,}\{exercise\}\s*(?P<title>.*)\n:label:\s*(?P<label>\S+)",
                             re.M)
_ROLE = re.compile(r"\{(?:prf:ref|ref|numref|eq|doc)\}`(?:[^`<]*<)?(?P<label>[^`>]*)>?`")
_CITE = re.compile(r"\{cite(?::\w+)?\}`([^`]*)`")
# words a reference falls back to, by label prefix, when no resolved name is known
_KIND = {"thm": "the theorem", "def": "the definition", "prop": "the proposition",
         "lem": "the lemma", "rem": "the remark", "fig": "the figure", "eq": "the equation",
         "tbl": "the table", "ex": "the exercise", "sol": "the solution"}


def escape_markdown(text: str) -> str:
    r"""``text`` with Markdown's emphasis characters escaped outside ``$...$`` math.

    Examples
    --------
    >>> escape_markdown("Find h* for n_2 at $h^*_n$")
    'Find h\\* for n\\_2 at $h^*_n$'
    """
    parts = re.split(r"(\$[^$]*\$)", text)
    return "".join(part if i % 2 else re.sub(r"([*_])", r"\\\1", part)
                   for i, part in enumerate(parts))


def exercise_name(title: str) -> str | None:
    """``"Exercise 1.1 (The Epanechnikov constants)"`` from an exercise's own title.

    Examples
    --------
    >>> exercise_name("1.2 — Find h* for a new sample size ★★ (computation)")
    'Exercise 1.2 (Find h* for a new sample size)'
    """
    match = _EXERCISE_TITLE.match(title.strip())
    if not match:
        return None
    return f"Exercise {match.group('number')} ({match.group('name')})"


def exercise_names(markdown: str) -> dict[str, str]:
    """Every exercise label of a MyST text with its name (:func:`exercise_name`)."""
    names = {}
    for block in _EXERCISE_BLOCK.finditer(markdown):
        name = exercise_name(block.group("title"))
        if name:
            names[block.group("label")] = name
    return names


def chapter_title(source: Path) -> str:
    """The ``# `` heading of a MyST chapter (its file stem if it has none)."""
    text = Path(source).read_text(encoding="utf-8")
    return next((ln[2:].strip() for ln in text.splitlines() if ln.startswith("# ")),
                Path(source).stem)


def _surname(person) -> str:
    from pybtex.richtext import Text

    return Text.from_latex(" ".join(person.prelast_names + person.last_names)).render_as("text")


def author_year_label(entry) -> str:
    """``Surname, Year`` / ``A and B, Year`` / ``A et al., Year`` of a pybtex entry."""
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [_surname(p) for p in people]
    if len(names) > 2:
        who = f"{names[0]} et al."
    else:
        who = " and ".join(names) or entry.fields.get("title", "Anonymous")
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


def citation_labels(bibfile: Path) -> dict[str, str]:
    """Every key of a BibTeX file with its author–year label."""
    from pybtex.database import parse_file

    return {key: author_year_label(entry)
            for key, entry in parse_file(str(bibfile)).entries.items()}


def resolve(markdown: str, names: dict[str, str], citations: dict[str, str]) -> str:
    """MyST text with its references and citations replaced by readable text.

    ``names`` maps a label to what a reference to it reads ("Theorem 3", "Fig. 4"); a label
    it lacks reads as its kind ("the theorem"). ``citations`` maps a BibTeX key to its
    author–year label; a citation reads "(Breiman, 2001; Hastie et al., 2009)".

    Examples
    --------
    >>> resolve("By {prf:ref}`thm-a` and {numref}`fig-b` {cite}`k1,k2`.",
    ...         {"thm-a": "Theorem 3"}, {"k1": "Breiman, 2001"})
    'By Theorem 3 and the figure (Breiman, 2001; k2).'
    """
    def reference(match):
        label = match.group("label").strip()
        return names.get(label) or _KIND.get(label.split("-")[0], label)

    def citation(match):
        keys = [k.strip() for k in match.group(1).split(",")]
        return "(" + "; ".join(citations.get(k, k) for k in keys) + ")"

    return _CITE.sub(citation, _ROLE.sub(reference, markdown))
