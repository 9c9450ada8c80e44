"""A numpy forward pass of all-MiniLM-L6-v2 (6 post-LayerNorm BERT layers, 12 heads of 32, d = 384).

Plain numpy, float64 by default: embeddings and LayerNorm, six layers of multi-head attention (with
the padding mask) and exact-erf GELU feed-forward, each followed by a residual connection and
LayerNorm, then the mean over the sentence's tokens, normalised, as sentence-transformers does.
:meth:`Encoder.forward` can keep, per layer, the layer's input token states and, per head, the
scores, the attention weights, the queries, keys and values. :func:`load` reads the files verified
by :mod:`attention_fw.encoder.files` (weights with ``safetensors``, tokens with ``tokenizers``).

Examples
--------
>>> import numpy as np
>>> float(gelu(np.array(0.0))), round(float(gelu(np.array(10.0))), 12)
(0.0, 10.0)
>>> y = layer_norm(np.array([[1.0, 2.0, 3.0]]), np.ones(3), np.zeros(3))
>>> np.round(y, 6) + 0.0, round(float(y.mean()), 12) + 0.0
(array([[-1.224745,  0.      ,  1.224745]]), 0.0)
>>> cosine_similarities(np.array([[1.0, 0.0], [1.0, 1.0]])).round(6)
array([[1.      , 0.707107],
       [0.707107, 1.      ]])
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import erf

from . import files as _files

__all__ = ["MAX_TOKENS", "Encoder", "Tokens", "Forward", "load", "gelu", "layer_norm", "cosine_similarities"]

MAX_TOKENS = 256
"""sentence-transformers truncates this model's input to 256 tokens ([CLS] and [SEP] included)."""


def gelu(x):
    """GELU in its exact form, ``x Phi(x) = x (1 + erf(x / sqrt 2)) / 2`` (BERT's ``"gelu"``).

    Examples
    --------
    >>> round(float(gelu(np.array(1.0))), 12)       # Phi(1)
    0.841344746069
    """
    x = np.asarray(x)
    if x.dtype != np.float32:
        x = x.astype(np.float64)
    return 0.5 * x * (1.0 + erf(x / x.dtype.type(math.sqrt(2.0))))


def layer_norm(x, weight, bias, eps: float = 1e-12):
    """LayerNorm over the last axis: ``(x - mean) / sqrt(var + eps) * weight + bias`` (biased var).

    Examples
    --------
    >>> layer_norm(np.array([[1.0, 3.0]]), np.array([2.0, 2.0]), np.array([0.5, 0.5]))
    array([[-1.5,  2.5]])
    """
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * weight + bias


def _dense(x, W, b):
    """``x W^T + b`` over the last axis, as one 2-D product (numpy's stacked matmul does not use BLAS
    for a transposed weight)."""
    shape = x.shape
    return (x.reshape(-1, shape[-1]) @ W.T).reshape(*shape[:-1], W.shape[0]) + b


def cosine_similarities(e) -> np.ndarray:
    """Matrix of cosine similarities of the rows of ``e``.

    Examples
    --------
    >>> cosine_similarities(np.array([[1.0, 0.0], [0.0, 2.0]]))
    array([[1., 0.],
           [0., 1.]])
    """
    e = np.asarray(e, dtype=np.float64)
    u = e / np.linalg.norm(e, axis=-1, keepdims=True)
    return u @ u.T


@dataclass
class Tokens:
    """A padded batch: ``ids`` and ``mask`` (b, n), the word pieces of each sentence, its lengths.

    Examples
    --------
    >>> t = load().tokenize(["And God saw the light.", "Light."])
    >>> t.ids.shape, t.lengths.tolist(), t.pieces[1]
    ((2, 8), [8, 4], ['[CLS]', 'light', '.', '[SEP]'])
    """
    ids: np.ndarray
    mask: np.ndarray
    pieces: list
    lengths: np.ndarray


@dataclass
class Forward:
    """What :meth:`Encoder.forward` computed.

    Attributes
    ----------
    embedding : numpy.ndarray
        The sentence embeddings, shape (b, 384): mean pooling over the tokens, unit norm.
    tokens : numpy.ndarray
        The last layer's token states, shape (b, n, 384).
    mask : numpy.ndarray
        Shape (b, n): 1 for real tokens, 0 for padding.
    inputs : list of numpy.ndarray
        The input token states of each layer, (b, n, 384) each (``keep=True``).
    heads : list of dict
        One per layer: ``scores`` (with the mask), ``weights``, ``queries``, ``keys``, ``values``
        of every head, arrays of shape (b, 12, n, ...) (``keep=True``).

    Examples
    --------
    >>> enc = load()
    >>> t = enc.tokenize(["And God saw the light."])
    >>> f = enc.forward(t.ids, t.mask, keep=True)
    >>> f.embedding.shape, len(f.inputs), f.heads[0]["weights"].shape
    ((1, 384), 6, (1, 12, 8, 8))
    """
    embedding: np.ndarray
    tokens: np.ndarray
    mask: np.ndarray
    inputs: list = field(default_factory=list)
    heads: list = field(default_factory=list)


