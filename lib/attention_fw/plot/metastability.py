"""What do the finite-beta experiments look like? Figures of Section 5.

The experiments are :mod:`attention_fw.experiments.metastability` (phase 1, Theorem 5.4's bound and
region, collapse), :mod:`attention_fw.experiments.exit_times` (exit times of the chain and of SA-beta)
and :mod:`attention_fw.experiments.survival` (censored fits). Each ``fig_*`` function takes the
experiment's results, draws one figure and returns it
with the numbers behind it attached (:func:`attention_fw.plot.figure_data`); it writes no file.
``name`` is the figure's file stem for whoever saves it (``phase1-event``, ...).
"""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from ..geometry import planar as geo
from ..experiments import metastability as M
from ..geometry import polytope as P
from ._figure import saved
from .style import ONE_COLUMN, TWO_COLUMN

__all__ = ["fig_phase1", "fig_admissible", "fig_histograms", "fig_rate", "fig_survival",
           "fig_sap_vs_sabeta", "fig_collapse", "fmt_beta", "survival_curves"]


def fmt_beta(b):
    """``10^k`` for powers of ten from 1000 on, plain otherwise (legend labels).

    >>> fmt_beta(1e4), fmt_beta(30.0)
    ('10^{4}', '30')
    """
    k = math.log10(b)
    return f"10^{{{k:.0f}}}" if b >= 1e3 and abs(k - round(k)) < 1e-9 else f"{b:g}"


def _closed(poly):
    return np.r_[poly, poly[:1]].T


