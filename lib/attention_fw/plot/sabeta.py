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

__all__ = ["fig_exit_times", "fig_rates", "fig_coupling", "runs_table"]


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
    Theorem 5.4's hypotheses (``in_hypotheses``).

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
    ['B', 'T2_reduced', 'T2_sabeta', 'T2_sap_ci', 'T2_sap_mean', 'beta', 'cap']
    """
    rows = []
    for r in results:
        for k, b in enumerate(r["betas"]):
            rows.append(dict(name=r["name"], x0=np.asarray(r["x0"]).tolist(), sigma=np.asarray(r["sigma"]).tolist(),
                             B=np.asarray(r["B"]).tolist(), gamma=float(r["gamma"]), beta=float(b),
                             eps=float(r["eps"]), cap=int(r["cap"]),
                             T2_sabeta=None if r["T2_sabeta"][k] <= 0 else int(r["T2_sabeta"][k]),
                             T2_reduced=None if r["T2_reduced"][k] <= 0 else int(r["T2_reduced"][k]),
                             T2_sap_mean=_none(r["T2_sap_mean"][k]),
                             T2_sap_ci=None if _none(r["T2_sap_mean"][k]) is None
                             else [float(c) for c in r["T2_sap_ci"][k]],
                             sap_runs=int(r["chain_runs"]), sap_censored=int(r["sap_censored"][k]),
                             in_hypotheses=bool(r["hypotheses"]["all"])))
    return rows


def fig_exit_times(results, outdir=None, formats=None, name: str = "sabeta-exit-times"):
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
        det = np.where(r["T2_sabeta"] > 0, r["T2_sabeta"], np.nan).astype(float)
        red = np.where(r["T2_reduced"] > 0, r["T2_reduced"], np.nan).astype(float)
        ax.plot(b, det, "s", color="C3", ms=4, label=r"SA$\beta$ (measured)")
        ax.plot(b, red, "-", color="k", lw=1.0, label="reduced model")
        ax.plot(b, r["T2_lead"], ":", color="0.4", lw=1.0, label="leading order")
        m = np.asarray(r["T2_sap_mean"], float)
        ok = np.isfinite(m)
        if ok.any():
            ci = np.asarray(r["T2_sap_ci"], float)
            ax.errorbar(b[ok], m[ok], yerr=[m[ok] - ci[ok, 0], ci[ok, 1] - m[ok]], fmt="o", ms=3, color="C0",
                        mfc="none", label="SAP mean (95% CI)")
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
    return saved(fig, name, data, outdir, formats)


def fig_rates(results, rates: list[dict], outdir=None, formats=None, name: str = "sabeta-rates"):
    """The effective rate ``c_eff`` (slope of ``log T2`` in beta) per configuration, with intervals:
    (SA-beta) (least squares over the grid), the chain (weighted fit of its censored means), the
    smallest gap of the settled points of the reduced model (over the grid), and ``c0``; all
    divided by ``c0``. Configurations inside Theorem 5.4's hypotheses are marked ``[H]``."""
    k = len(results)
    fig, ax = plt.subplots(figsize=(TWO_COLUMN, 0.22 * k + 1.0))
    y = np.arange(k)[::-1]
    for yi, r, q in zip(y, results, rates):
        c0 = r["c0"]
        lo, hi = q["sabeta_ci"]
        ax.errorbar(q["sabeta"] / c0, yi + 0.12, xerr=[[(q["sabeta"] - lo) / c0], [(hi - q["sabeta"]) / c0]],
                    fmt="s", ms=3.5, color="C3", capsize=1.5, label=r"SA$\beta$" if yi == y[0] else None)
        if q.get("sap") is not None:
            lo, hi = q["sap_ci"]
            ax.errorbar(q["sap"] / c0, yi - 0.12, xerr=[[(q["sap"] - lo) / c0], [(hi - q["sap"]) / c0]],
                        fmt="o", ms=3, color="C0", mfc="none", capsize=1.5,
                        label="SAP (95% CI)" if "sap_lab" not in q else None)
        g = np.asarray(r["gap"], float) / c0
        ax.plot([g.min(), g.max()], [yi, yi], "-", color="k", lw=2.5, alpha=0.35,
                label="gap at the settled points" if yi == y[0] else None)
    ax.axvline(1.0, color="k", lw=0.6, ls="--")
    ax.set_yticks(y)
    ax.set_yticklabels([r["name"].replace(", in the hypotheses", "") + (" [H]" if r["hypotheses"]["all"] else "")
                        for r in results], fontsize=8)
    ax.set_xlabel(r"rate $c_{\mathrm{eff}} = d\ln T_2/d\beta$, in units of $c_0$ (dashed: $c_0$)")
    handles, labels = ax.get_legend_handles_labels()
    seen: dict[str, Any] = {}
    for h, lab in zip(handles, labels):
        seen.setdefault(lab, h)
    ax.legend(list(seen.values()), list(seen.keys()), fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3,
              frameon=False)
    ax.set_ylim(-0.7, k - 0.3)
    fig.tight_layout()
    data = dict(runs=runs_table(results), rates=rates)
    return saved(fig, name, data, outdir, formats)


def fig_coupling(couplings: list[dict], outdir=None, formats=None, name: str = "sabeta-coupling"):
    """Distance between (SAP) paths and the (SA-beta) path against t, one panel per gamma: the
    median over paths of one path's distance (band: 10-90%), the distance of the chains' mean,
    the martingale scale ``gamma sqrt(t)`` and the theorem's radius. ``couplings``: dicts with
    ``gamma``, ``beta``, ``r_star``, ``eps``, ``t``, ``one`` (runs, T'), ``mean`` (T'), ``T2``."""
    k = len(couplings)
    fig, axs = plt.subplots(1, k, figsize=(TWO_COLUMN, 2.75), squeeze=False, sharey=True)
    for ax, c in zip(axs[0], couplings):
        t = np.asarray(c["t"], float)
        one = np.asarray(c["one"])
        q = np.quantile(one, [0.1, 0.5, 0.9], axis=0)
        s = t > 0
        ax.fill_between(t[s], q[0, s], q[2, s], color="C0", alpha=0.2, lw=0)
        ax.plot(t[s], q[1, s], "-", color="C0", lw=1.2, label="one SAP path (median)")
        ax.plot(t[s], np.asarray(c["mean"])[s], "-", color="C2", lw=1.2, label="mean of the SAP paths")
        ax.plot(t[s], c["gamma"] * np.sqrt(t[s]), "--", color="k", lw=0.8, label=r"$\gamma\sqrt{t}$")
        ax.axhline(c["r_star"], color="C3", lw=0.8, ls=":", label="radius $r$ of Thm 5.4")
        if c.get("T2"):
            ax.axvline(c["T2"], color="C3", lw=0.6, alpha=0.6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("step $t$")
        ax.set_title(rf"$\gamma={c['gamma']:g}$, $\beta={c['beta']:g}$", fontsize=8)
    axs[0, 0].set_ylabel(r"$\max_i |X_i^t - x_i^t|$")
    handles, labels = axs[0, 0].get_legend_handles_labels()      # below the panels: it hid the curves
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=len(labels), frameon=False)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    data = dict(couplings=[{k: (np.asarray(v).tolist() if isinstance(v, np.ndarray) else v) for k, v in c.items()}
                           for c in couplings])
    return saved(fig, name, data, outdir, formats)
