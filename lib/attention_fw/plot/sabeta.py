"""What does the deterministic dynamics (SA-beta) do over long times? Figures of Chapter 7.

The experiments are :mod:`attention_fw.experiments.sabeta` (exit times of SA-beta, the reduced
model, the family of configurations, the coupling with the chain). Each ``fig_*`` function takes
the experiment's results, draws one figure and returns it with the numbers behind it attached
(:func:`attention_fw.plot.figure_data`); nothing is written.
"""
from __future__ import annotations

import math
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from ._figure import saved
from .style import TWO_COLUMN

__all__ = ["fig_exit_times", "fig_rates", "fig_local_slopes", "fig_coupling", "runs_table"]


def _none(x):
    """A float, or None for NaN / a missing exit (JSON has no NaN)."""
    x = float(x)
    return None if not math.isfinite(x) or x <= 0 else x


def runs_table(results) -> list[dict]:
    """One entry per configuration and beta with what anyone needs to re-simulate it: ``x0``,
    ``sigma``, ``B``, ``gamma``, ``beta``, ``eps``, ``cap``, ``T2_sabeta`` (None when not reached
    within ``cap``), ``T2_reduced`` and, where computed, ``T2_sap_mean`` with its 95% interval
    ``T2_sap_ci`` (else None; the chain with the same ``B``, ``sap_runs`` runs of which
    ``sap_censored`` reached their cap), plus the configuration's ``name`` and whether it meets
    Theorem 5.4's hypotheses (``in_hypotheses``), the next-order model's ``T2_ode`` and the chain's seed
    ``chain_seed`` at this configuration and beta.

    >>> from attention_fw.experiments.sabeta import family_task
    >>> r = family_task(
    ...     name="triangle, 1 per vertex",
    ...     t_lo=10,
    ...     t_hi=100,
    ...     num=2,
    ...     cap=10**4,
    ...     chain_runs=20,
    ...     chain_budget=100,
    ...     rng=0,
    ... )
    >>> sorted(runs_table([r])[0])[:7]
    ['B', 'T2_ode', 'T2_reduced', 'T2_sabeta', 'T2_sap_ci', 'T2_sap_mean', 'beta']
    """
    rows = []
    for r in results:
        for k, b in enumerate(r["betas"]):
            rows.append(dict(name=r["name"], x0=np.asarray(r["x0"]).tolist(), sigma=np.asarray(r["sigma"]).tolist(),
                             B=np.asarray(r["B"]).tolist(), gamma=float(r["gamma"]), beta=float(b),
                             eps=float(r["eps"]), cap=int(r["cap"]),
                             T2_sabeta=None if r["T2_sabeta_censored"][k] else int(r["T2_sabeta"][k]),
                             T2_reduced=None if r["T2_reduced_censored"][k] else int(r["T2_reduced"][k]),
                             T2_sap_mean=_none(r["T2_sap_mean"][k]),
                             T2_sap_ci=None if _none(r["T2_sap_mean"][k]) is None
                             else [float(c) for c in r["T2_sap_ci"][k]],
                             sap_runs=int(r["chain_runs"]), sap_censored=int(r["sap_censored"][k]),
                             chain_seed=int(r["chain_seed"][k]) if "chain_seed" in r else None,
                             T2_ode=_none(r["T2_ode"][k]) if "T2_ode" in r else None,
                             in_hypotheses=bool(r["hypotheses"]["all"])))
    return rows


