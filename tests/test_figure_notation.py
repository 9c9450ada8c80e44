"""One logarithm on the axes of every figure of the book (issue 24).

The book writes the natural logarithm ``\\ln`` on its axes (slopes of ``ln E[T_2]`` are compared with
rates c_0 of e^{c_0 β}); quantities spread over decades are drawn on logarithmic axes, named
"log scale", not as log10 of themselves. The axis labels (``set_xlabel``, ``set_ylabel``, colour
bar ``set_label``) of every plot module and chapter are read from the sources (string literals,
f-strings included) and must not write ``\\log`` (ambiguous base), ``log10`` or ``\\log_{10}``.
"""
from __future__ import annotations

import ast
import re

import pytest

from bookbuild import ROOT

SOURCES = sorted((ROOT / "lib").rglob("*.py")) + sorted((ROOT / "book").glob("*.py"))
AXIS_CALLS = {"set_xlabel", "set_ylabel", "set_zlabel", "set_label", "xlabel", "ylabel"}
FORBIDDEN = re.compile(r"\\log(?![a-z])|log_\{?10|log10")


def axis_labels(path):
    """(line, text) of the string arguments of the axis-label calls in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in AXIS_CALLS:
            for arg in [*node.args[:1], *(k.value for k in node.keywords if k.arg in ("xlabel", "ylabel", "label"))]:
                texts = [c.value for c in ast.walk(arg) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
                out += [(node.lineno, t) for t in texts]
    return out


def test_the_scan_sees_labels_and_the_forbidden_forms(tmp_path):
    src = tmp_path / "x.py"
    src.write_text('ax.set_ylabel(r"$\\log_{10}\\,T$")\nax.set_xlabel(f"$\\\\ln x$ {1}")\nax.set_title("log10")\n')
    labels = axis_labels(src)
    assert [t for _, t in labels] == ["$\\log_{10}\\,T$", "$\\ln x$ "]
    assert [bool(FORBIDDEN.search(t)) for _, t in labels] == [True, False]
    assert FORBIDDEN.search("fitted slope of $\\log\\mathbb{E}$") and not FORBIDDEN.search("$\\ln\\mathbb{E}$ (log scale)")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_axes_write_one_logarithm(path):
    bad = [(line, text) for line, text in axis_labels(path) if FORBIDDEN.search(text)]
    assert bad == [], f"{path.name}: axis labels with another logarithm than ln: {bad}"
