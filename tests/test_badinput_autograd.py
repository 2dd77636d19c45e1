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
