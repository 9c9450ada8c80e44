"""How do the figures of the model chapter look? Each function takes a result and returns the figure.

The results come from :mod:`attention_fw.experiments.model_checks`; the chapter saves and glues the figures
(``afw_book.notebook.Page.figure``).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import NullFormatter

from . import style as plotting
from ..results import Result
from ._figure import saved

__all__ = ["fig_beta_limit", "fig_sap_expectation", "draw_paths", "beta_limit_data", "sap_data"]

FLOOR = 1e-16
"""Errors below this are drawn on the floor (equal in double precision)."""


def fig_beta_limit(res: Result, n: int | None = None, name: str = "ch1-beta-limit"):
    """Left: median and worst error against beta; right: every error against beta * Delta.

    Its :func:`~attention_fw.plot.figure_data`: :func:`beta_limit_data` (``n``: the tokens per
    configuration, recorded as given)."""
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(plotting.TWO_COLUMN, 2.6))
    ax.loglog(res.betas, np.maximum(res.median, FLOOR), "o-", ms=3, label="median over configurations")
    ax.loglog(res.betas, np.maximum(res.worst, FLOOR), "s--", ms=3, color="C3", label="worst configuration")
    ax.axhline(FLOOR, color="0.6", lw=0.8, ls=":")
    ax.xaxis.set_minor_formatter(NullFormatter())      # a short range of beta: labelled minor ticks collide
    ax.set_xlabel(r"inverse temperature $\beta$")
    ax.set_ylabel(r"$\max_i\|x_i^t(\beta)-x_i^t(\infty)\|$")
    ax.set_title(f"(1.3) against (SA$\\infty$) after t = {res.steps} layers", fontsize=8)
    ax.legend(frameon=False, fontsize=8)
    ax2.semilogy(res.bD.ravel(), np.maximum(res.errors.ravel(), FLOOR), ".", ms=2, color="C0", alpha=0.5)
    xs = np.linspace(10, max(res.bD.max(), 10), 200)
    if np.isfinite(res.const):
        ax2.semilogy(xs, np.maximum(res.const * np.exp(-xs), FLOOR), "k--", lw=0.8,
                     label=f"{res.const:.1f} exp($-\\beta\\Delta$)")
        ax2.legend(frameon=False, fontsize=8)
    ax2.set_xlim(0, min(res.bD.max(), 60))
    ax2.set_ylim(FLOOR / 2, 10)
    ax2.set_xlabel(r"$\beta\Delta$ ($\Delta$: smallest score gap of the configuration)")
    return saved(fig, name, beta_limit_data(res, n))


def beta_limit_data(res: Result, n: int | None) -> dict:
    """The numbers saved beside the beta-limit figure."""
    const = res.const if np.isfinite(res.const) else None
    return {"betas": res.betas, "median": res.median, "worst": res.worst, "Delta": res.Delta,
            "errors": res.errors, "steps": res.steps, "n": n, "h": res.h, "const": const,
            "const_note": ("the largest error * exp(beta Delta) over the points with beta Delta > 10 (the dashed line)"
                           if const is not None else "null: no point has beta Delta > 10, no line is fitted")}


def fig_sap_expectation(res: Result, token: int = 0, name: str = "ch1-sap-expectation"):
    """Left: the (SAP) moves of one token; middle: MC mean minus (SA-beta) step; right: error against M.

    Its :func:`~attention_fw.plot.figure_data`: :func:`sap_data`."""
    x, A, d = res.x, res.weights, res.x.shape[-1]
    fig, (ax, ax3, ax2) = plt.subplots(1, 3, figsize=(plotting.TWO_COLUMN, 3.1), layout="constrained",
                                       gridspec_kw={"width_ratios": [1.1, 0.9, 1]})
    i = token
    dest = (1 - res.gamma) * x[i] + res.gamma * x                # the n possible destinations of token i
    for j in range(len(x)):
        ax.plot([x[i, 0], x[j, 0]], [x[i, 1], x[j, 1]], color="0.85", lw=0.6, zorder=1)
    ax.scatter(x[:, 0], x[:, 1], s=30, c="k", zorder=3, label="tokens $x_j$")
    ax.scatter(dest[:, 0], dest[:, 1], s=900 * A[i], facecolors="none", edgecolors="C0", zorder=2,
               label=r"SAP destinations of $x_1$ (area $\propto A_{1j}$)")
    ax.scatter(*res.target[i], marker="*", s=120, c="C3", zorder=4, label=r"one SA$\beta$ step of $x_1$")
    ax.scatter(*res.mean[i], marker="x", s=60, c="C2", zorder=5, label="Monte Carlo mean of SAP")
    ax.annotate("$x_1$", x[i], textcoords="offset points", xytext=(-14, 6))
    ax.set_aspect("equal")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.04), ncol=1, frameon=False)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(r"one step of token $x_1$", fontsize=8)
    labels = [f"$x_{{{k + 1},{c + 1}}}$" for k in range(len(x)) for c in range(d)]
    pos = np.arange(x.size)
    ax3.errorbar(pos, (res.mean - res.target).ravel(), yerr=2 * res.se.ravel(), fmt="o", ms=3, capsize=2, color="C2")
    ax3.axhline(0, color="C3", lw=1)
    ax3.set_xticks(pos, labels, fontsize=8, rotation=90)
    ax3.set_title(r"MC mean $-$ SA$\beta$ step, $\pm2$ s.e.", fontsize=8)
    ax3.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
    ax2.loglog(res.checkpoints, res.errs, "o-", ms=3, label="largest coordinate error")
    ref = res.errs[0] * np.sqrt(res.checkpoints[0] / np.array(res.checkpoints, dtype=float))
    ax2.loglog(res.checkpoints, ref, "k:", lw=0.8, label=r"slope $-1/2$")
    ax2.set_xlabel("Monte Carlo samples $M$")
    ax2.xaxis.set_minor_formatter(NullFormatter())     # labelled minor ticks of a short log axis collide
    ax2.set_title("convergence of the mean", fontsize=8)
    ax2.legend(frameon=False, fontsize=8)
    return saved(fig, name, sap_data(res, token))


def sap_data(res: Result, token: int = 0) -> dict:
    """The numbers saved beside the (SAP) figure."""
    return {"x": res.x, "weights_token1": res.weights[token], "sa_beta": res.target, "mc_mean": res.mean,
            "mc_se": res.se, "samples": res.checkpoints, "max_error": res.errs}


def draw_paths(ax, traj, colors, title):
    """Token paths ``traj`` (T, n, 2) in [-1.1, 1.1]^2: start as open circles, end as dots."""
    for k in range(traj.shape[1]):
        ax.plot(traj[:, k, 0], traj[:, k, 1], color=colors[k], lw=0.9)
    ax.scatter(traj[0, :, 0], traj[0, :, 1], s=18, facecolors="none", edgecolors=colors)
    ax.scatter(traj[-1, :, 0], traj[-1, :, 1], s=18, c=colors, edgecolors="k", linewidths=0.4, zorder=3)
    ax.set_xlim(-1.1, 1.1)
    ax.set_ylim(-1.1, 1.1)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize=11)
