"""Bad-input battery, class 4: one conversion rule for types and devices (issue 12).

The rule (module docstring of :mod:`mhacore.nw` and the README's API section): floating
inputs keep their dtype and the common dtype is their promotion; integer and boolean
inputs (numpy or torch alike) take the floating inputs' dtype, or float64 when no input is
floating; complex, string, object and ragged inputs are rejected with a ``TypeError``
naming the parameter; torch inputs must share one device that holds data; ``dtype=``
arguments accept float32 or float64 (as torch, numpy or a string), nothing else.
"""

import numpy as np
import pytest
import torch

from mhacore import (DataModel, MultiHeadNW, bias_variance_covariance, design_covariance,
                     head_diversity_index, nw_estimate, nw_weights,
                     principal_angles, simulate_heads)
from mhacore import (colony_variance, effective_heads, ensemble_mse, error_second_moment, geometric_weights,
                     optimal_weights, simulate_assessments, sum_of_squares)
from mhacore.optimize import optimize_subspaces, random_subspaces
from mhacore.pretrained import load_head_projections
from mhacore._rng import as_generator, spawn
from mhacore._validation import check_int, check_positive

Q = np.array([[0.0, 1.0], [1.0, 0.0]])
K = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 0.0]])
V = np.array([1.0, 2.0, 4.0])
MODEL = DataModel(f=lambda x: x.sum(-1), p=2, sigma=0.0)
MHA = MultiHeadNW(np.ones((2, 2, 1)), np.ones((2, 2, 1)))


# ---------------------------------------------------------------- integers and booleans
INT_FORMS = {
    "numpy-int64": lambda a: a.astype(np.int64),
    "numpy-int32": lambda a: a.astype(np.int32),
    "numpy-uint8": lambda a: a.astype(np.uint8),
    "numpy-uint16": lambda a: a.astype(np.uint16),
    "numpy-uint32": lambda a: a.astype(np.uint32),
    "numpy-uint64": lambda a: a.astype(np.uint64),
    "numpy-bool": lambda a: a.astype(bool),
    "torch-int64": lambda a: torch.from_numpy(a.astype(np.int64)),
    "torch-int32": lambda a: torch.from_numpy(a.astype(np.int32)),
    "torch-uint8": lambda a: torch.from_numpy(a.astype(np.uint8)),
    "torch-bool": lambda a: torch.from_numpy(a.astype(bool)),
    "list-int": lambda a: a.astype(int).tolist(),
}
INT_Q, INT_K = np.array([[0, 1], [1, 0]]), np.array([[0, 0], [1, 1], [1, 0]])


@pytest.mark.parametrize("form", sorted(INT_FORMS))
def test_integer_and_boolean_inputs_become_float64(form):
    make = INT_FORMS[form]
    out = nw_weights(make(INT_Q), make(INT_K))
    expected = nw_weights(INT_Q.astype(np.float64), INT_K.astype(np.float64))
    out = out.numpy() if isinstance(out, torch.Tensor) else out
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, expected, rtol=1e-15)


@pytest.mark.parametrize("form", ["numpy-int64", "torch-int64", "torch-bool", "numpy-bool", "numpy-uint8",
                                  "numpy-uint16", "numpy-uint32", "numpy-uint64"])
def test_integers_take_the_floating_inputs_dtype(form):
    keys = INT_FORMS[form](INT_K)
    out = nw_estimate(torch.tensor(INT_Q, dtype=torch.float32), keys, torch.ones(3, dtype=torch.float32))
    assert out.dtype == torch.float32


@pytest.mark.parametrize("form", ["numpy-int64", "torch-int64", "torch-bool"])
def test_integer_values_take_float64_queries_dtype(form):
    out = nw_estimate(Q, K, INT_FORMS[form](np.array([1, 0, 1])))
    assert np.asarray(out).dtype == np.float64


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_float_inputs_keep_their_dtype(dtype):
    out = nw_weights(torch.tensor(Q, dtype=dtype), torch.tensor(K, dtype=dtype))
    assert out.dtype == dtype


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32, np.uint64, np.uint8])
def test_unsigned_values_follow_float32_data(dtype):
    q, k = Q.astype(np.float32), K.astype(np.float32)
    out = nw_estimate(q, k, np.array([1, 2, 4], dtype=dtype))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, nw_estimate(q, k, np.array([1.0, 2.0, 4.0], np.float32)), rtol=0)


