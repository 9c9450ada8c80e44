"""Helpers shared by test_faults.py and test_determinism.py.

* runs of the paper figure writer ``python -m afw_book.paper_figures all`` into a folder
  (through ``ATTENTION_FW_FIGURES``), cached for the session: the published parameters
  ("new") and another seed ("old" (seed 6), the earlier versions a folder may already hold);
* readers that check a figure file is complete: PDF (header, ``%%EOF``, the ``startxref``
  offset pointing at a cross-reference, and ``pdftoppm`` rendering page 1 when poppler is
  installed), PNG (decoded by Pillow and by matplotlib), SVG (parsed as XML), JSON (parsed);
* a Python-level network guard (``sitecustomize``) that refuses and logs every connection
  to a non-loopback address, for builds that must not touch the network.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
_CACHE: dict[str, Path] = {}


def writer_cmd(*args: str) -> list[str]:
    return [PY, "-m", "afw_book.paper_figures", "all", *args]


def writer_env(folder: Path) -> dict:
    env = dict(os.environ)
    env["ATTENTION_FW_FIGURES"] = str(folder)
    return env


def run_writer(folder: Path, *args: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(writer_cmd(*args), env=writer_env(folder), capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, f"figure writer failed:\n{proc.stderr[-3000:]}"
    return folder


def _reference_run(kind: str, folder: Path) -> None:
    if kind == "new":
        run_writer(folder)
    else:
        run_writer(folder, "--seed", "6", "--outdir", str(folder))


def reference(kind: str, base: Path) -> Path:
    """Folder with a complete run: ``new`` = published parameters, ``old`` = seed 6.

    Made once per session for all pytest-xdist workers (in the session folder, see
    ``sessiondir.py``) when that is set, else once per process under ``base``. Read only."""
    if kind not in _CACHE:
        import sessiondir

        if sessiondir.is_set():
            _CACHE[kind] = sessiondir.once(f"figrefs-{kind}", lambda folder: _reference_run(kind, folder))
        else:
            folder = base / kind
            _reference_run(kind, folder)
            _CACHE[kind] = folder
    return _CACHE[kind]


def files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative POSIX path -> bytes)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def temporary_files(folder: Path, hidden: bool = True) -> list[str]:
    """Anything that looks like a temporary file (``.tmp``, ``~``), and hidden files if ``hidden``."""
    out = []
    for p in folder.rglob("*"):
        rel = p.relative_to(folder)
        if (hidden and any(part.startswith(".") for part in rel.parts)) or ".tmp" in p.name \
                or p.name.endswith("~"):
            out.append(rel.as_posix())
    return sorted(out)


# ------------------------------------------------------------------------------ readers
def check_pdf(path: Path) -> None:
    data = path.read_bytes()
    assert data.startswith(b"%PDF-"), f"{path.name}: no PDF header"
    assert data.rstrip().endswith(b"%%EOF"), f"{path.name}: truncated (no %%EOF at the end)"
    m = re.search(rb"startxref\s+(\d+)\s+%%EOF\s*$", data)
    assert m, f"{path.name}: no startxref"
    off = int(m.group(1))
    assert 0 < off < len(data), f"{path.name}: startxref offset outside the file"
    head = data[off:off + 64]
    assert head.startswith(b"xref") or re.match(rb"\d+\s+\d+\s+obj", head), \
        f"{path.name}: startxref does not point at a cross-reference"
    if shutil.which("pdftoppm"):
        proc = subprocess.run(["pdftoppm", "-l", "1", "-r", "10", "-png", str(path)], capture_output=True,
                              timeout=60)
        assert proc.returncode == 0 and proc.stdout.startswith(b"\x89PNG"), \
            f"{path.name}: pdftoppm cannot render it: {proc.stderr[-300:]!r}"


def check_png(path: Path) -> None:
    from PIL import Image
    import matplotlib.image as mpimg

    with Image.open(path) as im:
        im.load()
        assert im.size[0] > 0 and im.size[1] > 0
    arr = mpimg.imread(path)
    assert arr.size > 0


def check_svg(path: Path) -> None:
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg"), f"{path.name}: not an SVG document"


def check_json(path: Path) -> None:
    json.loads(path.read_text())


CHECKERS = {".pdf": check_pdf, ".png": check_png, ".svg": check_svg, ".json": check_json}


def check_readable(folder: Path) -> int:
    """Check every figure file under ``folder``; returns how many were checked."""
    n = 0
    for p in sorted(folder.rglob("*")):
        if p.is_file() and p.suffix in CHECKERS:
            CHECKERS[p.suffix](p)
            n += 1
    return n


# ------------------------------------------------------------------------------ network guard
GUARD = '''\
"""Installed by tests/figrun.py: refuse every non-loopback connection and log it."""
import os, socket, sys
_LOG = os.environ.get("NETWORK_GUARD_LOG")
_connect, _connect_ex = socket.socket.connect, socket.socket.connect_ex
_getaddrinfo = socket.getaddrinfo

def _allowed(sock, address):
    if sock.family == getattr(socket, "AF_UNIX", None):
        return True
    host = address[0] if isinstance(address, tuple) else str(address)
    return host in ("127.0.0.1", "::1", "localhost", "0.0.0.0", "") or str(host).startswith("127.")

def _record(what):
    if _LOG:
        with open(_LOG, "a") as fh:
            fh.write(f"{os.getpid()} {' '.join(sys.argv)[:200]}: {what}\\n")

def connect(self, address):
    if not _allowed(self, address):
        _record(f"connect {address!r}")
        raise OSError(101, "Network is unreachable (blocked by the test network guard)")
    return _connect(self, address)

def connect_ex(self, address):
    if not _allowed(self, address):
        _record(f"connect_ex {address!r}")
        return 101
    return _connect_ex(self, address)

def getaddrinfo(host, *args, **kw):
    if host not in (None, "localhost", "127.0.0.1", "::1", "0.0.0.0", "") and not str(host).startswith("127."):
        _record(f"getaddrinfo {host!r}")
        raise socket.gaierror(-3, "Temporary failure in name resolution (blocked by the test network guard)")
    return _getaddrinfo(host, *args, **kw)

socket.socket.connect = connect
socket.socket.connect_ex = connect_ex
socket.getaddrinfo = getaddrinfo
'''


def guarded_env(env: dict, guard_dir: Path) -> dict:
    """``env`` with the network guard on PYTHONPATH (every Python child process loads it)."""
    guard_dir.mkdir(parents=True, exist_ok=True)
    (guard_dir / "sitecustomize.py").write_text(GUARD)
    env = dict(env)
    env["PYTHONPATH"] = str(guard_dir) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["NETWORK_GUARD_LOG"] = str(guard_dir / "attempts.log")
    return env


def unshare_works() -> bool:
    """True when ``unshare -n`` can make a network namespace with a working loopback here."""
    if not shutil.which("unshare") or not shutil.which("ip"):
        return False
    proc = subprocess.run(["unshare", "-n", "sh", "-c", "ip link set lo up"], capture_output=True, timeout=30)
    return proc.returncode == 0
