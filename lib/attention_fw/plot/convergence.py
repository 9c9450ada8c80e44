"""What do the convergence experiments look like? Figures of Sections 3 and 4.

The experiments are :mod:`attention_fw.experiments.convergence` and :mod:`attention_fw.experiments.vertex_limits`.

Each ``fig_*`` function takes the result dicts of the experiments, draws one figure
(measured curves with the theoretical rate or bound on the same axes, ``t`` = layer
index) and returns it with the numbers behind it attached (:func:`attention_fw.plot.figure_data`);
it writes no file. The fitted numbers come from :mod:`attention_fw.experiments.convergence`
(:func:`~attention_fw.experiments.convergence.rate_slopes` and friends), so a chapter can quote them
without the figure. ``name`` is the figure's file stem for whoever saves it.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Polygon as MplPolygon

from ..experiments import convergence as C
from ..geometry.polytope import hull_area
from ..geometry import planar as G
from ..experiments import vertex_limits as VL
from ._figure import saved
from .style import ONE_COLUMN, TWO_COLUMN

__all__ = ["COLORS", "fig_thm31_counterexample", "fig_thm31_symmetric_vs_shifted", "fig_thm31_horizon",
           "fig_rates_section3",
           "fig_fixed_vs_current", "fig_linear_contrast", "fig_vertex_schedules", "fig_vertex_straight_lines",
           "fig_vertex_not_owning", "fig_duality_gap", "fig_remark46", "fig_ode_euler", "fig_ode_continuity"]

COLORS = plt.rcParams["axes.prop_cycle"].by_key()["color"]
"""matplotlib's default colour cycle, read once at import (never changed)."""


def _supported(value, t, y, t_min):
    """``value`` (a fitted log-log slope of ``y``) to the decimals that its local slopes on windows
    ``[a, 4a]``, ``a >= t_min``, support (:func:`~attention_fw.experiments.convergence.supported_decimals`);
    "not fitted" for None (fewer than two positive points from ``t_min`` on)."""
    if value is None:
        return "not fitted"
    loc = C.local_loglog_slopes(t, y, t_min)
    txt = f"{value:.{C.supported_decimals(loc.slope) if len(loc.slope) else 2}f}"
    return txt.lstrip("-") if float(txt) == 0 else txt      # no "-0.000"


def _band(ax, t, Y, color, label, lw=1.3, q=(10, 90)):
    """Median line and a shaded q-band of the columns of Y (T, R)."""
    Y = np.asarray(Y, dtype=float)
    med = np.median(Y, axis=1)
    lo, hi = np.percentile(Y, q, axis=1)
    # statistics on the raw values (exact zeros included); zeros hidden / floored for log axes
    pos = Y[Y > 0]
    floor = pos.min() / 10 if pos.size else 1e-300
    hi = np.where(hi > 0, hi, np.nan)
    medp = np.where(med > 0, med, np.nan)
    ax.fill_between(t, np.where(lo > 0, lo, floor), hi, color=color, alpha=0.2, lw=0)
    ax.plot(t, medp, color=color, lw=lw, label=label)
    return med


def _pick_example(x0, limits, diam0):
    """Index of an illustrative cloud: a round hull (area / d^2) and a limit far from 0 (|x*| / d)."""
    return int(np.argmax(np.linalg.norm(limits, axis=-1) / diam0 * hull_area(x0) / diam0 ** 2))


def _hull_patch(ax, P, **kw):
    idx = G.convex_hull(P)
    ax.add_patch(MplPolygon(P[idx], closed=True, **kw))


def _pos(y):
    """Values <= 0 masked (log axes)."""
    y = np.asarray(y, dtype=float).copy()
    y[y <= 0] = np.nan
    return y


