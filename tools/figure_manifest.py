#!/usr/bin/env python
"""Write ``figures/MANIFEST.sha256``: the SHA-256 of every generated figure file.

    python tools/figure_manifest.py [FIGURES_DIR]

One line per file, ``<sha256>  <path relative to FIGURES_DIR>``, sorted by path, in the
format of ``sha256sum``, so ``cd figures && sha256sum -c MANIFEST.sha256`` verifies a
regeneration. Reader-made figures under ``custom/`` and hidden temporary files are left out.
The figures are byte-reproducible (``attention_fw.plotting.save``), so two builds from the
same sources give the same manifest.
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def manifest_lines(folder: Path) -> list[str]:
    lines = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder)
        if rel.name == "MANIFEST.sha256" or rel.parts[0] == "custom" or any(s.startswith(".") for s in rel.parts):
            continue
        lines.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {rel.as_posix()}")
    return lines


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    folder = Path(argv[0]) if argv else ROOT / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    lines = manifest_lines(folder)
    target = folder / "MANIFEST.sha256"
    text = "".join(line + "\n" for line in lines)
    tmp = target.with_name(".MANIFEST.sha256.tmp")
    tmp.write_text(text)
    tmp.replace(target)
    print(f"figure_manifest: {len(lines)} files -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
