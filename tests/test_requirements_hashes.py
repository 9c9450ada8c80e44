"""The book's own install is verified: every pin carries its SHA-256 and make venv installs in hash-checking mode.

* every line of ``requirements.txt`` and ``tools/installer-requirements.txt`` is a comment or an exact
  pin with at least one ``--hash`` (``tools/hash_requirements.py --check``), and the repository's own
  packages are not among them (they install editable, without dependencies, after the pins);
* the Makefile installs both files with ``--require-hashes``, by uv and by the pip fall-back;
* a file whose bytes differ from the recorded hash is refused by both installers, and the right file
  is accepted: a small wheel made here, from a local folder, no network.
"""
import base64
import hashlib
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import hash_requirements as H  # noqa: E402

UV = ROOT / ".venv" / "bin" / "uv"


@pytest.mark.parametrize("name", ["requirements.txt", "tools/installer-requirements.txt"])
def test_every_pin_has_its_sha256(name):
    path = ROOT / name
    assert H.check(path) == []
    entries = H.parse(path.read_text())
    pins = [pin for _, pin, _ in entries if pin]
    assert len(pins) >= (150 if name == "requirements.txt" else 2)
    assert all(re.fullmatch(r"[0-9a-f]{64}", h) for _, _, hs in entries for h in hs)
    names = {H._key(p.split("==")[0]) for p in pins}
    assert not names & {"attention-fw", "afw-book"}
    assert len(names) == len(pins)                       # one pin per package


def test_make_venv_installs_in_hash_checking_mode():
    make = (ROOT / "Makefile").read_text()
    recipe = make.split("$(STAMP): ", 1)[1].split("\n\n", 1)[0]
    assert "HASHED     := --require-hashes" in make and "INSTALLERS := tools/installer-requirements.txt" in make
    uv_line = [ln for ln in recipe.splitlines() if "$(VENV)/bin/uv pip install --quiet" in ln and "requirements.txt" in ln]
    pip_lines = [ln for ln in recipe.splitlines() if "$(PY) -m pip install --quiet" in ln and "-r " in ln]
    assert uv_line and all("$(HASHED)" in ln for ln in uv_line)
    assert len(pip_lines) == 3 and all("$(HASHED)" in ln for ln in pip_lines)     # ensurepip, fall-back: two
    assert "$(HASHED) -r $(INSTALLERS)" in recipe               # uv and pip themselves
    assert "requirements.txt" in make.split("freeze:", 1)[1].split("\n\n", 1)[0] and \
        "tools/hash_requirements.py" in make.split("freeze:", 1)[1].split("\n\n", 1)[0]


def _wheel(folder: Path, payload: str) -> Path:
    """A minimal valid wheel ``tinypkg-1.0`` whose module holds ``payload``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tinypkg-1.0-py3-none-any.whl"
    files = {"tinypkg.py": f"VALUE = {payload!r}\n",
             "tinypkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
             "tinypkg-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                            "Tag: py3-none-any\n"}
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    record.append("tinypkg-1.0.dist-info/RECORD,,")
    files["tinypkg-1.0.dist-info/RECORD"] = "\n".join(record) + "\n"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0)), text)
    return path


def _installers(tmp: Path):
    yield "pip", lambda req, links, target: [sys.executable, "-m", "pip", "install", "--isolated", "--quiet",
                                             "--disable-pip-version-check", "--no-index", "--find-links", links,
                                             "--require-hashes", "--no-deps", "--target", target, "-r", req]
    if UV.exists():
        yield "uv", lambda req, links, target: [UV, "pip", "install", "--no-config", "--quiet", "--offline",
                                                "--no-index", "--find-links", links, "--require-hashes", "--no-deps",
                                                "--target", target, "-r", req]


def test_a_tampered_or_substituted_file_is_refused(tmp_path):
    good = _wheel(tmp_path / "good", "the recorded file")
    recorded = hashlib.sha256(good.read_bytes()).hexdigest()
    _wheel(tmp_path / "bad", "a substituted file")               # same name and version, other bytes
    req = tmp_path / "requirements.txt"
    req.write_text(f"# one pin, hashed as make freeze writes it\ntinypkg==1.0 \\\n    --hash=sha256:{recorded}\n")
    assert H.check(req) == []
    ran = []
    for name, command in _installers(tmp_path):
        ran.append(name)
        ok = subprocess.run([str(c) for c in command(req, tmp_path / "good", tmp_path / f"{name}-good")],
                            capture_output=True, text=True)
        assert ok.returncode == 0, (name, ok.stderr)
        assert "the recorded file" in (tmp_path / f"{name}-good" / "tinypkg.py").read_text()
        bad = subprocess.run([str(c) for c in command(req, tmp_path / "bad", tmp_path / f"{name}-bad")],
                             capture_output=True, text=True)
        assert bad.returncode != 0, (name, "the substituted file was installed")
        assert re.search(r"hash", bad.stdout + bad.stderr, re.I), (name, bad.stderr)
        assert not (tmp_path / f"{name}-bad" / "tinypkg.py").exists()
    assert "pip" in ran


def test_the_hash_writer_keeps_comments_and_order():
    text = "# head\nb-pkg==1.0\n# middle\na_pkg==2.0 \\\n    --hash=sha256:" + "0" * 64 + "\n"
    entries = H.parse(text)
    out = H.render(entries, {"b-pkg": ["1" * 64, "2" * 64], "a-pkg": ["3" * 64]})
    assert out == ("# head\nb-pkg==1.0 \\\n    --hash=sha256:" + "1" * 64 + " \\\n    --hash=sha256:" + "2" * 64 +
                   "\n# middle\na_pkg==2.0 \\\n    --hash=sha256:" + "3" * 64 + "\n")
    assert [p for _, p, _ in H.parse(out) if p] == ["b-pkg==1.0", "a_pkg==2.0"]
