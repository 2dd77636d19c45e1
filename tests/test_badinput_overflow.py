"""Bad-input battery, class 3: finite inputs never give NaN silently (issue 12).

Either the result is computed in a stable form (and checked against a closed form here),
or the call is rejected up front with a message naming the parameter and the overflow.
"""

import numpy as np
import pytest
import torch

from mhacore import (DataModel, MultiHeadNW, bias_variance_covariance, colony_variance, design_covariance,
                     ensemble_mse, error_second_moment, head_diversity_index, nw_estimate,
                     nw_weights, optimal_weights, principal_angles, scout_moments, simulate_assessments,
                     simulate_heads)

KEYS = np.array([[-1.0], [0.0], [2.0]])
VALUES = np.array([1.0, 2.0, 4.0])

OVERFLOW = [
    # softmax logits beyond the dtype's range: every path
    (lambda: nw_estimate(np.array([[1e200]]), np.array([[1e200], [2e200]]), np.array([1.0, 2.0])),
     r"softmax logits .*overflow float64"),
    (lambda: nw_estimate(np.array([[1e200]]), np.array([[1e200], [2e200]]), np.array([1.0, 2.0]), chunk_size=1),
     r"softmax logits .*overflow float64"),
    (lambda: nw_estimate(np.array([[1e200]]), np.array([[1e200], [2e200]]), np.ones((2, 3))),
     r"softmax logits .*overflow float64"),
    (lambda: nw_weights(np.array([[1e200]]), np.array([[1e200], [2e200]])),
     r"softmax logits .*overflow float64"),
    (lambda: nw_estimate(np.array([[1e30]], dtype=np.float32), np.array([[1e30], [2e30]], dtype=np.float32),
                         np.array([1.0, 2.0], dtype=np.float32)), r"softmax logits .*overflow float32"),
    (lambda: nw_weights(torch.full((2, 3), 1e20), torch.full((4, 3), 1e20)), r"softmax logits .*overflow float32"),
    (lambda: nw_estimate(torch.full((2, 3), 1e20), torch.full((4, 3), 1e20), torch.ones(4), chunk_size=2),
     r"softmax logits .*overflow float32"),
    (lambda: nw_weights(np.ones((2, 1)), np.ones((3, 1)), temperature=1e-310), r"temperature .*1/temperature overflows"),
    (lambda: nw_weights(np.ones((2, 1)), np.ones((3, 1)), temperature=5e-324), r"temperature .*1/temperature overflows"),
    (lambda: nw_weights(np.full((2, 1), 1e10), np.full((3, 1), 1e10), temperature=1e-300),
     r"softmax logits .*overflow float64"),
    (lambda: nw_weights(np.array([[0.5]], dtype=np.float32), np.ones((3, 1), dtype=np.float32), temperature=1e-40),
     r"softmax logits .*overflow float32"),
    # Gaussian: the scale 1/(2 h^2) and squared distances
    (lambda: nw_weights(np.ones((2, 1)), KEYS, kernel="gaussian", bandwidth=1e-200), r"bandwidth .*overflows"),
    (lambda: nw_weights(np.ones((2, 1)), KEYS, kernel="gaussian", bandwidth=5e-324), r"bandwidth .*overflows"),
    (lambda: nw_estimate(np.ones((2, 1)), KEYS, VALUES, kernel="gaussian", bandwidth=1e-160), r"bandwidth .*overflows"),
    (lambda: nw_estimate(np.array([[1e200]]), np.array([[-1e200], [2e200]]), np.array([1.0, 2.0]),
                         kernel="gaussian", bandwidth=1.0), r"Gaussian logits .*overflow float64"),
    (lambda: nw_estimate(np.array([[1e200]]), np.array([[-1e200], [2e200]]), np.array([1.0, 2.0]),
                         kernel="gaussian", bandwidth=1.0, chunk_size=1), r"Gaussian logits .*overflow float64"),
    (lambda: nw_weights(np.array([[1e200]]), np.array([[-1e200], [2e200]]), kernel="gaussian", bandwidth=1.0),
     r"Gaussian logits .*overflow float64"),
    (lambda: nw_weights(np.array([[1.0]]), np.array([[-1e300], [1e300]]), kernel="gaussian", bandwidth=1.0),
     r"Gaussian logits .*overflow float64"),
    # the ensemble model
    (lambda: MultiHeadNW(np.ones((1, 1, 1)), np.ones((1, 1, 1)), temperature=1e-320)(np.ones((1, 1)), KEYS, VALUES),
     r"temperature .*1/temperature overflows"),
    (lambda: MultiHeadNW(np.full((1, 1, 1), 1e160), np.full((1, 1, 1), 1e160))(np.ones((1, 1)), KEYS, VALUES),
     r"softmax logits .*overflow float64"),
    # colony: standard deviations whose squares overflow
    (lambda: scout_moments(0.5, 1e200), r"assessment_sd.*variance .*overflows"),
    (lambda: scout_moments(0.5, 1.0, 1e200), r"reassess_sd.*variance .*overflows"),
    (lambda: colony_variance(0.5, 4, 1e160), r"assessment_sd.*variance .*overflows"),
    (lambda: colony_variance(0.5, 4, 1e300, 1e300), r"variance .*overflows"),
    (lambda: simulate_assessments(3, 4, 0.5, 1e308, rng=0), r"(assessments|variance) .*overflows? float64"),
    (lambda: simulate_assessments(3, 4, 0.5, 1.0, 1e308, rng=0), r"(assessments|variance) .*overflows? float64"),
    (lambda: simulate_assessments(3, 4, 0.5, 5e307, quality=1.7e308, rng=0), r"(assessments|variance) .*overflows? float64"),
    # decompositions and weighting: overflowing squares
    (lambda: bias_variance_covariance(np.full((3, 2, 1), 1e200) * np.arange(3.0)[:, None, None], np.zeros(1)),
     r"overflow"),
    (lambda: design_covariance(np.full((1, 1, 2), 0.5), sigma=1e200), r"sigma.*overflows"),
    (lambda: error_second_moment(np.eye(2), bias=[1e200, 0.0]), r"overflow"),
    (lambda: error_second_moment(np.full((2, 2), 1.7e308), bias=[1e154, 1e154]), r"overflow"),
    # a projection that overflows is named as such, not as non-finite data
    (lambda: MultiHeadNW(np.full((2, 2, 1), 1e200), np.full((2, 2, 1), 1e200))(
        np.full((1, 2), 1e200), np.full((2, 2), 1e-200), np.ones(2)),
     r"queries projected by w_query overflow float64"),
    (lambda: MultiHeadNW(np.full((2, 2, 1), 1e20), np.ones((2, 2, 1)))(
        np.full((1, 2), 1e20, np.float32), np.ones((2, 2), np.float32), np.ones(2, np.float32)),
     r"queries projected by w_query overflow float32"),
    # responses whose noise overflows name sigma, not an internal array
    (lambda: simulate_heads(DataModel(f=lambda x: x.sum(-1), p=2, sigma=1e308),
                            MultiHeadNW(np.ones((2, 2, 1)), np.ones((2, 2, 1))), 5, np.zeros((3, 2)), 2, rng=0),
     r"sigma .*overflow float64"),
]


