"""Bad-input battery, class 2: autograd on every computation path (issue 12).

``torch.autograd.gradcheck`` in float64 on each path of :func:`mhacore.nw_estimate`
(fused, fused Gaussian, dense, chunked, the float64 direct-distance fallback at tiny
bandwidths) and through :class:`mhacore.MultiHeadNW`, including a tensor ``alpha``; each
path is forced with small arguments so the checks stay fast. Where gradients cannot flow
(numpy data with a grad-requiring parameter, a grad-requiring temperature) the code raises.
"""

import numpy as np
import pytest
import torch
from torch.autograd import gradcheck

from mhacore import MultiHeadNW, nw_estimate, nw_weights
from mhacore import nw as nw_module


def _data(m=3, n=5, d=2, e=None, spread=1.0, seed=0, fallback=False):
    g = torch.Generator().manual_seed(seed)
    if fallback:  # keys 1e-3 apart near 0 and two far keys: bandwidth 1e-3 needs direct distances
        k = torch.tensor([[0.0], [1e-3], [2e-3], [5.0], [-5.0]], dtype=torch.float64).requires_grad_()
        q = torch.tensor([[0.5e-3], [1.2e-3], [1.7e-3]], dtype=torch.float64).requires_grad_()
        v = torch.randn(5, *(() if e is None else (e,)), generator=g, dtype=torch.float64)
        return q, k, v.requires_grad_()
    q = (spread * torch.randn(m, d, generator=g, dtype=torch.float64)).requires_grad_()
    k = (spread * torch.randn(n, d, generator=g, dtype=torch.float64)).requires_grad_()
    shape = (n,) if e is None else (n, e)
    v = torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_()
    return q, k, v


PATHS = {
    # name: (kwargs for nw_estimate, data kwargs, expected path)
    "fused-softmax": (dict(), dict(), "_fused"),
    "fused-gaussian": (dict(kernel="gaussian", bandwidth=0.8), dict(), "_fused"),
    "dense-softmax-wide-values": (dict(), dict(e=4), "dense"),
    "dense-gaussian-fallback": (dict(kernel="gaussian", bandwidth=1e-3), dict(fallback=True, e=3), "dense"),
    "chunked-softmax": (dict(chunk_size=2), dict(), "_chunked"),
    "chunked-gaussian": (dict(kernel="gaussian", bandwidth=0.7, chunk_size=2), dict(), "_chunked"),
    "chunked-gaussian-fallback": (dict(kernel="gaussian", bandwidth=1e-3, chunk_size=2),
                                  dict(fallback=True), "_chunked"),
    "chunked-vector-values": (dict(chunk_size=3), dict(e=3), "_chunked"),
}


def _path_taken(monkeypatch, call):
    """Which path ``call`` takes: "_fused" (a fused result), "_chunked" or "dense"."""
    taken = []
    fused, chunked = nw_module._fused, nw_module._chunked

    def spy_fused(*args):
        out = fused(*args)
        taken.append("_fused" if out is not None else "fused-declined")
        return out

    monkeypatch.setattr(nw_module, "_fused", spy_fused)
    monkeypatch.setattr(nw_module, "_chunked", lambda *a: taken.append("_chunked") or chunked(*a))
    call()
    monkeypatch.undo()
    return "_chunked" if "_chunked" in taken else "_fused" if "_fused" in taken else "dense"


@pytest.mark.parametrize("name", sorted(PATHS))
def test_gradcheck_on_every_path(name, monkeypatch):
    kwargs, data, path = PATHS[name]
    q, k, v = _data(**data)
    assert _path_taken(monkeypatch, lambda: nw_estimate(q, k, v, **kwargs)) == path
    assert gradcheck(lambda a, b, c: nw_estimate(a, b, c, **kwargs), (q, k, v))


@pytest.mark.parametrize("name", sorted(PATHS))
def test_backward_gives_finite_gradients(name):
    kwargs, data, _ = PATHS[name]
    q, k, v = _data(**data)
    nw_estimate(q, k, v, **kwargs).sum().backward()
    for t in (q, k, v):
        assert t.grad is not None and torch.isfinite(t.grad).all()


def test_gaussian_fallback_really_runs(monkeypatch):
    """The tiny-bandwidth case above goes through torch.cdist (the direct distances)."""
    calls = []
    real = torch.cdist
    monkeypatch.setattr(torch, "cdist", lambda *a, **k: calls.append(1) or real(*a, **k))
    for kwargs in (dict(chunk_size=2), dict()):
        calls.clear()
        q, k, v = _data(fallback=True, e=3)
        w = nw_estimate(q, k, v, kernel="gaussian", bandwidth=1e-3, **kwargs)
        assert calls and torch.isfinite(w).all()


