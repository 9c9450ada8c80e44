# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Many tokens
#
# :::{admonition} What is proved where, what is true (computed here), where this page shows it
# :class: important
# * **Proved in the paper: $n$ fixed.** Every statement of the paper is about $n$ tokens, for any
#   fixed $n$. It says nothing about $n\to\infty$; its review names the step it leaves open
#   ("transferring [the two-scale picture] to the mean-field limit $n\to+\infty$ would require a
#   separate argument").
# * **Proved in the cited works, for their own models.** Alcalde–Bungert–Riedl–Roith (2026,
#   arXiv 2605.10931): concentration of the mean-field softmax dynamics onto a push-forward of the
#   initial measure, at distance of order $\sqrt{\log(\beta+1)/\beta}\,e^{Ct}+e^{-ct}$.
#   Chen–Lin–Liu–Rigollet (2026, arXiv 2605.16747): propagation of chaos at rate $n^{-1/d}$ in
#   general and $n^{-1/2}$ for a class containing transformers. Bruno–Pasqualotto–Agazzi (2025,
#   arXiv 2509.25040): tokens on the sphere, fast collapse, then clusters, then slow merging. Their
#   models are continuous-time flows (on the sphere for the last), their metrics Wasserstein
#   distances; the paper's dynamics are discrete steps in $\mathbb R^d$. Nothing below proves any
#   of their statements for the paper's dynamics.
# * **Computed here**, with engines whose cost grows like $n$ (checked against the dense steps by
#   the tests): the hardmax limit of a density (uniform or Gaussian), carried to its vertices with the exact masses of the
#   cells; on the circle, the number of clusters that form against $\beta$ beside the fastest linear
#   mode; for (SA$\beta$) in the plane, the distance of the $n$-token measure to a
#   $10^6$-token reference against $n$, the distance between (SA$\beta$) and (SA$\infty$)
#   against $\beta$ and $t$, and the exit time of chapters 5 and 7 against $n$. Every distance is exact where it can be and a stated lower bound
#   otherwise.
# * **Not done here**: on the sphere $S^2$ only a first look (the force against its bound, the
#   clusters of one run per $\beta$), no prediction of their number and no large $N$.
# :::
#
# **The engines.** {py:mod}`attention_fw.model.fast` steps (SA$\infty$) with the leaders looked
# for only among the tokens near the boundary of the hull: a linear functional is largest at a
# vertex, and the library's tie rule can only add tokens within $4(\mathrm{tol}+2d\varepsilon)
# \max_j|x_j|$ of the boundary. The step repeats the dense step's arithmetic on those candidates and
# is bitwise the dense step (tested on grids, duplicated tokens, tokens at the origin and runs to the
# vertices). Vertices are stationary only when they own their cells, so the hull is found again at
# each step, in $O(n)$ (16 extreme directions discard the interior, Qhull takes the rest).
# (SA$\beta$) in the plane takes, row by row, a Taylor expansion about the centroid where
# $\beta|Bx_i|\,r\le6$ (Jensen's inequality bounds its error by $10^{-10}r$), a sum pruned to the
# grid cells that can hold a term above $e^{-(\log n+25)}$ of the row's largest where the kernel is
# sharp, a Chebyshev grid in between (below), and dense BLAS tiles where none applies; every row
# is within $10^{-8}r$ of the dense float64 step. {py:mod}`attention_fw.model.sphere` steps the circle model of the cited works with
# the force as a Fourier series in modified Bessel functions, truncated by a proved bound; on $S^2$
# ({py:func}`attention_fw.model.sphere.force_s2`) the kernel's Taylor series, each power expanded by
# the multinomial theorem into moments of the tokens, $O(NK^3/6)$ for $K$ terms, truncated where the
# proved tail $\sum_{k>K}\beta^k/k!$ is below $10^{-13}e^\beta$.
# `make bench` times them beside dense numpy steps. The pruned sum costs the tokens of each row's cap
# $\{x:\langle q_i,x\rangle\ge h_i-(\log n+25)\}$: few on the sparse rim of a Gaussian cloud, but on a
# uniform disk at $\beta=10^3$ the cap of a typical token holds about 1.3% of the tokens (at $n=10^6$,
# about $1.2\times10^{10}$ terms). There the rows are grouped by octaves of $|q_i|$ and sectors of
# directions; a cell keeps the sources that can hold a term above $e^{-(\log n+26)}$ of one of its
# rows' largest ($h_i=|q_i|\max_j\langle u_i,x_j\rangle$ with $u_i=q_i/|q_i|$, bounded over the cell's
# directions) and sums them by the Chebyshev grid below, in the frame turned to the sector. At fixed
# $\beta$ the cells do not multiply with $n$ and the caps deepen only like $\log n$, so the cost grows
# like $n$ up to powers of $\log n$ again, with a constant that grows with $\beta$ (the bench gives it).

# %% [markdown]
# **Middle temperatures.** Where $\beta|Bx_i|\,r$ is too large for the expansion and the kernel
# is not sharp enough to prune (a disk at $\beta=10$ to $100$), the weights are summed on a grid.
# With $q_i=\beta Bx_i$ and $y_j=x_j-c$ the kernel $e^{\langle q,y\rangle}=\prod_k e^{q_ky_k}$ is
# separable for any $B$. The targets are taken about the centre $q^0$ of their box:
# $e^{\langle q^0,y_j\rangle}$ becomes a weight of source $j$ and $e^{\langle q_i-q^0,y_j\rangle}$ is
# interpolated. Each coordinate is cut into cells with $p$ Chebyshev nodes: each source spreads its
# weight times $(1,y_j)$ to the $p^2$ nodes of its cell by its Lagrange weights, two dense matrix
# products per right-hand side with $e^{s_lt_m}$, between the target nodes $s_l$ and the source
# nodes $t_m$ of a coordinate (each row scaled by its largest entry), carry the sums to the target
# nodes, and each target interpolates them in its cell: $O(np^2+G^3)$ for $G$ nodes per coordinate.
# Cells of half-width $a/\max_j|y_{jk}|$ for the targets and $a/\max_i|q_{ik}-q^0_k|$ for the
# sources make each term's relative error at most
# $\varepsilon_k=e(a)+\Lambda_pe^{2a}e(a)$ per coordinate, with $e(a)=4e^a\sum_{k\ge p}I_k(a)$ the
# interpolation error of $e^{au}$ on $[-1,1]$ and $\Lambda_p$ the Lebesgue constant. The terms of
# the normaliser are positive and $|y_j|\le r$, so the mean moves by at most
# $2\varepsilon r/(1-\varepsilon)$, $\varepsilon=(1+\varepsilon_1)(1+\varepsilon_2)-1$; $p$ is
# chosen to hold it below $10^{-9}r$, and $a$, and the split of the rows between the grid and the
# pruned sum, by estimated cost. $G$ grows like $p\beta R^2/a$, so the grid serves $\beta R^2$ up to a
# few hundred; the bench gives its share and time.

# %% [markdown]
# **The chain's step.** {py:func}`attention_fw.model.fast.sap_step` draws each token's pick
# $J_i$ without the $n$ weights of its row. The tokens sit in a tree of boxes; a box bounds its
# tokens' scores by its corners, so $c_v e^{\beta u_v}$ ($c_v$ tokens, bound $u_v$) dominates its
# weight. Each row refines a partition of the tokens into boxes and single tokens until this
# envelope is at most three times the row's weight, picks a box in proportion to its envelope, a
# token $j$ uniformly in it, and accepts $j$ with probability $e^{\beta(\langle Bx_i,x_j\rangle-u_v)}$,
# else starts again. A round returns $j$ with probability proportional to $A_{ij}$, so the
# accepted pick has law exactly $A_{i\cdot}$ (rejection sampling): only the cost depends on the
# boxes. Every token stays in the envelope and the small probabilities are drawn from their
# logarithms, so an escape of probability $10^{-30}$ keeps it. The tests compare the picks with
# $A_{ij}$ over $\beta\in[0.1,10^3]$ and five states; the bench gives its time at $n=10^6$ and
# the boxes it opens.

