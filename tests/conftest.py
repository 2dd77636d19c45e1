"""Hypothesis profile for the unit tests (DESIGN.md house rule 10): reproducible in CI."""

from hypothesis import settings

settings.register_profile("ci", deadline=None, derandomize=True, database=None, max_examples=40)
settings.load_profile("ci")
