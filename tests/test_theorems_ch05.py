"""Chapter 5's registered checks at book scale."""

from mhacore import theorems


def test_optimum_starts_far_from_it():
    details = theorems.run("decorrelation-optimum", scale="book").details
    assert details["initial_hdi"] < 0.05
    assert details["final_mse"] < details["initial_mse"]