# %% tags=["parameters", "remove-cell"]
preset = "paper"  # "paper": the book; "quick": seconds (tests)
PARAMETERS = {
    "mass_ns": ("list[int]", ">= 10", "numbers of tokens of the hardmax limit"),
    "mass_reps": ("int", ">= 2", "independent samples per number of tokens"),
    "mass_steps": ("int", ">= 1", "(SA∞) steps of the hardmax limit, γ 1/2"),
    "gauss_mean": (
        "list[float]",
        "[-0.45, 0.45]",
        "mean of the Gaussian density (inside the pentagon)",
        "at least 2 items; at most 2 items",
    ),
    "gauss_sd": (
        "list[float]",
        "[0.05, 2]",
        "standard deviations of the Gaussian along the axes",
        "at least 2 items; at most 2 items",
    ),
    "gauss_rho": ("float", "[-0.9, 0.9]", "correlation of the Gaussian's coordinates"),
    "circle_betas": (
        "list[float]",
        "(0, 200]",
        "inverse temperatures on the circle",
    ),
    "circle_n": ("int", ">= 10", "tokens on the circle"),
    "circle_steps": (
        "int",
        ">= 1",
        "Euler steps on the circle, dt 0.01 over the fastest growth rate",
    ),
    "chaos_ns": (
        "list[int]",
        ">= 10",
        "numbers of tokens of the propagation of chaos",
    ),
    "chaos_reference": ("int", ">= 100", "tokens of the reference measure"),
    "chaos_reps": ("int", ">= 2", "independent runs per number of tokens"),
    "chaos_beta": (
        "float",
        "(0, 1]",
        "inverse temperature β of the propagation of chaos",
    ),
    "chaos_steps": ("int", ">= 1", "(SAβ) steps before the distance, γ 1/2"),
    "chaos_exact_ns": (
        "list[int]",
        "[10, 2000]",
        "numbers of tokens of the exact W1 (POT) of the propagation of chaos",
        "at least 2 items; distinct",
    ),
    "chaos_exact_reference": (
        "int",
        "[100, 5000]",
        "tokens of the reference run's block for the exact W1",
        "< chaos_reference",
    ),
    "chaos_exact_reps": ("int", ">= 2", "independent runs per n of the exact W1"),
    "low_n": ("int", ">= 10", "tokens of the low-temperature comparison"),
    "low_betas": (
        "list[float]",
        "> 0",
        "inverse temperatures of the low-temperature comparison",
    ),
    "low_steps": ("list[int]", ">= 1", "depths t of the low-temperature comparison"),
    "meta_per_vertex": (
        "list[int]",
        ">= 1",
        "tokens per vertex m of the metastability at scale (3(1 + m) tokens)",
        "at least 2 items; distinct",
    ),
    "meta_reps": ("int", ">= 2", "independent configurations per number of tokens"),
    "meta_beta": ("float", "(0, 8]", "inverse temperature β of the metastability at scale"),
    "meta_cap": ("int", ">= 1", "(SAβ) steps at most (T2 above: not reached)"),
    "s2_betas": ("list[float]", "(0, 20]", "inverse temperatures on the sphere S²"),
    "s2_n": ("int", ">= 10", "tokens on the sphere S²"),
    "s2_steps": ("int", ">= 1", "Euler steps on the sphere, step 0.2 β e^(−β)"),
    "seed": ("int", ">= 0", "seed of every random stream"),
}

# %% tags=["hide-input"]
from afw_book.presets import resolve_declared

PRESETS = {
    "paper": dict(
        mass_ns=[100, 1000, 10_000, 100_000, 1_000_000],
        mass_reps=3,
        mass_steps=30,
        gauss_mean=[0.2, -0.1],
        gauss_sd=[0.3, 0.4],
        gauss_rho=0.25,
        circle_betas=[1.0, 2.0, 3.0, 5.0, 8.0, 12.0, 16.0, 20.0],
        circle_n=100_000,
        circle_steps=1500,
        chaos_ns=[100, 1000, 10_000, 100_000],
        chaos_reference=1_000_000,
        chaos_reps=4,
        chaos_beta=1.0,
        chaos_steps=5,
        chaos_exact_ns=[100, 200, 400, 800],
        chaos_exact_reference=4000,
        chaos_exact_reps=12,
        low_n=800,
        low_betas=[1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0],
        low_steps=[1, 3, 10, 30],
        meta_per_vertex=[3, 10, 30, 100, 300, 1000, 3000],
        meta_reps=4,
        meta_beta=5.0,
        meta_cap=10_000,
        s2_betas=[1.0, 3.0, 6.0, 10.0],
        s2_n=1000,
        s2_steps=300,
        seed=0,
    ),
    "quick": dict(
        mass_ns=[100, 1000],
        mass_reps=2,
        mass_steps=20,
        gauss_mean=[0.2, -0.1],
        gauss_sd=[0.3, 0.4],
        gauss_rho=0.25,
        circle_betas=[1.0, 5.0],
        circle_n=2000,
        circle_steps=400,
        chaos_ns=[100, 400],
        chaos_reference=4000,
        chaos_reps=2,
        chaos_beta=1.0,
        chaos_steps=2,
        chaos_exact_ns=[50, 100, 200],
        chaos_exact_reference=1000,
        chaos_exact_reps=2,
        low_n=100,
        low_betas=[1.0, 100.0],
        low_steps=[1, 3],
        meta_per_vertex=[3, 30, 300],
        meta_reps=2,
        meta_beta=5.0,
        meta_cap=2000,
        s2_betas=[1.0, 6.0],
        s2_n=300,
        s2_steps=100,
        seed=0,
    ),
}
p = resolve_declared(PRESETS, preset, PARAMETERS, globals())

import matplotlib.pyplot as plt
import numpy as np

from afw_book import figures as plotting
from afw_book import sweeps
from afw_book.notebook import Page, fmt
from attention_fw.experiments import many_tokens as MT
from attention_fw.model import sphere

# %matplotlib inline
plotting.use_style()
page = Page("09-many-tokens", p)
page.parameters()  # the table "Parameters of this run"


def seed_of(*key):
    """An integer seed of one configuration (recorded in the figures' data)."""
    return int(np.random.SeedSequence([p.seed, *key]).generate_state(1)[0])