# ============================================================================ Section 3
def fig_thm31_counterexample(res: dict, name: str = "fw-thm31-counterexample"):
    """Theorem 3.1's printed bound against the exact counterexample x^0 = (3, -1) (E2)."""
    t = res["t"]
    J = np.array([[float(v) for v in row] for row in res["J"]])
    bound = np.array([float(b) for b in res["bound"]])
    traj = np.array([[float(p[0]) for p in step] for step in res["trajectory"]])
    tv = res["first_violation"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(TWO_COLUMN, 2.6))
    a.loglog(t + 1, J[:, 0], color=COLORS[0], label=r"token 1: $J(x_1^{t+1})$")
    a.loglog(t + 1, J[:, 1], color=COLORS[1], label=r"token 2: $J(x_2^{t+1})$")
    a.loglog(t + 1, bound, "k--", label=r"printed bound $\frac{2}{t+1}\lambda_{\max}\mathsf{d}(\mathcal{K}^0)^2=\frac{32}{t+1}$")
    a.axhline(float(res["plateau"]), color="0.5", lw=0.8, ls=":")
    a.axvline(tv + 1, color="C3", lw=0.8)
    a.annotate(f"first violation\n$t={tv}$ (exact)", xy=(tv + 1, float(res["plateau"])),
               xytext=(12, 0.5), fontsize=8, color="C3",
               arrowprops=dict(arrowstyle="->", color="C3", lw=0.7))
    a.text(1.3, float(res["plateau"]) * 0.55, r"plateau $J=1/18$", fontsize=8, color="0.35")
    a.set_xlabel(r"$t+1$ ($t$ = layer index)")
    a.set_ylabel(r"$J(x_i^{t+1})=\frac{1}{2}(x_i^{t+1})^2$")
    a.set_ylim(1e-2, 1e2)
    a.legend(loc="upper right", fontsize=8)
    a.set_title(r"(a) energy vs. the bound, $x^0=(3,-1)$, $\gamma^t=\frac{2}{t+2}$")
    s = np.arange(len(traj))
    b.fill_between(s, traj.min(axis=1), traj.max(axis=1), color="0.85", label=r"$\mathcal{K}^t$")
    b.plot(s, traj[:, 0], ".-", color=COLORS[0], ms=3, label=r"$x_1^t$")
    b.plot(s, traj[:, 1], ".-", color=COLORS[1], ms=3, label=r"$x_2^t$")
    b.axhline(0, color="k", lw=0.8)
    b.text(7.5, 0.08, "origin: leaves $\\mathcal{K}^t$ at $t=2$", fontsize=8)
    b.set_xlim(0, 12)
    b.set_xlabel(r"$t$ (layer index)")
    b.set_ylabel("position")
    b.legend(loc="upper right", fontsize=8)
    b.set_title(r"(b) the hull shrinks away from $0$; limit $x^*=1/3$")
    fig.tight_layout()
    data = dict(t=t, J_token1=J[:, 0], J_token2=J[:, 1], bound=bound, positions=traj,
                first_violation=tv, first_violation_token=res["first_violation_token"],
                equality_times=res["equality_times"], plateau=str(res["plateau"]), limit=str(res["limit"]),
                x0=[3, -1], Bstar=1, schedule="2/(t+2)")
    return saved(fig, name, data)


def fig_thm31_symmetric_vs_shifted(sym: dict, shf: dict, example: dict,
                                   name: str = "fw-thm31-symmetric-vs-shifted"):
    """Ratio (t+1) max_i J(x_i^{t+1}) / (lambda d^2) (printed: <= 2) for symmetric vs shifted clouds.

    ``sym``, ``shf``: outputs of :func:`~attention_fw.experiments.convergence.thm31_ratio`; ``example``: output of
    :func:`~attention_fw.experiments.convergence.section3_rates` for one shifted cloud (positions, for panel c).
    """
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(TWO_COLUMN, 2.5))
    t = shf["t"] + 1
    # short labels: at 8 pt a legend wider than the panel would shrink every panel of the figure
    _band(a, t, shf["ratio"], COLORS[3], "shifted (median, 10-90%)")
    a.plot(sym["t"] + 1, _pos(sym["ratio"].max(axis=1)), color=COLORS[0], label="symmetric (max; $\\to 0$)")
    a.axhline(2.0, color="k", ls="--", lw=1, label="printed bound: 2")
    a.set_xscale("log")
    a.set_yscale("log")
    a.set_ylim(1e-4, None)
    a.set_xlabel(r"$t+1$ ($t$ = layer index)")
    a.set_ylabel(r"ratio $(t+1)\,J_{\max}^{t+1}/(\lambda_{\max}\mathsf{d}(\mathcal{K}^0)^2)$")
    a.legend(fontsize=8, loc="lower left")
    a.set_title("(a) the bound's ratio")
    nviol = int((shf["first_violation"] >= 0).sum())
    a.text(0.98, 0.55, f"violated: {nviol}/{len(shf['first_violation'])} shifted\n"
           f"{int((sym['first_violation'] >= 0).sum())}/{len(sym['first_violation'])} symmetric",
           transform=a.transAxes, ha="right", fontsize=8)
    _band(b, t, shf["origin_dist"], COLORS[3], "shifted")
    b.plot(sym["t"] + 1, sym["origin_dist"].max(axis=1), color=COLORS[0], label="symmetric (max)")
    b.set_xscale("log")
    b.set_xlabel(r"$t+1$")
    b.set_ylabel(r"$\mathrm{dist}(0,\mathcal{K}^{t+1})/\mathsf{d}(\mathcal{K}^0)$")
    b.legend(fontsize=8)
    b.set_title(r"(b) is $0\in\mathcal{K}^t$?")
    P = example["positions"]  # (T, R, n, 2)
    lim_all = example["final"].mean(axis=1)
    r = _pick_example(P[0], lim_all, example["diam0"])
    x0 = P[0, r]
    _hull_patch(c, x0, fill=True, fc="0.92", ec="k", lw=0.8, label=r"$\mathcal{K}^0$")
    for i in range(x0.shape[0]):
        c.plot(P[:, r, i, 0], P[:, r, i, 1], ".-", ms=2, lw=0.6, color=COLORS[i % 10])
    lim = example["final"][r].mean(axis=0)
    c.plot(0, 0, "kx", ms=6, label="origin (minimiser of $J$)")
    c.plot(*lim, "*", color="C3", ms=9, label=r"limit $x^*\in\mathcal{K}^0$")
    c.set_aspect("equal", adjustable="datalim")  # keeps the panel's share of the width
    # below the panel, out of the layout (the saved figure grows downwards to hold it)
    c.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.02), frameon=False).set_in_layout(False)
    c.set_title("(c) one shifted cloud")
    c.set_xticks([])
    c.set_yticks([])
    fig.tight_layout()
    dist_lim = np.linalg.norm(shf["limit"], axis=-1) / shf["diam0"]
    data = dict(t=shf["t"], ratio_shifted=shf["ratio"], ratio_symmetric=sym["ratio"], example_index=r,
                first_violation_shifted=shf["first_violation"], first_violation_symmetric=sym["first_violation"],
                origin_dist_shifted=shf["origin_dist"], origin_dist_symmetric=sym["origin_dist"],
                limit_distance_over_diameter_shifted=dist_lim, example_positions=P[:, r],
                example_times=example["t"])
    return saved(fig, name, data)