def fig_exit_times(results, name: str = "sabeta-exit-times"):
    """``T2`` against beta on a few configurations: (SA-beta) measured, the reduced model, its
    leading order, the chain's mean with its 95% interval. ``results``: Results of
    :func:`attention_fw.experiments.sabeta.family_task`."""
    k = len(results)
    if k == 0:
        raise ValueError("results must hold at least one configuration, got none")
    cols = min(k, 2)         # two a row: four in a row needed 1065 px of a page for legible text
    rows = math.ceil(k / cols)
    fig, axs = plt.subplots(rows, cols, figsize=(TWO_COLUMN, 2.3 * rows + 0.35), squeeze=False)
    for ax, r in zip(axs.flat, results):
        b = np.asarray(r["betas"])
        det = np.where(r["T2_sabeta_censored"], np.nan, r["T2_sabeta"]).astype(float)   # no exit: not drawn
        red = np.where(r["T2_reduced_censored"], np.nan, r["T2_reduced"]).astype(float)
        ax.plot(b, det, "s", color="C3", ms=4, label=r"SA$\beta$ (measured)")
        ax.plot(b, red, "-", color="k", lw=1.0, label="reduced model")
        if "T2_ode" in r:
            ax.plot(b, np.asarray(r["T2_ode"], float), "--", color="C1", lw=1.0, label="next order (flow)")
        ax.plot(b, r["T2_lead"], ":", color="0.4", lw=1.0, label="leading order")
        m = np.asarray(r["T2_sap_mean"], float)
        ok = np.isfinite(m)
        if ok.any():
            ci = np.asarray(r["T2_sap_ci"], float)
            ax.errorbar(b[ok], m[ok], yerr=[m[ok] - ci[ok, 0], ci[ok, 1] - m[ok]], fmt="o", ms=3, color="C0",
                        mfc="none", label="SAP mean (95%)")
        ax.set_yscale("log")
        ax.set_xlabel(r"$\beta$")
        ax.set_title(r["name"].replace(", in the hypotheses", " [H]").replace(", ", "\n", 1), fontsize=8)
    for ax in list(axs.flat)[k:]:
        ax.set_visible(False)
    axs[0, 0].set_ylabel("exit step $T_2$")
    handles, labels = axs[0, 0].get_legend_handles_labels()
    for ax in axs.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=len(labels), frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    data = dict(runs=runs_table(results))
    return saved(fig, name, data)


def _label(r):
    return r["name"].replace(", in the hypotheses", "") + (" [H]" if r["hypotheses"]["all"] else "")


def fig_rates(results, rates: list[dict], name: str = "sabeta-rates"):
    """Exponents per configuration, in units of ``c0``: the asymptotic exponent ``c_inf`` of (SA-beta)
    with its interval (``rates[k]["c_inf"]``, from the next-order model), the chain's rate on its window
    with its interval, the straight slope of (SA-beta) on that same window, and the smallest gap at the
    settled points at the largest beta. Configurations inside Theorem 5.4's hypotheses are marked
    ``[H]``; where ``c_inf`` could not be made the row says so."""
    k = len(results)
    if k == 0:
        raise ValueError("results must hold at least one configuration, got none")
    fig, ax = plt.subplots(figsize=(TWO_COLUMN, 0.24 * k + 1.1))
    y = np.arange(k)[::-1]
    lab: dict[str, Any] = {}
    for yi, r, q in zip(y, results, rates):
        c0 = q["c0"]
        if q.get("c_inf") is not None:
            lo, hi = q["c_inf_ci"]
            h: Any = ax.errorbar(q["c_inf"] / c0, yi + 0.14, xerr=[[(q["c_inf"] - lo) / c0], [(hi - q["c_inf"]) / c0]],
                            fmt="s", ms=3.5, color="C3", capsize=1.5)
            lab.setdefault(r"SA$\beta$: exponent $c_\infty$ (interval of the model)", h)
        else:
            ax.text(1.0, yi + 0.14, "  no exponent: " + str(q.get("c_inf_reason")), fontsize=8, va="center", color="C3")
        if q.get("chain_rate") is not None:
            lo, hi = q["chain_rate_ci"]
            h = ax.errorbar(q["chain_rate"] / c0, yi - 0.14, xerr=[[(q["chain_rate"] - lo) / c0],
                                                                   [(hi - q["chain_rate"]) / c0]],
                            fmt="o", ms=3, color="C0", mfc="none", capsize=1.5)
            lab.setdefault("SAP: slope on its window (95%)", h)
            h, = ax.plot(q["sabeta_window_slope"] / c0, yi - 0.14, "x", color="C3", ms=4)
            lab.setdefault(r"SA$\beta$: slope on the same window", h)
        h, = ax.plot(q["gap_settled"] / c0, yi, "|", color="k", ms=8, alpha=0.5)
        lab.setdefault("gap at the settled points", h)
    ax.axvline(1.0, color="k", lw=0.6, ls="--")
    ax.set_yticks(y)
    ax.set_yticklabels([_label(r) for r in results], fontsize=8)
    ax.set_xlabel(r"exponent or slope of $\ln T_2$ in $\beta$, in units of $c_0$ (dashed: $c_0$)")
    ax.legend(list(lab.values()), list(lab.keys()), fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0),
              ncol=2, frameon=False)
    ax.set_ylim(-0.7, k - 0.3)
    fig.tight_layout()
    data = dict(runs=runs_table(results), rates=rates)
    return saved(fig, name, data)