# %% [markdown]
# ## The hardmax limit of a density
#
# Take $B=I$ and the polygon $\mathcal K$ whose five vertices lie on the unit circle at the angles
# $0.3, 1.5, 2.4, 3.7, 5.0$: every vertex owns its cell, and the cells $C_i$ are the Voronoi wedges
# of the vertices clipped to $\mathcal K$. Place tokens at the vertices and $n$ tokens uniform on
# $\mathcal K$ (the initial measure $\mu_0$). A token in $C_i$ has $v_i$ as its leader, and since
# $C_i$ is convex and contains $v_i$, it keeps that leader: under (SA$\infty$) it runs along a
# straight line to $v_i$. So the empirical measure goes to $\sum_i \hat\mu_n(C_i)\,\delta_{v_i}$,
# and as $n\to\infty$ to $\sum_i\mu_0(C_i)\,\delta_{v_i}$, with the masses $\mu_0(C_i)$ the areas of
# the exact cells ({py:func}`attention_fw.geometry.planar.cells`) over the area of $\mathcal K$.
# The same holds for any density on $\mathcal K$: the dynamics does not see the density, only the
# cells. Take also $\mu_0$ the Gaussian $N(m,\Sigma)$ conditioned on $\mathcal K$, with $m=$
# {glue:text}`gauss_mean`, standard deviations {glue:text}`gauss_sd` and correlation
# {glue:text}`gauss_rho`. Its masses are $\mu_0(C_i)=G(C_i)/G(\mathcal K)$, $G$ the Gaussian law,
# computed by {py:func}`attention_fw.experiments.many_tokens.gaussian_cell_masses`: after whitening
# ($y=L^{-1}(x-m)$, $\Sigma=LL^\top$) each cell is a polygon, its mass the signed sum over its edges of
# the masses of the triangles they span with the origin; in polar coordinates the radial integral is
# closed, $\int_0^{r(\theta)}e^{-r^2/2}r\,dr/2\pi=(1-e^{-r(\theta)^2/2})/2\pi$, and the angular one is
# done by adaptive quadrature with an absolute tolerance of $10^{-12}$ per edge (it is a difference of
# Owen's $T$ functions; the tests check the masses against that closed form, against products of normal
# laws on rectangles, against wedges and half-planes, and against $10^6$ draws within 5 standard
# errors). The tokens are drawn exactly, by rejection. Below, the hull engine runs
# {glue:text}`mass_steps` steps with $\gamma=1/2$ for each $n$ and each density, and the fraction of
# tokens at each vertex is compared with the exact mass.

# %% tags=["hide-input"]
angles = np.array([0.3, 1.5, 2.4, 3.7, 5.0])
V = np.stack([np.cos(angles), np.sin(angles)], 1)
masses = MT.cell_masses(V)
g_sd, g_rho = np.array(p.gauss_sd), p.gauss_rho
g_mean = np.array(p.gauss_mean)
g_cov = np.array(
    [
        [g_sd[0] ** 2, g_rho * g_sd[0] * g_sd[1]],
        [g_rho * g_sd[0] * g_sd[1], g_sd[1] ** 2],
    ]
)
gauss = MT.gaussian_cell_masses(V, g_mean, g_cov)
runs = {
    n: [
        MT.hardmax_limit(V, n, p.mass_steps, rng=seed_of(1, n, r))
        for r in range(p.mass_reps)
    ]
    for n in p.mass_ns
}
gruns = {
    n: [
        MT.hardmax_limit(
            V, n, p.mass_steps, rng=seed_of(5, n, r), mean=g_mean, cov=g_cov
        )
        for r in range(p.mass_reps)
    ]
    for n in p.mass_ns
}

# %% tags=["hide-input"]
def tv_of(rs, exact):
    return np.array(
        [[0.5 * np.abs(r.fractions - exact).sum() for r in rs[n]] for n in p.mass_ns]
    )


def w1_of(rs, exact):
    """Exact W1 to sum_i m_i delta_{v_i}: the kappa x kappa problem on the vertices."""
    return np.array(
        [[MT.w1_exact(V, V, r.fractions, exact) for r in rs[n]] for n in p.mass_ns]
    )


tv, gtv = tv_of(runs, masses), tv_of(gruns, gauss.masses)
w1u, w1g = w1_of(runs, masses), w1_of(gruns, gauss.masses)
every = [r for rs in [*runs.values(), *gruns.values()] for r in rs]
straight = all(r.straight for r in every)
reach = max(r.max_distance for r in every)
print("exact masses, uniform: ", np.round(masses, 6))
print(
    "exact masses, Gaussian:",
    np.round(gauss.masses, 6),
    f"(error bound {gauss.error:.1e}; the Gaussian gives K mass {gauss.mass_K:.4f})",
)
for n, row, grow in zip(p.mass_ns, tv, gtv):
    print(
        f"n = {n:>9,}: total variation to the exact masses {row.mean():.2e} (uniform),"
        f" {grow.mean():.2e} (Gaussian), means of {len(row)}"
    )
for n, wu, wg in zip(p.mass_ns, w1u, w1g):
    print(f"n = {n:>9,}: W1 to the limit measure {wu.mean():.2e} (uniform),"
          f" {wg.mean():.2e} (Gaussian), exact within the distance to the vertices")
print(
    "every token ended at the vertex of its initial cell:",
    straight,
    f"(farthest {reach:.1e})",
)

# %% tags=["hide-input"]
ns = np.array(p.mass_ns, float)


def rate_fit(t):
    """(slope, standard error) of log TV against log n, or None: a fit needs two
    numbers of tokens with a nonzero distance (zero: every token in a cell of mass
    1)."""
    x, y = np.repeat(ns, p.mass_reps), t.ravel()
    pos = y > 0
    return MT.slope(x[pos], y[pos]) if len(np.unique(x[pos])) >= 2 else None


def fit_words(f, name):
    if f is None:
        return (
            f"no fit for the {name} density (fewer than two numbers of tokens with a "
            "nonzero distance to the masses)"
        )
    return (
        f"s = {fmt(f[0], '.2f')} for the {name} density (95% interval "
        f"{fmt(f[0] - 1.96 * f[1], '.2f')} to {fmt(f[0] + 1.96 * f[1], '.2f')})"
    )


def covers_half(f):
    return f is None or f[0] - 1.96 * f[1] <= -0.5 <= f[0] + 1.96 * f[1]


u_fit, g_fit = rate_fit(tv), rate_fit(gtv)
fig, ax = plt.subplots(1, 3, figsize=(11.0, 3.7))
last = {"uniform": runs[p.mass_ns[-1]][0], "Gaussian": gruns[p.mass_ns[-1]][0]}
for k, (name, m) in enumerate([("uniform", masses), ("Gaussian", gauss.masses)]):
    a = ax[k]
    a.plot(np.append(V[:, 0], V[0, 0]), np.append(V[:, 1], V[0, 1]), "k-", lw=1)
    for v, mi in zip(V, m):
        a.annotate(
            f"{mi:.4f}", v, xytext=1.32 * v, fontsize=8, ha="center", va="center"
        )
        a.plot([0, v[0]], [0, v[1]], color="0.7", lw=0.6)
    a.scatter(
        V[:, 0], V[:, 1], s=18 + 400 * last[name].fractions, color=f"C{k}", zorder=3
    )
    a.set_aspect("equal")
    a.set_xlim(-1.5, 1.5)
    a.set_ylim(-1.45, 1.45)
a_ = np.linspace(0, 2 * np.pi, 200)
Lc = np.linalg.cholesky(g_cov)
for r_ in (1.0, 2.0):
    e_ = g_mean + (r_ * np.stack([np.cos(a_), np.sin(a_)], 1)) @ Lc.T
    ax[1].plot(e_[:, 0], e_[:, 1], color="C1", lw=0.7, ls=":")
ax[0].set_title("(a) uniform: exact masses", fontsize=9)
ax[1].set_title("(b) Gaussian on K: exact masses", fontsize=9)
for k, (t, lab) in enumerate([(tv, "uniform"), (gtv, "Gaussian")]):
    ax[2].loglog(np.repeat(ns, p.mass_reps), t.ravel(), "o", color=f"C{k}", ms=3)
    ax[2].loglog(ns, t.mean(axis=1), "-", color=f"C{k}", label=f"{lab} (mean)")
