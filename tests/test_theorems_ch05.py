"""Chapter 5's registered checks at book scale."""

import pytest

from mhacore import theorems

IDS = ["decorrelation-optimum", "random-subspace-hdi"]


@pytest.mark.parametrize("theorem_id", IDS)
def test_check_passes_at_book_scale(theorem_id):
    result = theorems.run(theorem_id, scale="book")
    assert result.passed, result.summary()
    assert result.chapter == "05-decorrelation"
    assert result.wall_time_s < 5


def test_optimum_starts_far_from_it():
    details = theorems.run("decorrelation-optimum", scale="book").details
    assert details["initial_hdi"] < 0.05
    assert details["final_mse"] < details["initial_mse"]
