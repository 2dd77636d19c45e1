"""Tests of mhacore.minilm_heads: MiniLM's heads on real text.

Provenance of the expected values (house rule 8): the forward pass and the head mask are held
to an independent implementation, ``transformers``' ``BertModel`` read from the same local
folder (``local_files_only=True``); ``transformers`` 5 has no ``head_mask`` argument, so the
oracle's head is zeroed by hand, by a hook that zeroes that head's slice of the input of the
output projection. The whitened HDI is held to identities (``Σ = I`` gives the raw HDI; a
multiple of ``Σ`` changes nothing) and to an independent route, SciPy's ``subspace_angles``
between the heads' feature matrices (canonical correlations). The correlation and CKA are held
to their token-level definitions, and the report's per-sentence route to the token-level one.
"""

import json
import math
import re
from dataclasses import replace

import numpy as np
import pytest
import scipy.linalg
import torch
import torch.nn.functional as F

from mhacore import minilm_heads as mh
from mhacore.diversity import head_diversity_index
from mhacore.pretrained import load_head_projections

pytest.importorskip("tokenizers")

TEXTS = ["Heads are smoothers.",
         "A well-studied case of collective decision-making is nest-site selection by ants.",
         "Forests and colonies follow the curves within four standard errors at every size."]


@pytest.fixture(scope="module")
def model64():
    return mh.load_minilm(dtype=torch.float64)


@pytest.fixture(scope="module")
def batch(model64):
    return mh.tokenize(model64, TEXTS)  # padded: the three texts have different lengths


@pytest.fixture(scope="module")
def base(model64, batch):
    return mh.forward(model64, *batch)


def _oracle(model, dtype):
    transformers = pytest.importorskip("transformers")
    return transformers.BertModel.from_pretrained(str(model.folder), local_files_only=True, dtype=dtype,
                                                  attn_implementation="eager").eval()


@pytest.fixture(scope="module")
def oracle64(model64):
    return _oracle(model64, torch.float64)


def _masked(a, mask):
    """Zero padded positions: (B, n, ...) with mask (B, n)."""
    return a * mask.reshape(*mask.shape, *([1] * (a.ndim - 2))).to(a.dtype)


def _oracle_run(oracle, ids, mask, heads=()):
    """Oracle forward with the listed (layer, head) pairs zeroed by hand: a pre-hook zeroes each
    head's d_head columns of the input of attention.output.dense (the concatenated contexts)."""
    d_head = oracle.config.hidden_size // oracle.config.num_attention_heads
    hooks = []
    for layer, head in heads:
        def zero(module, args, head=head):
            x = args[0].clone()
            x[..., head * d_head:(head + 1) * d_head] = 0.0
            return (x,)
        hooks.append(oracle.encoder.layer[layer].attention.output.dense.register_forward_pre_hook(zero))
    try:
        with torch.no_grad():
            out = oracle(input_ids=ids, attention_mask=mask.long(), output_hidden_states=True, output_attentions=True)
    finally:
        for hook in hooks:
            hook.remove()
    m = mask.to(out.last_hidden_state.dtype)[..., None]
    pooled = F.normalize((out.last_hidden_state * m).sum(1) / m.sum(1), dim=1)  # sentence-transformers' mean + Normalize
    return out, pooled


# --- the forward pass against transformers ------------------------------------------------

def test_forward_matches_transformers_float64(model64, batch, base, oracle64):
    ids, mask = batch
    assert bool((~mask).any())  # the batch really is padded
    out, pooled = _oracle_run(oracle64, ids, mask)
    assert len(out.hidden_states) == len(base.hidden_states) == 7
    for ours, theirs in zip(base.hidden_states, out.hidden_states):
        torch.testing.assert_close(_masked(ours, mask), _masked(theirs, mask), rtol=0, atol=1e-12)
    for ours, theirs in zip(base.weights, out.attentions):  # (B, H, n, n), real query rows
        torch.testing.assert_close(ours * mask[:, None, :, None], theirs * mask[:, None, :, None], rtol=0, atol=1e-12)
    torch.testing.assert_close(base.sentence_embeddings, pooled, rtol=0, atol=1e-12)


def test_forward_matches_transformers_float32():
    model = mh.load_minilm(dtype="float32")
    ids, mask = mh.tokenize(model, TEXTS)
    ours = mh.forward(model, ids, mask)
    out, pooled = _oracle_run(_oracle(model, torch.float32), ids, mask)
    for a, b in zip(ours.hidden_states, out.hidden_states):
        torch.testing.assert_close(_masked(a, mask), _masked(b, mask), rtol=0, atol=1e-5)
    torch.testing.assert_close(ours.sentence_embeddings, pooled, rtol=0, atol=1e-5)


