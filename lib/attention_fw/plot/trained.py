"""Figures of the trained-transformer chapter (:mod:`attention_fw.experiments.trained_heads`).

Each ``fig_*`` function draws one figure from the chapter's results and returns it with the
numbers behind it attached (:func:`attention_fw.plot.figure_data`); it writes no file. The
chapter saves them as ``trained-heads-map``, ``trained-support``, ``trained-sentence`` and
``trained-dynamics``.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..experiments import trained_heads as T
from ._figure import saved
from .style import TWO_COLUMN

__all__ = ["COLORS", "HEAD_KEYS", "label", "fig_heads_map", "fig_support", "fig_sentence", "fig_dynamics",
           "fig_hull_test"]

COLORS = plt.rcParams["axes.prop_cycle"].by_key()["color"]
"""matplotlib's default colour cycle, read once at import (never changed)."""
LAYER_CMAP = "viridis"
HEAD_KEYS = ("layer", "head", "antisym_ratio", "pos_mass", "value_scalar_dist")
"""The keys of each entry of the ``heads`` table in the data of :func:`fig_heads_map`."""


def fig_heads_map(table: list, subspace: dict, token_sign, similarity_check, *, share: float, extra: dict | None = None):
    """Where the trained heads sit. (a) The 72 heads by ``pos_mass`` and ``antisym_ratio`` on the whole space; (b) the same on the
    tokens' principal subspace (``share`` of the energy), open markers where ``x^T M x > 0`` for
    every token of the corpus. Colour: the layer. The data hold ``heads`` (the five statistics of
    each head) and ``similarity_check`` (the reference check of the forward pass)."""
    layers = np.array([r["layer"] for r in table])
    pm = np.array([r["pos_mass"] for r in table])
    ar = np.array([r["antisym_ratio"] for r in table])
    sub = subspace[share]
    pm_s, ar_s = np.ravel(sub["pos_mass"]), np.ravel(sub["antisym_ratio"])
    sign = np.ravel(token_sign)
    fig, (a, b) = plt.subplots(1, 2, figsize=(TWO_COLUMN, 2.9), sharey=False)
    norm = plt.Normalize(-0.5, layers.max() + 0.5)
    sc = a.scatter(pm, ar, c=layers, cmap=LAYER_CMAP, norm=norm, s=16, edgecolors="none")
    b.scatter(pm_s, ar_s, c=layers, cmap=LAYER_CMAP, norm=norm, s=16, edgecolors="none")
    full = sign >= 1.0
    b.scatter(pm_s[full], ar_s[full], s=70, facecolors="none", edgecolors="0.2", linewidths=0.7,
              label=r"$x^\top Mx>0$ on every token")
    for ax, title in ((a, "(a) on the whole space $\\mathbb{R}^{384}$"),
                      (b, f"(b) on the tokens' subspace ({share:.0%} of the energy)")):
        ax.axvspan(-0.02, 0.0, color="C3", alpha=0.25)
        ax.axvspan(1.0, 1.02, color="C0", alpha=0.25)
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(0, None)
        ax.set_xlabel("pos$\\_$mass (1: $S\\succeq0$, 0: $S\\preceq0$)")
        ax.set_title(title, loc="left")
    a.set_ylabel(r"antisym$\_$ratio $\|M-M^\top\|/\|M+M^\top\|$")
    a.annotate("$S\\preceq0$", (0.0, 0.02), xycoords=("data", "axes fraction"), fontsize=8, color="C3", ha="left")
    a.annotate("$S\\succeq0$", (1.0, 0.02), xycoords=("data", "axes fraction"), fontsize=8, color="C0", ha="right")
    b.legend(frameon=False, fontsize=8, loc="upper left")
    cb = fig.colorbar(sc, ax=[a, b], ticks=range(int(layers.max()) + 1), fraction=0.03, pad=0.02)
    cb.set_label("layer")
    data = {"heads": [{k: r[k] for k in HEAD_KEYS} for r in table],
            "similarity_check": similarity_check, "share": share,
            "subspace": {"dim": sub["dim"], "pos_mass": sub["pos_mass"], "antisym_ratio": sub["antisym_ratio"]},
            "token_sign": token_sign, **(extra or {})}
    return saved(fig, "trained-heads-map", data)