def fig_local_slopes(results, rates: list[dict], name: str = "sabeta-local-slopes"):
    """Left: the local slopes ``d ln T2 / d beta`` of (SA-beta) against ``1 / beta``, in units of ``c0``,
    one line per configuration (red: coincident starts, blue: spread), with ``c_inf / c0`` at
    ``1 / beta = 0`` (markers). Right: the residuals of the model of ``c_inf``
    (``ln T2 - ln T_ode - a - delta beta``) against beta."""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(TWO_COLUMN, 2.9))
    for r, q in zip(results, rates):
        col = "C3" if r.get("coincident", np.all(np.asarray(r["rho"]) == 0)) else "C0"
        ls = np.asarray(q["local_slopes"], float).reshape(-1, 2)
        if len(ls):
            ax.plot(1 / ls[:, 0], ls[:, 1] / q["c0"], "-", color=col, lw=0.8, alpha=0.7, marker=".", ms=3)
        if q.get("c_inf") is not None:
            lo, hi = q["c_inf_ci"]
            ax.errorbar(0.0, q["c_inf"] / q["c0"], yerr=[[(q["c_inf"] - lo) / q["c0"]], [(hi - q["c_inf"]) / q["c0"]]],
                        fmt="_", color=col, ms=6, alpha=0.7)
        res = np.asarray(q.get("c_inf_residuals") or [], float).reshape(-1, 2)
        if len(res):
            bx.plot(res[:, 0], res[:, 1], ".-", color=col, lw=0.6, ms=3, alpha=0.7)
    ax.axhline(1.0, color="k", lw=0.6, ls="--")
    ax.set_xlim(left=-0.01)
    ax.set_xlabel(r"$1/\beta$")
    ax.set_ylabel(r"local slope $d\ln T_2/d\beta$ / $c_0$")
    ax.plot([], [], "-", color="C3", label="coincident starts")
    ax.plot([], [], "-", color="C0", label="spread starts")
    ax.legend(fontsize=8, loc="lower left", frameon=False)
    bx.axhline(0.0, color="k", lw=0.6)
    bx.set_xlabel(r"$\beta$")
    bx.set_ylabel(r"residual of $\ln T_2$ (model of $c_\infty$)")
    fig.tight_layout()
    data = dict(rates=[{k: q[k] for k in ("name", "c0", "local_slopes", "c_inf", "c_inf_ci", "c_inf_residuals")}
                       for q in rates])
    return saved(fig, name, data)


def fig_coupling(couplings: list[dict], name: str = "sabeta-coupling"):
    """(SAP) paths against the (SA-beta) path, one line per beta, against ``t / T2``: left, the fraction of
    paths whose largest token distance to the (SA-beta) path is at most ``r_star``; right, that distance
    (median over paths, band 10-90%) with ``gamma sqrt(t)`` and ``r_star``. ``couplings``: dicts with
    ``gamma``, ``beta``, ``r_star``, ``t``, ``one`` (runs, T'), ``mean`` (T'), ``T2``, ``within`` (T')."""
    if not couplings:
        raise ValueError("couplings must hold at least one experiment, got none")
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(TWO_COLUMN, 2.8))
    for k, c in enumerate(couplings):
        col = f"C{k}"
        t = np.asarray(c["t"], float)
        s = t > 0
        x = t[s] / c["T2"]
        lab = rf"$\beta={c['beta']:g}$ ($T_2={c['T2']:,}$)"
        ax.plot(x, np.asarray(c["within"])[s], "-", color=col, lw=1.2, label=lab)
        q = np.quantile(np.asarray(c["one"]), [0.1, 0.5, 0.9], axis=0)
        bx.fill_between(x, q[0, s], q[2, s], color=col, alpha=0.15, lw=0)
        bx.plot(x, q[1, s], "-", color=col, lw=1.2)
        bx.plot(x, c["gamma"] * np.sqrt(t[s]), "--", color=col, lw=0.7)
    r = couplings[0]["r_star"]
    bx.axhline(r, color="k", lw=0.8, ls=":")
    for a in (ax, bx):
        a.axvline(1.0, color="C3", lw=0.6, alpha=0.6)
        a.set_xscale("log")
        a.set_xlabel(r"$t / T_2$")
    bx.set_yscale("log")
    ax.set_ylim(-0.03, 1.03)
    ax.set_ylabel(rf"fraction within $r={r:g}$")
    bx.set_ylabel(r"$\max_i |X_i^t - x_i^t|$")
    ax.legend(fontsize=8, loc="lower left", frameon=False)
    fig.tight_layout()
    data = dict(couplings=[{k: (np.asarray(v).tolist() if isinstance(v, np.ndarray) else v) for k, v in c.items()}
                           for c in couplings])
    return saved(fig, name, data)