@pytest.mark.parametrize("index", range(len(OVERFLOW)))
def test_overflow_is_rejected_with_a_message(index):
    call, pattern = OVERFLOW[index]
    with pytest.raises(ValueError, match=pattern):
        call()


def _softmax_reference(logits):
    logits = np.asarray(logits, dtype=np.float64)
    w = np.exp(logits - logits.max(-1, keepdims=True))
    return w / w.sum(-1, keepdims=True)


STABLE = [
    # (call, expected) with the expected value from a closed form
    # huge bandwidth / temperature: the scale underflows to 0 and the weights are uniform
    (lambda: nw_estimate(np.ones((2, 1)), KEYS, VALUES, kernel="gaussian", bandwidth=1e200), np.full(2, 7 / 3)),
    (lambda: nw_estimate(np.ones((2, 1)), KEYS, VALUES, kernel="gaussian", bandwidth=1e300), np.full(2, 7 / 3)),
    (lambda: nw_estimate(np.ones((2, 1)), KEYS, VALUES, temperature=1e300), np.full(2, 7 / 3)),
    (lambda: nw_estimate(np.ones((2, 1)), KEYS, VALUES, temperature=1e308), np.full(2, 7 / 3)),
    # float32 data with a float32-overflowing Gaussian scale: nearest key takes the weight
    (lambda: nw_estimate(np.array([[0.1]], dtype=np.float32), KEYS.astype(np.float32),
                         VALUES.astype(np.float32), kernel="gaussian", bandwidth=1e-20), np.array([2.0])),
    (lambda: nw_estimate(np.array([[1.9]], dtype=np.float32), KEYS.astype(np.float32),
                         VALUES.astype(np.float32), kernel="gaussian", bandwidth=1e-20, chunk_size=2), np.array([4.0])),
    (lambda: nw_weights(np.array([[-0.9]], dtype=np.float32), KEYS.astype(np.float32),
                        kernel="gaussian", bandwidth=1e-22), np.array([[1.0, 0.0, 0.0]])),
    # float32 data far apart (distances^2 beyond float32) but within float64
    (lambda: nw_estimate(np.array([[0.0]], dtype=np.float32), np.array([[1e30], [3e30]], dtype=np.float32),
                         np.array([5.0, 7.0], dtype=np.float32), kernel="gaussian", bandwidth=1.0), np.array([5.0])),
    (lambda: nw_weights(np.array([[1e25]], dtype=np.float32), np.array([[0.0], [1.1e25]], dtype=np.float32),
                        kernel="gaussian", bandwidth=1.0), np.array([[0.0, 1.0]])),
    # big but representable softmax logits: the max-subtracted softmax is exact
    (lambda: nw_weights(np.array([[1e150]]), np.array([[1e150], [0.0]]), temperature=1.0), np.array([[1.0, 0.0]])),
    (lambda: nw_weights(np.array([[1e15]], dtype=np.float32), np.array([[1e15], [0.0]], dtype=np.float32),
                        temperature=1.0), np.array([[1.0, 0.0]])),
    # colony: tiny standard deviations underflow to a 0 variance, with the right correlation
    (lambda: scout_moments(0.5, 1e-200), (0.0, 0.25)),
    (lambda: scout_moments(1.0, 1e-200, 0.0), (0.0, 1.0)),
    (lambda: colony_variance(0.5, 4, 1e-200), 0.0),
    (lambda: scout_moments(0.5, 1e150, 1e150), (2e300, 0.125)),
    # large but finite decompositions and diversity
    (lambda: principal_angles(np.array([[1e200, 0.0], [0.0, 1e200], [1.0, 1.0]]), np.eye(3)[:, :1]), np.array([1e-200])),
    (lambda: head_diversity_index(np.stack([np.eye(4)[:, :2], np.eye(4)[:, 2:]]) * 1e300), 1.0),
    (lambda: head_diversity_index(np.stack([np.eye(4)[:, :2], np.eye(4)[:, 2:]]) * 1e-300), 1.0),
    (lambda: bias_variance_covariance(np.array([[[1e150]], [[-1e150]]]), np.zeros(1)).mse, 1e300),
    # an average of finite values is finite: values near the float range on every path
    (lambda: nw_estimate(np.zeros((1, 1)), np.zeros((2, 1)), [1.7e308, 1.7e308]), [1.7e308]),
    (lambda: nw_estimate(np.zeros((1, 1)), np.zeros((2, 1)), [1.7e308, 1.7e308], chunk_size=1), [1.7e308]),
    (lambda: nw_estimate(np.zeros((1, 1)), np.zeros((2, 1)), [1.7e308, 1.7e308], kernel="gaussian", bandwidth=1.0),
     [1.7e308]),
    (lambda: nw_estimate(np.zeros((1, 2)), np.zeros((2, 2)), [[1.7e308, 1.0], [1.7e308, 3.0]]), [[1.7e308, 2.0]]),
    (lambda: nw_estimate(np.zeros((1, 1)), np.zeros((2, 1)), [1.7e308, -1.7e308]), [0.0]),
    (lambda: nw_estimate(np.zeros((1, 1), np.float32), np.zeros((2, 1), np.float32),
                         np.array([3e38, 3e38], np.float32)), np.array([3e38], np.float32)),
    (lambda: nw_estimate(np.zeros((1, 2), np.float32), np.zeros((2, 2), np.float32),
                         np.array([3e38, 3e38], np.float32), chunk_size=1), np.array([3e38], np.float32)),
    # a softmax scale beyond float32 (1/temperature = 1e40) on data whose logits fit: exact
    (lambda: nw_weights(np.zeros((1, 2), np.float32), np.zeros((2, 2), np.float32), temperature=1e-40),
     [[0.5, 0.5]]),
    (lambda: nw_estimate(np.zeros((1, 2), np.float32), np.zeros((2, 2), np.float32),
                         np.array([1.0, 2.0], np.float32), temperature=1e-40), [1.5]),
    (lambda: nw_estimate(np.zeros((1, 2), np.float32), np.zeros((2, 2), np.float32),
                         np.array([1.0, 2.0], np.float32), temperature=1e-40, chunk_size=1), [1.5]),
    (lambda: nw_estimate(np.array([[1e-30, 0]], np.float32), np.array([[1e-30, 0], [0, 0]], np.float32),
                         np.array([1.0, 2.0], np.float32), temperature=1e-39), [1.5]),
    (lambda: nw_weights(np.zeros((1, 2), np.float16), np.zeros((2, 2), np.float16), temperature=1e-5),
     [[0.5, 0.5]]),
    # float32 Gaussian data near the float32 range: centring at the keys' mean in float64
    (lambda: nw_estimate(np.array([[0.0]], np.float32), np.array([[3e38], [3e38]], np.float32),
                         np.array([1.0, 2.0], np.float32), kernel="gaussian", bandwidth=1e38), [1.5]),
    (lambda: nw_estimate(np.array([[0.0]], np.float32), np.array([[3e38], [3e38]], np.float32),
                         np.array([1.0, 2.0], np.float32), kernel="gaussian", bandwidth=1e38, chunk_size=1), [1.5]),
    # weighting: quadratic forms and optimal weights at the ends of the float range
    (lambda: ensemble_mse([0.5, 0.5], [[1.7e308, -1.7e308], [-1.7e308, 1.7e308]]), 0.0),
    (lambda: ensemble_mse([0.5, 0.5], [[1.7e308, 1.7e308], [1.7e308, 1.7e308]]), 1.7e308),
    (lambda: optimal_weights([[1e-310, 0], [0, 3e-310]]), [0.75, 0.25]),
    (lambda: optimal_weights([[1e-310, 0], [0, 3e-310]], nonnegative=False), [0.75, 0.25]),
    (lambda: optimal_weights([[1e300, 0], [0, 3e300]]), [0.75, 0.25]),
    # colony: a re-assessment noise far above the assessment error
    (lambda: scout_moments(0.5, 1e-200, 1.0), (1.0, 0.0)),
    (lambda: colony_variance(0.5, 4, 1e-200, 1.0), 0.25),
]