def fig_support(study: dict, hull: list):
    """How many keys the attention uses.

    (a) Effective support of the attention rows, distinct hardmax leaders and hull vertices of the
    keys against the number of tokens n (medians over the 72 heads per sentence; vertices for the
    sentences tested by LP); (b) attention mass received by [CLS], [SEP], punctuation and words per
    layer, against their share of the tokens."""
    n = np.asarray(study["n"])
    order = np.argsort(n, kind="stable")
    sup = study["support"].reshape(len(n), -1)
    lead = study["leaders"].reshape(len(n), -1)
    fig, (a, b) = plt.subplots(1, 2, figsize=(TWO_COLUMN, 2.8), gridspec_kw={"width_ratios": [1.25, 1]})
    nn = n[order]
    a.plot([nn.min(), nn.max()], [nn.min(), nn.max()], color="0.6", lw=0.8, ls="--", label="$n$")
    for vals, c, lab in ((sup, COLORS[0], "effective support $e^{H}$"), (lead, COLORS[1], "distinct leaders")):
        med = np.median(vals[order], axis=1)
        lo, hi = np.percentile(vals[order], [10, 90], axis=1)
        a.fill_between(nn, lo, hi, color=c, alpha=0.15, lw=0)
        a.plot(nn, med, ".", color=c, ms=3, label=lab + " (median, 10-90% of heads)")
    hv = np.array([[e["n"], e["vertices"]] for e in hull], float)
    if len(hv):
        a.plot(hv[:, 0], hv[:, 1], "kx", ms=4, mew=0.8, label="hull vertices of the keys (LP, every head)")
    a.set_xscale("log")
    a.set_yscale("log")
    ticks = [t for t in (10, 20, 50, 100, 200) if nn.min() / 1.5 <= t <= nn.max() * 1.5]
    a.set_xticks(ticks)
    a.set_xticklabels([str(t) for t in ticks])
    a.xaxis.set_minor_formatter(plt.NullFormatter())
    a.set_xlabel("tokens $n$")
    a.set_ylabel("tokens")
    a.set_title("(a) attended tokens against $n$", loc="left")
    a.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(0, 1.0))
    a.set_ylim(0.8, nn.max() * 25)                                   # the legend above the data
    cm = study["class_mass"].mean(axis=(0, 2))                        # (layers, 4)
    share = study["class_share"].mean(axis=0)
    L = cm.shape[0]
    width = 0.2
    for c in range(4):
        b.bar(np.arange(L) + (c - 1.5) * width, cm[:, c], width, color=COLORS[c], label=T.CLASS_NAMES[c])
        b.axhline(share[c], color=COLORS[c], lw=0.8, ls=":")
    b.set_xticks(range(L))
    b.set_xlabel("layer")
    b.set_ylabel("mean attention mass received")
    b.set_ylim(0, 1.12)
    b.set_title("(b) where the mass goes (dotted: share of tokens)", loc="left")
    b.legend(frameon=False, fontsize=8, ncol=4, loc="upper center", handlelength=1.0, columnspacing=0.8)
    fig.tight_layout()
    data = {"n": n, "support": study["support"], "leaders": study["leaders"],
            "hull": [{k: e[k] for k in ("sentence", "layer", "head", "n", "vertices", "vertex_mass", "support",
                                        "leaders", "leaders_are_vertices")} for e in hull],
            "class_names": list(T.CLASS_NAMES), "class_mass": cm, "class_share": share}
    return saved(fig, "trained-support", data)