def test_head_mask_matches_oracle_zeroed_by_hand(model64, batch, oracle64):
    ids, mask = batch
    heads = [(1, 3), (4, 0), (4, 11)]
    ours = mh.forward(model64, ids, mask, head_mask=mh.ablation_mask(model64, heads))
    out, pooled = _oracle_run(oracle64, ids, mask, heads)
    for a, b in zip(ours.hidden_states, out.hidden_states):
        torch.testing.assert_close(_masked(a, mask), _masked(b, mask), rtol=0, atol=1e-12)
    torch.testing.assert_close(ours.sentence_embeddings, pooled, rtol=0, atol=1e-12)


def test_masking_one_head_changes_only_what_follows_it(model64, batch, base):
    layer, head = 2, 5
    out = mh.forward(model64, *batch, head_mask=mh.ablation_mask(model64, [(layer, head)]))
    for l in range(layer + 1):  # states entering layers 0..layer: bit-for-bit the same
        assert torch.equal(out.layer_inputs[l], base.layer_inputs[l])
    for l in range(layer):
        assert torch.equal(out.contexts[l], base.contexts[l])
    others = [h for h in range(model64.n_heads) if h != head]
    assert torch.equal(out.contexts[layer][:, others], base.contexts[layer][:, others])
    assert torch.equal(out.weights[layer], base.weights[layer])  # masking acts after the weights
    assert not out.contexts[layer][:, head].any()
    assert (out.layer_inputs[layer + 1] - base.layer_inputs[layer + 1]).abs().max() > 1e-3
    assert (out.sentence_embeddings - base.sentence_embeddings).abs().max() > 1e-6


def test_masking_every_head_of_a_layer_leaves_the_residual_path(model64, batch, base):
    layer = 3
    out = mh.forward(model64, *batch, head_mask=mh.ablation_mask(model64, [(layer, h) for h in range(12)]))
    w = lambda name: model64.weights[f"encoder.layer.{layer}.{name}"]
    x = base.layer_inputs[layer]  # (B, n, p)
    eps = model64.layer_norm_eps
    # no head: the attention block adds only the output bias to the residual stream
    attended = F.layer_norm(x + w("attention.output.dense.bias"), (384,), w("attention.output.LayerNorm.weight"),
                            w("attention.output.LayerNorm.bias"), eps)
    hidden = F.gelu(attended @ w("intermediate.dense.weight").T + w("intermediate.dense.bias"))
    expected = F.layer_norm(hidden @ w("output.dense.weight").T + w("output.dense.bias") + attended, (384,),
                            w("output.LayerNorm.weight"), w("output.LayerNorm.bias"), eps)
    torch.testing.assert_close(out.layer_inputs[layer + 1], expected, rtol=0, atol=1e-12)


def test_head_contributions_sum_to_the_output_projection(model64, batch, base):
    ids, _ = batch
    layer = 1
    parts = mh.head_contributions(model64, layer, base.contexts[layer])  # (B, n, H, p)
    merged = base.contexts[layer].transpose(1, 2).reshape(*ids.shape, 384)
    torch.testing.assert_close(parts.sum(2), merged @ model64.weights[f"encoder.layer.{layer}.attention.output.dense.weight"].T,
                               rtol=0, atol=1e-12)


# --- importance ---------------------------------------------------------------------------

def test_importance_fast_path_equals_masked_forward(model64, batch, base):
    importance = mh.head_importance(model64, *batch, base=base)  # (B, L, H)
    assert importance.shape == (3, 6, 12)
    for layer, head in [(0, 0), (2, 7), (5, 11)]:
        ablated = mh.forward(model64, *batch, head_mask=mh.ablation_mask(model64, [(layer, head)]))
        cos = (ablated.sentence_embeddings * base.sentence_embeddings).sum(1).numpy()
        np.testing.assert_allclose(importance[:, layer, head], 1.0 - cos, rtol=0, atol=1e-12)
    assert (importance > 0).all() and (importance <= 2).all()


def test_importance_is_zero_for_a_head_whose_output_slice_is_zeroed(model64, batch):
    layer, head, d = 2, 5, model64.d_head
    weights = dict(model64.weights)
    name = f"encoder.layer.{layer}.attention.output.dense.weight"
    weights[name] = weights[name].clone()
    weights[name][:, head * d:(head + 1) * d] = 0.0
    silent = replace(model64, weights=weights)
    importance = mh.head_importance(silent, *batch)
    np.testing.assert_allclose(importance[:, layer, head], 0.0, rtol=0, atol=1e-13)
    assert (np.delete(importance.reshape(3, -1), layer * 12 + head, axis=1) > 1e-9).all()


# --- whitened HDI -------------------------------------------------------------------------