@pytest.mark.parametrize("index", range(len(STABLE)))
def test_stable_forms_give_the_closed_form(index):
    call, expected = STABLE[index]
    result = call()
    result = np.asarray(result if not isinstance(result, torch.Tensor) else result.numpy(), dtype=np.float64)
    assert np.isfinite(result).all()
    np.testing.assert_allclose(result, np.asarray(expected, dtype=np.float64), rtol=1e-6, atol=0)


def _gaussian_reference(queries, keys, values, bandwidth):
    queries, keys = np.asarray(queries, np.float64), np.asarray(keys, np.float64)
    logits = -(((queries[:, None, :] - keys[None]) / bandwidth) ** 2).sum(-1) / 2  # (m, n)
    return _softmax_reference(logits) @ np.asarray(values, np.float64)


F32 = lambda a: np.array(a, np.float32)  # noqa: E731
FAR = [  # float32 data whose differences exceed float32 (the keys' mean of row 2 overflows it)
    (F32([[3e38]]), F32([[-3e38], [-2e38]]), F32([1.0, 2.0]), 1e38),
    (F32([[-3e38]]), F32([[3e38], [2e38]]), F32([1.0, 2.0]), 1e38),
    (F32([[3e38, 0.0]]), F32([[-3e38, 0.0], [-2e38, 1.0]]), F32([1.0, 2.0]), 1e38),
]