def fig_thm31_horizon(limit_over_diameter, first, first_extended, horizon: int, extended: int,
                      name: str = "fw-thm31-horizon"):
    """When does a shifted cloud violate Theorem 3.1's bound? First violation against ``|x*| / d(K^0)``.

    Once the tokens have merged at ``x*`` the ratio is ``(t+1) |x*|^2 / (2 d^2)`` (``B_* = I``), which
    passes 2 at ``t + 1 = 4 / (|x*|/d)^2``: the line. ``first`` (R,): first violation within
    ``horizon`` layers (-1: none); ``first_extended`` (R,): for those, the first violation when
    followed for ``extended`` layers (-1: none; ignored where ``first >= 0``).
    """
    lim = np.asarray(limit_over_diameter, float)
    first = np.asarray(first)
    first_ext = np.asarray(first_extended)
    fig, ax = plt.subplots(figsize=(ONE_COLUMN, 3.3))
    pos = lim > 0
    xs = np.geomspace(max(lim[pos].min() / 1.5, 1e-6), lim.max() * 1.5, 100) if pos.any() else np.array([1e-3, 1.0])
    ax.plot(xs, 4 / xs ** 2, "k-", lw=0.9, label=r"$4/(|x^*|/\mathsf{d})^2$")
    early = first >= 0
    late = ~early & (first_ext >= 0)
    never = ~early & ~late
    def tex(k):                       # 10{,}000: no space after the comma in math mode
        return f"{k:,}".replace(",", "{,}")

    ax.plot(lim[early], first[early] + 1, "o", ms=2.5, color=COLORS[3], label=f"violated by $t={tex(horizon)}$")
    if late.any():
        ax.plot(lim[late], first_ext[late] + 1, "s", ms=3.5, mfc="none", mew=0.9, color=COLORS[0],
                label=f"violated later (followed to $t={tex(extended)}$)")
    if never.any():
        shown = np.where(pos[never], lim[never], xs[0])
        ax.plot(shown, np.full(never.sum(), max(extended, horizon) + 1), "^", ms=4, color="k",
                label="not violated when last seen")
    ax.axhline(horizon + 1, color="0.5", ls="--", lw=0.8)
    ax.text(xs[-1], (horizon + 1) * 1.15, f"first horizon, $t={tex(horizon)}$", ha="right", va="bottom", fontsize=8,
            color="0.4")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_minor_formatter(plt.NullFormatter())       # labelled minor ticks ran into each other
    ax.set_xlabel(r"$|x^*|/\mathsf{d}(\mathcal{K}^0)$ (limit's distance to the origin)")
    ax.set_ylabel(r"first violation $t+1$")
    # under the axes: inside, it covered the points of the clouds farthest from the origin
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.28), frameon=False, ncol=1)
    fig.tight_layout()
    data = dict(limit_over_diameter=lim, first_violation=first, first_violation_extended=first_ext, horizon=horizon,
                extended_horizon=extended,
                predicted=[4 / v ** 2 if v > 0 else None for v in lim.tolist()])   # None: x* = 0, never
    return saved(fig, name, data)


