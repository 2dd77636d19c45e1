"""Citations and exercise names as the site prints them, for every edition.

The site cites author–year ("Breiman, 2001", ``book/_ext/authoryear_bib.py``) and names an
exercise "Exercise 1.1 (The Epanechnikov constants)" in its links
(``book/_ext/exercise_titles.py``). Both Sphinx extensions and the notebook editions'
converter (:mod:`mhacore.editions.reader`) take those words from here, so every edition prints the
same ones; :func:`read_references` is the one reader of the book's BibTeX file.
"""

from __future__ import annotations

import re
from pathlib import Path

# "1.1 — The Epanechnikov constants ★ (derivation)": the number, then the name (up to the
# first ★, trailing spaces dropped by exercise_name: a lazy ".*?\s*★" took cubic time on a
# long run of spaces without a ★)
_EXERCISE_TITLE = re.compile(r"^(?P<number>\d+\.\d+)\s*[—-]\s*(?P<name>[^★]*)★")


def escape_markdown(text: str) -> str:
    r"""``text`` with Markdown's emphasis characters escaped outside ``$...$`` math and
    ```...``` code.

    Examples
    --------
    >>> escape_markdown("Find h* for n_2 at $h^*_n$ in `a_b`")
    'Find h\\* for n\\_2 at $h^*_n$ in `a_b`'
    """
    parts = re.split(r"(\$[^$]*\$|`[^`]*`)", text)
    return "".join(part if i % 2 else re.sub(r"([*_])", r"\\\1", part)
                   for i, part in enumerate(parts))


def exercise_name(title: str) -> str | None:
    """``"Exercise 1.1 (The Epanechnikov constants)"`` from an exercise's own title.

    Examples
    --------
    >>> exercise_name("1.2 — Find h* for a new sample size ★★ (computation)")
    'Exercise 1.2 (Find h* for a new sample size)'
    >>> exercise_name("Count") is None
    True
    """
    title = title.strip()
    match = _EXERCISE_TITLE.match(title) if "★" in title else None
    if not match:
        return None
    return f"Exercise {match.group('number')} ({match.group('name').rstrip()})"


def _plain(latex: str) -> str:
    """BibTeX's LaTeX as plain text: ``{\\L}ukasz`` gives ``Łukasz``."""
    from pybtex.backends.plaintext import Backend
    from pybtex.richtext import Text

    # render(Backend()), not render_as("text"): that looks the backend up among the
    # installed packages' entry points on every call (20 ms each, 5 s for the book)
    return Text.from_latex(latex).render(Backend()) if latex else ""


def _people(entry) -> list:
    return entry.persons.get("author") or entry.persons.get("editor") or []


def author_year(entry) -> tuple[str, str]:
    """``("Surname", year)``, ``("A and B", year)`` or ``("A et al.", year)`` of a pybtex
    entry: the site's citation and bibliography label (:func:`author_year_label`) and the
    notebooks' ``(Surname, year)`` / ``Surname (year)``."""
    names = [_plain(" ".join(p.prelast_names + p.last_names)) for p in _people(entry)]
    if len(names) > 2:
        who = f"{names[0]} et al."
    else:
        who = " and ".join(names) or entry.fields.get("title", "Anonymous")
    return who, entry.fields.get("year", "n.d.")


def author_year_label(entry) -> str:
    """``Surname, Year`` / ``A and B, Year`` / ``A et al., Year`` of a pybtex entry."""
    return "{}, {}".format(*author_year(entry))


def _entry_text(key: str, entry) -> str:
    """The reference list's line for ``entry``: authors, year, title, venue, link."""
    full = [_plain(" ".join(p.last_names)) + ", " + " ".join(
        _plain(n)[0] + "." for n in p.first_names + p.middle_names if _plain(n))
        for p in _people(entry)]  # initials from the decoded names: "{\\L}ukasz" gives "Ł."
    fields = {k.lower(): _plain(v) for k, v in entry.fields.items()}
    venue = next((fields[k] for k in ("journal", "booktitle", "publisher", "howpublished",
                                      "school", "institution") if fields.get(k)), "")
    parts = [f"{'; '.join(full) or key} ({fields.get('year', 'n.d.')}). "
             f"{fields.get('title', '')}."]
    if venue:
        parts.append(f"*{venue}*" + (f" {fields['volume']}" if fields.get("volume") else "")
                     + (f", {fields['pages']}" if fields.get("pages") else "") + ".")
    if fields.get("eprint") and fields["eprint"] not in " ".join(parts):
        parts.append(f"arXiv:{fields['eprint']}.")
    elif fields.get("doi"):
        parts.append(f"doi:{fields['doi']}.")
    elif fields.get("url"):
        parts.append(fields["url"])
    return " ".join(parts)


def read_references(bibfile: Path) -> dict[str, dict]:
    """``{key: {"who": ..., "year": ..., "entry": formatted text}}`` for a BibTeX file:
    ``who`` and ``year`` as :func:`author_year` gives them, ``entry`` the line of a
    reference list, LaTeX decoded.

    A file that cannot be read or parsed (a missing file, a syntax error, a key given
    twice, a name or LaTeX pybtex cannot read) is a ``ValueError`` naming the file (and
    the entry, where the error is in one), in one line."""
    from pybtex.database import parse_file
    from pybtex.exceptions import PybtexError

    def problem(exc):
        return " ".join(str(exc).split())

    try:
        entries = parse_file(str(bibfile)).entries
    except PybtexError as exc:
        raise ValueError(f"BibTeX file {bibfile} cannot be read: {problem(exc)}") from None
    refs = {}
    for key, entry in entries.items():
        try:
            who, year = author_year(entry)
            refs[key] = {"who": _plain(who), "year": _plain(year),
                         "entry": _entry_text(key, entry)}
        except PybtexError as exc:
            raise ValueError(f"BibTeX file {bibfile}, entry {key}: {problem(exc)}") from None
    return refs