def fig_phase1(ph1, ph1_3d, x0, sigma, vertices, constants: dict, beta_cfg: float, config_beta: float,
               name: str = "phase1-event"):
    """Theorem 5.2 by Monte Carlo: the start, the event at ``T1`` against beta, and against time.

    ``ph1``, ``ph1_3d``: results of :func:`attention_fw.experiments.metastability.phase1_task` over the
    same betas (triangle, regular simplex in R^3); ``x0``, ``sigma``: the triangle's start;
    ``constants``: :func:`~attention_fw.experiments.metastability.phase1_constants`.
    """
    b1 = np.array([r["beta"] for r in ph1])
    frac = np.array([r["fraction"] for r in ph1])
    frac3 = np.array([r["fraction"] for r in ph1_3d])
    bound1 = np.array([r["bound"] for r in ph1])
    horizon = len(ph1[0]["fraction_by_time"]) - 1
    k1 = constants
    # (a) wider than (b) and (c), so that its triangle fills the height their panels and the
    # legends under them take (with one width for all three, white space stood under it)
    fig, axs = plt.subplots(1, 3, figsize=(TWO_COLUMN, 3.1), gridspec_kw=dict(width_ratios=[1.55, 1.2, 1.2]))
    ax = axs[0]
    tri_poly = vertices[geo.convex_hull(vertices)]
    ax.fill(*_closed(tri_poly), color="0.95", ec="k", lw=0.8)
    for i in range(len(vertices)):
        cone = geo.erode(geo.cone(vertices, i, config_beta ** (-1 / 8)), config_beta ** (-1 / 4))
        if len(cone):
            ax.fill(*_closed(cone), color="C2", alpha=0.35, lw=0)
    ax.scatter(*x0[3:].T, s=9, c=[f"C{s}" for s in sigma[3:]], zorder=3)
    ax.scatter(*vertices.T, s=25, marker="s", c=["C0", "C1", "C2"], zorder=3)
    ax.plot(0, 0, "kx", ms=4)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(r"(a) start, cones at $\beta=10^4$")
    ax = axs[1]
    ax.semilogx(b1, frac, "o-", ms=3, label="event at $T_1$")
    ax.semilogx(b1, [r["fraction_interior"] for r in ph1], "s--", ms=2.5, lw=0.8, label=r"interior part ($<C\tau$)")
    ax.semilogx(b1, [r["fraction_vertices"] for r in ph1], "^:", ms=2.5, lw=0.8, label=r"vertex part ($<\beta^{-1/4}$)")
    ax.semilogx(b1, frac3, "d-", ms=2.5, lw=0.8, color="C4", label=r"event, simplex in $\mathbb{R}^3$")
    ax.semilogx(b1, bound1, "k-", lw=0.8, label=r"$1-\beta^{-1/8}$")
    ax.axvspan(b1.min() / 1.5, beta_cfg, color="0.9", lw=0)
    ax.text(math.sqrt(b1.min() * beta_cfg), 0.04, "hypotheses\nfail", ha="center", fontsize=8)
    ax.set_xlabel(r"$\beta$")
    ax.set_ylabel("fraction of runs")
    ax.set_ylim(-0.02, 1.05)
    ax.set_xlim(b1.min() / 1.5, b1.max() * 1.5)
    # below the panel: inside, it covered the bound's curve
    ax.legend(fontsize=8, loc="upper center", ncol=1, handlelength=1.8)
    ax.set_title("(b) Theorem 5.2 at $T_1$")
    ax = axs[2]
    sel = np.unique(np.linspace(0, len(ph1) - 1, min(5, len(ph1))).astype(int))
    for c, k in enumerate(sel):
        ax.plot(np.arange(horizon + 1), ph1[k]["fraction_by_time"], "-", color=plt.cm.viridis(c / max(len(sel) - 1, 1)),
                label=rf"$\beta={fmt_beta(b1[k])}$")
    ax.axvline(k1["T1"], color="k", lw=0.8, ls="--")
    ax.text(k1["T1"] + 0.3, 0.5, r"$T_1$", fontsize=8)
    ax.set_xlabel("step $t$")
    ax.set_ylabel("fraction meeting the event")
    # under the panel too, level with (b)'s: inside, it stood over the curves
    ax.legend(fontsize=8, loc="upper center", ncol=1, handlelength=1.8)
    ax.set_title("(c) event against time")
    # The panels are laid out without the two legends (wider than (b), (b)'s would widen the gaps
    # between all panels), which then go under (b) and (c), below their axis labels; (a) reaches
    # down to them, its top and title level with the others': the triangle takes the height
    # that (b) and (c) take with their legends, instead of standing over white space.
    to_fig = fig.transFigure.inverted()
    for a in axs[1:]:
        a.get_legend().set_in_layout(False)
    room = max(a.get_legend().get_window_extent().transformed(to_fig).height for a in axs[1:])
    fig.tight_layout(rect=(0, room + 0.03, 1, 1))
    label_bottom = min(a.get_tightbbox().transformed(to_fig).y0 for a in axs[1:])
    for a in axs[1:]:
        box = a.get_position()
        a.get_legend().set_bbox_to_anchor(((box.x0 + box.x1) / 2, label_bottom - 0.01), transform=fig.transFigure)
        a.get_legend().set_in_layout(True)      # part of the figure's box again (a tight save keeps it)
    bottom = min(a.get_legend().get_window_extent().transformed(to_fig).y0 for a in axs[1:])
    left = axs[0].get_position(original=True)     # its grid cell, not the box its aspect shrank
    axs[0].set_anchor("N")
    axs[0].set_position([left.x0, bottom, left.width, axs[1].get_position().y1 - bottom])
    data = dict(beta=b1, fraction=frac, fraction_simplex3=frac3, bound=bound1, T1=k1["T1"], tau=k1["tau"], m=k1["m"],
                C=k1["C"], beta_config=beta_cfg, x0=x0, sigma=sigma,
                fraction_by_time=[r["fraction_by_time"] for r in ph1])
    return saved(fig, name, data)


def fig_admissible(vertices, hyp, eps: float, gamma: float,
                   name: str = "metastability-admissible"):
    """The (eps, gamma) region where the proof of Theorem 5.4 applies (clusters at the vertices).

    ``hyp``: :func:`attention_fw.experiments.metastability.theorem54_hypotheses` at ``(eps, gamma)``.
    """
    diam = P.diameter(vertices)
    fig, ax = plt.subplots(figsize=(ONE_COLUMN, 2.4))
    region = M.theorem54_region(vertices)
    ee = np.linspace(0, 0.4, 200)
    ax.fill(*region.T, color="C2", alpha=0.35, lw=0, label=r"admissible (proof), $\rho=0$")
    ax.plot(ee, ee / (2 * diam), "k--", lw=0.8, label=r"$\gamma=\varepsilon/(2\mathsf{d})$")
    ax.axvline(hyp["r_star"], color="k", ls=":", lw=0.8, label=r"$\varepsilon=r_*$")
    ax.plot(eps, gamma, "k^", ms=5, label="experiments below")
    ax.plot(0.35, 0.1, "x", color="C3", ms=5, label=r"$\varepsilon=0.35,\ \gamma=0.1$")
    ax.set_xlim(0, 0.4)
    ax.set_ylim(0, 0.13)
    ax.set_xlabel(r"$\varepsilon$")
    ax.set_ylabel(r"$\gamma$")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    data = dict(region=region, r_star=hyp["r_star"], d=diam, eps=eps, gamma=gamma, hypotheses=dict(hyp))
    return saved(fig, name, data)


