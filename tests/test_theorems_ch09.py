"""Chapter 9's checks on trained attention: they can hold, and their statistics are right."""

import numpy as np
import pytest
import statsmodels.api as sm

from mhacore import theorems
from mhacore.diversity import head_diversity_index
from mhacore.theorems import ch09_trained
from mhacore.training import Task, TrainConfig, init_params


def test_the_hdi_check_holds_when_training_does_push_heads_apart(monkeypatch):
    """The same layers trained with the diversity penalty in the loss (fewer seeds and steps,
    to keep the test short): the key HDI then rises far beyond 4 SE, so the check is not
    built to fail."""
    monkeypatch.setitem(ch09_trained.SETTINGS, "book", dict(seeds=4, steps=150, n_test=100))
    ch09_trained.trained_models.cache_clear()
    m = ch09_trained._check_raise_hdi("book", "cpu", theorems.DEFAULT_SEED, penalty=0.03)
    ch09_trained.trained_models.cache_clear()  # the book-scale checks must not see these
    assert m.side == "greater" and m.estimate - m.prediction > 4 * m.standard_error


def test_the_slope_and_its_se_are_those_of_ordinary_least_squares(monkeypatch):
    rng = np.random.default_rng(3)
    x = rng.uniform(0.5, 0.7, 16)  # (S,)
    y = 0.5 - 2.0 * x + rng.normal(0, 0.01, 16)  # (S,): a strong, negative relation
    fake = {"token_hdi_trained": x, "risk": y}
    monkeypatch.setattr(ch09_trained, "trained_models", lambda *args: fake)
    m = ch09_trained._check_diversity_risk("book", "cpu", 0)
    fit = sm.OLS(y, sm.add_constant(x)).fit()  # an implementation the check did not write
    assert m.estimate == pytest.approx(fit.params[1], rel=1e-10)
    assert m.standard_error == pytest.approx(fit.bse[1], rel=1e-10)
    assert m.side == "less" and m.prediction - m.estimate > 4 * m.standard_error  # it would hold


def test_token_keys_are_the_embedding_times_the_key_projections():
    params = init_params(TrainConfig(Task(x_dim=2), d_model=8, n_heads=4), [0, 1])
    keys = ch09_trained.token_keys(params)  # (S, H, d+1, d_head)
    expected = params.embed[1, :3].numpy() @ params.w_key[1, 2].numpy()  # (d+1, d_head)
    np.testing.assert_allclose(keys[1, 2], expected, rtol=1e-12)
    assert 0 <= head_diversity_index(keys[0]) <= 1
