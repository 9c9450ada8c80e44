"""Make book/data/prose-corpus.json: the prose paragraphs of two chapters of the Python 3.11 tutorial.

Chapter 8 needs a second corpus of modern English prose, beside Genesis, whose licence allows it to
be redistributed. This script is run by hand, once, by whoever changes that corpus (the build reads
only the committed JSON and never the network)::

    apt-get download python3.11-doc=3.11.2-6+deb12u9
    .venv/bin/python tools/prose_corpus.py python3.11-doc_3.11.2-6+deb12u9_all.deb

It checks the SHA-256 of the package, extracts the tutorial's reStructuredText sources
``appetite.rst.txt`` and ``classes.rst.txt`` (with ``dpkg-deb``), keeps the prose paragraphs (not
headings, labels, directives, code blocks, lists or tables), removes the inline markup and writes
the paragraphs with their provenance. The licence (PSF License Agreement version 2) asks for its
text and a summary of the changes to go with the excerpt: both are in the JSON and the licence text
in ``book/data/prose-corpus-LICENSE.txt``.
"""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGE, VERSION = "python3.11-doc", "3.11.2-6+deb12u9"
DEB_SHA256 = "5b3594189d6ef9a6963ce0347fd307a1cc67620ad697e144db366070e2e146be"
SOURCES = "usr/share/doc/python3.11/html/_sources/tutorial/"
FILES = ("appetite.rst.txt", "classes.rst.txt")
COPYRIGHT = "usr/share/doc/python3.11-doc/copyright"
OUT = Path(__file__).resolve().parents[1] / "book" / "data"


def _clean(text: str) -> str:
    """Inline reStructuredText markup removed: roles, literals, emphasis, links."""
    text = re.sub(r":[a-z:]+:`~?([^`<]*?)\s*(<[^>]*>)?`", r"\1", text)    # :ref:`text <target>` -> text
    text = re.sub(r"``([^`]*)``", r"\1", text)
    text = re.sub(r"`([^`<]*?)\s*(<[^>]*>)?`_+", r"\1", text)
    text = re.sub(r"\*\*?([^*]+)\*\*?", r"\1", text)
    text = text.replace("---", "\u2014").replace("\\'", "'")
    return re.sub(r"\s+", " ", text).strip()


def paragraphs(rst: str) -> list[str]:
    """The prose paragraphs of one tutorial source, in order."""
    out, code = [], False
    for block in re.split(r"\n\s*\n", rst):
        lines = block.split("\n")
        first = lines[0]
        if not first.strip():
            continue
        indented = first.startswith((" ", "\t"))
        if code and indented:
            continue                                         # the body of a code block
        code = False
        heading = len(lines) > 1 and re.fullmatch(r"[=*\-~^\"]{3,}", lines[-1].strip() or "x")
        if (indented or heading or first.startswith(("..", "*", "-", "+", "|", ">>>", "#"))
                or re.match(r"^\d+\.|^[=*\-~^]{3,}", first)):
            code = block.rstrip().endswith("::")
            continue
        text = " ".join(line.strip() for line in lines)
        code = text.endswith("::")
        if code:
            text = text[:-2].rstrip() + ("" if text[:-2].rstrip().endswith((".", ":")) else ":")
        text = _clean(text)
        if len(text.split()) >= 4 and not text.endswith(":"):
            out.append(text)
    return out


def main(deb: str) -> None:
    data = Path(deb).read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    if sha != DEB_SHA256:
        raise SystemExit(f"{deb}: SHA-256 {sha}, expected {DEB_SHA256} ({PACKAGE} {VERSION})")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["dpkg-deb", "-x", deb, tmp], check=True)
        root = Path(tmp)
        entries, files = [], []
        for name in FILES:
            raw = (root / SOURCES / name).read_bytes()
            files.append({"file": "/" + SOURCES + name, "sha256": hashlib.sha256(raw).hexdigest()})
            for k, text in enumerate(paragraphs(raw.decode("utf-8")), 1):
                entries.append({"ref": f"{name.split('.')[0]} paragraph {k}", "text": text})
        copyright_text = (root / COPYRIGHT).read_text()
    start = copyright_text.index("PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2")
    end = copyright_text.index("8. By copying", start)
    end = copyright_text.index("\n\n", end)
    licence = copyright_text[start:end].strip() + "\n"
    (OUT / "prose-corpus-LICENSE.txt").write_text(
        "The excerpt in prose-corpus.json is taken from the Python 3.11.2 documentation\n"
        "(Copyright (c) 2001-2023 Python Software Foundation; All Rights Reserved),\n"
        f"as shipped in the Debian package {PACKAGE} {VERSION}, under this licence:\n\n" + licence)
    doc = {
        "title": "The Python Tutorial (Python 3.11.2), chapters 'Whetting Your Appetite' and 'Classes': "
                 "the prose paragraphs",
        "source": {"package": f"Debian {PACKAGE}", "version": VERSION,
                   "package_file": f"{PACKAGE}_{VERSION}_all.deb", "package_sha256": DEB_SHA256,
                   "files": files, "extracted_by": "tools/prose_corpus.py"},
        "licence": "PSF License Agreement version 2 (the Python licence, which covers Python's documentation; "
                   "a free, GPL-compatible licence that allows redistribution with the licence text and "
                   "notice). Copyright (c) 2001-2023 Python Software Foundation; All Rights Reserved. "
                   "The licence text: prose-corpus-LICENSE.txt beside this file.",
        "changes": "Only the prose paragraphs are kept (headings, labels, directives, code examples, lists "
                   "and tables are left out); reStructuredText inline markup is removed and line breaks "
                   "are joined; the words are unchanged.",
        "paragraphs": entries,
    }
    (OUT / "prose-corpus.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(entries)} paragraphs -> {OUT / 'prose-corpus.json'}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: prose_corpus.py PACKAGE.deb")
    main(sys.argv[1])