def fig_histograms(fits: dict, stepped: dict, betas,
                   name: str = "metastability-histograms", drawn_from: dict | None = None):
    """Histograms of ``T2`` per decade, with the fitted geometric law and plain stepping.

    ``fits[beta] = (CensoredFit, ExitSample)`` of the engine; ``stepped[beta]``: the
    :class:`~attention_fw.experiments.exit_times.ExitSample` of plain stepping where it was run;
    ``drawn_from[beta]``: the seed of each sample's stream, recorded in the data (an entry ``seed`` per beta).
    """
    fig, ax = plt.subplots(figsize=(TWO_COLUMN, 2.6))
    hist_data = {}
    for c, beta in enumerate(betas):
        f, es = fits[beta]
        lo, hi = np.log10(es.times.min()), np.log10(es.times.max())
        edges = np.unique(np.floor(np.logspace(max(lo - 0.3, 0), hi + 0.3, 40))) + 0.5
        edges = np.r_[0.5, edges] if edges[0] > 1 else edges
        cnt, _ = np.histogram(es.times, edges)
        mids = np.sqrt(edges[:-1] * edges[1:])
        dens = cnt / (len(es.times) * np.diff(np.log10(edges)))        # per decade
        col = plt.cm.plasma(c / max(len(betas), 1))
        ax.step(mids, dens, where="mid", color=col, lw=1, label=rf"$\beta={beta:g}$")
        # fitted geometric law: P(a < T <= b) = (1-p)^a - (1-p)^b, a, b = edges - 1/2
        a_, b_ = np.ceil(edges[:-1]) - 1, np.floor(edges[1:])
        pr = np.exp(a_ * np.log1p(-f.rate)) - np.exp(b_ * np.log1p(-f.rate))
        ax.plot(mids, pr / np.diff(np.log10(edges)), "--", color=col, lw=0.8)
        if beta in stepped:                           # plain stepping, same parameters: markers
            cs, _ = np.histogram(stepped[beta].times, edges)
            ax.plot(mids, cs / (len(stepped[beta].times) * np.diff(np.log10(edges))), "o", ms=2.2,
                    mfc="none", mew=0.6, color=col, label=rf"plain stepping, $\beta={beta:g}$")
        hist_data[str(beta)] = dict(edges=edges, counts=cnt, p_hat=f.rate, n=f.n, censored=f.n_censored)
        if drawn_from is not None:
            hist_data[str(beta)]["seed"] = drawn_from[beta]
    ax.set_xscale("log")
    ax.set_xlabel(r"exit time $T_2$ (steps, log scale)")
    ax.set_ylabel("fraction per decade")
    ax.legend(fontsize=8, ncol=len(ax.get_legend_handles_labels()[1]), loc="upper center", bbox_to_anchor=(0.5, 1.18),
              frameon=False, columnspacing=1.2, handlelength=1.5)
    fig.tight_layout()
    return saved(fig, name, hist_data)