def test_whitened_hdi_with_identity_covariance_is_the_raw_hdi():
    w_key = load_head_projections(0, "key")  # (12, 384, 32)
    raw = head_diversity_index(w_key)
    assert mh.whitened_hdi(w_key, np.eye(384)) == pytest.approx(raw, rel=0, abs=1e-12)
    # a multiple of the identity, or of any covariance, changes nothing
    assert mh.whitened_hdi(w_key, 7.5 * np.eye(384)) == pytest.approx(raw, rel=0, abs=1e-12)
    cov = np.cov(np.random.default_rng(0).normal(size=(2000, 384)), rowvar=False)
    assert mh.whitened_hdi(w_key, 3.0 * cov) == pytest.approx(mh.whitened_hdi(w_key, cov), rel=0, abs=1e-12)


def test_whitened_hdi_is_one_minus_mean_squared_canonical_correlation():
    rng = np.random.default_rng(1)
    mixing = rng.normal(size=(6, 6))
    tokens = rng.normal(size=(400, 6)) @ mixing + 3.0  # correlated coordinates, non-zero mean
    w = rng.normal(size=(3, 6, 2))  # (H, p, d_head)
    centred = tokens - tokens.mean(0)
    cos2 = []
    for h in range(3):
        for g in range(3):
            if h != g:  # canonical correlations of the heads' features = cosines of their data-space angles
                angles = scipy.linalg.subspace_angles(centred @ w[h], centred @ w[g])
                cos2.append(np.sum(np.cos(angles) ** 2) / 2)
    expected = 1.0 - np.mean(cos2)
    cov = centred.T @ centred / len(tokens)
    assert mh.whitened_hdi(w, cov) == pytest.approx(expected, rel=0, abs=1e-10)
    assert abs(mh.whitened_hdi(w, cov) - head_diversity_index(w)) > 1e-3  # the metric matters here


# --- functional correlation ---------------------------------------------------------------

def test_functional_correlation_against_its_token_level_definitions():
    rng = np.random.default_rng(2)
    c = rng.normal(size=(2, 9, 3, 5))  # (B, n, H, p)
    c[..., 1, :] += 0.8 * c[..., 0, :]
    mask = np.ones((2, 9), dtype=bool)
    mask[1, 6:] = False
    rho, cka = mh.functional_correlation(c, mask)
    tokens = c[mask] - c[mask].mean(0)  # (T, H, p)
    for h in range(3):
        for g in range(3):
            a, b = tokens[:, h], tokens[:, g]
            assert rho[h, g] == pytest.approx(np.sum(a * b) / math.sqrt(np.sum(a * a) * np.sum(b * b)), abs=1e-12)
            k, m = a @ a.T, b @ b.T  # token Gram (kernel) form of linear CKA, centred features
            expected = np.trace(k @ m) / math.sqrt(np.trace(k @ k) * np.trace(m @ m))
            assert cka[h, g] == pytest.approx(expected, abs=1e-12)
    assert rho[0, 1] > 0.4 and abs(rho[0, 2]) < 0.4


def test_report_statistics_agree_with_token_level_measures(model64):
    texts = TEXTS[:2]
    stats = mh._measure(model64, texts, batch_size=2)
    ids, mask = mh.tokenize(model64, texts)
    out = mh.forward(model64, ids, mask)
    corr, cka = mh._correlations(stats), mh._cka(model64, stats)
    for layer in (0, 5):
        rho, kernel = mh.functional_correlation(mh.head_contributions(model64, layer, out.contexts[layer]), mask)
        np.testing.assert_allclose(corr[layer], rho, rtol=0, atol=1e-9)
        np.testing.assert_allclose(cka[layer], kernel, rtol=0, atol=1e-9)
    np.testing.assert_allclose(stats["importance"], mh.head_importance(model64, ids, mask), rtol=0, atol=1e-12)


# --- text and reproducibility -------------------------------------------------------------

CHAPTER = """---
jupytext:
  formats: md:myst
---

# A title is not a sentence

The first paragraph has plain words in it and ends here. It cites a paper {cite}`fokoue2026mha` in passing.
A sentence with $x^2$ math in it is dropped entirely.
See {doc}`Chapter 4 <04-head-diversity>` for the proof of the theorem.

```{code-cell} ipython3
print("Code is never a sentence to keep.")
```

:::{admonition} Learning objectives
:class: tip
Prose inside an admonition is kept as it stands.
:::

The measured value {glue:text}`value` is dropped because it needs execution.
"""


def test_book_sentences_rules(tmp_path):
    (tmp_path / "01-demo.md").write_text(CHAPTER, encoding="utf-8")
    (tmp_path / "index.md").write_text("This file is not a chapter and is never read here.\n", encoding="utf-8")
    texts = [s.text for s in mh.book_sentences(tmp_path)]
    assert texts == ["The first paragraph has plain words in it and ends here.",
                     "It cites a paper in passing.",
                     "See Chapter 4 for the proof of the theorem.",
                     "Prose inside an admonition is kept as it stands."]