def test_uint64_beyond_int64_keeps_its_value():
    big = np.array([2**64 - 1] * 3, dtype=np.uint64)
    np.testing.assert_array_equal(nw_estimate(Q, K, big), np.full(2, float(2**64 - 1)))
    assert nw_estimate(Q.astype(np.float32), K.astype(np.float32), big).dtype == np.float32


BF16_ALPHA = torch.tensor([0.5, 0.5], dtype=torch.bfloat16)


@pytest.mark.parametrize("call, expected", [
    (lambda: sum_of_squares(BF16_ALPHA), 0.5),
    (lambda: effective_heads(BF16_ALPHA), 2.0),
    (lambda: ensemble_mse(BF16_ALPHA, np.eye(2)), 0.5),
    (lambda: ensemble_mse([0.5, 0.5], torch.eye(2, dtype=torch.bfloat16)), 0.5),
    (lambda: bias_variance_covariance(np.array([[[1.0], [3.0]], [[3.0], [5.0]]]), np.zeros(1), alpha=BF16_ALPHA).mse,
     10.0),
    (lambda: MultiHeadNW(np.ones((2, 2, 1)), np.ones((2, 2, 1)), alpha=BF16_ALPHA)(Q, K, V),
     MHA(Q, K, V)),
    (lambda: MultiHeadNW(np.ones((2, 2, 1)), np.ones((2, 2, 1)), alpha=BF16_ALPHA)(
        torch.tensor(Q), torch.tensor(K), torch.tensor(V)).numpy(), MHA(Q, K, V)),
], ids=["sum_of_squares", "effective_heads", "ensemble_mse", "ensemble_mse-matrix", "bias_variance_covariance",
        "MultiHeadNW-numpy", "MultiHeadNW-torch"])
def test_bfloat16_alpha_is_a_floating_alpha(call, expected):
    np.testing.assert_allclose(call(), expected, rtol=1e-12)


def test_bfloat16_alpha_off_the_simplex_names_its_dtype():
    with pytest.raises(ValueError, match=r"alpha must lie in the simplex .*tolerance .* for bfloat16"):
        sum_of_squares(torch.tensor([0.5, 0.6], dtype=torch.bfloat16))


def test_float32_and_float64_promote_to_float64():
    out = nw_weights(torch.tensor(Q, dtype=torch.float32), torch.tensor(K))
    assert out.dtype == torch.float64


@pytest.mark.parametrize("form", ["torch-int64", "torch-bool", "numpy-uint8"])
def test_integer_inputs_accepted_by_diversity_and_decomposition(form):
    make = INT_FORMS[form]
    w = make(np.stack([np.eye(4)[:, :2], np.eye(4)[:, 2:]]))
    assert head_diversity_index(w) == 1.0
    angles = principal_angles(make(np.eye(3)[:, :2]), make(np.eye(3)[:, 2:]))
    np.testing.assert_allclose(np.asarray(angles), [np.pi / 2])
    d = bias_variance_covariance(make(np.array([[[1]], [[0]]])), make(np.array([0])))
    assert d.mse == 0.5


