"""Hypothesis profile for the unit tests (DESIGN.md house rule 10): reproducible in CI."""

import os

from hypothesis import settings

# Triton kernels (mhacore.nw_triton) run through Triton's CPU interpreter in the test session
# (tests/test_nw_triton.py). Triton makes that choice when it is first imported, so it is set
# here, before any test module or doctest imports it; nw_estimate hands only CUDA tensors to
# Triton, so nothing else changes on the CPU. An explicit TRITON_INTERPRET=0 is respected.
os.environ.setdefault("TRITON_INTERPRET", "1")

settings.register_profile("ci", deadline=None, derandomize=True, database=None, max_examples=40)
settings.load_profile("ci")
