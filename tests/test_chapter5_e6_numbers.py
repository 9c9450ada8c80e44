"""Chapter 5's (SAP)-against-(SA-beta) numbers and erratum E6's statements about chapter 7's family
recompute from the data files (issue 35).

Chapter 5's section "SAP against the deterministic SA-beta (E6)" glues seven values
(``e6_ratio_lo`` ... ``e6_hyp``); each is recomputed here from ``data/sap-vs-sabeta.json`` alone,
independently of the chapter's helpers: the chain's mean exit time as the censored exponential MLE
(exposure / exits) from the recorded exit times, the (SA-beta) exit step by plain stepping of
:func:`attention_fw.model.dynamics.softmax_step` from the recorded start, Theorem 5.4's ratio
condition from the recorded vertices, step size and ``eps``. The text of chapter 5 and of erratum
E6 states, without a glued number, what chapter 7's family shows; those statements are checked on
``data/sabeta-rates.json``: the exit time grows with beta on every configuration, the one solved case
(one token per vertex of the equilateral triangle) follows its one-line recursion exactly and its
closed form ``e^{3 beta / 2} (1 - e^{-3 beta eps}) / (9 gamma beta)`` ever closer, its exponent is
``c0 = 3/2`` within the interval of c_inf while a straight line through ``log T2`` reads less, and the
configurations inside Theorem 5.4's hypotheses are a few with ``gamma < 0.05``.

Erratum E6's three glued values (``e6-chains``, ``e6-z1``, ``e6-z5``) come from a Monte Carlo run
of the errata page itself, not from a data file of the family; they are not recomputed here.

Each check also runs on a copy of the data with one number changed, and must fail there.
"""
from __future__ import annotations

import copy
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from attention_fw.geometry.polytope import distance_to_hull
from attention_fw.model.dynamics import softmax_step
from test_chapter7_numbers import glued

pytestmark = pytest.mark.slow

SOLVED = "triangle, 1 per vertex"          # the configuration whose T2 chapter 5 and E6 solve


# ---------------------------------------------------------------------------------------------
# chapter 5: the glued numbers of its (SAP)-against-(SA-beta) section
# ---------------------------------------------------------------------------------------------

_STEPPED: dict[str, int | None] = {}


def sabeta_exit_by_plain_stepping(x0, sigma, gamma, beta, eps, cap) -> int | None:
    """The first t >= 1 with some token farther than eps from its group's initial hull, by plain
    stepping of (SA-beta) (B = I); None if none within cap. (Remembered: the checks of the changed
    copies ask again.)"""
    key = json.dumps([np.asarray(x0).tolist(), np.asarray(sigma).tolist(), gamma, beta, eps, cap])
    if key not in _STEPPED:
        _STEPPED[key] = _plain_stepping(x0, sigma, gamma, beta, eps, cap)
    return _STEPPED[key]


def _plain_stepping(x0, sigma, gamma, beta, eps, cap) -> int | None:
    x0, sigma = np.asarray(x0, float), np.asarray(sigma)
    groups = [(np.flatnonzero(sigma == g), x0[sigma == g]) for g in np.unique(sigma)]
    x = x0.copy()
    for t in range(1, cap + 1):
        x = softmax_step(x, gamma, beta)
        if any(distance_to_hull(x[idx], pts).max() > eps for idx, pts in groups):
            return t
    return None