@pytest.mark.parametrize("kwargs", [dict(), dict(kernel="gaussian", bandwidth=0.5),
                                    dict(kernel="gaussian", bandwidth=1e-7)])
def test_gradcheck_weights(kwargs):
    q, k, _ = _data()
    assert gradcheck(lambda a, b: nw_weights(a, b, **kwargs), (q, k))


def _model_inputs():
    g = torch.Generator().manual_seed(4)
    wq = torch.randn(3, 4, 2, generator=g, dtype=torch.float64)
    wk = torch.randn(3, 4, 2, generator=g, dtype=torch.float64)
    x = torch.randn(6, 4, generator=g, dtype=torch.float64)
    y = torch.randn(6, generator=g, dtype=torch.float64)
    return wq, wk, x, y


@pytest.mark.parametrize("chunk_size", [None, 2])
def test_gradcheck_multihead_alpha(chunk_size):
    wq, wk, x, y = _model_inputs()
    raw = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64, requires_grad=True)

    def ensemble(a):
        return MultiHeadNW(wq, wk, alpha=a / a.sum())(x[:3], x, y, chunk_size=chunk_size)

    assert gradcheck(ensemble, (raw,))


@pytest.mark.parametrize("chunk_size", [None, 2])
def test_gradcheck_multihead_projections_and_data(chunk_size):
    wq, wk, x, y = _model_inputs()
    wq.requires_grad_(), wk.requires_grad_(), x.requires_grad_(), y.requires_grad_()
    alpha = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    assert gradcheck(lambda a, b, c, v: MultiHeadNW(a, b, alpha=alpha)(c[:3], c, v, chunk_size=chunk_size),
                     (wq, wk, x, y))


def test_gradcheck_multihead_replicated_values():
    """Shared queries/keys with replicate values take the value-column path."""
    wq, wk, x, y = _model_inputs()
    ys = torch.stack([y, 2 * y]).requires_grad_()  # (R=2, n)
    model = MultiHeadNW(wq, wk)
    assert gradcheck(lambda v: model(x[:3], x, v), (ys,))


def test_tensor_alpha_keeps_its_gradient():
    wq, wk, x, y = _model_inputs()
    alpha = torch.full((3,), 1 / 3, dtype=torch.float64, requires_grad=True)
    model = MultiHeadNW(wq, wk, alpha=alpha)
    model(x[:3], x, y).sum().backward()
    assert alpha.grad is not None and torch.isfinite(alpha.grad).all()
    heads = model.head_estimates(x[:3], x, y).detach()
    torch.testing.assert_close(alpha.grad, heads.sum(-1))


def test_grad_alpha_with_numpy_data_is_refused():
    wq, wk, x, y = _model_inputs()
    alpha = torch.full((3,), 1 / 3, dtype=torch.float64, requires_grad=True)
    model = MultiHeadNW(wq, wk, alpha=alpha)
    with pytest.raises(TypeError, match=r"requires grad.*torch tensors"):
        model(x[:3].numpy(), x.numpy(), y.numpy())


def test_grad_projection_with_numpy_data_is_refused():
    wq, wk, x, y = _model_inputs()
    model = MultiHeadNW(wq.requires_grad_(), wk)
    with pytest.raises(TypeError, match=r"w_query requires grad.*torch tensors"):
        model(x[:3].numpy(), x.numpy(), y.numpy())


@pytest.mark.parametrize("call", [
    lambda t: nw_estimate(np.zeros((2, 1)), np.ones((3, 1)), np.ones(3), temperature=t),
    lambda t: MultiHeadNW(np.ones((1, 1, 1)), np.ones((1, 1, 1)), temperature=t),
])
def test_grad_temperature_is_refused(call):
    t = torch.tensor(1.0, requires_grad=True)
    with pytest.raises(TypeError, match=r"temperature.*requires grad.*not supported"):
        call(t)


def test_no_grad_results_unchanged_by_the_grad_paths():
    """The out-of-place steps used under autograd give the in-place results."""
    q, k, v = _data(n=9)
    with torch.no_grad():
        a = nw_estimate(q, k, v, chunk_size=2)
    b = nw_estimate(q, k, v, chunk_size=2).detach()
    torch.testing.assert_close(a, b, rtol=0, atol=1e-14)


def test_path_names_exist():
    for name in ("_fused", "_chunked", "_online_softmax", "_gaussian_logits"):
        assert hasattr(nw_module, name)


def test_design_mse_loss_keeps_a_tensor_alpha_graph():
    from mhacore import DataModel
    from mhacore.optimize import design_mse_loss, random_subspaces

    model = DataModel(f=lambda x: x.sum(-1), p=3, sigma=0.5)
    alpha = torch.tensor([0.25, 0.75], dtype=torch.float64, requires_grad=True)
    loss = design_mse_loss(model, n=6, m=3, n_designs=2, alpha=alpha, rng=0)
    mse, _ = loss(torch.from_numpy(random_subspaces(2, 1, 3, rng=1)))
    mse.backward()
    assert alpha.grad is not None and torch.isfinite(alpha.grad).all()