def fig_rates_section3(shf: dict, sym: dict, window=(100, None), name: str = "fw-rates-section3"):
    """Energy, FW gap and primal gap on the current hull vs t (log-log), with fitted slopes and O(1/t)."""
    fig, axes = plt.subplots(1, 2, figsize=(TWO_COLUMN, 2.7), sharey=False)
    slopes = {}

    def _alive(res):
        """Drop the clouds that collapse to one point in finitely many steps (their gaps are exactly 0)."""
        keep = res["diameter"][-1] > 0
        out = {k: (v[:, keep] if isinstance(v, np.ndarray) and v.ndim >= 2 and v.shape[1] == len(keep) else v)
               for k, v in res.items()}
        out["diam0"] = res["diam0"][keep]
        return out, int((~keep).sum()), len(keep)

    panels = [(axes[0], *_alive(shf), "(a) shifted clouds ($0\\in\\mathcal{K}^0$ only)", "shifted"),
              (axes[1], *_alive(sym), "(b) symmetric clouds ($0\\in\\mathcal{K}^t$ for all $t$)", "symmetric")]
    counts = {}
    for ax, res, n_zero, n_all, title, kind in panels:
        counts[kind] = (n_zero, n_all)
        ax.text(0.98, 0.62 if kind == "symmetric" else 0.5,
                f"{n_zero} of {n_all} clouds collapse exactly\nin finitely many steps (not drawn)",
                transform=ax.transAxes, ha="right", va="top", fontsize=8)
        t = res["t"]
        tt = np.maximum(t, 1)
        keep = t >= 1
        fitted = C.rate_slopes(shf if kind == "shifted" else sym, window)
        sl = {}
        for key, col, lab in (("J", COLORS[0], r"$\max_i J(x_i^t)$"),
                              ("fw_gap", COLORS[1], r"FW gap on $\mathcal{K}^t$"),
                              ("primal_current", COLORS[2], r"primal gap on $\mathcal{K}^t$")):
            sl[key] = fitted[key]
            med = np.median(res[key], axis=1)
            lab = lab + (" (reaches 0)" if sl[key] is None else
                         f" (slope {_supported(sl[key], t, med, window[0] or 1)})")
            _band(ax, tt[keep], res[key][keep], col, lab)
        ref = 2 * res["lam"] * np.median(res["diam0"]) ** 2 / (t[keep] + 2)
        ax.plot(tt[keep], ref, "k--", lw=1, label=r"$O(1/t)$ bound on the gap: $2\lambda_{\max}\mathsf{d}^2/(t+2)$")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(r"$t$ (layer index)")
        ax.set_title(title)
        ax.legend(fontsize=8, loc="lower left")
        slopes[kind] = sl
    axes[0].set_ylabel("median over clouds (band: 10-90%)")
    axes[1].set_ylim(max(axes[1].get_ylim()[0], 1e-30), None)
    fig.tight_layout()
    data = dict(t_shifted=shf["t"], t_symmetric=sym["t"], slopes=slopes, window=[window[0], window[1] or -1],
                exact_collapse_counts=counts,
                **{f"{k}_shifted": shf[k] for k in ("J", "fw_gap", "primal_current", "primal_initial")},
                **{f"{k}_symmetric": np.where(sym[k] > 0, sym[k], 0.0) for k in ("J", "fw_gap", "primal_current")})
    return saved(fig, name, data)


def fig_fixed_vs_current(fixed: dict, current: dict, name: str = "fw-fixed-vs-current-hull"):
    """Classical FW over the fixed hull K^0 vs the token dynamics over the shrinking K^t (same clouds)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(TWO_COLUMN, 2.7), gridspec_kw=dict(width_ratios=[1.4, 1]))
    t = current["t"]
    keep = t >= 1
    diam = np.median(current["diam0"])
    alive = current["diameter"][-1] > 0  # clouds that do not collapse in finitely many steps
    _band(a, t[keep], current["primal_initial"][keep], COLORS[3],
          r"tokens, shrinking $\mathcal{K}^t$: $J-\min_{\mathcal{K}^0}J$")
    _band(a, t[keep], current["primal_current"][keep][:, alive], COLORS[2],
          r"tokens: $J-\min_{\mathcal{K}^t}J$ (current hull)")
    _band(a, fixed["t"][keep], fixed["primal"][keep], COLORS[0],
          r"classical FW, fixed $\mathcal{K}^0$: $J-\min_{\mathcal{K}^0}J$")
    a.plot(t[keep], 2 * current["lam"] * diam ** 2 / (t[keep] + 2), "k--", lw=1,
           label=r"classical FW bound $2L\mathsf{d}^2/(t+2)$")
    fitted = C.fixed_vs_current_slopes(fixed, current)
    s_fixed, s_cur = fitted.fixed, fitted.current
    txt_fixed = _supported(s_fixed, fixed["t"], np.median(fixed["primal"], axis=1), 100)
    txt_cur = _supported(s_cur, t, np.median(current["primal_current"][:, alive], axis=1), 100)
    a.text(0.98, 0.97, f"fitted slopes ($t\\geq 100$): fixed hull {txt_fixed},\ncurrent hull {txt_cur}"
           f" ({int((~alive).sum())} of {len(alive)} clouds that\ncollapse in finitely many steps not drawn)",
           transform=a.transAxes, fontsize=8, ha="right", va="top")
    a.set_xscale("log")
    a.set_yscale("log")
    a.set_xlabel(r"$t$ (layer index)")
    a.set_ylabel("primal gap (median, 10-90%)")
    a.legend(fontsize=8, loc="lower left")
    a.set_title(r"(a) same clouds, $\gamma^t=2/(t+2)$, $B_*=I_2$")
    r = _pick_example(current["positions"][0], current["final"].mean(axis=1), current["diam0"])
    P0 = current["positions"][0, r]
    _hull_patch(b, P0, fill=True, fc="0.93", ec="k", lw=0.8)
    for i in range(P0.shape[0]):
        b.plot(current["positions"][:, r, i, 0], current["positions"][:, r, i, 1], "-", lw=0.9, color=COLORS[3], zorder=3,
               label="token dynamics" if i == 0 else None)
        b.plot(fixed["positions"][:, r, i, 0], fixed["positions"][:, r, i, 1], "-", lw=0.6, color=COLORS[0],
               label="classical FW (fixed hull)" if i == 0 else None)
    b.plot(0, 0, "kx", ms=6, label=r"$\arg\min_{\mathcal{K}^0}J=0$")
    b.plot(*current["final"][r].mean(axis=0), "*", color="C3", ms=9, label=r"token limit $x^*$")
    b.set_aspect("equal")
    b.set_xticks([])
    b.set_yticks([])
    b.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.02), frameon=False).set_in_layout(False)
    b.set_title("(b) paths of one cloud")
    fig.tight_layout()
    data = dict(t=t, primal_initial_tokens=current["primal_initial"], primal_current_tokens=current["primal_current"],
                primal_fixed_fw=fixed["primal"], slope_fixed=s_fixed, slope_current=s_cur, example_index=r,
                collapsed_in_finite_time=~alive,
                positions_tokens=current["positions"][:, r], positions_fixed=fixed["positions"][:, r])
    return saved(fig, name, data)


def fig_linear_contrast(open_loop: dict, line: dict, bound: dict, name: str = "fw-linear-contrast"):
    """Frank-Wolfe over a fixed polygon with 0 in its interior: exact line search (linear) vs 2/(t+2)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(TWO_COLUMN, 2.6))
    t = line["t"]
    h_ls = line["primal"][:, 0]
    h_ol = open_loop["primal"][:, 0]
    h0 = h_ls[0]
    rho = bound["rho"]
    fitted = C.linear_contrast_rates(open_loop, line)
    rate, s_ol = fitted.rate, fitted.slope_open_loop
    for ax in (a, b):
        ax.plot(t, _pos(h_ls), ".", ms=3, color=COLORS[0], label=f"exact line search (measured factor {rate:.3f})")
        tb = np.arange(0, int(open_loop["t"][-1]) + 1)
        tb = tb[rho ** tb * h0 > 1e-17]
        ax.plot(tb, h0 * rho ** tb, "-", color=COLORS[0], lw=0.9,
                label=r"bound $\rho^t h^0$, $\rho=1-(\mu/L)(r/D)^2$" + f" $={rho:.3f}$")
        ax.plot(open_loop["t"], _pos(h_ol), "-", color=COLORS[1],
                label=f"$\\gamma^t=2/(t+2)$ (slope {_supported(s_ol, open_loop['t'], h_ol, 10)})")
        tt = np.maximum(open_loop["t"], 1)
        ax.plot(tt, 2 * bound["L"] * bound["D"] ** 2 / (tt + 2), "k--", lw=1, label=r"$O(1/t)$: $2LD^2/(t+2)$")
        ax.set_yscale("log")
        ax.set_xlabel(r"$t$ (iteration)")
        ax.set_ylim(1e-16, 1e2)
    a.set_xlim(0, 150)
    a.set_ylabel(r"primal gap $f(x^t)-\min_{\mathcal{K}}f$")
    a.set_title("(a) linear axis in $t$")
    b.set_xscale("log")
    b.set_xlim(1, open_loop["t"][-1])
    b.set_title("(b) log-log axes")
    a.legend(fontsize=8, loc="center right")
    fig.tight_layout()
    data = dict(t=t, primal_line_search=h_ls, primal_open_loop=h_ol, t_open_loop=open_loop["t"], rho=rho,
                measured_factor=rate, slope_open_loop=s_ol, r=bound["r"], D=bound["D"], mu=bound["mu"], L=bound["L"])
    return saved(fig, name, data)