# ---------------------------------------------------------------- rejected types
REJECTED = [
    (lambda: nw_weights(np.array([["a", "b"]]), K), TypeError, r"queries must be a real numeric array; got dtype <U1"),
    (lambda: nw_weights([["1", "2"]], K), TypeError, r"queries must be a real numeric array; got dtype <U1"),
    (lambda: nw_weights([[0.0, 1.0], [1.0]], K), TypeError, r"queries must be a rectangular numeric array.*ragged"),
    (lambda: nw_weights(Q, [[0.0, 1.0], [1.0, 2.0, 3.0]]), TypeError, r"keys must be a rectangular numeric array"),
    (lambda: nw_estimate(Q, K, [1.0, [2.0], 3.0]), TypeError, r"values must be a rectangular numeric array"),
    (lambda: nw_weights(None, K), TypeError, r"queries must be a numpy array, a torch tensor or a nested list; got NoneType"),
    (lambda: nw_weights("abc", K), TypeError, r"queries must be a numpy array, a torch tensor or a nested list; got str"),
    (lambda: nw_weights(Q, {"a": 1}), TypeError, r"keys must be a numpy array, a torch tensor or a nested list; got dict"),
    (lambda: nw_weights(np.array([[object(), 1]]), K), TypeError, r"queries must be a real numeric array; got dtype object"),
    (lambda: nw_weights(Q.astype(complex), K), TypeError, r"queries must be a real numeric array; got dtype complex128"),
    (lambda: nw_weights(torch.tensor(Q, dtype=torch.complex64), K), TypeError, r"queries must be a real numeric array; got dtype torch.complex64"),
    (lambda: nw_weights(Q.astype("datetime64[s]"), K), TypeError, r"queries must be a real numeric array; got dtype datetime64"),
    (lambda: nw_weights(torch.tensor(Q).to_sparse(), torch.tensor(K)), TypeError, r"queries must be a dense \(strided\) tensor; got layout torch.sparse_coo"),
    (lambda: nw_weights(torch.zeros(2, 2, device="meta"), torch.zeros(3, 2, device="meta")), ValueError,
     r"queries must be on a device that holds data \(cpu, cuda, \.\.\.\); got meta"),
    (lambda: nw_estimate(torch.zeros(2, 2), torch.zeros(3, 2), torch.zeros(3, device="meta")), ValueError,
     r"torch inputs must be on one device"),
    (lambda: MultiHeadNW(torch.zeros(1, 2, 1, device="meta"), torch.zeros(1, 2, 1, device="meta")), ValueError,
     r"w_query must be on a device that holds data"),
    (lambda: head_diversity_index([[[1.0], [0.0]], [[0.0]]]), TypeError, r"w_key must be a rectangular numeric array"),
    (lambda: principal_angles("ab", np.eye(2)), TypeError, r"a must be a numpy array, a torch tensor or a nested list; got str"),
    (lambda: design_covariance([["x"]], 1.0), TypeError, r"weights must be a real numeric array"),
    (lambda: MHA(Q, K, ["1", "2", "3"]), TypeError, r"values must be a real numeric array"),
    (lambda: error_second_moment([[1.0, 2.0], [3.0]]), TypeError, r"covariance must be a rectangular numeric array"),
    (lambda: error_second_moment("ab"), TypeError, r"covariance must be a numpy array, a torch tensor or a nested list; got str"),
    (lambda: error_second_moment(None), TypeError, r"covariance must be a numpy array, .* got NoneType"),
    (lambda: error_second_moment(np.eye(2), bias=["a", "b"]), TypeError, r"bias must be a real numeric array"),
    (lambda: ensemble_mse([0.5, 0.5], "ab"), TypeError, r"second_moment must be a numpy array, .* got str"),
    (lambda: ensemble_mse([0.5, [0.5]], np.eye(2)), TypeError, r"alpha must be a rectangular numeric array"),
    (lambda: ensemble_mse("ab", np.eye(2)), TypeError, r"alpha must be a numpy array, .* got str"),
    (lambda: sum_of_squares(None), TypeError, r"alpha must be a numpy array, .* got NoneType"),
    (lambda: optimal_weights(np.eye(2) * (1 + 1j)), TypeError, r"second_moment must be a real numeric array; got dtype complex128"),
    (lambda: optimize_subspaces(random_subspaces(2, 1, 3, rng=0), lambda b: 3.0, n_steps=1), TypeError,
     r"loss must return \(scalar tensor, dict of floats\); got float 3.0"),
    (lambda: optimize_subspaces(random_subspaces(2, 1, 3, rng=0), lambda b: (b.sum() * np.nan, {}), n_steps=1),
     ValueError, r"loss must return a finite value; got nan at step 0"),
    (lambda: optimize_subspaces(random_subspaces(2, 1, 3, rng=0), lambda b: (torch.tensor(1.0), {}), n_steps=1),
     ValueError, r"loss must return a tensor computed from the bases"),
    (lambda: optimize_subspaces("abc", lambda b: (b.sum(), {}), n_steps=1), TypeError,
     r"initial_bases must be a numpy array, a torch tensor or a nested list; got str"),
    # integers that do not fit the floating inputs' dtype
    (lambda: nw_estimate(np.ones((3, 2), np.float16), np.ones((5, 2), np.float16), np.full(5, 100000)), ValueError,
     r"values holds integers up to 100000, which overflow float16"),
    (lambda: nw_weights(np.ones((3, 2), np.float16), np.full((5, 2), -70000)), ValueError,
     r"keys holds integers up to -70000, which overflow float16"),
    # numpy dtypes that torch lacks
    (lambda: nw_estimate(np.ones((3, 2), np.longdouble), np.ones((5, 2)), np.ones(5)), TypeError,
     r"queries must be a real numeric array of a dtype torch supports .*got dtype float128"),
    (lambda: principal_angles(np.eye(3)[:, :1].astype(np.longdouble), np.eye(3)[:, :1]), TypeError,
     r"a must be a real numeric array of a dtype torch supports"),
    # a torch module whose query/key biases are NaN is not bias-free
    (lambda: MultiHeadNW.from_torch(_mha_with_bias(float("nan"))), ValueError,
     r"mha must have finite, zero query/key biases .*got 8 NaN/inf"),
    # what f returns is named as f's output
    (lambda: simulate_heads(DataModel(f=lambda x: x.sum(-1) * np.nan, p=2, sigma=0.0), MHA, 5, Q, 2, rng=0),
     ValueError, r"f\(x\) must contain only finite values"),
    (lambda: simulate_heads(DataModel(f=lambda x: np.array(["a"] * x.shape[0]), p=2, sigma=0.0), MHA, 5, Q, 2, rng=0),
     TypeError, r"f\(x\) must be a real numeric array; got dtype <U1"),
    (lambda: simulate_heads(DataModel(f=lambda x: None, p=2, sigma=0.0), MHA, 5, Q, 2, rng=0),
     TypeError, r"f\(x\) must be a numpy array, a torch tensor or a nested list; got NoneType"),
    # bool parameters are bools
    (lambda: optimal_weights(np.diag([1.0, 3.0]), nonnegative="no"), TypeError,
     r"nonnegative must be a bool; got str 'no'"),
    (lambda: optimal_weights(np.diag([1.0, 3.0]), nonnegative=None), TypeError, r"nonnegative must be a bool"),
    (lambda: simulate_heads(MODEL, MHA, 4, Q, 2, rng=0, progress="x"), TypeError,
     r"progress must be None or a bool; got str 'x'"),
    (lambda: simulate_heads(MODEL, MHA, 4, Q, 2, rng=0, progress=1), TypeError, r"progress must be None or a bool"),
    # scalar parameters
    (lambda: simulate_assessments(2, 3, 0.5, quality="1"), TypeError, r"quality must be a finite number; got str '1'"),
    (lambda: simulate_assessments(2, 3, 0.5, quality=True), TypeError, r"quality must be a finite number; got bool"),
    (lambda: simulate_assessments(2, 3, 0.5, quality=np.nan), ValueError, r"quality must be a finite number; got nan"),
    (lambda: geometric_weights(3, torch.tensor([0.5])), TypeError, r"ratio must be a finite number > 0; got Tensor"),
    (lambda: geometric_weights(3, np.array(-0.5)), ValueError, r"ratio must be a finite number > 0; got -0.5"),
]