@pytest.mark.parametrize("index", range(len(FAR)))
@pytest.mark.parametrize("chunk_size", [None, 1])
def test_float32_gaussian_far_apart_matches_float64(index, chunk_size):
    queries, keys, values, bandwidth = FAR[index]
    out = nw_estimate(queries, keys, values, kernel="gaussian", bandwidth=bandwidth, chunk_size=chunk_size)
    assert out.dtype == np.float32 and np.isfinite(out).all()
    np.testing.assert_allclose(out, _gaussian_reference(queries, keys, values, bandwidth), rtol=1e-6)
    weights = nw_weights(queries, keys, kernel="gaussian", bandwidth=bandwidth)
    np.testing.assert_allclose(weights[0], _softmax_reference(
        -(((queries.astype(float)[:, None] - keys.astype(float)[None]) / bandwidth) ** 2).sum(-1) / 2)[0], rtol=1e-5)


N_HALF = 70_000  # more keys than float16's largest number (65504): a float16 running sum overflows


@pytest.mark.parametrize("call", [
    lambda: nw_estimate(np.zeros((64, 1), np.float16), np.zeros((N_HALF, 1), np.float16),
                        np.ones(N_HALF, np.float16), kernel="gaussian", bandwidth=1.0),
    lambda: nw_estimate(np.zeros((1, 1), np.float16), np.zeros((N_HALF, 1), np.float16),
                        np.ones(N_HALF, np.float16), chunk_size=1024),
    lambda: nw_estimate(np.zeros((1, 1), np.float16), np.zeros((N_HALF, 1), np.float16),
                        np.ones(N_HALF, np.float16)),
    lambda: nw_estimate(torch.zeros(1, 1, dtype=torch.bfloat16), torch.zeros(N_HALF, 1, dtype=torch.bfloat16),
                        torch.ones(N_HALF, dtype=torch.bfloat16), chunk_size=1024),
], ids=["f16-gaussian", "f16-softmax-chunked", "f16-softmax-auto", "bf16-softmax-chunked"])
def test_half_precision_sums_over_many_keys_stay_finite(call):
    out = call()
    out = out.float().numpy() if isinstance(out, torch.Tensor) else out.astype(np.float32)
    np.testing.assert_array_equal(out, np.ones_like(out))  # the average of ones is exactly 1


