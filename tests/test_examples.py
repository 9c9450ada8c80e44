"""Every public function and class of the library's core modules shows how it is used: an
Examples section whose ``>>>`` lines run as doctests in ``make test`` (pytest.ini:
``--doctest-modules``). Plot and infrastructure modules are left out: their output is a figure
or a file, which the figure and book tests cover."""
import importlib
import re

import pytest

EXAMPLES = re.compile(r"\n\s*Examples\n\s*-{8}\n.*?>>> ", re.S)   # the numpy-style heading, then >>>

# the model, the geometry, the engine and the experiments
DOCUMENTED = ["attention_fw.model.dynamics", "attention_fw.model.tiled", "attention_fw.model.schedules",
              "attention_fw.model.frank_wolfe", "attention_fw.geometry.planar", "attention_fw.geometry.polytope",
              "attention_fw.experiments.exit_times", "attention_fw.experiments.convergence",
              "attention_fw.experiments.vertex_limits", "attention_fw.experiments.metastability",
              "attention_fw.experiments.survival", "attention_fw.experiments.sabeta", "attention_fw.experiments.model_checks",
              "attention_fw.experiments.context_length", "attention_fw.experiments.trained_heads",
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