ax[2].loglog(
    ns,
    max(tv.mean(axis=1)[0], gtv.mean(axis=1)[0]) * 1.6 * (ns / ns[0]) ** -0.5,
    "--",
    color="0.4",
    label="slope $-1/2$",
)
ax[2].set_xlabel("tokens $n$")
ax[2].set_ylabel("total variation to exact masses")
ax[2].set_title("(c) particle fractions against the masses", fontsize=9)
ax[2].legend(fontsize=8, loc="lower left")
fig.tight_layout()
page.glue(
    mass_steps=p.mass_steps,
    mass_fit=fit_words(u_fit, "uniform"),
    gauss_fit=fit_words(g_fit, "Gaussian"),
    gauss_error=(gauss.error, ".0e"),
    gauss_mass_K=(gauss.mass_K, ".4f"),
    gauss_mean=f"({fmt(g_mean[0], 'g')}, {fmt(g_mean[1], 'g')})",
    gauss_sd=f"{fmt(g_sd[0], 'g')} and {fmt(g_sd[1], 'g')}",
    gauss_rho=(g_rho, "g"),
    mass_straight="every" if straight else "NOT every",
    mass_verdict=(
        "No rate is fitted (a fit needs two numbers of tokens)"
        if u_fit is None and g_fit is None
        else "Every fitted interval contains −1/2"
        if covers_half(u_fit) and covers_half(g_fit)
        else "Not every fitted interval contains −1/2"
    )
    + (
        ". Since every token ended at the vertex of its initial cell, the final "
        "fractions are "
        "the initial ones, a multinomial sample of the masses, whose expected total "
        "variation "
        "to them is of order n^(−1/2) (the central limit theorem): the rate −1/2 "
        "holds for the "
        "mean, and a fit is a noisy estimate of it from "
        f"{p.mass_reps} samples per n (their intervals treat the log-residuals as "
        "independent "
        "and normal)."
        if straight
        else ". Some token did not end at the vertex of its initial cell, so the "
             "final fractions "
        "are not the initial ones and no rate is claimed."
    ),
    mass_reach=(reach, ".1e"),
    mass_w1=(
        f"{fmt(w1u[-1].mean(), '.2e')} (uniform) and {fmt(w1g[-1].mean(), '.2e')} "
        "(Gaussian)"
    ),
    mass_nmax=p.mass_ns[-1],
)
page.figure(
    fig,
    "many-hardmax-limit",
    {
        "masses": {
            "vertices": V,
            "exact": masses,
            "fractions": {str(n): [r.fractions for r in runs[n]] for n in p.mass_ns},
            "seeds": {
                str(n): [seed_of(1, n, r) for r in range(p.mass_reps)]
                for n in p.mass_ns
            },
            "steps": p.mass_steps,
            "gamma": 0.5,
            "w1_to_limit": {"uniform": w1u, "gaussian": w1g},
            "gaussian": {
                "mean": g_mean,
                "cov": g_cov,
                "exact": gauss.masses,
                "error_bound": gauss.error,
                "mass_of_K": gauss.mass_K,
                "fractions": {
                    str(n): [r.fractions for r in gruns[n]] for n in p.mass_ns
                },
                "seeds": {
                    str(n): [seed_of(5, n, r) for r in range(p.mass_reps)]
                    for n in p.mass_ns
                },
            },
        }
    },
    statement="Theorem 4.2 for a density (the hardmax limit)",
    caption="Uniform and Gaussian tokens on a pentagon carried to its vertices: "
    "exact masses of the cells "
    "and the particle fractions against n",
)

# %% [markdown]
# ```{glue:figure} fig-many-hardmax-limit
# :name: fig-many-hardmax-limit
#
# (a) The pentagon, its cells (grey rays bound the wedges) and the exact masses $\mu_0(C_i)$ of the
# uniform density; the discs' areas are the fractions of the largest run. (b) The same for the
# Gaussian conditioned on the pentagon (dotted: its ellipses of one and two standard deviations).
# (c) Total variation between the particle fractions and the exact masses against $n$ for both
# densities, each independent sample (dots) and their mean (line), with a line of slope $-1/2$.
# ```
#
# In {glue:text}`mass_straight` run, every token ended at the vertex of the cell it started in
# (the farthest within {glue:text}`mass_reach` of it after the steps). The fractions approach the
# exact masses at the fitted rate $n^{s}$: {glue:text}`mass_fit` and
# {glue:text}`gauss_fit`, least-squares fits over the samples. {glue:text}`mass_verdict`
# What is proved and what is computed: that each token of $C_i$ goes to $v_i$ is the argument above
# (exact for every density on $\mathcal K$ and this $B$; it is the mean-field form of Theorem 4.2, not
# a new theorem); the Gaussian masses are computed, each within {glue:text}`gauss_error` (the sum of
# the quadratures' error estimates, divided by $G(\mathcal K)=$ {glue:text}`gauss_mass_K`); the
# fractions are samples, and their rate is a fit.
#
# The same convergence in $W_1$: every token ends within {glue:text}`mass_reach` of the vertex of
# its cell, so moving each to that vertex changes $W_1$ by at most that, and $W_1$ between the tokens
# and the limit $\sum_i\mu_0(C_i)\,\delta_{v_i}$ is, within that, the transport between two
# measures on the $\kappa$ vertices (the fractions and the exact masses, cost $|v_i-v_j|$): a linear
# program of $\kappa^2$ unknowns, solved exactly by POT
# ({py:func}`attention_fw.experiments.many_tokens.w1_exact`; the tests check it against the same
# distance computed from every token). At $n=$ {glue:text}`mass_nmax` it is {glue:text}`mass_w1`
# (means over the samples); it lies between the shortest and the longest distance between two
# vertices times the total variation.
#
# ## Clusters on the circle
#
# The sphere model of the cited works on the circle: $x_i=(\cos\theta_i,\sin\theta_i)$ and
#
# $$
# \dot\theta_i=-\frac1N\sum_j e^{\beta\cos(\theta_i-\theta_j)}\sin(\theta_i-\theta_j),
# $$
#
# the tangential part of $\frac1N\sum_j e^{\beta\langle x_i,x_j\rangle}x_j$ (the sign that
# attracts). Since $e^{\beta\cos\varphi}\sin\varphi=\frac2\beta\sum_{k\ge1}kI_k(\beta)\sin k\varphi$,
# the force is a sum over Fourier modes, computed in $O(NK)$ with $K$ chosen by a proved bound on the
# Bessel tail ({py:mod}`attention_fw.model.sphere`). Linearised at the uniform density, the mode $k$
# grows at rate $k^2I_k(\beta)/\beta$: from uniform data the fastest mode predicts the number of
# clusters. Below, {glue:text}`circle_n` i.i.d. uniform angles for each $\beta$, forward Euler with
# $dt=0.01/\lambda^*$ ($\lambda^*$ the fastest rate) for {glue:text}`circle_steps` steps, then the
# groups separated by gaps wider than 0.05 rad and holding at least 1% of the tokens are counted.

# %%
clusters = []
for a, beta in enumerate(p.circle_betas):
    s = seed_of(2, a)
    c = MT.circle_clusters(beta, p.circle_n, p.circle_steps, rng=s)
    clusters.append(dict(beta=beta, N=p.circle_n, dt=c.dt, steps=p.circle_steps,
                         seed=s, k_observed=c.k_observed, k_predicted=c.k_predicted,
                         modes=sphere.modes(beta)))
    print(f"beta = {beta:5g}: {c.k_observed} clusters, fastest mode "
          f"k = {c.k_predicted} ({sphere.modes(beta)} Fourier modes)")