# ============================================================================ Section 4
_SCHED_TEXT = {
    "constant": ("(a) $\\gamma^t=\\gamma={g}$: exponential, $(1-\\gamma)^t$", "semilogy"),
    "harmonic": ("(b) $\\gamma^t=1/(t+2)$: polynomial, $1/(t+1)$", "loglog"),
    "halving": ("(c) $\\gamma^t=2^{{-t-1}}$: no convergence, $\\to 0.2888$", "semilogy"),
    "to-one": ("(d) $\\gamma^t=1-e^{{-a(t+1)}}$, $a={g}$: $e^{{-at(t+1)/2}}$", "semilogy"),
}


def fig_vertex_schedules(results: dict, name: str = "vertex-convergence-schedules"):
    """Distance to the cell's vertex vs t, measured (markers) over the closed form of Theorem 4.2 (lines).

    ``results``: ``{kind: (schedule, vertex_convergence result)}`` with ``kind`` in
    ``constant, harmonic, halving, to-one``.
    """
    fig, axes = plt.subplots(2, 2, figsize=(TWO_COLUMN, 4.4))
    data = {}
    for ax, (kind, (sched, res)) in zip(axes.ravel(), results.items()):
        text, scale = _SCHED_TEXT[kind]
        t = res["t"]
        d0 = res["dist"][0]
        mov = d0 > 0  # tokens that are not vertices
        ratio = res["dist"][:, mov] / d0[mov]
        dev = np.abs(res["dist"] - res["closed"]).max()
        if scale == "loglog":  # t = 0 cannot be drawn on a log axis
            t, ratio, prod = t[1:], ratio[1:], res["product"][1:]
        else:
            prod = res["product"]
        tt = t
        ax.plot(tt, _pos(ratio.max(axis=1)), "o", ms=2.5, color=COLORS[0], label="measured, max over tokens")
        ax.plot(tt, _pos(ratio.min(axis=1)), "s", ms=2, mfc="none", color=COLORS[2], label="measured, min over tokens")
        ax.plot(tt, prod, "-", color="k", lw=0.9, label=r"Thm 4.2: $\prod_{\tau<t}(1-\gamma^\tau)$")
        if kind == "halving":
            ax.axhline(VL.HALVING_LIMIT, color="C3", ls=":", lw=1, label="limit 0.288788")
            ax.set_ylim(0.2, 1.05)
        if kind == "harmonic":
            ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(r"$t$ (layer index)")
        ax.set_ylabel(r"$\|x_i^t-v_{\sigma(i)}\|/\|x_i^0-v_{\sigma(i)}\|$")
        g = getattr(sched, "value", getattr(sched, "a", ""))
        ax.set_title(text.format(g=g), fontsize=8)
        ax.text(0.02, 0.04, f"largest deviation from the closed form: {dev:.1e}", transform=ax.transAxes,
                fontsize=8)
        ax.legend(fontsize=8, loc="upper right")
        if kind != "halving":
            ax.set_ylim(max(1e-17, np.nanmin(_pos(ratio))) / 3, 2)
        data[kind] = dict(schedule=sched.name, t=res["t"], ratio_max=(res["dist"][:, mov] / d0[mov]).max(axis=1),
                          ratio_min=(res["dist"][:, mov] / d0[mov]).min(axis=1), product=res["product"], max_deviation=dev,
                          labels_constant=res["labels_constant"],
                          vertex_displacement=res["vertices_fixed"])
    fig.tight_layout()
    return saved(fig, name, data)


