"""Every registered theorem check, at book scale: it holds, it is reproducible, and its
registry entry points at a real chapter of the book."""

from pathlib import Path

import pytest

from mhacore import theorems

BOOK = Path(__file__).resolve().parents[1] / "book"


@pytest.mark.parametrize("theorem_id", list(theorems.REGISTRY))
def test_check_holds_at_book_scale(theorem_id, book_result):
    # a check holds, unless its chapter reports that the data do not support the claim
    result = book_result(theorem_id)
    assert result.as_reported, result.summary()
    side = theorems._registry.side_of(result.tolerance_rule)
    shown = result.estimate - result.prediction
    if side != "both":  # a directional claim: shown beyond 4 SE, or not
        assert (shown * (1 if side == "greater" else -1) > 4 * result.standard_error) == result.passed
    elif "4 SE" in result.tolerance_rule:  # possibly "... and <further conditions>"
        assert abs(shown) <= 4 * result.standard_error or not result.passed
    else:
        assert result.tolerance <= 1e-6 and abs(shown) <= result.tolerance


@pytest.mark.parametrize("theorem_id", list(theorems.REGISTRY))
def test_registry_entry_names_its_chapter_and_claim(theorem_id):
    theorem = theorems.REGISTRY[theorem_id]
    chapter = BOOK / f"{theorem.chapter}.md"
    assert chapter.is_file(), chapter
    assert theorem.claim and theorem.title and theorem.symbolic
    assert f'"{theorem_id}"' in chapter.read_text(encoding="utf-8"), \
        f"{theorem.chapter} does not run its check {theorem_id}"


@pytest.mark.parametrize("theorem_id", list(theorems.REGISTRY))
def test_monte_carlo_checks_state_their_power(theorem_id, book_result):
    # the ledger prints each Monte Carlo check's power line (the smallest perturbation detected)
    theorem = theorems.REGISTRY[theorem_id]
    result = book_result(theorem_id) if not theorem.power else None
    assert theorem.power or (result is not None and "atol" in result.tolerance_rule)


def test_same_seed_same_numbers():
    first = theorems.run("bvc-design-variance", scale="book", seed=7)
    second = theorems.run("bvc-design-variance", scale="book", seed=7)
    other = theorems.run("bvc-design-variance", scale="book", seed=8)
    assert (first.estimate, first.standard_error) == (second.estimate, second.standard_error)
    assert first.estimate != other.estimate


VERDICTS = ("supported", "supported only in a model", "mixed", "refuted", "untested")


def ledger_claims() -> dict[str, dict[str, str]]:
    """The ledger's claim table: per claim id, its cells by column name."""
    lines = [line for line in (BOOK / "ledger.md").read_text(encoding="utf-8").splitlines()
             if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
    return {row[0]: dict(zip(header, row)) for row in rows if row[0].startswith("C")}


def test_the_ledger_table_has_every_claim_a_verdict_and_the_registrys_kinds():
    """The kinds of evidence the table names for a claim are those of its checks, and
    each claim has one of the five verdicts with a reason and a chapter link."""
    table = ledger_claims()
    assert list(table) == list(theorems.CLAIMS)
    for claim, row in table.items():
        kinds = {t.kind for t in theorems.REGISTRY.values() if t.claim_id == claim}
        assert set(row["evidence"].split(", ")) == kinds, (claim, row["evidence"], kinds)
        assert row["verdict"] in VERDICTS, row
        assert "{doc}" in row["tested in"] and len(row["why"]) > 40, row