# %% tags=["hide-input"]
agree = sum(c["k_observed"] == c["k_predicted"] for c in clusters)
bs = np.array(p.circle_betas)
fig, ax = plt.subplots(figsize=(5.6, 3.4))
fine = np.linspace(bs.min(), bs.max(), 400)
ax.plot(
    fine,
    [sphere.predicted_clusters(b) for b in fine],
    "-",
    color="0.4",
    lw=1,
    label=r"fastest mode $\arg\max_k k^2 I_k(\beta)$",
)
ax.plot(
    bs, [c["k_observed"] for c in clusters], "o", color="C1", label="clusters formed"
)
ax.yaxis.set_major_locator(plt.matplotlib.ticker.MaxNLocator(integer=True))
ax.set_xlabel(r"$\beta$")
ax.set_ylabel("number of clusters")
ax.legend(fontsize=8, loc="upper left")
fig.tight_layout()
page.glue(
    circle_n=p.circle_n,
    circle_steps=p.circle_steps,
    circle_agree=agree,
    circle_total=len(clusters),
)
page.figure(
    fig,
    "many-circle-clusters",
    {"clusters": clusters},
    statement="Sphere model of the cited works (Bruno–Pasqualotto–Agazzi 2025)",
    caption="Number of clusters formed on the circle from uniform data against β, "
    "beside the fastest linear mode",
)

# %% [markdown]
# ```{glue:figure} fig-many-circle-clusters
# :name: fig-many-circle-clusters
#
# Number of clusters formed from uniform initial angles against $\beta$ (dots), and the mode $k$
# that maximises $k^2I_k(\beta)$ (line), the fastest growing mode of the mean-field equation
# linearised at the uniform density.
# ```
#
# The count agrees with the fastest mode at {glue:text}`circle_agree` of the
# {glue:text}`circle_total` values of $\beta$. A disagreement is not a failure of the linear
# theory: i.i.d. initial data excite every mode at amplitude $N^{-1/2}$, neighbouring modes grow at
# nearly the same rate when $\beta$ is large, and clusters that form close together merge later (the
# slow phase of Bruno–Pasqualotto–Agazzi); the count is of one run per $\beta$ at one time.
#
# ## Propagation of chaos for (SA$\beta$)
#
# Tokens uniform on the unit disc, (SA$\beta$) with $B=I$, $\beta=$ {glue:text}`chaos_beta`,
# $\gamma=1/2$, {glue:text}`chaos_steps` steps: the distance between the measure of $n$ tokens and
# that of an independent run of {glue:text}`chaos_reference` tokens, against $n$. Two distances:
#
# * **the sliced $W_1$**: the mean over 16 equally spaced directions of the $W_1$ of the
#   projections, each exact by sorting. A projection is 1-Lipschitz, so it is a lower bound of
#   $W_1$, not $W_1$; it costs $O(n\log n)$ and is computed against the whole reference, at every $n$;
# * **the exact $W_1$** (Euclidean cost, uniform weights, unequal sizes): an optimal transport plan,
#   by the network simplex of POT ({py:func}`attention_fw.experiments.many_tokens.w1_exact`), for
#   $n$ = {glue:text}`chaos_exact_ns` against the first {glue:text}`chaos_exact_block` tokens of
#   the reference run (an exchangeable sample of it). Its cost matrix and plan are dense, $nm$
#   entries each, so the library refuses more than {glue:text}`w1_max` entries; the sizes stay
#   moderate. Beside it, the same distance to the same block from $n$ other tokens of the reference
#   run: the sampling error of $n$ tokens of the large system, measured the same way (the baseline).
#
# The sliced distance to the whole reference includes the reference's own sampling error, of the
# order of its value at $n$ = the reference size.

# %%
ch = MT.chaos(
    p.chaos_ns, p.chaos_reference, 0.5, p.chaos_beta, p.chaos_steps, p.chaos_reps,
    rng=seed_of(3), directions=16,
    exact_ns=p.chaos_exact_ns, exact_reference=p.chaos_exact_reference,
    exact_replicates=p.chaos_exact_reps,
)
for n, row in zip(p.chaos_ns, ch.distances):
    print(f"n = {n:>7,}: sliced W1 to the reference {row.mean():.2e}"
          f" (mean of {len(row)})")
for n, w, s, b in zip(ch.exact_ns, ch.exact, ch.sliced_exact, ch.baseline):
    print(f"n = {n:>7,}, to the block: exact W1 {w.mean():.2e}, sliced {s.mean():.2e},"
          f" baseline {b.mean():.2e}")

# %% tags=["hide-input"]
cn = np.array(p.chaos_ns, float)
s_ch, e_ch = MT.slope(np.repeat(cn, p.chaos_reps), ch.distances.ravel())
en = np.array(ch.exact_ns, float)
xs = np.repeat(en, p.chaos_exact_reps)
fit_w = MT.slope(xs, ch.exact.ravel())
fit_s = MT.slope(xs, ch.sliced_exact.ravel())
ratio = ch.sliced_exact / ch.exact
fit_r = MT.slope(xs, ratio.ravel())  # the ratio's slope: the two slopes' difference
base = ch.baseline.mean(axis=1) / ch.exact.mean(axis=1)
fig, ax = plt.subplots(1, 2, figsize=(10.0, 3.9))
ax[0].loglog(np.repeat(cn, p.chaos_reps), ch.distances.ravel(), "s", color="C0", ms=4,
             mfc="none")
ax[0].loglog(cn, ch.distances.mean(axis=1), "-", color="C0")
m0 = ch.distances.mean(axis=1)[0]
ax[0].loglog(cn, m0 * (cn / cn[0]) ** -0.5, "--", color="0.3")
ax[0].set_ylabel("sliced $W_1$ to the reference")
ax[0].set_title(f"(a) sliced, to {p.chaos_reference:,} tokens", fontsize=9)
for k, (vals, col) in enumerate(
    [(ch.exact, "C1"), (ch.sliced_exact, "C0"), (ch.baseline, "C2")]
):
    ax[1].loglog(xs, vals.ravel(), "os^"[k], color=col, ms=4, mfc="none")
    ax[1].loglog(en, vals.mean(axis=1), "-", color=col)
w0 = ch.exact.mean(axis=1)[0]
ax[1].loglog(en, w0 * (en / en[0]) ** -0.5, "--", color="0.3")
ax[1].set_ylabel(f"$W_1$ to {ch.exact_reference:,} tokens of it")
ax[1].set_title("(b) exact (POT) and sliced, moderate $n$", fontsize=9)
for a in ax:
    a.set_xlabel("tokens $n$")
handles = [
    plt.Line2D([], [], color="C1", marker="o", mfc="none", label="exact $W_1$"),
    plt.Line2D([], [], color="C0", marker="s", mfc="none",
               label="sliced $W_1$ (lower bound)"),
    plt.Line2D([], [], color="C2", marker="^", mfc="none",
               label="exact, $n$ tokens of the reference run"),
    plt.Line2D([], [], color="0.3", ls="--", label="$n^{-1/2}$"),
]
fig.legend(handles=handles, fontsize=8, loc="lower center", ncol=4, frameon=False)
fig.tight_layout(rect=(0, 0.08, 1, 1))


def iv(f, spec=".2f"):
    return f"{fmt(f[0], spec)} (95% interval {fmt(f[0] - 1.96 * f[1], spec)} to " + (
        f"{fmt(f[0] + 1.96 * f[1], spec)})"
    )