def fig_rate(rate, name: str = "metastability-rate"):
    """Mean exit time against beta, fitted slopes against ``c0``, slopes on moving windows.

    ``rate``: the dict of the chapter's rate analysis, keys ``kappas``, ``betas``, ``fits``
    (``(kappa, n, beta) -> CensoredFit``), ``rows`` (``(kappa, n) -> slope fit``), ``exact``,
    ``thm_betas``, ``thm_fits``, ``thm_slope``, ``win_starts``, ``win``, ``c0``, ``halves``,
    ``half_fits``, ``half_exact``; optional ``seeds`` (``(kappa, n, beta) -> seed``), ``thm_seeds``
    (one per ``thm_betas``), recorded in the data, and ``thm_local`` (slope fits between
    consecutive ``thm_betas``), drawn in (c).
    """
    r = rate
    kappas, fits, rate_rows, exact_slope = r["kappas"], r["fits"], r["rows"], r["exact"]
    win_starts, win, c0_of, halves = r["win_starts"], r["win"], r["c0"], r["halves"]
    half_fits, half_exact, s_thm = r["half_fits"], r["half_exact"], r["thm_slope"]
    fig, axs = plt.subplots(1, 3, figsize=(TWO_COLUMN, 2.6), gridspec_kw=dict(width_ratios=[1.3, 1, 1]))
    ax = axs[0]
    bj = np.array(r["betas"])
    rate_data = {}
    for c, kappa in enumerate(kappas):
        fl = [fits[kappa, 6, b] for b in r["betas"]]
        mean = np.array([f.mean for f in fl])
        # the 95% interval of ln E[T_2], drawn on a logarithmic axis (one logarithm, ln, on every axis)
        lo, hi = np.exp([f.log_mean_ci[0] for f in fl]), np.exp([f.log_mean_ci[1] for f in fl])
        s = rate_rows[kappa, 6]
        ax.errorbar(bj, mean, yerr=[mean - lo, hi - mean], fmt="o", ms=3, color=f"C{c}", label=rf"$\kappa={kappa}$, $n=6$")
        ax.plot(bj, np.exp(s["intercept"] + s["slope"] * bj), "-", lw=0.7, color=f"C{c}")
    seeds = r.get("seeds")
    for kappa, n in sorted(rate_rows):
        s = rate_rows[kappa, n]
        rate_data[f"kappa{kappa}_n{n}"] = dict(
            beta=bj, log10_mean=np.array([math.log10(fits[kappa, n, b].mean) for b in r["betas"]]), slope=s["slope"],
            slope_ci=s["slope_ci"], c0=P.c0(P.regular_polygon(kappa)))
        if seeds is not None:
            rate_data[f"kappa{kappa}_n{n}"]["seeds"] = [seeds[kappa, n, b] for b in r["betas"]]
    yt = np.array([math.log10(f.mean) for f in r["thm_fits"]])
    ax.plot(r["thm_betas"], [f.mean for f in r["thm_fits"]], "k^", ms=4, label=r"theorem regime, $n=3$")
    ax.set_yscale("log")
    rate_data["theorem_n3"] = dict(beta=r["thm_betas"], log10_mean=yt, slope=s_thm["slope"], slope_ci=s_thm["slope_ci"])
    if r.get("thm_seeds") is not None:
        rate_data["theorem_n3"]["seeds"] = list(r["thm_seeds"])
    thm_local = r.get("thm_local") or []
    if thm_local:
        rate_data["theorem_n3"]["local_beta"] = [lo_hi for lo_hi, _ in thm_local]
        rate_data["theorem_n3"]["local_slope"] = [f["slope"] for _, f in thm_local]
        rate_data["theorem_n3"]["local_slope_ci"] = [f["slope_ci"] for _, f in thm_local]
    ax.set_xlabel(r"$\beta$")
    ax.set_ylabel(r"$\mathbb{E}[T_2]$ (censored MLE, log scale)")
    # room above the curves for the legend: its upper left corner is empty once the top of the
    # axis is raised (the theorem regime's grid may run past the single-jump one on the right)
    lo_y, hi_y = ax.get_ylim()
    ax.set_ylim(lo_y, hi_y * (hi_y / lo_y) ** 0.8)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(r"(a) mean exit time")
    ax = axs[1]
    labels = []
    for j, ((kappa, n), s) in enumerate(sorted(rate_rows.items())):
        c0k = P.c0(P.regular_polygon(kappa))
        ax.errorbar([j], [s["slope"]], yerr=[[s["slope"] - s["slope_ci"][0]], [s["slope_ci"][1] - s["slope"]]],
                    fmt="o", ms=3, color=f"C{kappas.index(kappa)}", label="Monte Carlo (95% CI)" if j == 0 else None)
        ax.plot([j + 0.2], [exact_slope[kappa, n]], "D", ms=3.5, mfc="none", mew=0.8, color="k",
                label="exact mean, same grid" if j == 0 else None)
        ax.plot([j - 0.3, j + 0.3], [c0k, c0k], "k-", lw=1)
        labels.append(f"{kappa},{n}")
        rate_data[f"slope_kappa{kappa}_n{n}"] = dict(mc=s["slope"], mc_ci=s["slope_ci"], exact=exact_slope[kappa, n], c0=c0k)
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlabel(r"$\kappa$, $n$")
    ax.set_ylabel(r"fitted slope of $\ln\mathbb{E}[T_2]$")
    lo_y, hi_y = ax.get_ylim()
    ax.set_ylim(lo_y, hi_y + 0.5 * (hi_y - lo_y))   # the legend above the largest slopes
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title(r"(b) slope vs $c_0$ (bars)", fontsize=8)
    ax = axs[2]
    for kappa in kappas:
        k, col = (kappa, 6), f"C{kappas.index(kappa)}"
        ax.plot(win_starts + 4, win[k] / c0_of[k], "-", lw=0.9, color=col)
        for h, bs in enumerate(halves):
            f = half_fits[k, h]
            ax.errorbar([np.mean(bs)], [f["slope"] / c0_of[k]], fmt="o", ms=2.5, color=col,
                        yerr=[[(f["slope"] - f["slope_ci"][0]) / c0_of[k]], [(f["slope_ci"][1] - f["slope"]) / c0_of[k]]])
        rate_data[f"windows_kappa{kappa}_n6"] = dict(start=win_starts, width=8.0, exact_slope=win[k],
                                                     halves=halves, mc_half_slopes=[half_fits[k, h]["slope"] for h in range(2)],
                                                     exact_half_slopes=[half_exact[k, h] for h in range(2)])
    c0_thm = c0_of.get((3, 6), P.c0(P.regular_polygon(3)))
    for j, ((b_lo, b_hi), f) in enumerate(thm_local):      # theorem regime: slope between consecutive betas
        ax.errorbar([(b_lo + b_hi) / 2], [f["slope"] / c0_thm], fmt="^", ms=3, color="k",
                    yerr=[[(f["slope"] - f["slope_ci"][0]) / c0_thm], [(f["slope_ci"][1] - f["slope"]) / c0_thm]],
                    label=r"theorem, $n=3$" if j == 0 else None)
    ax.plot([], [], "-", lw=0.9, color="0.4", label="exact mean")   # one entry: colours as in (a)
    ax.axhline(1, color="k", lw=0.6)
    ax.set_xlim(0, max(max(r["betas"]), max(r["thm_betas"]) if thm_local else 0) + 6)
    ax.set_xlabel(r"$\beta$ (centre of the window)")
    ax.set_ylabel(r"slope $/\ c_0$")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("(c) slope on moving windows", fontsize=8)
    fig.tight_layout()
    return saved(fig, name, rate_data)