# Beyond first order (issue 27, item 10): the fused kernels' backward has no derivative of
# its own, so ``higher_order=True`` (or a torch.func transform, or a dual tensor) keeps to
# the dense and chunked paths; each result is checked against torch's own softmax.

def _reference(q, k, v, scale):
    return torch.softmax(q @ k.transpose(-1, -2) * scale, dim=-1) @ v  # (m, n) @ (n,) -> (m,)


HIGHER = {"dense": dict(), "chunked": dict(chunk_size=2),
          "gaussian": dict(kernel="gaussian", bandwidth=0.8),
          "gaussian-direct-distances": dict(kernel="gaussian", bandwidth=1e-3)}


@pytest.mark.parametrize("name", sorted(HIGHER))
def test_gradgradcheck_when_asked(name):
    kwargs = HIGHER[name]
    q, k, v = _data(fallback=name.endswith("distances"))
    assert torch.autograd.gradgradcheck(lambda a, b, c: nw_estimate(a, b, c, higher_order=True, **kwargs),
                                        (q, k, v))


def test_second_derivative_without_asking_says_so():
    q, k, v = _data()
    with pytest.raises(RuntimeError, match="higher_order=True"):
        torch.autograd.grad(nw_estimate(q, k, v).sum(), q, create_graph=True)


def test_torch_func_transforms_match_torch_softmax():
    q, k, v = (t.detach() for t in _data(m=3, n=5, d=2))
    scale = 2 ** -0.5
    jac = torch.func.jacrev(lambda a: _reference(a, k, v, scale))(q)  # (m, m, d)
    torch.testing.assert_close(torch.func.jacfwd(lambda a: nw_estimate(a, k, v))(q), jac)
    torch.testing.assert_close(torch.func.jacfwd(lambda a: nw_estimate(a, k, v, chunk_size=2))(q), jac)
    hess = torch.autograd.functional.hessian(lambda a: _reference(a, k, v, scale).sum(), q)
    torch.testing.assert_close(torch.func.hessian(lambda a: nw_estimate(a, k, v).sum())(q), hess)
    torch.testing.assert_close(torch.autograd.functional.hessian(
        lambda a: nw_estimate(a, k, v, higher_order=True).sum(), q), hess)
    batch = torch.stack([q, 2 * q])  # (2, m, d)
    torch.testing.assert_close(torch.func.vmap(lambda a: nw_estimate(a, k, v))(batch),
                               torch.stack([_reference(x, k, v, scale) for x in batch]))


def test_forward_mode_dual_tensors():
    import torch.autograd.forward_ad as fwAD

    q, k, v = (t.detach() for t in _data())
    tangent = torch.ones_like(q)
    expected = torch.func.jvp(lambda a: _reference(a, k, v, 2 ** -0.5), (q,), (tangent,))[1]
    with fwAD.dual_level():
        out = nw_estimate(fwAD.make_dual(q, tangent), k, v)
        torch.testing.assert_close(fwAD.unpack_dual(out).tangent, expected)


def test_vmap_still_checks_the_data():
    q, k, v = (t.detach() for t in _data())
    bad = torch.stack([q, torch.full_like(q, float("nan"))])
    with pytest.raises(ValueError, match="queries must contain only finite values"):
        torch.func.vmap(lambda a: nw_estimate(a, k, v))(bad)


def test_multihead_hessian_and_vmap():
    wq, wk, x, y = _model_inputs()
    model = MultiHeadNW(wq, wk)
    x.requires_grad_()
    assert torch.autograd.gradgradcheck(lambda a: model(a[:3], a, y, higher_order=True), (x,))
    batch = torch.stack([x[:3], -x[:3]]).detach()  # (2, 3, p)
    torch.testing.assert_close(torch.func.vmap(lambda a: model(a, x.detach(), y))(batch),
                               torch.stack([model(b, x.detach(), y) for b in batch]))


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_higher_order_must_be_a_bool(bad):
    q, k, v = _data()
    with pytest.raises(TypeError, match="higher_order"):
        nw_estimate(q, k, v, higher_order=bad)


def test_principal_angles_refuse_a_graph_they_would_cut():
    from mhacore import principal_angles

    a = torch.eye(3, 2, dtype=torch.float64, requires_grad=True)
    with pytest.raises(TypeError, match=r"a requires grad.*a\.detach\(\)"):
        principal_angles(a, torch.eye(3, 1, dtype=torch.float64))
    with torch.no_grad():
        assert principal_angles(a, torch.eye(3, 1, dtype=torch.float64)).tolist() == [0.0]