def _draw_cells(ax, verts, B, alpha=0.35):
    cells = G.cells(verts, B)
    hues = plt.cm.hsv(np.linspace(0, 1, len(verts), endpoint=False))
    for c, col in zip(cells, hues):
        if len(c):
            ax.add_patch(MplPolygon(c, closed=True, fc=col, alpha=alpha, ec="k", lw=0.4))
    return cells


def fig_vertex_straight_lines(panels: list, name: str = "vertex-straight-lines"):
    """Trajectories of (SA-inf) drawn over the exact cells C_i(v): straight segments to the cell's vertex.

    ``panels``: list of ``(title, vertices (k,2), B, vertex_convergence result)``.
    """
    fig, axes = plt.subplots(1, len(panels), figsize=(TWO_COLUMN, 3.3))
    axes = np.atleast_1d(axes)
    data = {}
    for j, (ax, (title, verts, B, res)) in enumerate(zip(axes, panels)):
        _draw_cells(ax, verts, B)
        tr = res["trajectory"][:, 0]
        k = len(verts)
        for i in range(k, tr.shape[1]):
            ax.plot(tr[:, i, 0], tr[:, i, 1], "-", color="k", lw=0.6)
            ax.plot(tr[:, i, 0], tr[:, i, 1], ".", color="k", ms=2)
            ax.plot(*tr[0, i], "o", mfc="white", mec="k", ms=3.5)
        ax.plot(verts[:, 0], verts[:, 1], "o", mfc="k", mec="k", ms=4)
        ax.plot(0, 0, "kx", ms=5)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        own = G.owns_cell(verts, B)
        lost = int((~np.asarray(own, bool)).sum())
        owners = ("every vertex owns its cell" if lost == 0 else "one vertex does not own its cell" if lost == 1
                  else f"{lost} vertices do not own their cells")
        ax.set_title(f"{title}\n{owners}", fontsize=8)
        # straightness: distance of every point from the segment x^0 -> v
        x0 = tr[0, k:]
        v = verts[res["sigma"][0, k:]]
        e = v - x0
        u = tr[:, k:] - x0
        cross = np.abs(u[..., 0] * e[..., 1] - u[..., 1] * e[..., 0]) / np.linalg.norm(e, axis=-1)
        data[f"panel{j}"] = dict(title=title, vertices=verts, B=np.asarray(B), trajectory=tr,
                                 max_distance_from_segment=float(cross.max()),
                                 vertex_displacement=float(res["vertices_fixed"][0]),
                                 labels_constant=bool(res["labels_constant"][0]))
    axes[0].plot([], [], "o", mfc="white", mec="k", ms=3.5, label=r"$x_i^0$")
    axes[0].plot([], [], "k.-", lw=0.6, label=r"$x_i^t$, constant $\gamma$")
    axes[0].plot([], [], "kx", label="origin")
    axes[0].legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return saved(fig, name, data)