class Encoder:
    """all-MiniLM-L6-v2 as numpy arrays (float64), with its tokenizer.

    Build it with :func:`load`. Attributes: ``config`` (the model's ``config.json``), ``layers``
    (6), ``heads`` (12), ``head_dim`` (32), ``d`` (384), ``w`` (name -> array, the names of the
    safetensors file).

    Examples
    --------
    >>> enc = load()
    >>> enc.layers, enc.heads, enc.head_dim, enc.d
    (6, 12, 32, 384)
    """

    def __init__(self, weights: dict, config: dict, tokenizer):
        self.w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items() if k != "embeddings.position_ids"}
        self.config = config
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.d = int(config["hidden_size"])
        self.head_dim = self.d // self.heads
        self.eps = float(config["layer_norm_eps"])
        self.tokenizer = tokenizer

    # -- per-layer weights
    def attention_weights(self, layer: int) -> dict:
        """``query``, ``key``, ``value``, ``output`` weights (384 x 384, ``y = W x + b``) and biases."""
        if not (0 <= int(layer) < self.layers):
            raise ValueError(f"layer must be in [0, {self.layers}), got {layer!r}")
        p = f"encoder.layer.{int(layer)}.attention."
        out = {}
        for key, name in (("query", "self.query"), ("key", "self.key"), ("value", "self.value"),
                          ("output", "output.dense")):
            out[key] = self.w[p + name + ".weight"]
            out[key + "_bias"] = self.w[p + name + ".bias"]
        return out

    # -- tokens
    def tokenize(self, sentences) -> Tokens:
        """Word pieces with [CLS] and [SEP], truncated to :data:`MAX_TOKENS`, padded to the longest."""
        if isinstance(sentences, str) or not all(isinstance(s, str) for s in sentences) or not len(sentences):
            raise TypeError("sentences must be a non-empty list of strings")
        enc = self.tokenizer.encode_batch(list(sentences))
        lengths = np.array([min(len(e.ids), MAX_TOKENS) for e in enc])
        n = int(lengths.max())
        ids = np.zeros((len(enc), n), dtype=np.int64)
        mask = np.zeros((len(enc), n), dtype=np.int64)
        pieces = []
        for r, (e, m) in enumerate(zip(enc, lengths)):
            tok = list(e.ids[:m])
            if len(e.ids) > m:
                tok[-1] = self.tokenizer.token_to_id("[SEP]")
            ids[r, :m] = tok
            mask[r, :m] = 1
            pieces.append([self.tokenizer.id_to_token(t) for t in tok])
        return Tokens(ids, mask, pieces, lengths)

    # -- the forward pass
    def embed(self, ids, *, positions: bool = True) -> np.ndarray:
        """LayerNorm(word + position + token type 0) embeddings, (b, n, 384)."""
        ids = np.asarray(ids)
        x = self.w["embeddings.word_embeddings.weight"][ids] + self.w["embeddings.token_type_embeddings.weight"][0]
        if positions:
            x = x + self.w["embeddings.position_embeddings.weight"][: ids.shape[-1]]
        return layer_norm(x, self.w["embeddings.LayerNorm.weight"], self.w["embeddings.LayerNorm.bias"], self.eps)

    def split(self, y) -> np.ndarray:
        """(b, n, 384) -> (b, 12, n, 32): the head blocks of a projection."""
        b, n, _ = y.shape
        return y.reshape(b, n, self.heads, self.head_dim).transpose(0, 2, 1, 3)

    def attention(self, x, mask, layer: int, keep: bool = False):
        """Multi-head self-attention of ``layer`` on states ``x`` (b, n, 384): its output (b, n, 384)
        before the residual, and (``keep``) the per-head arrays."""
        W = self.attention_weights(layer)
        q = np.ascontiguousarray(self.split(_dense(x, W["query"], W["query_bias"])))
        k = np.ascontiguousarray(self.split(_dense(x, W["key"], W["key_bias"])))
        v = np.ascontiguousarray(self.split(_dense(x, W["value"], W["value_bias"])))
        s = q @ np.ascontiguousarray(np.swapaxes(k, -1, -2)) / math.sqrt(self.head_dim)
        s = np.where(np.asarray(mask, bool)[:, None, None, :], s, x.dtype.type(-np.inf))
        a = np.exp(s - s.max(axis=-1, keepdims=True))
        a /= a.sum(axis=-1, keepdims=True)
        ctx = (a @ v).transpose(0, 2, 1, 3).reshape(x.shape)
        out = _dense(ctx, W["output"], W["output_bias"])
        return out, (dict(scores=s, weights=a, queries=q, keys=k, values=v) if keep else None)

    def layer(self, x, mask, layer: int, keep: bool = False):
        """One post-LN layer: ``x1 = LN(x + attention(x))``, ``LN(x1 + W2 gelu(W1 x1 + b1) + b2)``."""
        p = f"encoder.layer.{int(layer)}."
        att, kept = self.attention(x, mask, layer, keep)
        x1 = layer_norm(x + att, self.w[p + "attention.output.LayerNorm.weight"],
                        self.w[p + "attention.output.LayerNorm.bias"], self.eps)
        h = gelu(_dense(x1, self.w[p + "intermediate.dense.weight"], self.w[p + "intermediate.dense.bias"]))
        ff = _dense(h, self.w[p + "output.dense.weight"], self.w[p + "output.dense.bias"])
        x2 = layer_norm(x1 + ff, self.w[p + "output.LayerNorm.weight"], self.w[p + "output.LayerNorm.bias"], self.eps)
        return x2, kept

    def forward(self, ids, mask=None, *, keep: bool = False, positions: bool = True, dtype=np.float64) -> Forward:
        """The encoder on a padded batch ``ids`` (b, n) with ``mask`` (1 = token, 0 = padding).

        ``keep=True`` also returns each layer's input states and each head's scores, weights,
        queries, keys and values. ``positions=False`` leaves out the position embeddings (an
        analysis device: the network is then equivariant under permutations of the tokens).
        """
        ids = np.asarray(ids)
        if ids.ndim != 2 or ids.dtype.kind not in "iu":
            raise ValueError(f"ids must be a (batch, tokens) array of integer token ids, got shape {ids.shape}")
        mask = np.ones_like(ids) if mask is None else np.asarray(mask)
        if mask.shape != ids.shape:
            raise ValueError(f"mask must have the shape of ids {ids.shape}, got {mask.shape}")
        if (mask.sum(axis=1) == 0).any():
            raise ValueError("mask: every sentence needs at least one token")
        dtype = np.dtype(dtype)
        if dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {dtype}")
        saved = self.w
        if dtype == np.float32:
            self.w = self._w32()
        try:
            x = self.embed(ids, positions=positions)
            res = Forward(embedding=np.empty((0, self.d)), tokens=np.empty((0, 0, self.d)), mask=mask)
            for layer in range(self.layers):
                if keep:
                    res.inputs.append(x)
                x, kept = self.layer(x, mask, layer, keep)
                if keep:
                    res.heads.append(kept)
        finally:
            self.w = saved
        m = mask[..., None].astype(x.dtype)
        pooled = (x * m).sum(axis=1) / m.sum(axis=1)
        res.tokens = x
        res.embedding = pooled / np.linalg.norm(pooled, axis=-1, keepdims=True)
        return res

    def _w32(self):
        if getattr(self, "_single", None) is None:
            self._single = {k: v.astype(np.float32) for k, v in self.w.items()}
        return self._single

    def encode(self, sentences, batch: int = 32) -> np.ndarray:
        """Sentence embeddings (len(sentences), 384), unit norm, as sentence-transformers' ``encode``."""
        out = []
        for s in range(0, len(sentences), batch):
            t = self.tokenize(sentences[s:s + batch])
            out.append(self.forward(t.ids, t.mask).embedding)
        return np.concatenate(out)


def load(root=None, *, fetch_missing: bool = True) -> Encoder:
    """The verified model as an :class:`Encoder` (fetching the files first if ``fetch_missing``).

    Examples
    --------
    >>> enc = load()
    >>> e = enc.encode(["The weather is lovely today.", "It's so sunny outside!"])
    >>> round(float(e[0] @ e[1]), 4)                   # the documentation prints 0.6660
    0.666
    """
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    files = _files.fetch(root) if fetch_missing else _files.model_files(root)
    config = json.loads(files["config.json"].read_text())
    tok = Tokenizer.from_file(str(files["tokenizer.json"]))
    tok.no_padding()
    tok.no_truncation()
    return Encoder(load_file(str(files["model.safetensors"])), config, tok)