def test_half_precision_average_of_random_values():
    values = np.random.default_rng(0).uniform(1.0, 2.0, N_HALF).astype(np.float16)  # (n,)
    out = nw_estimate(np.zeros((1, 1), np.float16), np.zeros((N_HALF, 1), np.float16), values, chunk_size=1024)
    # float16 rounding of the result: half an ulp at 1.5 is 2**-11 ~ 5e-4
    np.testing.assert_allclose(out.astype(np.float64), [values.astype(np.float64).mean()], rtol=1e-3)


def test_softmax_reference_helper():
    np.testing.assert_allclose(_softmax_reference([[0.0, np.log(3)]]), [[0.25, 0.75]])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("chunk_size", [None, 1])
def test_low_temperature_on_small_dot_products_is_computed(dtype, chunk_size):
    """q/temperature beyond the dtype while the logits fit it (issue 27, item 11): float64 logits.

    Queries of 10 against keys of 1e-3 at temperature 1e-3 (1e-40 in float32): the scaled
    queries pass the dtype's range, the logits (10 and 0) do not; it used to be refused.
    """
    temperature = 1e-40 if dtype == torch.float32 else 1e-3
    small = 1e-3 if dtype != torch.float32 else 1e-39
    q, k = torch.tensor([[10.0]]), torch.tensor([[0.0], [small]])  # logits 0 and 10
    v = torch.tensor([1.0, 2.0])
    expected = torch.softmax(torch.tensor([0.0, 10.0], dtype=torch.float64), 0)
    weights = nw_weights(q.to(dtype), k.to(dtype), temperature=temperature)
    torch.testing.assert_close(weights.double(), expected[None].double(), rtol=1e-2, atol=1e-4)
    estimate = nw_estimate(q.to(dtype), k.to(dtype), v.to(dtype), temperature=temperature, chunk_size=chunk_size)
    torch.testing.assert_close(estimate.double(), (expected @ v.double())[None], rtol=1e-2, atol=1e-3)