r_mean, r_lo, r_hi = ratio.mean(), ratio.min(), ratio.max()
near = abs(r_mean - 2 / np.pi) < 0.03
same = fit_r[0] - 1.96 * fit_r[1] <= 0 <= fit_r[0] + 1.96 * fit_r[1]
page.glue(
    chaos_reps=p.chaos_reps,
    chaos_beta=p.chaos_beta,
    chaos_steps=p.chaos_steps,
    chaos_reference=p.chaos_reference,
    chaos_slope=(s_ch, ".2f"),
    chaos_lo=(s_ch - 1.96 * e_ch, ".2f"),
    chaos_hi=(s_ch + 1.96 * e_ch, ".2f"),
    chaos_exact_ns=", ".join(fmt(int(n)) for n in en),
    chaos_exact_block=(ch.exact_reference, ","),
    chaos_exact_reps=p.chaos_exact_reps,
    w1_max=(MT.W1_MAX_ENTRIES, ","),
    chaos_w_fit=iv(fit_w),
    chaos_s_fit=iv(fit_s),
    chaos_r_fit=iv(fit_r, ".1e"),
    chaos_ratio=(r_mean, ".3f"),
    chaos_ratio_lo=(r_lo, ".3f"),
    chaos_ratio_hi=(r_hi, ".3f"),
    chaos_ratio_words=(
        "close to 2/π ≈ 0.637, the ratio for a translate (the sliced W1 of a shift s "
        "is the mean of |⟨u, s⟩| over the directions, (2/π)|s|; tested), as if the "
        "n-token measure differed from the block mostly by a shift of the whole cloud"
        if near
        else "not near 2/π ≈ 0.637, the ratio for a translate, so the difference is "
        "not a shift of the whole cloud alone"
    ),
    chaos_same=(
        "contains 0: over this range the data do not tell the rates of the bound and "
        "of W1 apart, and the slope of panel (a) is consistent with a slope of W1"
        if same
        else "does not contain 0: over this range the bound does not fall at the rate "
        "of W1, and the slope of panel (a) is not a slope of W1"
    ),
    chaos_base=f"{fmt(base.min(), '.2f')} to {fmt(base.max(), '.2f')}",
    chaos_base_words=(
        "most of the distance is the n-token system's own (its tokens interact with "
        "n − 1 others, not with the large system), not the sampling of the law at "
        "depth t"
        if base.max() < 0.5
        else "the sampling of n tokens accounts for a large part of the distance"
    ),
    chaos_block_err=(ch.baseline.mean(axis=1).min(), ".1e"),
)
page.figure(
    fig,
    "many-chaos",
    {
        "chaos": {
            "ns": cn,
            "distances": ch.distances,
            "reference": p.chaos_reference,
            "beta": p.chaos_beta,
            "steps": p.chaos_steps,
            "gamma": 0.5,
            "seed": seed_of(3),
            "directions": 16,
            "exact": {
                "ns": en,
                "block": ch.exact_reference,
                "w1": ch.exact,
                "sliced": ch.sliced_exact,
                "baseline": ch.baseline,
                "max_entries": MT.W1_MAX_ENTRIES,
            },
        }
    },
    statement="Propagation of chaos (Chen–Lin–Liu–Rigollet 2026), for (SAβ)",
    caption="Sliced and exact Wasserstein distances of the n-token (SAβ) measure "
    "to a large reference against n",
)

# %% [markdown]
# ```{glue:figure} fig-many-chaos
# :name: fig-many-chaos
#
# (a) Sliced $W_1$ between the $n$-token measure after the steps and the whole reference measure,
# each independent run (squares) and their mean (line), with the line $n^{-1/2}$; in the plane
# $n^{-1/d}=n^{-1/2}$ too. (b) At moderate $n$, against a block of the reference run: the exact
# $W_1$ (circles), the sliced $W_1$ (squares) and the exact $W_1$ from $n$ tokens of the reference
# run itself (triangles), each run and their means.
# ```
#
# The fitted slope of panel (a) is {glue:text}`chaos_slope` (95% interval {glue:text}`chaos_lo` to
# {glue:text}`chaos_hi`). In the plane $n^{-1/d}$ and $n^{-1/2}$ coincide, so this range cannot tell
# the two rates of Chen–Lin–Liu–Rigollet apart. The sliced distance between two independent samples
# of one law already decays like $n^{-1/2}$ (the sampling error of the initial tokens), so the
# fitted slope is consistent with the dynamics adding no slower error over these $n$ and this
# horizon; with {glue:text}`chaos_reps` runs per $n$ the scatter is large and the interval wide.
# Their theorem is for a continuous-time flow and $W$ distances; these are discrete steps.

# %% [markdown]
# **Exact against the bound.** In panel (b), over {glue:text}`chaos_exact_reps` independent runs
# per $n$, the exact $W_1$ falls with slope
# {glue:text}`chaos_w_fit` and the sliced one, to the same block, with slope
# {glue:text}`chaos_s_fit`. The sliced value is {glue:text}`chaos_ratio` of $W_1$ on average
# (from {glue:text}`chaos_ratio_lo` to {glue:text}`chaos_ratio_hi` over the runs): that is the
# bias of the bound here, {glue:text}`chaos_ratio_words`. The slope of their ratio against $n$ is
# {glue:text}`chaos_r_fit`, which {glue:text}`chaos_same`. The baseline is
# {glue:text}`chaos_base` of the $n$-token system's distance at the same $n$ (means):
# {glue:text}`chaos_base_words`. The block is finite too: by the triangle inequality it moves each
# exact value by at most its own distance to the law at depth $t$, which for independent draws is
# in expectation at most the baseline at any $n$ (Jensen's inequality: the law is the mean of the
# empirical measures), here at most {glue:text}`chaos_block_err`. So each exact value is, within
# that amount, $W_1$ to the measure of the large system at depth $t$ (itself a system of
# {glue:text}`chaos_reference` tokens, not the mean-field limit), and the sliced values fall short
# of $W_1$ by the ratio above.

# %% [markdown]
# ## Low temperature
#
# From {glue:text}`low_n` tokens uniform on the disc, (SA$\beta$) and (SA$\infty$) with $\gamma=1/2$,
# $B=I$, from the same tokens; $W_1$ between their measures (exact, an optimal assignment) at depth $t$,
# against $\beta$. Alcalde–Bungert–Riedl–Roith bound the distance of the mean-field softmax flow to
# its hardmax push-forward by $\sqrt{\log(\beta+1)/\beta}\,e^{Ct}+e^{-ct}$, for a continuous-time
# flow.

# %%
low = MT.low_temperature(p.low_n, p.low_betas, p.low_steps, 0.5, rng=seed_of(4))
for b, row in zip(p.low_betas, low.distances):
    print(
        f"beta = {b:6g}: W1 at t = {[int(t) for t in low.steps]}: "
        + ", ".join(f"{w:.2e}" for w in row)
    )

# %% tags=["hide-input"]
lb = np.array(p.low_betas)
ref = np.sqrt(np.log(lb + 1) / lb)
fits = []
for k, t in enumerate(low.steps):
    big = lb >= 10
    if big.sum() >= 2 and np.all(low.distances[big, k] > 0):
        s, e = MT.slope(lb[big], low.distances[big, k])
        fits.append((int(t), s, e))
fig, ax = plt.subplots(figsize=(5.6, 3.4))
for k, t in enumerate(low.steps):
    ax.loglog(lb, low.distances[:, k], "o-", ms=3, label=f"$t = {t}$")
ax.loglog(
    lb,
    ref * low.distances[0, -1] / ref[0],
    "--",
    color="0.3",
    label=r"$\sqrt{\log(\beta+1)/\beta}$",
)
ax.set_xlabel(r"$\beta$")
ax.set_ylabel(r"$W_1$(SA$\beta$, SA$\infty$)")
ax.legend(fontsize=8, loc="lower left")
fig.tight_layout()
fit_text = (
    "; ".join(
        f"t = {t}: {fmt(s, '.2f')} ± {fmt(1.96 * e, '.2f')}" for t, s, e in fits
    )
    or "no fit (fewer than two β ≥ 10)"
)
page.glue(low_n=p.low_n, low_fits=fit_text)
page.figure(
    fig,
    "many-low-temperature",
    {
        "low": {
            "n": p.low_n,
            "betas": lb,
            "steps": low.steps,
            "distances": low.distances,
            "seed": seed_of(4),
            "gamma": 0.5,
        }
    },
    statement="Low temperature (Alcalde–Bungert–Riedl–Roith 2026), "
    "for the paper's steps",
    caption="Wasserstein distance between SAβ and SA∞ from the same tokens "
    "against β at several depths",
)