def survival_curves(panels, vertices, gamma: float, eps: float) -> dict:
    """Empirical survival and the two forms of the Theorem 5.4 bound on a log grid of t.

    ``panels``: ``[(n, {beta: ExitSample}), ...]``. Returns ``{"n<n>_beta<beta>": dict(t=...,
    survival=..., bound_printed=..., bound_corrected=..., censored=..., runs=...)}``.
    """
    c0, diam = P.c0(vertices), P.diameter(vertices)
    out = {}
    for n, samples in panels:
        for beta, es in samples.items():
            t = np.unique(np.r_[np.logspace(0, np.log10(es.times.max()) + 0.5, 300)])
            out[f"n{n}_beta{beta:g}"] = dict(
                t=t, survival=es.survival(t),
                bound_printed=M.metastability_bound(t, beta, n, gamma, eps, c0, form="printed"),
                bound_corrected=M.metastability_bound(t, beta, n, gamma, eps, c0, diam=float(diam), form="corrected"),
                censored=es.n_censored, runs=len(es.times))
    return out


def fig_survival(surv_data: dict, titles, name: str = "metastability-survival"):
    """Survival of ``T2`` with the printed and the corrected bound of Theorem 5.4, one panel per n.

    ``surv_data``: :func:`survival_curves`; ``titles``: ``[(n, title), ...]`` for the panels.
    """
    fig, axs = plt.subplots(1, 2, figsize=(TWO_COLUMN, 2.6), sharey=True)
    for ax, (n, title) in zip(axs, titles):
        keys = [k for k in surv_data if k.startswith(f"n{n}_beta")]
        for c, key in enumerate(keys):
            d = surv_data[key]
            col = plt.cm.viridis(c / max(len(keys) - 1, 1))
            ax.plot(d["t"], d["survival"], "-", color=col, lw=1.1, label=rf"$\beta={key.split('beta')[1]}$")
            ax.plot(d["t"], d["bound_printed"], "--", color=col, lw=0.8)
            ax.plot(d["t"], d["bound_corrected"], ":", color=col, lw=1.0)
        ax.set_xscale("log")
        ax.set_xlabel("$t$ (steps)")
        ax.set_title(title, fontsize=8)
        ax.legend(fontsize=8, loc="lower left")
    axs[0].set_ylabel(r"$\mathbb{P}[T_2\geq t]$")
    fig.tight_layout()
    # the line styles once, above both panels (inside a panel they would hide the curves)
    styles = [plt.Line2D([], [], color="k", ls=ls, lw=lw) for ls, lw in (("-", 1.1), ("--", 0.8), (":", 1.0))]
    fig.legend(styles, ["simulated", "bound as printed", "corrected bound (E11)"], fontsize=8, ncol=3,
               loc="lower center", bbox_to_anchor=(0.5, 0.98), frameon=False)
    return saved(fig, name, surv_data)