def _mha_with_bias(value):
    mha = torch.nn.MultiheadAttention(4, 2)
    torch.nn.init.constant_(mha.in_proj_bias, value)
    return mha


@pytest.mark.parametrize("index", range(len(REJECTED)))
def test_rejected_inputs_name_the_parameter(index):
    call, exc, pattern = REJECTED[index]
    with pytest.raises(exc, match=pattern):
        call()


# ---------------------------------------------------------------- dtype= arguments
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, np.int64, int, "int32", torch.complex64,
                                   "float99", 3])
def test_simulate_heads_rejects_non_float_dtypes(dtype):
    with pytest.raises(TypeError, match=r"dtype must be float32 or float64"):
        simulate_heads(MODEL, MHA, 4, Q, 2, rng=0, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, np.float32, np.float64, "float32", "float64",
                                   "torch.float64"])
def test_simulate_heads_accepts_float_dtypes(dtype):
    out = simulate_heads(MODEL, MHA, 4, Q, 2, rng=0, dtype=dtype)
    assert out.shape == (2, 2, 2) and np.isfinite(out).all()


@pytest.mark.parametrize("dtype", [torch.int64, torch.float16, "int", np.int32])
def test_to_torch_rejects_non_float_dtypes(dtype):
    model = MultiHeadNW(np.ones((2, 2, 1)), np.ones((2, 2, 1)))
    with pytest.raises(TypeError, match=r"dtype must be float32 or float64"):
        model.to_torch(dtype=dtype)