def test_the_book_gives_clean_sentences():
    pool = mh.book_sentences()
    assert len(pool) >= 150
    assert all(re.match(r"0\d-.*\.md$", s.file) for s in pool)
    assert not any(re.search(r"[$`{}\\]", s.text) for s in pool)
    assert len({s.text for s in pool}) == len(pool)


def test_sample_is_reproducible_from_the_seed():
    pool = mh.book_sentences()
    a, ia = mh.sample_sentences(pool, 20, 11)
    b, ib = mh.sample_sentences(pool, 20, 11)
    _, ic = mh.sample_sentences(pool, 20, 12)
    assert a == b and ia.tolist() == ib.tolist() and ia.tolist() != ic.tolist()
    assert ia.tolist() == sorted(ia.tolist())
    assert mh.sample_sentences(pool, None, 0)[1].tolist() == list(range(len(pool)))


def test_run_is_reproducible_and_json_able():
    first = mh.run("book", 5, n_sentences=3, n_boot=20)
    second = mh.run("book", 5, n_sentences=3, n_boot=20)
    for report in (first, second):
        report.pop("seconds")
    assert first == second
    text = json.dumps(first)
    assert json.loads(text) == first
    assert len(first["heads"]) == 72 and len(first["layers"]) == 6 and first["text"]["n_sentences"] == 3
    layer = first["layers"][0]
    assert layer["hdi_raw"]["key"] == pytest.approx(head_diversity_index(load_head_projections(0, "key")), abs=1e-10)
    assert 0 <= layer["hdi_whitened"]["key"] <= 1
    lo, hi = first["regression"]["pooled"]["slope_ci95"]
    assert lo <= hi
    assert [r["importance"] for r in first["top5"]] == sorted((r["importance"] for r in first["heads"]), reverse=True)[:5]


# --- bad inputs ---------------------------------------------------------------------------

@pytest.mark.parametrize("heads, exc, words", [
    ([(6, 0)], ValueError, r"layer must be an integer in \[0, 6\); got 6"),
    ([(-1, 0)], ValueError, r"layer must be an integer in \[0, 6\); got -1"),
    ([(0, 12)], ValueError, r"head must be an integer in \[0, 12\); got 12"),
    ([(0, 1.5)], TypeError, r"head must be an integer in \[0, 12\); got float 1.5"),
    ([(0,)], TypeError, r"heads must hold \(layer, head\) pairs"),
])
def test_unknown_layer_or_head_is_named(model64, heads, exc, words):
    with pytest.raises(exc, match=words):
        mh.ablation_mask(model64, heads)


def test_bad_inputs_name_the_parameter(model64, batch, base):
    ids, mask = batch
    with pytest.raises(ValueError, match=r"texts must hold at least one text; got an empty list"):
        mh.tokenize(model64, [])
    with pytest.raises(ValueError, match=r"texts\[1\] must be non-empty text; got '  '"):
        mh.tokenize(model64, ["A real sentence.", "  "])
    with pytest.raises(TypeError, match=r"texts must be a list of strings; got str"):
        mh.tokenize(model64, "A single string.")
    with pytest.raises(ValueError, match=r"head_mask must have shape \(6, 12\); got \(6, 11\)"):
        mh.forward(model64, ids, mask, head_mask=np.ones((6, 11)))
    with pytest.raises(ValueError, match=r"layer must be an integer in \[0, 6\); got 7"):
        mh.head_contributions(model64, 7, base.contexts[0])
    with pytest.raises(ValueError, match=r"attention_mask must mark at least one real token"):
        mh.forward(model64, ids, torch.zeros_like(mask))
    with pytest.raises(ValueError, match=r"covariance must have shape \(384, 384\) to match w; got \(3, 3\)"):
        mh.whitened_hdi(load_head_projections(0, "key"), np.eye(3))
    with pytest.raises(ValueError, match=r"covariance must be positive semi-definite"):
        mh.whitened_hdi(np.ones((2, 2, 1)), -np.eye(2))
    with pytest.raises(ValueError, match=r"scale must be one of \('book', 'large'\); got 'huge'"):
        mh.run("huge")
    with pytest.raises(ValueError, match=r"seed must be an integer >= 0; got -1"):
        mh.run("book", -1)
    with pytest.raises(ValueError, match=r"n_sentences must be <= \d+ \(the sentences available\); got 100000"):
        mh.sample_sentences(mh.book_sentences(), 100000, 0)
    with pytest.raises(TypeError, match=r"dtype must be torch.float32, torch.float64"):
        mh.load_minilm(dtype="float16")
    with pytest.raises(SystemExit):
        mh._main(["--scale", "huge"])