# %% [markdown]
# ```{glue:figure} fig-many-low-temperature
# :name: fig-many-low-temperature
#
# Exact $W_1$ between the (SA$\beta$) and (SA$\infty$) measures from the same tokens against $\beta$,
# at each depth $t$, with the curve $\sqrt{\log(\beta+1)/\beta}$ (scaled to the first point of the
# deepest curve).
# ```
#
# Fitted slopes of $\log W_1$ against $\log\beta$ over $\beta\ge10$ (95% intervals):
# {glue:text}`low_fits`. Over this range the distance falls like a power of $\beta$, more
# steeply than $\sqrt{\log(\beta+1)/\beta}$ (local slope $-1/2$ up to a logarithm), and it grows
# with the depth $t$, as the factor $e^{Ct}$ of their bound would allow. With finitely many tokens the
# (SA$\beta$) weights differ from the hardmax ones by about $e^{-\beta\Delta}$ for the score gap
# $\Delta$ of each token, positive for almost every token, so at some larger $\beta$ the decay must
# become faster than any power; with {glue:text}`low_n` tokens many gaps are small and this range
# does not reach that regime. The mean-field rate, where gaps near cell boundaries are arbitrarily
# small, is a statement about $n=\infty$ first. The slopes above describe this range only; they are
# not the exponent of a limit.
#
# ## Metastability at scale
#
# Do the clusters of chapters 5 and 7 persist as $n$ grows at fixed $\beta$? The exit time is the
# library's $T_2$ (Theorem 5.4's event, {py:func}`attention_fw.experiments.sabeta.sabeta_exit_times`):
# the first step at which some token is farther than $\varepsilon$ from the hull of its group's
# initial tokens. Two dynamics, as in chapters 5 and 7.
#
# * **The chain (SAP)** from chapter 5's clusters ($m$ coincident tokens at each vertex of the
#   triangle, $\gamma=0.1$, $\varepsilon=0.05$, the single-jump regime): $T_2$ is geometric with
#   the closed form $\mathbb E[T_2]=1/(1-q)$,
#   $-\log q=\sum_a n_a\log\bigl(1+\sum_{b\ne a}(n_b/n_a)e^{\beta(\langle v_a,v_b\rangle-|v_a|^2)}\bigr)$
#   ({py:func}`attention_fw.experiments.exit_times.frozen_escape_rate`). With the proportions fixed,
#   $-\log q$ is $n$ times one token's escape rate, so $\mathbb E[T_2]$ falls like $1/n$ to its floor 1:
#   this is proved (an exact law), computed here for every $n$.
# * **(SA$\beta$)** from a configuration after phase 1 with a density: the vertices and $m$ tokens
#   i.i.d. uniform in the sector of radius 0.05 of $\mathcal K$ at each vertex
#   ({py:func}`attention_fw.experiments.many_tokens.sector_configuration`), $\gamma=0.1$,
#   $\varepsilon=0.1$ (chapter 7's "triangle, 1+2 near" with a density instead of a circle of
#   radius 0.05), $\beta=$ {glue:text}`meta_beta`, stepped by the fast engine, with
#   {glue:text}`meta_reps` independent configurations per $n$ (one stream per task,
#   `afw_book.sweeps.run`), at most {glue:text}`meta_cap` steps. Nothing is proved about
#   it; it is computed. (Coincident clusters move as one token under (SA$\beta$), so their $T_2$ does
#   not depend on $n$ at all: tested.)

# %%
tasks = sweeps.grid(
    per_vertex=p.meta_per_vertex,
    rep=list(range(p.meta_reps)),
    beta=[p.meta_beta],
    cap=[p.meta_cap],
)
meta = sweeps.run(
    MT.exit_at_scale_task, tasks, seed=p.seed, executor="serial", progress=False
)
meta_m = sorted(p.meta_per_vertex)
for m in meta_m:
    rs = [r for r in meta if r["per_vertex"] == m]
    ts = [("no exit" if r["T2"] is None else str(r["T2"])) for r in rs]
    print(f"n = {rs[0]['n']:>6,}: T2 = {', '.join(ts)}")

# %% tags=["hide-input"]
from scipy import stats as _stats

meta_n = np.array([3 * (1 + m) for m in meta_m], float)
T = np.array(
    [
        [np.nan if r["T2"] is None else r["T2"] for r in meta if r["per_vertex"] == m]
        for m in meta_m
    ],
    float,
)
exited = np.isfinite(T)
n_cens = int((~exited).sum())
rows = []
for k, m in enumerate(meta_m):
    t = T[k][exited[k]]
    if len(t) >= 2:
        half = _stats.t.ppf(0.975, len(t) - 1) * t.std(ddof=1) / np.sqrt(len(t))
        rows.append((meta_n[k], t.mean(), t.mean() - half, t.mean() + half, len(t)))
    elif len(t) == 1:
        rows.append((meta_n[k], t[0], None, None, 1))
chain_m = np.unique(np.round(np.logspace(0, 6, 60)).astype(int))
chain_T = MT.chain_exit_mean(chain_m, p.meta_beta)
fig, ax = plt.subplots(1, 2, figsize=(10.0, 3.6))
for k in range(len(meta_n)):
    ax[0].plot(
        np.full(exited[k].sum(), meta_n[k]), T[k][exited[k]], "o", color="C0", ms=3
    )
if rows:
    rn = np.array([r[0] for r in rows])
    ax[0].plot(rn, [r[1] for r in rows], "-", color="C0")
    for r in rows:
        if r[2] is not None:
            ax[0].plot([r[0], r[0]], [r[2], r[3]], "-", color="C0", lw=2.5, alpha=0.5)
ax[0].set_xscale("log")
ax[0].set_xlabel("tokens $n$")
ax[0].set_ylabel(r"$T_2$ of (SA$\beta$), steps")
ax[0].set_title(r"(a) (SA$\beta$) from sectors, $\beta$ = " + fmt(p.meta_beta, "g"),
                fontsize=9)
finite = np.isfinite(chain_T)
ax[1].loglog(3 * chain_m[finite], chain_T[finite], "-", color="C1")
ax[1].set_xlabel("tokens $n$")
ax[1].set_ylabel(r"exact $\mathbb{E}[T_2]$ of (SAP)")
ax[1].set_title("(b) the chain from coincident clusters", fontsize=9)
fig.tight_layout()
if rows:
    first, last = rows[0], rows[-1]

    def _iv(r):
        if r[2] is None:
            return "one run exited, no interval"
        return f"95% interval {fmt(r[2], '.1f')} to {fmt(r[3], '.1f')}"

    change = abs(last[1] / rows[-2][1] - 1) if len(rows) >= 2 else None
    meta_text = (
        f"At n = {fmt(int(first[0]))} the mean exit time is {fmt(first[1], '.1f')} "
        "steps "
        f"({_iv(first)}); at n = {fmt(int(last[0]))} it is {fmt(last[1], '.1f')} "
        f"({_iv(last)})"
        + (
            f", {fmt(100 * change, '.1f')}% from its value at n = "
            f"{fmt(int(rows[-2][0]))}"
            if change is not None
            else ""
        )
        + "."
    )
    if len(rows) >= 3 and all(r[2] is not None for r in rows[-3:]):
        overlap = max(r[2] for r in rows[-3:]) <= min(r[3] for r in rows[-3:])
        meta_text += (
            " The intervals of the three largest n overlap: over this range T2 "
            "settles to a "
            "limit rather than growing or falling with n."
            if overlap
            else " The intervals of the three largest n do not all overlap: over this "
                 "range T2 "
            "still moves with n."
        )
