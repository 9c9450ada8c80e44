"""Chapter 7's numbers recompute from its data files (issue 35).

The numbers the chapter's prose quotes (glued values of the executed notebook) are recomputed here
from ``figures/.../data/sabeta-rates.json`` and ``sabeta-coupling.json`` alone, with the rules the
text states: the exponent c∞ equals c0 where c0 lies in c∞'s interval; the reach of a configuration
is its largest T2; the coupling fractions are those of the chain paths within ε at the time
named. A number of the text that its data file does not give back would fail here.
"""
from __future__ import annotations

import ast
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from afw_book.notebook import fmt, span

pytestmark = pytest.mark.slow


def glued(notebook: Path) -> dict[str, str]:
    """The text of every value the executed notebook glued (scrapbook records)."""
    out = {}
    for cell in json.loads(notebook.read_text())["cells"]:
        for o in cell.get("outputs", []):
            name = o.get("metadata", {}).get("scrapbook", {}).get("name")
            text = o.get("data", {}).get("application/papermill.record/text/plain")
            if name and text is not None and not name.startswith("fig-"):
                out[name] = ast.literal_eval(text)
    return out


def recomputed(rates_file: dict, coupling_file: dict) -> dict[str, str]:
    rates = rates_file["rates"]
    made = [q for q in rates if q["c_inf"] is not None]
    eq = [q for q in made if q["c_inf_ci"][0] <= q["c0"] <= q["c_inf_ci"][1]]
    below = [q for q in made if q["c_inf_ci"][1] < q["c0"]]
    above = [q for q in made if q["c_inf_ci"][0] > q["c0"]]
    widths = [(q["c_inf_ci"][1] - q["c_inf_ci"][0]) / q["c0"] for q in made]
    top = [np.asarray(q["local_slopes"], float)[-1, 1] / q["c0"] for q in rates if len(q["local_slopes"])]
    reach: dict[str, list[int]] = defaultdict(list)
    for r in rates_file["runs"]:
        assert r["T2_sabeta"] is None or (isinstance(r["T2_sabeta"], int) and 1 <= r["T2_sabeta"] <= r["cap"])
        if r["T2_sabeta"] is not None:             # null: no exit within the cap (no -1 marker in the data)
            reach[r["name"]].append(r["T2_sabeta"])
    out = {
        "n_made": str(len(made)), "n_eq": str(len(eq)), "n_below": str(len(below)), "n_above": str(len(above)),
        "reach_min": fmt(min(max(t) for t in reach.values()), ",") if reach else "none (no exit within the cap)",
        "cinf_rel": span([q["c_inf"] / q["c0"] for q in made], ".3f") if made else "-",
        "width_max": fmt(max(widths), ".3f") if widths else "-",
        "width_med": fmt(float(np.median(widths)), ".3f") if widths else "-",
        "top_slope": span(top, ".2f") if top else "-",
    }
    sentences = []
    for c in coupling_file["couplings"]:
        t, within, T2 = np.asarray(c["t"]), np.asarray(c["within"], float), int(c["T2"])
        at = []
        for named, label in ((max(T2 // 2, 1), "T₂/2"), (T2, "T₂"), (2 * T2, "2T₂")):
            k = int(np.searchsorted(t, named))
            assert t[k] == named, "the coupling records the times the text names"
            at.append(f"{within[k]:.0%} at t = {int(t[k]):,} ({label})")
        sentences.append(f"at β = {c['beta']:g} (T₂ = {T2:,}): " + ", ".join(at).replace(
            " at t = ", " of the paths within ε at t = ", 1))
    out["cp_list"] = "; ".join(sentences)
    return out


def check(build_figures: Path, notebook: Path) -> None:
    g = glued(notebook)
    rates = json.loads((build_figures / "data" / "sabeta-rates.json").read_text())
    coupling = json.loads((build_figures / "data" / "sabeta-coupling.json").read_text())
    want = recomputed(rates, coupling)
    for key in ("n_made", "n_eq", "n_below", "n_above", "reach_min", "cinf_rel", "width_max", "width_med",
                "top_slope"):
        assert g[key] == want[key], (key, g[key], want[key])
    assert int(g["n_configs"]) == len(rates["rates"])
    # every fraction and time the coupling sentence quotes, at the time it names
    assert g["cp_list"] == want["cp_list"]


def test_chapter_7_of_the_quick_book_recomputes_from_its_data_files(quick_figures):
    assert quick_figures.returncode == 0, f"the quick book did not build:\n{quick_figures.log[-4000:]}"
    check(quick_figures.repo / "figures" / "presets" / "quick",
          quick_figures.repo / "book" / "07-deterministic-dynamics.ipynb")