def fig_sap_vs_sabeta(e6: dict, vertices, name: str = "sap-vs-sabeta"):
    """(SAP) against (SA-beta) from the same start: exit times, excursions, paths near a vertex.

    ``e6``: dict with ``betas``, ``results`` (:func:`attention_fw.experiments.exit_times.e6_task`),
    ``fits`` (censored exponential fits), ``beta_path``, ``paths``
    (:func:`~attention_fw.experiments.exit_times.excursion_paths`), ``sabeta``, ``sap``
    (:func:`attention_fw.experiments.exit_times.zoom_paths`). Draws only: the dynamics run before.
    """
    res_e6, e6_fit, paths_ = e6["results"], e6["fits"], e6["paths"]
    e6_det = [r["sabeta_T"] for r in res_e6]
    x0_e6, sig_e6 = res_e6[0]["x0"], res_e6[0]["sigma"]
    beta_path = e6["beta_path"]
    fig, axs = plt.subplots(1, 3, figsize=(TWO_COLUMN, 2.5), gridspec_kw=dict(width_ratios=[1.1, 1, 1]))
    ax = axs[0]
    be = np.array(e6["betas"])
    m_ = np.array([f.mean for f in e6_fit])
    lo_ = np.array([math.exp(f.log_mean_ci[0]) for f in e6_fit])
    hi_ = np.array([math.exp(f.log_mean_ci[1]) for f in e6_fit])
    ax.errorbar(be, m_, yerr=[m_ - lo_, hi_ - m_], fmt="o", ms=3, label=r"SAP: mean $T_2$ (95% CI)")
    for k, r in enumerate(res_e6):
        ax.plot(np.full(8, be[k]) + np.linspace(-0.12, 0.12, 8), np.quantile(r["times"], np.linspace(0.1, 0.9, 8)),
                ".", color="C0", ms=1.5, alpha=0.6)
    ax.plot(be, [d if d is not None else np.nan for d in e6_det], "s-", ms=3, color="C3", label=r"SA$\beta$: $T_2$")
    ax.set_yscale("log")
    ax.set_xlabel(r"$\beta$")
    ax.set_ylabel("exit step")
    ax.legend(fontsize=8)
    ax.set_title("(a) exit times", fontsize=8)
    ax = axs[1]
    ax.plot(paths_["t"], paths_["sabeta"], "-", color="C3", lw=1.2, label=r"SA$\beta$")
    for j in range(paths_["sap"].shape[0]):
        yj = paths_["sap"][j].copy()
        out = np.flatnonzero(yj > 0.1)
        if out.size:                                   # draw each run up to its exit only
            yj[out[0] + 1:] = np.nan
            ax.plot(paths_["t"][out[0]], yj[out[0]], "o", color="C0", ms=2.5)
        ax.plot(paths_["t"], yj, "-", color="C0", lw=0.6, alpha=0.8, label="SAP runs" if j == 0 else None)
    ax.axhline(0.1, color="k", lw=0.6, ls="--")
    ax.set_yscale("symlog", linthresh=1e-3)
    ax.set_ylim(0, 2)
    ax.set_xlabel("step $t$")
    ax.set_ylabel("max distance to group hull")
    ax.legend(fontsize=8)
    ax.set_title(rf"(b) excursions, $\beta={beta_path:g}$", fontsize=8)
    ax = axs[2]
    traj, sap_tr = e6["sabeta"], e6["sap"]
    jumper = int(np.argmax(np.linalg.norm(sap_tr[-1] - sap_tr[-2], axis=1)))
    home = sig_e6[jumper]                             # zoom on the vertex the SAP run leaves from
    tri_poly = vertices[geo.convex_hull(vertices)]
    ax.fill(*_closed(tri_poly), color="0.96", ec="k", lw=0.6)
    for q in x0_e6[sig_e6 == home]:                   # group hull + B(0, eps), as a union of discs
        ax.add_patch(plt.Circle(q, 0.1, color="0.8", alpha=0.35, lw=0))
    for j in range(traj.shape[1]):
        ax.plot(traj[:, j, 0], traj[:, j, 1], "-", color="C3", lw=1.0)
    for j in range(sap_tr.shape[1]):
        ax.plot(sap_tr[:, j, 0], sap_tr[:, j, 1], "-", color="C0", lw=0.6, alpha=0.8)
    ax.annotate("", sap_tr[-1, jumper], sap_tr[-2, jumper], arrowprops=dict(arrowstyle="->", color="C0", lw=0.9))
    ax.scatter(*x0_e6.T, s=6, color="k", zorder=3)
    ctr = 0.85 * vertices[home]                       # window shifted towards the inside of K
    ax.set_xlim(ctr[0] - 0.2, ctr[0] + 0.2)
    ax.set_ylim(ctr[1] - 0.2, ctr[1] + 0.2)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(r"(c) near $v_{%d}$: paths until exit" % (home + 1), fontsize=8)
    fig.tight_layout()
    data = dict(beta=be, sap_mean=m_, sap_ci_lo=lo_, sap_ci_hi=hi_,
                sabeta_T=list(e6_det),        # None (JSON null): no exit within e6_task's sabeta_cap
                path_t=paths_["t"], path_sabeta=paths_["sabeta"], path_sap=paths_["sap"])
    return saved(fig, name, data)


