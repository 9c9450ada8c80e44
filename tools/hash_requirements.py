"""Write the SHA-256 of every distribution file of every pin into a requirements file (pip's hash-checking mode).

    python tools/hash_requirements.py requirements.txt tools/installer-requirements.txt
    python tools/hash_requirements.py --check requirements.txt    # no network: every pin has hashes

``make freeze`` runs it after re-resolving the pins; run it again by hand after adding a pin. The
hashes come from the package index through uv (``uv pip compile --generate-hashes --no-deps`` over
the exact pins, so nothing is re-resolved): every file the index lists for that version (every
platform's wheel and the sdist), so that the install verifies whichever file the machine picks.
Comment lines and the order of the file are kept; a pin's earlier hashes are replaced.
``make venv`` then installs with ``--require-hashes`` (uv, and pip for ``INSTALLER=pip``): a
file whose bytes differ from the recorded ones is refused.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*(?:\[[^\]]*\])?)==([^\s\\;]+)")
HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.split("[")[0]).lower()


def parse(text: str) -> list[tuple[str, str | None, list[str]]]:
    """The entries of a requirements file: ``(line, pin or None, hashes)``, continuation lines joined."""
    entries: list[tuple[str, str | None, list[str]]] = []
    logical = ""
    for raw in text.splitlines():
        logical += raw.rstrip("\\").rstrip() + " " if raw.rstrip().endswith("\\") else raw
        if raw.rstrip().endswith("\\"):
            continue
        line, logical = logical.strip(), ""
        m = PIN.match(line)
        entries.append((line, f"{m.group(1)}=={m.group(2)}" if m else None, HASH.findall(line)))
    return entries


def _uv() -> str:
    here = Path(sys.executable).parent / "uv"
    found = str(here) if here.exists() else shutil.which("uv")
    if not found:
        raise SystemExit("hash_requirements: uv is needed (make venv puts it into .venv/bin)")
    return found


def fetch_hashes(pins: list[str]) -> dict[str, list[str]]:
    """``{normalised name: [sha256, ...]}`` for the exact pins, from the package index (uv)."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "pins.in", Path(tmp) / "pins.txt"
        src.write_text("\n".join(pins) + "\n")
        subprocess.run([_uv(), "pip", "compile", "--quiet", "--generate-hashes", "--no-deps", "--no-header",
                        "--no-annotate", "--python", sys.executable, str(src), "-o", str(out)], check=True)
        found = {}
        for _, pin, hashes in parse(out.read_text()):
            if pin:
                found[_key(pin.split("==")[0])] = hashes
    missing = [p for p in pins if _key(p.split("==")[0]) not in found]
    if missing:
        raise SystemExit(f"hash_requirements: no hashes for {missing}")
    return found


def render(entries, hashes: dict[str, list[str]]) -> str:
    lines = []
    for line, pin, _ in entries:
        if pin is None:
            lines.append(line)
            continue
        lines.append(pin + " \\")
        lines += [f"    --hash=sha256:{h} \\" for h in hashes[_key(pin.split("==")[0])][:-1]]
        lines.append(f"    --hash=sha256:{hashes[_key(pin.split('==')[0])][-1]}")
    return "\n".join(lines) + "\n"


def check(path: Path) -> list[str]:
    """The problems of a hashed requirements file: pins without hashes, lines that are neither pins nor comments."""
    bad = []
    for line, pin, hashes in parse(path.read_text()):
        if not line or line.startswith("#"):
            continue
        if pin is None:
            bad.append(f"{path}: not an exact pin (hash-checking mode installs only those): {line!r}")
        elif not hashes:
            bad.append(f"{path}: {pin} has no --hash")
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--check", action="store_true", help="only check that every pin has hashes (no network)")
    args = ap.parse_args(argv)
    if args.check:
        problems = [p for f in args.files for p in check(f)]
        print("\n".join(problems) or "every pin has its SHA-256")
        return 1 if problems else 0
    for f in args.files:
        entries = parse(f.read_text())
        hashes = fetch_hashes([pin for _, pin, _ in entries if pin])
        f.write_text(render(entries, hashes))
        print(f"{f}: {sum(1 for e in entries if e[1])} pins, {sum(len(h) for h in hashes.values())} hashes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