def fig_sentence(panels: list):
    """One sentence's attention at two heads: the weights (rows: queries, columns: keys), each row's
    hardmax leader (dots) and the keys that are vertices of the hull in the head's 32 dimensions
    (ticks on top; all of them here) and of the hull of the keys' 2-D principal projection (squares)."""
    fig, axes = plt.subplots(1, len(panels), figsize=(TWO_COLUMN, 3.5))
    axes = np.atleast_1d(axes)
    for j, (ax, p) in enumerate(zip(axes, panels)):
        a = np.asarray(p["weights"])
        n = len(a)
        im = ax.imshow(a, cmap="Greys", vmin=0, vmax=1, interpolation="nearest")
        ax.plot(p["leader_index"], np.arange(n), "o", color=COLORS[1], ms=2.2, label="hardmax leader of the row")
        v = np.flatnonzero(p["is_vertex"])
        ax.plot(v, np.full(len(v), -1.2), "|", color=COLORS[0], ms=4, clip_on=False, label="vertex (32-D hull)")
        v2 = np.flatnonzero(p["is_vertex_2d"])
        ax.plot(v2, np.full(len(v2), n + 0.6), "s", color=COLORS[2], ms=2.5, clip_on=False, label="vertex of the 2-D projection")
        ticks = np.arange(n)
        ax.set_xticks(ticks)
        ax.set_xticklabels(p["pieces"], rotation=90, fontsize=8)
        ax.set_yticks(ticks)
        ax.set_yticklabels(p["pieces"], fontsize=8)
        ax.set_ylim(n + 1.2, -1.8)
        ax.set_title(f"({chr(97 + j)}) layer {p['layer']}, head {p['head']}: "
                     f"support {p['support']:.1f} of $n={n}$", loc="left", fontsize=8)
    fig.subplots_adjust(bottom=0.24, top=0.93, left=0.09, right=0.9, wspace=0.3)
    fig.legend(*axes[0].get_legend_handles_labels(), frameon=False, fontsize=8, loc="lower center",
               bbox_to_anchor=(0.5, 0.0), ncol=3)
    fig.colorbar(im, ax=list(axes), fraction=0.02, pad=0.01).set_label("attention weight")
    data = {"panels": [{k: p[k] for k in ("layer", "head", "pieces", "weights", "leader_index", "is_vertex",
                                          "is_vertex_2d", "support")} for p in panels]}
    return saved(fig, "trained-sentence", data)