@pytest.mark.parametrize("dtype", ["float32", np.float64, torch.float32])
def test_to_torch_accepts_float_dtypes(dtype):
    mha = MultiHeadNW(np.ones((2, 2, 1)), np.ones((2, 2, 1))).to_torch(dtype=dtype)
    assert mha.in_proj_weight.dtype in (torch.float32, torch.float64)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, "int8", bool, torch.int64])
def test_load_head_projections_rejects_non_float_dtypes(dtype):
    with pytest.raises(TypeError, match=r"dtype must be float32 or float64"):
        load_head_projections(0, "key", dtype=dtype)


# ---------------------------------------------------------------- devices
@pytest.mark.parametrize("device", ["nonsense", "meta", 3.5, "xla", "xpu", "hpu:0"])
def test_simulate_heads_rejects_bad_devices(device):
    with pytest.raises((ValueError, TypeError), match=r"device must be"):
        simulate_heads(MODEL, MHA, 4, Q, 2, rng=0, device=device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message when CUDA is missing")
def test_simulate_heads_rejects_an_unavailable_cuda():
    with pytest.raises(ValueError, match=r"device must be available.*cuda"):
        simulate_heads(MODEL, MHA, 4, Q, 2, rng=0, device="cuda")


# ---------------------------------------------------------------- scalars
@pytest.mark.parametrize("value", [np.float32(2.0), np.int64(2), np.array(2.0), torch.tensor(2.0),
                                   torch.tensor(2), 2, 2.0])
def test_scalar_parameters_accept_numpy_and_0d_tensors(value):
    assert check_positive(value, "temperature") == 2.0
    out = nw_weights(Q, K, temperature=value)
    np.testing.assert_allclose(out, nw_weights(Q, K, temperature=2.0))


@pytest.mark.parametrize("value, exc, pattern", [
    (np.array([1.0, 2.0]), TypeError, r"temperature must be a finite number > 0; got ndarray"),
    (torch.tensor([2.0]), TypeError, r"temperature must be a finite number > 0; got Tensor"),
    ("2", TypeError, r"temperature must be a finite number > 0; got str '2'"),
    (True, TypeError, r"temperature must be a finite number > 0; got bool"),
    (1 + 2j, TypeError, r"temperature must be a finite number > 0; got complex"),
    (np.array(-1.0), ValueError, r"temperature must be a finite number > 0; got -1.0"),
])
def test_bad_scalars_are_rejected(value, exc, pattern):
    with pytest.raises(exc, match=pattern):
        nw_weights(Q, K, temperature=value)


@pytest.mark.parametrize("device", ["xla", "xpu", "hpu"])
def test_devices_without_a_backend_are_not_available(device):
    with pytest.raises(ValueError, match=rf"device must be available on this machine; got '{device}'"):
        simulate_heads(MODEL, MHA, 4, Q, 2, rng=0, device=device)


@pytest.mark.parametrize("ratio", [torch.tensor(0.5), np.array(0.5), np.float32(0.5), 0.5])
def test_geometric_ratio_accepts_0d_numbers(ratio):
    np.testing.assert_allclose(geometric_weights(3, ratio), [4 / 7, 2 / 7, 1 / 7], rtol=1e-15)


@pytest.mark.parametrize("quality", [torch.tensor(1.0), np.float64(1.0), np.array(1.0), 1])
def test_quality_accepts_0d_numbers(quality):
    np.testing.assert_array_equal(simulate_assessments(2, 3, 0.5, quality=quality, rng=4),
                                  simulate_assessments(2, 3, 0.5, quality=1.0, rng=4))


@pytest.mark.parametrize("flag", [True, False, np.bool_(True)])
def test_bool_parameters_accept_bools(flag):
    assert np.isfinite(optimal_weights(np.diag([1.0, 3.0]), nonnegative=flag)).all()
    assert simulate_heads(MODEL, MHA, 4, Q, 2, rng=0, progress=flag).shape == (2, 2, 2)


def test_from_torch_accepts_zero_biases():
    assert MultiHeadNW.from_torch(_mha_with_bias(0.0)).n_heads == 2


def test_colony_variance_accepts_0d_tensors():
    assert colony_variance(torch.tensor(0.0), 4, torch.tensor(2.0)) == 1.0


@pytest.mark.parametrize("value, expected", [(np.int64(3), 3), (np.uint8(3), 3), (torch.tensor(3), 3)])
def test_integer_parameters_accept_numpy_integers(value, expected):
    assert check_int(value, "n") == expected


@pytest.mark.parametrize("value, exc", [(3.0, TypeError), (np.float64(3.0), TypeError), (torch.tensor(3.0), TypeError),
                                        (-2, ValueError), (True, TypeError), ("3", TypeError)])
def test_integer_parameters_reject_others(value, exc):
    with pytest.raises(exc, match=r"n must be an integer >= 1"):
        check_int(value, "n")


@pytest.mark.parametrize("seed", [np.int64(5), np.uint32(5), 5])
def test_rng_accepts_numpy_integers(seed):
    assert as_generator(seed).integers(100) == as_generator(5).integers(100)


@pytest.mark.parametrize("seed, exc, pattern", [(-1, ValueError, r"got -1"), (1.5, TypeError, r"got float"),
                                                ("1", TypeError, r"got str"), (True, TypeError, r"got bool")])
def test_rng_rejects_others(seed, exc, pattern):
    with pytest.raises(exc, match=r"rng must be None, an integer >= 0.*" + pattern):
        as_generator(seed)


@pytest.mark.parametrize("count, exc", [(-1, ValueError), (2.0, TypeError), ("2", TypeError)])
def test_spawn_rejects_bad_counts(count, exc):
    with pytest.raises(exc, match=r"n_children must be an integer >= 0"):
        spawn(0, count)


# --- from the second adversarial review (issue 27) -----------------------------------------

def test_principal_angles_refuse_more_columns_than_rows():
    """A (2, 3) matrix is never of full column rank; it used to give angles anyway."""
    from mhacore import principal_angles

    with pytest.raises(ValueError, match=r"a must have full column rank, so at most p = 2 columns"):
        principal_angles(np.array([[1.0, 0, 1], [0, 1, 1]]), np.array([[1.0], [0]]))


def test_the_model_keeps_its_own_copies_and_rechecks_a_torch_alpha():
    from mhacore import MultiHeadNW

    w, a = np.ones((2, 2, 1)), np.array([0.25, 0.75])
    model = MultiHeadNW(w, w.copy(), alpha=a)
    w[0], a[:] = 5.0, [2.0, -1.0]  # the caller's arrays change afterwards
    assert model.w_query.flatten().tolist() == [1.0] * 4 and model.alpha.tolist() == [0.25, 0.75]
    alpha = torch.tensor([0.5, 0.5])
    model = MultiHeadNW(np.ones((2, 2, 1)), np.ones((2, 2, 1)), alpha=alpha)
    alpha[0], alpha[1] = 5.0, -4.0  # kept as given (for gradients), so checked at each call
    with pytest.raises(ValueError, match="alpha must lie in the simplex"):
        model(np.ones((1, 2)), np.ones((3, 2)), np.ones(3))


@pytest.mark.parametrize("device, error, words", [("gpu0", ValueError, "not a torch device"),
                                                  (3, TypeError, "got int 3"),
                                                  ("meta", ValueError, "holds no data")])
def test_head_diversity_indices_check_their_device(device, error, words):
    from mhacore.diversity import head_diversity_indices

    with pytest.raises(error, match=words):
        head_diversity_indices(np.random.default_rng(0).random((2, 2, 3, 1)), device=device)