def fig_vertex_not_owning(run: dict, B, name: str = "vertex-not-owning-cell"):
    """A vertex that does not own its cell moves (towards its leader) and the hull shrinks."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(TWO_COLUMN, 2.9), gridspec_kw=dict(width_ratios=[1, 1.2]))
    tr = run["trajectory"]
    own = run["owner"]
    k = len(own)
    verts = tr[0, :k]
    _draw_cells(a, verts, B, alpha=0.25)
    _hull_patch(a, tr[-1], fill=False, ec="C3", lw=1.2, ls="--")
    for i in range(tr.shape[1]):
        col = "C3" if (i < k and not own[i]) else "k"
        a.plot(tr[:, i, 0], tr[:, i, 1], ".-", color=col, lw=0.7, ms=2)
    a.plot(verts[own, 0], verts[own, 1], "o", mfc="k", mec="k", ms=4, label="owns its cell")
    a.plot(verts[~own, 0], verts[~own, 1], "o", mfc="C3", mec="C3", ms=5, label="does not own its cell")
    a.plot(0, 0, "kx", ms=5, label="origin")
    a.plot([], [], "--", color="C3", label=r"final hull $\mathcal{K}^T$")
    a.set_aspect("equal")
    a.set_xticks([])
    a.set_yticks([])
    a.legend(fontsize=8, loc="lower left")
    a.set_title("(a) cells of $\\mathcal{K}^0$ and the paths", fontsize=8)
    t = np.arange(len(run["area"]))
    b.plot(t, run["area"] / run["area"][0], color="k", label=r"area$(\mathcal{K}^t)$/area$(\mathcal{K}^0)$")
    for j, i in enumerate(np.where(~own)[0]):
        b.plot(t, run["vertex_shift"][:, i], color="C3", lw=1.0,
               label=r"$\|x_j^t-v_j\|$, non-owning vertices $v_j$" if j == 0 else None)
    b.plot(t, run["vertex_shift"][:, own].max(axis=1), color=COLORS[0], ls="--", label="max shift of owning vertices")
    b.set_xlabel(r"$t$ (layer index)")
    b.legend(fontsize=8)
    b.set_title("(b) the hull is not fixed", fontsize=8)
    fig.tight_layout()
    data = dict(trajectory=tr, owner=own, area=run["area"], vertex_shift=run["vertex_shift"], B=np.asarray(B))
    return saved(fig, name, data)


def fig_duality_gap(results: dict, name: str = "duality-gap-prop"):
    """Both sides of the duality-gap proposition of Section 4.1 along trajectories, and their ratio.

    ``results``: ``{label: duality_gap_check result}``.
    """
    fig, (a, b) = plt.subplots(1, 2, figsize=(TWO_COLUMN, 2.7))
    data = {}
    for j, (lab, res) in enumerate(results.items()):
        t = res["t"]
        col = COLORS[j % 10]
        if j < 2:
            a.plot(t, _pos(np.median(res["rhs"], axis=(1, 2))), "-", color=col, label=f"RHS, {lab}")
            a.plot(t, _pos(np.median(res["lhs"], axis=(1, 2))), ":", color=col, lw=1.5, label=f"LHS, {lab}")
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(res["rhs"] > 1e-13, res["lhs"] / res["rhs"], np.nan)
        worst = np.nanmax(ratio.reshape(len(t), -1), axis=1)
        b.plot(t, _pos(worst), "-", color=col, label=lab)
        slack = (res["rhs"] - res["lhs"]).min()
        data[lab] = dict(t=t, lhs_median=np.median(res["lhs"], axis=(1, 2)),
                         rhs_median=np.median(res["rhs"], axis=(1, 2)),
                         worst_ratio=np.nan_to_num(worst, nan=0.0), min_slack=slack)
    tt = results[next(iter(results))]["t"]
    a.set_xscale("log")
    a.set_yscale("log")
    a.set_xlabel(r"$t$ (layer index)")
    a.set_ylabel("median over tokens and systems")
    a.set_title(r"(a) LHS $=\min_{\tau\leq t}$ FW gap, "
                r"RHS $=\frac{1}{t}\left(\frac{J^1(x^1)}{\gamma^1}-\inf_{\mathcal{K}^t}\frac{J^t}{\gamma^t}\right)$", fontsize=8)
    a.legend(fontsize=8, loc="lower left")
    b.axhline(1, color="k", ls="--", lw=1, label="equality")
    b.set_xscale("log")
    b.set_yscale("log")
    b.set_xlim(1, tt[-1])
    b.set_ylim(1e-6, 3)
    b.set_xlabel(r"$t$ (layer index)")
    b.set_ylabel("max over tokens of LHS/RHS")
    b.set_title("(b) the proposition holds iff this stays $\\leq 1$", fontsize=8)
    b.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return saved(fig, name, data)


def fig_remark46(results: list, dims_theory=None, extra=None, name: str = "remark46-owns-cell"):
    """Monte-Carlo P(all kappa Gaussian vertices own their cells) vs d, Wilson 95% bands, union bound.

    ``results``: outputs of :func:`~attention_fw.experiments.vertex_limits.owns_cell_probability` (B = I) for several kappa;
    ``extra``: optional ``(label, result)`` with a non-identity ``B``.
    """
    fig, ax = plt.subplots(figsize=(ONE_COLUMN * 1.45, 2.7))
    data = {}
    for j, res in enumerate(results):
        col = COLORS[j % 10]
        k = res["kappa"]
        ax.fill_between(res["d"], res["low"], res["high"], color=col, alpha=0.25, lw=0)
        ax.plot(res["d"], res["p"], "o-", ms=2.5, color=col, label=f"$\\kappa={k}$, Monte Carlo ({res['samples']} draws)")
        dd = np.unique(np.round(np.geomspace(res["d"].min(), res["d"].max(), 60)).astype(int)) if dims_theory is None \
            else dims_theory
        ub = VL.owns_cell_union_bound(dd, k)
        ax.plot(dd, ub, "--", color=col, lw=0.9)
        data[f"kappa{k}"] = dict(d=res["d"], p=res["p"], low=res["low"], high=res["high"],
                                 successes=res["successes"], samples=res["samples"], union_bound_d=dd, union_bound=ub)
    if extra is not None:
        lab, res = extra
        ax.plot(res["d"], res["p"], "^:", ms=3, color="0.3", label=lab)
        data["extra"] = dict(label=lab, d=res["d"], p=res["p"], low=res["low"], high=res["high"])
    ax.plot([], [], "k--", lw=0.9, label=r"union bound $1-\kappa(\kappa-1)q(d)$")
    ax.set_xscale("log")
    ax.set_xlabel(r"dimension $d$")
    ax.set_ylabel(r"$P$(every vertex owns its cell)")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(r"Remark 4.6: $v_1,\dots,v_\kappa\sim\mathcal{N}(0,I_d)$, $B=I_d$", fontsize=8)
    fig.tight_layout()
    return saved(fig, name, data)


def fig_ode_euler(err: dict, paths: dict, name: str = "ode-euler-error"):
    """Euler = (SA-inf) with gamma = dt against the exact solution of Theorem 4.8.

    ``err``: :func:`~attention_fw.experiments.vertex_limits.euler_error`;
    ``paths``: ``{"t": ..., "exact": (T,), dt: (times, values)}`` for one coordinate of one token.
    """
    fig, (a, b) = plt.subplots(1, 2, figsize=(TWO_COLUMN, 2.6))
    dt = err["dt"]
    slope = err["slope"]
    a.loglog(dt, err["err_T"], "o", ms=4, color=COLORS[0], label=f"error at $t={err['T']:g}$ (slope {slope:.3f})")
    a.loglog(dt, err["err_sup"], "s", ms=3, mfc="none", color=COLORS[1], label=r"$\sup_{k\Delta t\leq T}$ error")
    a.loglog(dt, err["leading_T"] * dt, "k-", lw=0.9,
             label=r"leading term $\frac{t}{2}e^{-t}\Delta t\,\max_i\|x_i^0-v_{\sigma(i)}\|$")
    a.set_xlabel(r"$\Delta t=\gamma$")
    a.set_ylabel(r"$\max_i\|x_i^{k}-x_i(k\Delta t)\|$")
    a.legend(fontsize=8, loc="upper left")
    a.set_title("(a) first-order convergence of the Euler scheme", fontsize=8)
    b.plot(paths["t"], paths["exact"], "k-", lw=1.2, label=r"exact $e^{-t}x^0+(1-e^{-t})v$")
    for j, (h, (tt, vals)) in enumerate(paths["euler"].items()):
        b.plot(tt, vals, "o-", ms=2.5, lw=0.7, color=COLORS[j + 2], label=f"(SA$\\infty$), $\\gamma=\\Delta t={h:g}$")
    b.set_xlabel(r"continuous time $t=k\Delta t$ ($k$ = layer index)")
    b.set_ylabel("first coordinate of one token")
    b.legend(fontsize=8)
    b.set_title("(b) Euler paths approach the ODE solution", fontsize=8)
    fig.tight_layout()
    data = dict(dt=dt, err_T=err["err_T"], err_sup=err["err_sup"], leading_T=err["leading_T"], T=err["T"],
                slope=slope, path_t=paths["t"], path_exact=paths["exact"],
                euler={str(h): dict(t=tt, x=vals) for h, (tt, vals) in paths["euler"].items()})
    return saved(fig, name, data)


def fig_ode_continuity(generic: dict, boundary: dict, eta: float, name: str = "ode-continuity"):
    """sup-norm distance of ODE solutions vs the size of the perturbation of the initial data."""
    fig, ax = plt.subplots(figsize=(ONE_COLUMN * 1.45, 2.7))
    ax.loglog(generic["delta"], generic["sup_dist"], "o", ms=4, color=COLORS[0], label="generic data")
    same = boundary["same_cells"]
    ax.loglog(boundary["delta"][same], boundary["sup_dist"][same], "s", ms=3.5, color=COLORS[3],
              label=f"a token at distance {eta:g} from a cell boundary")
    ax.loglog(boundary["delta"][~same], boundary["sup_dist"][~same], "s", ms=3.5, mfc="none", color=COLORS[3],
              label="... after it crossed the boundary")
    dd = np.geomspace(generic["delta"].min(), generic["delta"].max(), 50)
    ax.loglog(dd, dd, "k--", lw=0.9, label=r"$\sup_t\|x-\tilde x\|=\delta$ (1-Lipschitz)")
    ax.axvline(eta, color="0.5", lw=0.7, ls=":")
    ax.set_xlabel(r"perturbation size $\delta=\max_i\|\tilde x_i^0-x_i^0\|$")
    ax.set_ylabel(r"$\sup_{t\leq T}\max_i\|x_i(t)-\tilde x_i(t)\|$")
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(f"Theorem 4.8: continuous dependence ($T={generic['T']:g}$)", fontsize=8)
    fig.tight_layout()
    data = dict(delta=generic["delta"], sup_dist_generic=generic["sup_dist"], sup_dist_boundary=boundary["sup_dist"],
                same_cells_boundary=same, eta=eta, T=generic["T"], dt=generic["dt"])
    return saved(fig, name, data)