def fig_dynamics(runs: list, sweep: list):
    """The attention-only dynamics (1.3) under trained heads: (top, two per row) the tokens in the
    plane of their two first principal components at the start (grey), along the way and at the
    end, for each run of ``runs`` (a head, as trained or symmetrised, at its trained temperature);
    (bottom) the diameter and the number of clusters against the layer for each ``sweep`` run (a
    head at beta times its temperature)."""
    k = len(runs)
    rows = (k + 1) // 2
    betas = sorted({r["beta"] for r in sweep})
    # the sweep's legend goes under the two bottom panels, one column per head and kind, one row
    # per beta (inside panel (e) it covered the curves)
    legend_in = 0.2 + len(betas) * 8 * 1.35 / 72
    height = 2.3 * rows + 2.4 + legend_in
    fig = plt.figure(figsize=(TWO_COLUMN, height))
    gs = fig.add_gridspec(rows + 1, 2, height_ratios=[1] * rows + [0.95])
    data: dict[str, list] = {"runs": [], "sweep": []}
    for j, r in enumerate(runs):
        ax = fig.add_subplot(gs[j // 2, j % 2])
        x = np.asarray(r["x"])
        c = x[0].mean(axis=0)
        _, _, vt = np.linalg.svd(x[0] - c, full_matrices=False)
        P = vt[:2].T
        y = (x - c) @ P
        for i in range(y.shape[1]):
            ax.plot(y[:, i, 0], y[:, i, 1], color=COLORS[0], lw=0.4, alpha=0.5)
        ax.plot(y[0, :, 0], y[0, :, 1], "o", color="0.65", ms=2.5)
        ax.plot(y[-1, :, 0], y[-1, :, 1], "o", color=COLORS[3], ms=3.5)
        ax.set_title(f"({chr(97 + j)}) {r['head_label']} head {r['layer']}.{r['head']}, {r['kind']}", loc="left",
                     fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
        c = int(r["clusters"][-1])
        ax.set_xlabel(f"{c} cluster{'' if c == 1 else 's'} at $t={r['t'][-1]}$", fontsize=8)
        data["runs"].append({"label": r["label"], "layer": r["layer"], "head": r["head"], "t": r["t"],
                             "projected": y, "clusters": r["clusters"], "diameter": r["diameter"]})
    a = fig.add_subplot(gs[rows, 0])
    b = fig.add_subplot(gs[rows, 1])
    heads = list(dict.fromkeys(r["head_label"] for r in sweep))
    ramps = [plt.get_cmap("Blues"), plt.get_cmap("Reds"), plt.get_cmap("Greens")]
    for r in sweep:
        ramp = ramps[heads.index(r["head_label"]) % len(ramps)]
        shade = 0.45 + 0.5 * (betas.index(r["beta"]) / max(1, len(betas) - 1))
        style = dict(color=ramp(shade), lw=1.0, ls="-" if r["kind"] == "trained" else "--")
        t1 = np.asarray(r["t"]) + 1
        lab = f"{r['layer']}.{r['head']} {'trained' if r['kind'] == 'trained' else 'sym.'}, $\\beta\\times{r['beta']:g}$"
        a.loglog(t1, np.maximum(r["diameter"], 1e-17), label=lab, **style)
        b.semilogx(t1, r["clusters"], **style)
        data["sweep"].append({k2: r[k2] for k2 in ("label", "layer", "head", "kind", "beta", "t", "diameter",
                                                    "clusters")})
    for ax in (a, b):
        ax.set_xlabel("layer $t+1$")
    a.set_ylabel("diameter / initial")
    b.set_ylabel("clusters")
    a.set_ylim(1e-17, 5)
    a.set_title(f"({chr(97 + k)}) diameter", loc="left")
    b.set_title(f"({chr(98 + k)}) clusters", loc="left")
    b.set_ylim(0, None)
    handles, labels = a.get_legend_handles_labels()
    order = sorted(range(len(sweep)), key=lambda i: (heads.index(sweep[i]["head_label"]),
                                                     sweep[i]["kind"] != "trained", sweep[i]["beta"]))
    groups = len({(r["head_label"], r["kind"]) for r in sweep})
    fig.legend([handles[i] for i in order], [labels[i] for i in order], frameon=False, fontsize=8,
               loc="lower center", bbox_to_anchor=(0.5, 0.0), ncol=max(1, groups), handlelength=1.6,
               columnspacing=1.2)
    fig.tight_layout(rect=(0.0, legend_in / height, 1.0, 1.0))
    return saved(fig, "trained-dynamics", data)


_LABELS = {
    "near_top_0.5": r"near top $\Delta{=}0.5$", "near_top_1": r"near top $\Delta{=}1$",
    "near_top_2": r"near top $\Delta{=}2$", "near_top_4": r"near top $\Delta{=}4$",
    "robust_0.01": r"robust $\varepsilon{=}0.01$", "robust_0.03": r"robust $\varepsilon{=}0.03$",
    "robust_0.1": r"robust $\varepsilon{=}0.1$", "projected_2": "vertices, 2 PCs", "projected_3": "vertices, 3 PCs",
    "projected_4": "vertices, 4 PCs", "projected_8": "vertices, 8 PCs", "query_span": "vertices, query span",
    "support": r"support $e^{H}$", "mass90": "90% of the mass", "participation": r"$1/\sum a^2$",
    "leaders": "distinct leaders",
}


def label(stat: str) -> str:
    """The label (matplotlib mathtext) of the count ``stat`` of
    :mod:`attention_fw.experiments.hull_counts` in the figures; ``stat`` itself for a count
    without one."""
    if not isinstance(stat, str):
        raise TypeError(f"stat must be a str, got {type(stat).__name__}")
    return _LABELS.get(stat, stat)
"""How :func:`fig_hull_test` names each statistic of :mod:`attention_fw.experiments.hull_counts`."""


def fig_hull_test(data: dict, *, variant: str = "excluded", shown=("support", "leaders", "near_top_1", "robust_0.1",
                                                                    "projected_2", "projected_4")):
    """The hull prediction against the computation. (a) The exponent ``b`` of ``count ~ n^b`` of every
    statistic (:mod:`attention_fw.experiments.hull_counts`), pooled over the 72 heads with its
    bootstrap interval ([CLS] and [SEP] excluded: filled; included: open) and per layer (small
    dots, coloured by layer); the statistics without a fit are marked "no fit". (b) The mean count
    over the 72 heads against ``n`` for a few statistics, with ``n`` itself dashed.

    ``data`` holds ``scaling`` (entries ``statistic``, ``variant``, ``layer``, ``exponent``,
    ``ci``), ``statistics``, ``layers``, ``n`` and ``pooled`` ({variant: {statistic: mean count
    per input}}); it is saved with the figure as ``trained-hull-test``."""
    stats = list(data["statistics"])
    by = {(e["statistic"], e["variant"], e["layer"]): e for e in data["scaling"]}
    fig, (a, b) = plt.subplots(1, 2, figsize=(TWO_COLUMN, 3.6), gridspec_kw={"width_ratios": [1.6, 1]})
    x = np.arange(len(stats))
    cmap = plt.get_cmap(LAYER_CMAP)
    L = int(data["layers"])
    for k, s in enumerate(stats):
        missing = []
        for kind, dx, face in (("excluded", -0.08, "k"), ("included", 0.18, "white")):
            e = by.get((s, kind, "all"))
            if e is None or e["exponent"] is None:
                missing.append(dx)
                continue
            lo, hi = e["ci"]
            a.plot([k + dx, k + dx], [lo, hi], color="k", lw=1.2)
            a.plot(k + dx, e["exponent"], "o", mfc=face, mec="k", ms=4.5, mew=0.9, zorder=3)
        if missing:
            a.annotate("no fit", (k if len(missing) == 2 else k + missing[0], 0.05), rotation=90, fontsize=8,
                       ha="center", va="bottom", color="0.4")
        for layer in range(L):
            e = by.get((s, "excluded", layer))
            if e is not None and e["exponent"] is not None:
                a.plot(k - 0.45 + 0.05 * layer, e["exponent"], ".", color=cmap(layer / max(L - 1, 1)), ms=3.5)
    a.axhline(1.0, color="0.5", lw=0.8, ls="--")
    a.axhline(0.0, color="0.8", lw=0.6)
    a.axvline(len([s for s in stats if s not in ("support", "mass90", "participation", "leaders")]) - 0.5,
              color="0.6", lw=0.8, ls=":")
    a.set_xticks(x)
    a.set_xticklabels([label(s) for s in stats], rotation=90, fontsize=8)
    a.set_xlim(-0.6, len(stats) - 0.4)
    a.set_ylim(-0.1, 1.35)
    a.set_ylabel(r"exponent $b$ of count $\sim n^{b}$")
    a.set_title("(a) growth with $n$: hull counts | attention counts", loc="left")
    handles = [plt.Line2D([], [], marker="o", ls="", mfc="k", mec="k", ms=4.5, label="[CLS], [SEP] excluded"),
               plt.Line2D([], [], marker="o", ls="", mfc="white", mec="k", ms=4.5, label="included"),
               plt.Line2D([], [], marker=".", ls="", color=cmap(0.5), ms=5, label="per layer (0 to 5)")]
    a.legend(handles=handles, frameon=False, fontsize=8, loc="lower left", bbox_to_anchor=(0.0, 1.08), ncol=3)
    n = np.asarray(data["n"], float)
    order = np.argsort(n, kind="stable")
    b.plot(n[order], n[order], color="0.6", lw=0.8, ls="--", label="$n$")
    pooled = data["pooled"][variant]
    for k, s in enumerate(shown):
        b.plot(n[order], np.asarray(pooled[s], float)[order], ".", color=COLORS[k % len(COLORS)], ms=3.5,
               label=label(s))
    b.set_xscale("log")
    b.set_yscale("log")
    for axis, top in ((b.xaxis, n.max()), (b.yaxis, n.max())):
        ticks = [t for t in (1, 2, 5, 10, 20, 50, 100, 200) if t <= top * 1.5]
        axis.set_major_locator(plt.FixedLocator(ticks))
        axis.set_major_formatter(plt.FixedFormatter([str(t) for t in ticks]))
        axis.set_minor_formatter(plt.NullFormatter())
    b.set_xlabel("tokens $n$ of the input")
    b.set_ylabel("mean count over the 72 heads")
    b.set_title(f"(b) counts against $n$ ({variant})", loc="left")
    # under the panel, where panel (a)'s rotated labels leave room: to its right it would widen
    # the figure beyond the text width
    b.legend(frameon=False, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2,
             columnspacing=1.0, handletextpad=0.3)
    fig.tight_layout()
    return saved(fig, "trained-hull-test", data)