def recomputed_chapter5(d: dict) -> dict[str, str]:
    beta = [float(b) for b in d["beta"]]
    # the chain: exponential MLE from right-censored exit times (rate = exits / exposure)
    means = []
    for times, cens in zip(d["sap_times"], d["sap_censored"]):
        times, cens = np.asarray(times, float), np.asarray(cens, bool)
        assert times.max() <= min(d["sap_cap"]) and np.all(times[cens] == min(d["sap_cap"]))
        means.append(times.sum() / np.count_nonzero(~cens))
    np.testing.assert_allclose(d["sap_mean"], means, rtol=1e-12)         # the plotted means are those
    # (SA-beta): plain stepping from the recorded start, at every beta
    det = [sabeta_exit_by_plain_stepping(d["x0"], d["sigma"], d["gamma"], b, d["eps"], c)
           for b, c in zip(beta, d["sabeta_cap"])]
    assert det == list(d["sabeta_T"]), (det, d["sabeta_T"])          # null: no exit within sabeta_cap
    ratio = [t / m for t, m in zip(det, means) if t is not None]
    # Theorem 5.4's ratio condition eps / gamma >= 2 d(K), d(K) the diameter of the vertices
    v = np.asarray(d["vertices"], float)
    diam = max(np.linalg.norm(p - q) for p, q in itertools.combinations(v, 2))
    ratio_holds = d["eps"] / d["gamma"] >= 2 * diam
    n_runs = sum(len(t) for t in d["sap_times"])
    assert float(d["beta_path"]) == beta[len(beta) // 2]
    return {
        "e6_ratio_lo": f"{min(ratio):.1f}", "e6_ratio_hi": f"{max(ratio):.1f}",
        "e6_cens": str(int(sum(np.count_nonzero(c) for c in d["sap_censored"]))), "e6_total": str(n_runs),
        "e6_beta_path": f"{beta[len(beta) // 2]:,g}",
        "e6_beta_range": f"{min(beta):g} to {max(beta):g}",
        "e6_hyp": "the ratio condition holds" if ratio_holds
        else f"ε/γ = {d['eps'] / d['gamma']:g} < 2 d(K) = {2 * diam:.2f}",
    }


def check_chapter5(sap_vs_sabeta: dict, glue: dict[str, str]) -> None:
    want = recomputed_chapter5(sap_vs_sabeta)
    for key, value in want.items():
        assert glue[key] == value, (key, glue[key], value)
    # every value glued in the section is one of these (a new one must be added here)
    assert {k for k in glue if k.startswith("e6_")} == set(want)


# ---------------------------------------------------------------------------------------------
# chapter 5's last paragraph of the section and erratum E6: what chapter 7's family shows
# ---------------------------------------------------------------------------------------------

def solved_case_T2(gamma: float, beta: float, eps: float, cap: int) -> int | None:
    """T2 of one token per vertex of the equilateral triangle (unit circle): the tokens stay at
    r v_i, r <- r (1 - 1.5 gamma (1 - a(r))), a(r) = 1 / (1 + 2 e^{-1.5 beta r^2}); exit at 1 - r > eps."""
    r = 1.0
    for t in range(1, cap + 1):
        r *= 1 - 1.5 * gamma * (1 - 1 / (1 + 2 * math.exp(-1.5 * beta * r * r)))
        if 1 - r > eps:
            return t
    return None


def check_family_statements(rates_file: dict) -> None:
    rates = {q["name"]: q for q in rates_file["rates"]}
    runs: dict[str, list[dict]] = {}
    for r in rates_file["runs"]:
        runs.setdefault(r["name"], []).append(r)
    assert set(runs) == set(rates)
    # "its exit time grows exponentially in beta": T2 increases with beta, every local slope > 0
    for name, rs in runs.items():
        rs = sorted(rs, key=lambda r: r["beta"])
        T = [r["T2_sabeta"] for r in rs if r["T2_sabeta"] is not None]     # null: no exit within the cap
        assert len(T) >= 2 and all(a < b for a, b in zip(T, T[1:])), (name, T)
        assert all(s > 0 for _, s in rates[name]["local_slopes"]), name
    # "polygons with 3 to 6 vertices, polytopes in R^3, B = I and non-isotropic B"
    kinds = set()
    for rs in runs.values():
        x0, sigma, B = np.asarray(rs[0]["x0"]), np.asarray(rs[0]["sigma"]), np.asarray(rs[0]["B"], float)
        kinds.add(("R^3" if x0.shape[1] == 3 else len(np.unique(sigma)), bool(np.allclose(B, B[0, 0] * np.eye(len(B))))))
        if x0.shape[1] == 2:
            assert 3 <= len(np.unique(sigma)) <= 6
    assert any(k[0] == "R^3" for k in kinds) and {k[1] for k in kinds} == {True, False}
    # "a few inside Theorem 5.4's hypotheses, which no step size gamma >= 0.05 meets"
    inside = {r["name"] for r in rates_file["runs"] if r["in_hypotheses"]}
    assert 1 <= len(inside) < len(runs) / 2
    assert all(r["gamma"] < 0.05 for r in rates_file["runs"] if r["in_hypotheses"])
    # the solved case: the one-line recursion gives the chapter's T2 exactly; the closed form
    # e^{3 beta / 2} (1 - e^{-3 beta eps}) / (9 gamma beta) ever closer as beta grows
    q, rs = rates[SOLVED], sorted(runs[SOLVED], key=lambda r: r["beta"])
    x0 = np.asarray(rs[0]["x0"], float)
    assert x0.shape == (3, 2) and np.allclose(np.linalg.norm(x0, axis=1), 1)
    assert np.allclose(x0 @ x0.T, np.where(np.eye(3, dtype=bool), 1.0, -0.5))
    errs = []
    for r in rs:
        g, b, e = r["gamma"], r["beta"], r["eps"]
        assert solved_case_T2(g, b, e, int(r["cap"])) == r["T2_sabeta"], (b, r["T2_sabeta"])
        if r["T2_sabeta"] is None:
            continue
        closed = math.exp(1.5 * b) * -math.expm1(-3 * b * e) / (9 * g * b)
        errs.append(abs(r["T2_sabeta"] / closed - 1))
    top = len(errs) // 2
    assert all(a > b for a, b in zip(errs[top:], errs[top + 1:])) and errs[-1] < 0.05, errs
    # "exponent c0 = 3/2": c0 lies in c_inf's interval; "a straight line through log T2 reads less"
    assert abs(q["c0"] - 1.5) < 1e-12
    assert q["c_inf_ci"][0] <= q["c0"] <= q["c_inf_ci"][1], (q["c_inf_ci"], q["c0"])
    rs = [r for r in rs if r["T2_sabeta"] is not None]
    slope = np.polyfit([r["beta"] for r in rs], np.log([r["T2_sabeta"] for r in rs]), 1)[0]
    assert slope < q["c0"], slope


# ---------------------------------------------------------------------------------------------
# the tests
# ---------------------------------------------------------------------------------------------

def perturbed(d: dict, path: tuple, factor: float) -> dict:
    out = copy.deepcopy(d)
    node = out
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = type(node[path[-1]])(node[path[-1]] * factor)
    return out


def check(data: Path, ch5_notebook: Path) -> None:
    sap = json.loads((data / "sap-vs-sabeta.json").read_text())
    rates = json.loads((data / "sabeta-rates.json").read_text())
    glue = glued(ch5_notebook)
    check_chapter5(sap, glue)
    check_family_statements(rates)
    # the checks can fail: one number changed in the data (or in the page) is found
    changes = [(sap, ("sap_times", 0, 0), 3.0), (sap, ("sabeta_T", -1), 1.02), (sap, ("gamma",), 1.5),
               (sap, ("vertices", 0, 1), 1.2)]
    for d, path, factor in changes:
        with pytest.raises(AssertionError):
            check_chapter5(perturbed(d, path, factor), glue)
    with pytest.raises(AssertionError):
        check_chapter5(sap, {**glue, "e6_ratio_hi": f"{float(glue['e6_ratio_hi']) + 0.1:.1f}"})
    solved = next(k for k, r in enumerate(rates["runs"]) if r["name"] == SOLVED)
    q = next(k for k, r in enumerate(rates["rates"]) if r["name"] == SOLVED)
    for path, factor in ((("runs", solved + 1, "T2_sabeta"), 1.1), (("rates", q, "c_inf_ci", 1), 0.99),
                         (("runs", solved, "beta"), 1.3)):
        with pytest.raises(AssertionError):
            check_family_statements(perturbed(rates, path, factor))


def test_chapter_5_and_e6_of_the_quick_book_recompute_from_the_data_files(quick_figures):
    assert quick_figures.returncode == 0, f"the quick book did not build:\n{quick_figures.log[-4000:]}"
    check(quick_figures.repo / "figures" / "presets" / "quick" / "data",
          quick_figures.repo / "book" / "05-finite-beta.ipynb")