else:
    meta_text = (
        f"No configuration exited within {fmt(p.meta_cap)} steps: at this β the "
        "clusters "
        "held for the whole run at every n, and no exit time is measured."
    )
if n_cens and rows:
    meta_text += (
        f" {n_cens} of {T.size} runs did not exit within {fmt(p.meta_cap)} steps "
        "(left out of the means above)."
    )
ch_lo = chain_T[0]
ch_hi = chain_T[-1]
page.glue(
    meta_beta=(p.meta_beta, "g"),
    meta_reps=p.meta_reps,
    meta_cap=(p.meta_cap, ","),
    meta_text=meta_text,
    meta_chain=(
        f"from {fmt(ch_lo, '.4g')} at n = 3 to {fmt(ch_hi, '.4f')} at n = "
        f"{fmt(int(3 * chain_m[-1]))}"
        if np.isfinite(ch_lo)
        else f"above every float at n = 3 (the escape probability underflows at β = "
        f"{fmt(p.meta_beta, 'g')}) and {fmt(ch_hi, '.4f')} at n = "
        f"{fmt(int(3 * chain_m[-1]))}"
    ),
)
page.figure(
    fig,
    "many-metastability",
    {
        "metastability": {
            "beta": p.meta_beta,
            "gamma": 0.1,
            "eps": 0.1,
            "radius": 0.05,
            "cap": p.meta_cap,
            "runs": [
                {
                    "n": r["n"],
                    "per_vertex": r["per_vertex"],
                    "rep": r["rep"],
                    "seed": r["rng"],
                    "T2": r["T2"],
                    "censored": r["censored"],
                }
                for r in meta
            ],
            "chain": {
                "gamma": 0.1,
                "eps": 0.05,
                "n": 3 * chain_m,
                "mean_T2": [float(v) if np.isfinite(v) else None for v in chain_T],
            },
        }
    },
    statement="Theorem 5.4's exit time at scale (SAP exact; SAβ computed)",
    caption="Exit time T2 against the number of tokens at fixed β: "
    "(SAβ) from sectors at the vertices, and the chain's exact mean",
)

# %% [markdown]
# ```{glue:figure} fig-many-metastability
# :name: fig-many-metastability
#
# (a) $T_2$ of (SA$\beta$) against $n$ from configurations with tokens uniform in the sectors at the
# vertices of the triangle: each configuration (dots), their mean (line) and its 95% interval
# (Student $t$, bars). (b) The exact $\mathbb E[T_2]$ of the chain from $n/3$ coincident tokens per
# vertex, against $n$.
# ```
#
# {glue:text}`meta_text` The chain's mean exit time falls {glue:text}`meta_chain`: the first token
# to leave its cluster comes $n$ times sooner, so in this sense the chain's clusters do not persist
# as $n$ grows (each token's own escape time does not change; the exit is a minimum over $n$ tokens).
# For (SA$\beta$) the exit is a property of the configuration's measure, not of a single token: from
# a measure with a density it has a limit as $n\to\infty$ if the mean-field dynamics leaves its
# neighbourhood transversally, which the panel (a) is consistent with over this range; this is
# computed, not proved.

# %% [markdown]
# ## The sphere $S^2$
#
# Tokens on the unit sphere of $\mathbb R^3$ follow the tangential part of
# $\frac1N\sum_je^{\beta\langle x_i,x_j\rangle}x_j$ (the model of the cited works in dimension 3).
# {py:func}`attention_fw.model.sphere.force_s2` sums it through the kernel's Taylor series, each
# power $\langle x,y\rangle^k$ expanded by the multinomial theorem into moments of the tokens; the
# terms above $K$ change it by at most $\sum_{k>K}\beta^k/k!$ (proved, since
# $|\langle x,y\rangle|\le1$ on the sphere), and $K$ is the smallest with that tail below
# $10^{-13}e^\beta$. Below, for each $\beta$, {glue:text}`s2_n` i.i.d. uniform tokens: the largest
# difference between that force and the dense sum at the start, then {glue:text}`s2_steps` forward
# Euler steps with $dt=0.2\beta e^{-\beta}$ (the kernel is at most $e^\beta$), each followed by the
# projection back to the sphere, and the groups of tokens linked at chordal distance below 0.05
# holding at least 1% of them are counted.

# %%
s2 = []
for a, beta in enumerate(p.s2_betas):
    r = MT.sphere_clusters(
        beta, p.s2_n, p.s2_steps, 0.2 * beta * np.exp(-beta), rng=seed_of(6, a)
    )
    s2.append(r)
    print(
        f"beta = {beta:5g}: {r.k_observed} clusters; force error {r.force_error:.1e} "
        "e^beta "
        f"(bound {r.bound:.1e} e^beta, K = {r.K})"
    )

# %% tags=["hide-input"]
sb = np.array(p.s2_betas)
fig, ax = plt.subplots(1, 2, figsize=(9.0, 3.4))
ax[0].semilogy(sb, [max(r.force_error, 1e-18) for r in s2], "o", color="C0")
ax[0].semilogy(sb, [r.bound for r in s2], "_", color="0.3", ms=14, mew=1.5)
ax[0].set_xlabel(r"$\beta$")
ax[0].set_ylabel(r"force error / $e^\beta$")
ax[0].set_title("(a) error (dots), proved bound (bars)", fontsize=9)
ax[1].plot(sb, [r.k_observed for r in s2], "o", color="C1")
ax[1].yaxis.set_major_locator(plt.matplotlib.ticker.MaxNLocator(integer=True))
ax[1].set_xlabel(r"$\beta$")
ax[1].set_ylabel("number of clusters")
ax[1].set_title("(b) clusters formed on the sphere", fontsize=9)
fig.tight_layout()
worst = max(r.force_error / r.bound for r in s2)
page.glue(
    s2_n=(p.s2_n, ","),
    s2_steps=(p.s2_steps, ","),
    s2_worst=(worst, ".1e"),
    s2_counts=", ".join(f"{r.k_observed} at β = {fmt(r.beta, 'g')}" for r in s2),
)
page.figure(
    fig,
    "many-sphere",
    {
        "sphere": [
            {
                "beta": r.beta,
                "N": r.N,
                "dt": r.dt,
                "steps": r.steps,
                "seed": seed_of(6, a),
                "K": r.K,
                "force_error": r.force_error,
                "bound": r.bound,
                "k_observed": r.k_observed,
            }
            for a, r in enumerate(s2)
        ]
    },
    statement="Sphere model of the cited works on S²",
    caption="Tokens on the sphere S²: the force's error against its proved bound, "
    "and the clusters formed against β",
)

# %% [markdown]
# ```{glue:figure} fig-many-sphere
# :name: fig-many-sphere
#
# (a) Largest difference between the truncated force and the dense sum at the start, over $e^\beta$
# (dots), and the proved bound of the truncation (bars). (b) The number of clusters formed from
# uniform tokens after the steps, one run per $\beta$.
# ```
#
# The error is at most {glue:text}`s2_worst` times its bound (the rest is rounding). Clusters
# formed: {glue:text}`s2_counts`. That they form, and more of them at larger $\beta$, is what the
# cited works prove or observe for the continuous flow; these counts are computed, of one run per
# $\beta$ at one time, and this page compares them with no prediction.

