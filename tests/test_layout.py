"""The two maps of the repository stay true: the module lists in ``attention_fw.__init__`` and
``afw_book.__init__`` and the README's layout table name exactly the files that exist (a module
added, renamed or removed without updating them fails here)."""
import re
from pathlib import Path

import afw_book
import attention_fw

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lib" / "attention_fw"
BOOK_PACKAGE = ROOT / "lib" / "afw_book"


def _modules(package: Path) -> set[str]:
    """Dotted names (relative to the package) of every module file, the package machinery (``__init__``,
    ``__main__``: a package's command line) excluded."""
    return {".".join(p.relative_to(package).with_suffix("").parts) for p in package.rglob("*.py")
            if p.stem not in ("__init__", "__main__") and "__pycache__" not in p.parts}


def _layout_row(path: str) -> str:
    """The README layout table's row for ``path`` (its second cell)."""
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Layout", 1)[1]
    rows = [line for line in table.splitlines() if line.startswith(f"| `{path}`")]
    assert len(rows) == 1, f"README's layout table has no single row for {path}"
    return rows[0]


def test_init_lists_exactly_the_modules():
    listed = set(re.findall(r"^    ([\w.]+) ", attention_fw.__doc__, re.M))   # a literal block: 4 spaces, name, text
    assert listed == _modules(PACKAGE)
    listed = set(re.findall(r"^    ([\w.]+) ", afw_book.__doc__, re.M))
    assert listed == _modules(BOOK_PACKAGE)


def test_readme_layout_names_every_module_and_tool():
    lib_row = _layout_row("lib/attention_fw/")
    for module in _modules(PACKAGE):
        *package, name = module.split(".")
        assert f"`{name}`" in lib_row, module
        if package:                       # named after its sub-package's tag in the row
            assert f"`{name}`" in lib_row.split(f"`{package[0]}/`", 1)[1], module
    book_lib_row = _layout_row("lib/afw_book/")
    assert {m for m in _modules(BOOK_PACKAGE) if f"`{m}`" not in book_lib_row} == set()
    tools_row = _layout_row("tools/")
    tools = {p.name for p in (ROOT / "tools").iterdir() if not p.name.startswith((".", "__"))}
    assert {t for t in tools if f"`{t}" not in tools_row} == set()
    book_row = _layout_row("book/")
    chapters = {p.name for p in (ROOT / "book").glob("[0-9][0-9]-*.py")}
    named = set(re.findall(r"`([\w.-]+\.py)`", book_row))   # the chapters as a range: first ... last
    assert {"errata.py", "reproducibility.py", min(chapters), max(chapters)} <= named


def test_library_reference_documents_exactly_the_public_modules():
    """The book's "Library reference" (book/reference/) has one page per sub-package and documents
    every public module of it, and nothing that does not exist; the README's row and the package
    agree with it (test above)."""
    reference = ROOT / "book" / "reference"
    documented = set()
    for page in reference.glob("*.md"):
        documented |= set(re.findall(r"^\.\. automodule:: attention_fw\.([\w.]+)$", page.read_text(), re.M))
    public = {m for m in _modules(PACKAGE) if not any(part.startswith("_") for part in m.split("."))}
    packages = {m.split(".")[0] for m in _modules(PACKAGE) if "." in m}
    assert public <= documented, public - documented
    assert documented <= public | packages, documented - public - packages
    # a page per sub-package, continued on pages <package>-<part> where one would pass 300 KB, the index
    # and the quickstart, the quickstart before the module pages in the table of contents
    stems = {p.stem for p in reference.glob("*.md")}
    parts = {p for p in stems if "-" in p and p.split("-", 1)[0] in packages}
    pages = packages | {"index", "quickstart"} | parts
    assert stems == pages
    toc = (ROOT / "_toc.yml").read_text()
    assert all(f"book/reference/{p}" in toc for p in pages)
    assert toc.index("book/reference/quickstart") < min(toc.index(f"book/reference/{p}") for p in packages)
