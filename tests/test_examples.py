"""Every public function and class of the library's core modules shows how it is used: an
Examples section whose ``>>>`` lines run as doctests in ``make test`` (pytest.ini:
``--doctest-modules``). Plot and infrastructure modules are left out: their output is a figure
or a file, which the figure and book tests cover."""
import importlib
import re

import pytest

EXAMPLES = re.compile(r"\n\s*Examples\n\s*-{8}\n.*?>>> ", re.S)   # the numpy-style heading, then >>>

# the model, the geometry, the engine and the experiments
DOCUMENTED = ["attention_fw.model.dynamics", "attention_fw.model.tiled", "attention_fw.model.tiled_plan",
              "attention_fw.model.tiled_softmax", "attention_fw.model.tiled_leaders", "attention_fw.model.schedules",
              "attention_fw.model.frank_wolfe", "attention_fw.geometry.planar", "attention_fw.geometry.polytope",
              "attention_fw.experiments.exit_times", "attention_fw.experiments.convergence",
              "attention_fw.experiments.vertex_limits", "attention_fw.experiments.metastability",
              "attention_fw.experiments.survival", "attention_fw.experiments.sabeta", "attention_fw.experiments.model_checks",
              "attention_fw.experiments.sabeta_kernel", "attention_fw.experiments.sabeta_reduced",
              "attention_fw.experiments.sabeta_family", "attention_fw.experiments.sabeta_exponent",
              "attention_fw.experiments.context_length", "attention_fw.experiments.trained_heads",
              "attention_fw.experiments.hull_counts",
              "attention_fw.encoder.files", "attention_fw.encoder.bert", "attention_fw.results",
              "afw_book.sweeps", "afw_book.presets"]


def _public(mod):
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [n for n, o in vars(mod).items() if not n.startswith("_")
                 and getattr(o, "__module__", None) == mod.__name__]
    return [n for n in names if callable(getattr(mod, n))]


@pytest.mark.parametrize("module", DOCUMENTED)
def test_every_public_name_has_an_example(module):
    mod = importlib.import_module(module)
    missing = [n for n in _public(mod) if not EXAMPLES.search(getattr(mod, n).__doc__ or "")]
    assert not missing, f"{module}: no Examples section in {missing}"


# What a code box of the library reference holds at 1920 px (85 characters of the code font; the
# box is indented in its entry), measured in headless Chromium (tests/test_browser.py::CODE_JS).
REFERENCE_CODE_COLUMNS = 85
SHOWN = ["attention_fw", *DOCUMENTED[:-2], "attention_fw.plot.sabeta"]


def _example_lines(doc: str):
    """The lines of a docstring's examples (``>>>``/``...`` lines and the output under them) and
    literal blocks (after a paragraph ending in ``::``), dedented as the reference page shows them."""
    import inspect

    lines = inspect.cleandoc(doc).splitlines()
    out, literal, example = [], None, None
    for line in lines:
        stripped = line.lstrip()
        if not stripped:
            example = None
        if literal is not None:
            if stripped and len(line) - len(stripped) <= literal:
                literal = None
            else:
                out.append(line)
                continue
        if stripped.startswith((">>> ", "... ")) or stripped in (">>>", "..."):
            out.append(stripped)
            example = len(line) - len(stripped)
        elif example is not None and stripped:        # the example's expected output
            out.append(line[example:])
        elif stripped.endswith("::"):
            literal = len(line) - len(stripped)
    return out


@pytest.mark.parametrize("module", SHOWN)
def test_examples_fit_the_column_of_the_reference(module):
    """The docstring examples the library reference shows are formatted to its code column, so
    that no line of them scrolls or wraps on a desktop window."""
    mod = importlib.import_module(module)
    docs = [mod.__doc__ or ""]
    for name in getattr(mod, "__all__", None) or _public(mod):
        obj = getattr(mod, name)
        docs.append(getattr(obj, "__doc__", None) or "" if callable(obj) else "")
        for member in vars(obj).values() if isinstance(obj, type) else ():
            docs.append(getattr(member, "__doc__", None) or "")
    long = sorted({f"{len(line)}: {line[:60]}" for doc in docs for line in _example_lines(doc)
                   if len(line.rstrip()) > REFERENCE_CODE_COLUMNS})
    assert not long, f"{module}: example lines longer than {REFERENCE_CODE_COLUMNS} characters: {long}"


def test_the_column_check_sees_examples_and_literal_blocks():
    doc = '''Title.

    The modules::

      model    a line
    Back to prose.

    >>> f(1,
    ...   2)
    3

    Prose again.
    '''
    assert _example_lines(doc) == ["", "  model    a line", ">>> f(1,", "...   2)", "3"]
