"""Chapter 9's checks on trained attention: they can hold, and their statistics are right."""

import numpy as np
import pytest
from scipy import stats

from mhacore import theorems
from mhacore.diversity import head_diversity_index
from mhacore.theorems import ch09_trained
from mhacore.training import Task, TrainConfig, init_params, token_keys


def test_the_frame_bound_check_holds_when_training_does_push_heads_apart(monkeypatch):
    """The same layers trained with the token-space diversity penalty in the loss (fewer
    seeds and steps, to keep the test short): the heads then come within a thousandth of
    the frame bound, where training alone leaves them about 0.05 short, so the check
    measures the shortfall and is not built to fail."""
    monkeypatch.setitem(ch09_trained.SETTINGS, "book", dict(seeds=4, steps=150, n_test=100))
    ch09_trained.trained_models.cache_clear()
    m = ch09_trained._check_frame_bound("book", "cpu", theorems.DEFAULT_SEED, penalty=1.0)
    ch09_trained.trained_models.cache_clear()  # the book-scale checks must not see these
    assert m.side == "both" and abs(m.estimate - m.prediction) < 0.001
    assert m.details["token_hdi_change"] > 4 * m.details["token_hdi_change_se"]


def test_the_risk_check_is_a_paired_t_statistic_and_holds_for_a_real_fall(monkeypatch):
    rng = np.random.default_rng(3)
    plain = {"risk": rng.normal(0.44, 0.03, 24), "token_hdi_trained": rng.normal(0.58, 0.02, 24)}
    diverse = {"risk": plain["risk"] - 0.01 + rng.normal(0, 0.002, 24),  # a real fall
               "token_hdi_trained": np.full(24, 0.64)}
    monkeypatch.setattr(ch09_trained, "trained_models",
                        lambda scale, device, seed, penalty=0.0: diverse if penalty else plain)
    m = ch09_trained._check_diversity_risk("book", "cpu", 0)
    test = stats.ttest_rel(diverse["risk"], plain["risk"])  # an implementation it did not write
    assert m.estimate / m.standard_error == pytest.approx(test.statistic, rel=1e-10)
    assert m.side == "less" and m.prediction - m.estimate > 4 * m.standard_error  # it would hold


def test_token_keys_are_the_embedding_times_the_key_projections():
    params = init_params(TrainConfig(Task(x_dim=2), d_model=8, n_heads=4), [0, 1])
    keys = token_keys(params).numpy()  # (S, H, d+1, d_head)
    expected = params.embed[1, :3].numpy() @ params.w_key[1, 2].numpy()  # (d+1, d_head)
    np.testing.assert_allclose(keys[1, 2], expected, rtol=1e-12)
    assert 0 <= head_diversity_index(keys[0]) <= 1
