"""Bad-input battery, class 8: corrupt checkpoint files (issue 12).

A corrupt weights file or ``config.json`` for :mod:`mhacore.pretrained` raises a
``ValueError`` naming the file and the problem, never the library's raw error.
(Class 7, untrusted answer text in :mod:`mhacore.exercises`, is tested with that module.)
"""

import json

import numpy as np
import pytest

from mhacore.pretrained import checkpoint_info, load_all_head_projections, load_head_projections


def _checkpoint(folder, config=None, weights=None, n_layers=2, n_heads=2, d_head=2):
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    p = n_heads * d_head
    if weights is None:
        rng = np.random.default_rng(0)
        tensors = {f"encoder.layer.{i}.attention.self.{name}.weight": rng.normal(size=(p, p)).astype(np.float32)
                   for i in range(n_layers) for name in ("query", "key", "value")}
        save_file(tensors, str(folder / "model.safetensors"))
    else:
        (folder / "model.safetensors").write_bytes(weights)
    text = json.dumps({"num_attention_heads": n_heads}) if config is None else config
    (folder / "config.json").write_bytes(text if isinstance(text, bytes) else text.encode())
    return folder


def test_a_good_toy_checkpoint_loads(tmp_path):
    folder = _checkpoint(tmp_path / "ok")
    assert load_head_projections(1, "key", path=folder).shape == (2, 4, 2)


BAD_CONFIGS = [
    ("{not json", r"config\.json .*is not valid JSON"),
    ("", r"config\.json .*is not valid JSON"),
    (b"\xff\xfe\x00bad", r"config\.json .*is not valid (UTF-8|JSON)"),
    ("[1, 2]", r"config\.json .*must hold a JSON object"),
    ('{"hidden_size": 4}', r"config\.json .*must define num_attention_heads"),
    ('{"num_attention_heads": "two"}', r"num_attention_heads must be an integer >= 1; got 'two'"),
    ('{"num_attention_heads": 0}', r"num_attention_heads must be an integer >= 1; got 0"),
    ('{"num_attention_heads": -2}', r"num_attention_heads must be an integer >= 1; got -2"),
    ('{"num_attention_heads": 1.5}', r"num_attention_heads must be an integer >= 1; got 1.5"),
    ('{"num_attention_heads": null}', r"num_attention_heads must be an integer >= 1; got None"),
    ('{"num_attention_heads": 3}', r"key weight rows \(4\) must be divisible by num_attention_heads = 3"),
]


@pytest.mark.parametrize("config, pattern", BAD_CONFIGS)
def test_corrupt_config_names_the_file(tmp_path, config, pattern):
    folder = _checkpoint(tmp_path / "c", config=config)
    with pytest.raises(ValueError, match=pattern) as info:
        checkpoint_info(folder)
    assert "config.json" in str(info.value) or "num_attention_heads" in str(info.value)


BAD_WEIGHTS = [
    b"",
    b"garbage that is not a safetensors file",
    b"\x10\x00\x00\x00\x00\x00\x00\x00{\"a\": 1",  # header length beyond the file
    (8).to_bytes(8, "little") + b"not-json",
    (2**40).to_bytes(8, "little") + b"{}",
]


@pytest.mark.parametrize("index", range(len(BAD_WEIGHTS)))
@pytest.mark.parametrize("call", [checkpoint_info, lambda f: load_head_projections(0, path=f),
                                  lambda f: load_all_head_projections(path=f)])
def test_corrupt_weights_name_the_file(tmp_path, index, call):
    folder = _checkpoint(tmp_path / "w", weights=BAD_WEIGHTS[index])
    with pytest.raises(ValueError, match=r"model\.safetensors .*is not a readable safetensors file"):
        call(folder)


def test_truncated_weights_name_the_file(tmp_path):
    good = _checkpoint(tmp_path / "good")
    data = (good / "model.safetensors").read_bytes()
    folder = _checkpoint(tmp_path / "cut", weights=data[: len(data) - 40])
    with pytest.raises(ValueError, match=r"model\.safetensors .*is not a readable safetensors file"):
        load_head_projections(1, "value", path=folder)


def test_weights_of_the_wrong_rank_are_rejected(tmp_path):
    from safetensors.numpy import save_file

    folder = _checkpoint(tmp_path / "rank")
    save_file({"encoder.layer.0.attention.self.key.weight": np.ones(4, dtype=np.float32)},
              str(folder / "model.safetensors"))
    with pytest.raises(ValueError, match=r"must be a 2-D .*got shape \(4,\)"):
        checkpoint_info(folder)
