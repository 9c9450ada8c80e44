"""Figures of the context-length chapter (:mod:`attention_fw.experiments.context_length`).

Each ``fig_*`` function takes the result dicts of the sweep tasks and draws one figure and returns it
with the numbers behind it attached (:func:`attention_fw.plot.figure_data`); it writes no file.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from ..experiments import context_length as CL
from ._figure import saved
from .style import TWO_COLUMN

__all__ = ["COLORS", "fig_ownership", "fig_stay_put"]

COLORS = plt.rcParams["axes.prop_cycle"].by_key()["color"]
"""matplotlib's default colour cycle, read once at import (never changed)."""


def _count(k: int) -> str:
    """An integer with thousands separators, for mathtext (``65{,}536``)."""
    return f"{k:,}".replace(",", "{,}")


def fig_ownership(results: list, head_d: int = 64, name: str = "ctx-ownership"):
    """Fraction of tokens that own their cells against ``d``, one colour per ``n``: Monte Carlo
    (``ownership_task`` results; bars: two binomial standard errors) and the exact
    ``E[Phi(R)^(n-1)]`` (lines), the dimension where it is 1/2 (dotted) and ``d = head_d``."""
    ns = sorted({r["n"] for r in results})
    dmax = max(max(r["d"] for r in results), head_d)
    dgrid = np.linspace(1.0, dmax + 2, 400)
    fig, ax = plt.subplots(figsize=(TWO_COLUMN * 0.62, 2.7))
    data: dict = {"head_d": head_d, "curves": [], "points": []}
    for k, n in enumerate(ns):
        c = COLORS[k % len(COLORS)]
        p = CL.own_cell_probability(n, dgrid)
        d_half = CL.half_dimension(n)
        ax.plot(dgrid, p, color=c, lw=1.1, label=f"$n={_count(n)}$")
        ax.axvline(d_half, color=c, lw=0.7, ls=":")
        rows = sorted((r for r in results if r["n"] == n), key=lambda r: r["d"])
        d = np.array([r["d"] for r in rows])
        f = np.array([r["fraction"] for r in rows])
        se = np.sqrt(np.maximum(f * (1 - f), 1e-12) / np.array([r["tokens"] for r in rows]))
        ax.errorbar(d, f, yerr=2 * se, fmt="o", ms=3, color=c, elinewidth=0.8, capsize=0)
        data["curves"].append({"n": n, "d": dgrid, "probability": p, "d_half": d_half})
        data["points"] += [{k2: r[k2] for k2 in ("n", "d", "systems", "owners", "tokens", "fraction", "probability")}
                           for r in rows]
    ax.axvline(head_d, color="0.5", lw=0.8)
    ax.annotate(f"one head, $d={head_d}$", (head_d, 0.6), xytext=(-4, 0), textcoords="offset points",
                ha="right", va="center", fontsize=8, color="0.35", rotation=90)
    ax.set_xlabel("dimension $d$ ($B=I_d$)")
    ax.set_ylabel("fraction owning their cells")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlim(0, dmax + 2)
    ax.legend(frameon=False, loc="center", bbox_to_anchor=(0.68, 0.35), title="exact (lines), sampled (dots)",
              title_fontsize=8)
    fig.tight_layout()
    return saved(fig, name, data)


def fig_stay_put(run: dict, name: str = "ctx-stay-put"):
    """One (SA-inf) run (``hardmax_run_task``): (a) the tokens that moved at each layer against the
    number of tokens that do not own their cells; (b) for the tokens led by an owner, the distance
    to their leader relative to the start (median and largest) against ``(1 - gamma)^t``, and the
    deviation from Theorem 4.2's closed form."""
    t = np.arange(1, run["steps"] + 1)
    n = run["n"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(TWO_COLUMN, 2.5))
    a.bar(t, run["moved"], width=0.6, color=COLORS[0], alpha=0.8, label="tokens that moved at layer $t$")
    a.axhline(n - run["owners"], color="0.2", lw=1.0, ls="--", label="tokens not owning their cells at $t=0$")
    a.set_ylim(0, 1.25 * n)
    a.set_xlabel("layer $t$")
    a.set_ylabel("tokens")
    a.xaxis.set_major_locator(MaxNLocator(integer=True))
    a.set_title(f"(a) $n={_count(n)}$, $d={run['d']}$: the owners never move", loc="left")
    a.legend(frameon=False, loc="upper right", fontsize=8)
    b.semilogy(t, (1 - run["gamma"]) ** t, "k-", lw=0.9, label=r"$(1-\gamma)^t$")
    led = run["led_by_owner"] > 0
    if led:
        b.semilogy(t, run["ratio_median"], "o", color=COLORS[1], ms=4, mfc="none", label="median ratio")
        b.semilogy(t, run["ratio_max"], "x", color=COLORS[2], ms=4, label="largest ratio")
        err = np.maximum(np.asarray(run["closed_form_error"], float), 1e-17)
        b.semilogy(t, err, "s", color=COLORS[3], ms=3, label="deviation from the closed form")
    else:      # every token owns its cell or follows a non-owner: nothing to compare with the closed form
        b.text(0.5, 0.3, "no token is led by an owner:\nno ratio to show", transform=b.transAxes,
               ha="center", va="center", fontsize=8)
    b.set_xlabel("layer $t$")
    b.xaxis.set_major_locator(MaxNLocator(integer=True))
    b.set_ylim(1e-18, 10.0)
    b.set_ylabel(r"$\|x_i^t-v\|/\|x_i^0-v\|$")
    b.set_title(f"(b) the ${_count(run['led_by_owner'])}$ tokens led by an owner $v$", loc="left")
    b.legend(frameon=False, fontsize=8, loc="center right")
    fig.tight_layout()
    data = {k: run[k] for k in ("n", "d", "gamma", "steps", "seed", "owners", "led_by_owner", "others", "moved",
                                "never_moved", "never_moved_are_owners", "closed_form_error", "ratio_median",
                                "ratio_max", "probability")}
    if not led:     # null where a number does not exist, with the reason
        data.update(closed_form_error=None, ratio_median=None, ratio_max=None,
                    ratio_note="null: no token is led by an owner of its cell, so there is no ratio to measure")
    return saved(fig, name, data)
