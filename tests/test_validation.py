"""Bad-input battery for every public function of the mhacore core, and its doctests."""

import doctest
import importlib

import numpy as np
import pytest
import torch

import mhacore
from mhacore import (
    DataModel,
    MultiHeadNW,
    bias_variance_covariance,
    cross_gram,
    design_covariance,
    design_decomposition,
    head_diversity_index,
    max_feasible_hdi,
    nw_estimate,
    nw_weights,
    principal_angles,
    simulate_heads,
)

Q, K, V = np.zeros((3, 2)), np.ones((5, 2)), np.arange(5.0)
NAN_K = K.copy()
NAN_K[1, 0] = np.nan
W = np.ones((2, 4, 1))
W_KEY = np.stack([np.eye(4)[:, :2], np.eye(4)[:, 2:]])
MODEL = DataModel(f=lambda x: x.sum(-1), p=4, sigma=1.0)
MHA = MultiHeadNW(W, W)

BAD_INPUTS = [
    # (call, exception, message pattern)
    (lambda: nw_weights(Q, K, kernel="laplace"), ValueError, r"kernel must be one of .*got 'laplace'"),
    (lambda: nw_weights(Q, K, kernel="gaussian", bandwidth=0.0), ValueError, r"bandwidth must be a finite number > 0; got 0.0"),
    (lambda: nw_weights(Q, K, kernel="gaussian", bandwidth=np.nan), ValueError, r"bandwidth must be a finite number > 0; got nan"),
    (lambda: nw_weights(Q, K, kernel="gaussian"), ValueError, r"bandwidth must be a finite number > 0 for kernel='gaussian'; got None"),
    (lambda: nw_weights(Q, K, kernel="gaussian", bandwidth="1"), TypeError, r"bandwidth must be a finite number > 0; got str"),
    (lambda: nw_weights(Q, K, temperature=-1.0), ValueError, r"temperature must be a finite number > 0; got -1.0"),
    (lambda: nw_weights(Q, K, temperature=np.inf), ValueError, r"temperature must be a finite number > 0; got inf"),
    (lambda: nw_weights(Q, K, bandwidth=1.0), ValueError, r"bandwidth applies to kernel='gaussian' only"),
    (lambda: nw_weights(Q, K, kernel="gaussian", bandwidth=1.0, temperature=1.0), ValueError, r"temperature applies to kernel='softmax' only"),
    (lambda: nw_weights(Q, NAN_K), ValueError, r"keys must contain only finite values; got 1 NaN/inf"),
    (lambda: nw_weights(np.zeros((0, 2)), K), ValueError, r"queries must not be empty; got shape \(0, 2\)"),
    (lambda: nw_weights(np.zeros(2), K), ValueError, r"queries must have at least 2 dimensions; got shape \(2,\)"),
    (lambda: nw_weights(np.zeros((3, 3)), K), ValueError, r"same feature dimension d; got 3 and 2"),
    (lambda: nw_weights(np.zeros((2, 3, 2)), np.ones((4, 5, 2))), ValueError, r"leading \(batch\) dimensions must broadcast"),
    (lambda: nw_weights("abc", K), TypeError, r"queries must be a numpy array, a torch tensor or a nested list; got str"),
    (lambda: nw_weights(np.array([["a", "b"]]), K), TypeError, r"queries must be a real numeric array; got dtype <U1"),
    (lambda: nw_weights({"a": 1}, K), TypeError, r"queries must be a numpy array, a torch tensor or a nested list; got dict"),
    (lambda: nw_weights(Q.astype(complex), K), TypeError, r"queries must be a real numeric array; got dtype complex128"),
    (lambda: nw_estimate(Q, K, np.arange(4.0)), ValueError, r"values must have one entry per key \(n = 5\); got 4"),
    (lambda: nw_estimate(Q, K, np.ones((1, 1, 5, 1))), ValueError, r"values must have keys.ndim - 1 = 1 .* got shape \(1, 1, 5, 1\)"),
    (lambda: nw_estimate(Q, K, V, chunk_size=0), ValueError, r"chunk_size must be an integer >= 1; got 0"),
    (lambda: nw_estimate(Q, K, V, chunk_size=2.5), TypeError, r"chunk_size must be an integer >= 1; got float"),
    (lambda: nw_estimate(Q, K, np.array([0, 1, np.inf, 0, 0])), ValueError, r"values must contain only finite values"),
    (lambda: nw_estimate(torch.zeros(3, 2), torch.ones(5, 2, device="meta"), torch.ones(5)), ValueError, r"torch inputs must be on one device"),
    (lambda: MultiHeadNW(np.ones((4, 1)), np.ones((4, 1))), ValueError, r"w_query must have at least 3 dimensions; got shape \(4, 1\)"),
    (lambda: MultiHeadNW(np.ones((2, 4, 1, 1)), np.ones((2, 4, 1, 1))), ValueError, r"w_query must have shape \(n_heads, p, d_head\)"),
    (lambda: MultiHeadNW(W, np.ones((2, 4, 2))), ValueError, r"w_query and w_key must have the same shape .* got \(2, 4, 1\) and \(2, 4, 2\)"),
    (lambda: MultiHeadNW(W, W, alpha=[0.7, 0.7]), ValueError, r"alpha must lie in the simplex .* got sum 1.4"),
    (lambda: MultiHeadNW(W, W, alpha=[1.5, -0.5]), ValueError, r"alpha must lie in the simplex .* got min -0.5"),
    (lambda: MultiHeadNW(W, W, alpha=[1.0]), ValueError, r"alpha must have shape \(2,\) \(one weight per head\); got \(1,\)"),
    (lambda: MultiHeadNW(W, W, alpha=[np.nan, 1.0]), ValueError, r"alpha must contain only finite values"),
    (lambda: MultiHeadNW(W, W, temperature=0), ValueError, r"temperature must be a finite number > 0; got 0.0"),
    (lambda: MHA(np.zeros((3, 2)), K, V), ValueError, r"queries must have p = 4 features \(last dimension\); got 2"),
    (lambda: MHA.head_estimates(np.zeros((3, 4)), np.ones((5, 4)), V[:4]), ValueError, r"values must have one entry per key \(n = 5\); got 4"),
    (lambda: MHA.weights(np.zeros((3, 4)), np.full((5, 4), np.nan)), ValueError, r"keys must contain only finite values"),
    (lambda: principal_angles(np.ones((3, 2)), np.eye(3)[:, :1]), ValueError, r"a must have full column rank 2"),
    (lambda: principal_angles(np.eye(3)[:, :1], np.zeros((3, 1))), ValueError, r"b must have full column rank 1"),
    (lambda: principal_angles(np.eye(3), np.eye(4)), ValueError, r"a and b must have the same number of rows p; got 3 and 4"),
    (lambda: principal_angles(np.ones((2, 2, 2)), np.eye(2)), ValueError, r"a must have shape \(p, k\)"),
    (lambda: principal_angles(np.eye(2), np.full((2, 1), np.inf)), ValueError, r"b must contain only finite values"),
    (lambda: cross_gram(np.ones((2, 2, 3))), ValueError, r"w_key must have d_head <= p .* got d_head=3, p=2"),
    (lambda: cross_gram(np.ones((2, 3))), ValueError, r"w_key must have at least 3 dimensions"),
    (lambda: cross_gram(np.stack([np.eye(3)[:, :2], np.ones((3, 2))])), ValueError, r"w_key\[1\] must have full column rank 2"),
    (lambda: head_diversity_index(W_KEY[:1]), ValueError, r"w_key must hold n_heads >= 2 heads; got 1|n_heads >= 2 heads for a diversity index; got 1"),
    (lambda: max_feasible_hdi(1, 2, 4), ValueError, r"n_heads must be an integer >= 2; got 1"),
    (lambda: max_feasible_hdi(2, 5, 4), ValueError, r"d_head must be <= p = 4; got 5"),
    (lambda: max_feasible_hdi(2, 2.0, 4), TypeError, r"d_head must be an integer >= 1; got float"),
    (lambda: bias_variance_covariance(np.ones((5, 2)), np.ones(2)), ValueError, r"head_predictions must have at least 3 dimensions"),
    (lambda: bias_variance_covariance(np.ones((5, 2, 3)), np.ones(2)), ValueError, r"target must have shape \(m,\) = \(3,\) .* got \(2,\)"),
    (lambda: bias_variance_covariance(np.ones((1, 2, 3)), np.ones(3)), ValueError, r"R >= 2 replicates; got R = 1"),
    (lambda: bias_variance_covariance(np.ones((4, 2, 3)), np.ones(3), alpha=[1.0, 1.0]), ValueError, r"alpha must lie in the simplex"),
    (lambda: bias_variance_covariance(np.full((4, 2, 3), np.nan), np.ones(3)), ValueError, r"head_predictions must contain only finite values"),
    (lambda: design_covariance(np.ones((2, 3, 4)), sigma=-1.0), ValueError, r"sigma must be a finite number >= 0; got -1.0"),
    (lambda: design_covariance(np.ones((3, 4)), sigma=1.0), ValueError, r"weights must have at least 3 dimensions"),
    (lambda: design_decomposition(np.ones((2, 3, 4)), np.ones(5), np.ones(3), 1.0), ValueError, r"f_keys must have shape \(n,\) = \(4,\); got \(5,\)"),
    (lambda: design_decomposition(np.ones((2, 3, 4)), np.ones(4), np.ones(2), 1.0), ValueError, r"f_queries must have shape \(m,\) = \(3,\); got \(2,\)"),
    (lambda: DataModel(f=1.0, p=2, sigma=1.0), TypeError, r"f must be callable; got float"),
    (lambda: DataModel(f=np.sum, p=0, sigma=1.0), ValueError, r"p must be an integer >= 1; got 0"),
    (lambda: DataModel(f=np.sum, p=2, sigma=-0.1), ValueError, r"sigma must be a finite number >= 0; got -0.1"),
    (lambda: DataModel(f=np.sum, p=2, sigma=1.0, design="cauchy"), ValueError, r"design must be one of .* got 'cauchy'"),
    (lambda: simulate_heads(MODEL, MHA, 0, np.zeros((2, 4)), 3), ValueError, r"n must be an integer >= 1; got 0"),
    (lambda: simulate_heads(MODEL, MHA, 5, np.zeros((2, 4)), 0), ValueError, r"n_replicates must be an integer >= 1; got 0"),
    (lambda: simulate_heads(MODEL, MHA, 5, np.zeros((2, 3)), 3), ValueError, r"queries must have shape \(m, p\) with p = 4; got \(2, 3\)"),
    (lambda: simulate_heads(MODEL, MHA, 5, np.zeros((2, 4)), 3, fixed_design=np.zeros((4, 4))), ValueError, r"fixed_design must be a bool or an array of shape \(n, p\) = \(5, 4\)"),
    (lambda: simulate_heads(MODEL, MultiHeadNW(np.ones((1, 2, 1)), np.ones((1, 2, 1))), 5, np.zeros((2, 4)), 3), ValueError, r"mha.p must equal model.p = 4; got 2"),
    (lambda: simulate_heads("model", MHA, 5, np.zeros((2, 4)), 3), TypeError, r"model must be a DataModel; got str"),
    (lambda: simulate_heads(MODEL, MHA, 5, np.zeros((2, 4)), 3, rng=1.5), TypeError, r"rng must be None, an integer >= 0 or a numpy Generator; got float"),
    (lambda: simulate_heads(DataModel(f=lambda x: x, p=4, sigma=1.0), MHA, 5, np.zeros((2, 4)), 3), ValueError, r"f must map shape \(..., p\) to \(...\)"),
]


@pytest.mark.parametrize("call, exception, match", BAD_INPUTS, ids=[f"bad{i}" for i in range(len(BAD_INPUTS))])
def test_bad_input_is_rejected_with_a_named_message(call, exception, match):
    with pytest.raises(exception, match=match):
        call()


MODULES = ["_rng", "_validation", "nw", "attention", "diversity", "decomposition", "montecarlo"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(f"mhacore.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


def test_public_api_and_version():
    assert mhacore.__version__ == "0.1.0"
    for name in ["nw_weights", "nw_estimate", "MultiHeadNW", "principal_angles", "cross_gram", "head_diversity_index",
                 "max_feasible_hdi", "bias_variance_covariance", "BiasVarianceCovariance", "DataModel", "simulate_heads"]:
        assert callable(getattr(mhacore, name))