def fig_collapse(x0, results, betas, name: str = "collapse-prop51"):
    """Proposition 5.1: limit points, diameter against time, collapse time against beta.

    ``results``: :func:`attention_fw.experiments.metastability.collapse_task` for each beta, from ``x0``.
    """
    lim = np.array([r["limit"] for r in results])
    conv = np.array([r["converged"] for r in results])
    steps_col = np.array([r["steps"] for r in results])
    # panel (a) has equal axes, so its width follows the figure's height: 2.8 in keeps it over
    # 1.5 in wide, i.e. 200 CSS px when the book shows the figure at full width (920 px)
    fig, axs = plt.subplots(1, 3, figsize=(TWO_COLUMN, 2.8), gridspec_kw=dict(width_ratios=[1.25, 1, 1]))
    ax = axs[0]
    hull = x0[geo.convex_hull(x0)]
    ax.fill(*_closed(hull), color="0.93", ec="k", lw=0.6)
    ax.scatter(*x0.T, s=10, color="k", zorder=3, label="$x_i^0$")
    cols = plt.cm.viridis(np.linspace(0, 1, len(lim)))
    ax.scatter(*lim.T, s=18, c=cols, marker="*", zorder=4, label=r"$x^*(\beta)$")
    ax.plot(0, 0, "kx", ms=6)
    ax.annotate("origin", (0, 0), (0.05, 0.08), fontsize=8)
    ax.set_aspect("equal")
    ax.set_xlim(-0.15, 1.15)
    ax.axis("off")
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title("(a) limit points", fontsize=8)
    ax = axs[1]
    for c, r in enumerate(results):
        ax.plot(np.maximum(r["times"], 1), r["diameters"], "-", color=cols[c], lw=0.9,
                label=rf"$\beta={betas[c]:g}$")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(1e-6, 3)
    ax.set_xlabel("step $t$")
    ax.set_ylabel("diameter")
    ax.legend(fontsize=8, ncol=2)
    ax.set_title("(b) diameter of the tokens", fontsize=8)
    ax = axs[2]
    bc = np.array(betas)
    ax.semilogy(bc[conv], steps_col[conv], "o-", ms=3)
    if (~conv).any():
        ax.semilogy(bc[~conv], steps_col[~conv], "^", ms=4, color="C3", label="not collapsed by the budget")
        ax.legend(fontsize=8)
    ax.set_xlabel(r"$\beta$")
    ax.set_ylabel("steps to diameter $<10^{-6}$")
    ax.set_title("(c) collapse time", fontsize=8)
    fig.tight_layout()
    data = dict(x0=x0, beta=bc, limit=lim, steps=steps_col, converged=conv,
                dist_to_initial_hull=P.distance_to_hull(lim, x0))
    return saved(fig, name, data)
