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
#   the tests): the hardmax limit of a density, carried to its vertices with the exact masses of the
#   cells; on the circle, the number of clusters that form against $\beta$ beside the fastest linear
#   mode; for (SA$\beta$) in the plane, the distance of the $n$-token measure to a
#   $10^6$-token reference against $n$, and the distance between (SA$\beta$) and (SA$\infty$)
#   against $\beta$ and $t$. Every distance is exact where it can be and a stated lower bound
#   otherwise.
# * **Not done here**: metastability at scale (exit times against $n$), a Gaussian initial
#   density for the hardmax limit, the sphere $S^2$.
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
# sharp, and dense BLAS tiles where neither applies; every row is within $10^{-8}r$ of the dense
# float64 step. {py:mod}`attention_fw.model.sphere` steps the circle model of the cited works with
# the force as a Fourier series in modified Bessel functions, truncated by a proved bound.
# `make bench` times them beside dense numpy steps.

# %% tags=["parameters", "remove-cell"]
preset = "paper"  # "paper": the book; "quick": seconds (tests)
PARAMETERS = {
    "mass_ns": ("list[int]", ">= 10", "numbers of tokens of the hardmax limit"),
    "mass_reps": ("int", ">= 2", "independent samples per number of tokens"),
    "mass_steps": ("int", ">= 1", "(SA∞) steps of the hardmax limit, γ 1/2"),
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
    "low_n": ("int", ">= 10", "tokens of the low-temperature comparison"),
    "low_betas": (
        "list[float]",
        "> 0",
        "inverse temperatures of the low-temperature comparison",
    ),
    "low_steps": ("list[int]", ">= 1", "depths t of the low-temperature comparison"),
    "seed": ("int", ">= 0", "seed of every random stream"),
}

# %% tags=["hide-input"]
from afw_book.presets import resolve_declared

PRESETS = {
    "paper": dict(
        mass_ns=[100, 1000, 10_000, 100_000, 1_000_000],
        mass_reps=3,
        mass_steps=30,
        circle_betas=[1.0, 2.0, 3.0, 5.0, 8.0, 12.0, 16.0, 20.0],
        circle_n=100_000,
        circle_steps=1500,
        chaos_ns=[100, 1000, 10_000, 100_000],
        chaos_reference=1_000_000,
        chaos_reps=4,
        chaos_beta=1.0,
        chaos_steps=5,
        low_n=800,
        low_betas=[1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0],
        low_steps=[1, 3, 10, 30],
        seed=0,
    ),
    "quick": dict(
        mass_ns=[100, 1000],
        mass_reps=2,
        mass_steps=20,
        circle_betas=[1.0, 5.0],
        circle_n=2000,
        circle_steps=400,
        chaos_ns=[100, 400],
        chaos_reference=4000,
        chaos_reps=2,
        chaos_beta=1.0,
        chaos_steps=2,
        low_n=100,
        low_betas=[1.0, 100.0],
        low_steps=[1, 3],
        seed=0,
    ),
}
p = resolve_declared(PRESETS, preset, PARAMETERS, globals())

import matplotlib.pyplot as plt
import numpy as np

from afw_book import figures as plotting
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
# Below, the hull engine runs {glue:text}`mass_steps` steps with $\gamma=1/2$ for each $n$, and the
# fraction of tokens at each vertex is compared with the exact mass.

# %%
angles = np.array([0.3, 1.5, 2.4, 3.7, 5.0])
V = np.stack([np.cos(angles), np.sin(angles)], 1)
masses = MT.cell_masses(V)
runs = {
    n: [
        MT.hardmax_limit(V, n, p.mass_steps, rng=seed_of(1, n, r))
        for r in range(p.mass_reps)
    ]
    for n in p.mass_ns
}

# %% tags=["hide-input"]
tv = np.array(
    [[0.5 * np.abs(r.fractions - masses).sum() for r in runs[n]] for n in p.mass_ns]
)
straight = all(r.straight for rs in runs.values() for r in rs)
reach = max(r.max_distance for rs in runs.values() for r in rs)
print("exact masses:", np.round(masses, 6))
for n, row in zip(p.mass_ns, tv):
    print(
        f"n = {n:>9,}: total variation to the exact masses {row.mean():.2e}"
        f" (mean of {len(row)})"
    )
print(
    "every token ended at the vertex of its initial cell:",
    straight,
    f"(farthest {reach:.1e})",
)

# %% tags=["hide-input"]
ns = np.array(p.mass_ns, float)
s_tv, e_tv = MT.slope(np.repeat(ns, p.mass_reps), tv.ravel())
fig, ax = plt.subplots(1, 2, figsize=(9.0, 3.6))
ax[0].plot(np.append(V[:, 0], V[0, 0]), np.append(V[:, 1], V[0, 1]), "k-", lw=1)
for i, (v, m) in enumerate(zip(V, masses)):
    ax[0].annotate(
        f"{m:.4f}", v, xytext=1.32 * v, fontsize=8, ha="center", va="center"
    )
    ax[0].plot([0, v[0]], [0, v[1]], color="0.7", lw=0.6)
last = runs[p.mass_ns[-1]][0]
ax[0].scatter(V[:, 0], V[:, 1], s=18 + 400 * last.fractions, color="C0", zorder=3)
ax[0].set_aspect("equal")
ax[0].set_xlim(-1.5, 1.5)
ax[0].set_ylim(-1.45, 1.45)
ax[0].set_title("(a) exact masses at the vertices", fontsize=9)
ax[1].loglog(
    np.repeat(ns, p.mass_reps), tv.ravel(), "o", color="C0", ms=4, label="samples"
)
ax[1].loglog(ns, tv.mean(axis=1), "-", color="C0", label="mean")
ax[1].loglog(
    ns,
    tv.mean(axis=1)[0] * (ns / ns[0]) ** -0.5,
    "--",
    color="0.4",
    label="slope $-1/2$",
)
ax[1].set_xlabel("tokens $n$")
ax[1].set_ylabel("total variation to exact masses")
ax[1].set_title("(b) particle fractions against the masses", fontsize=9)
ax[1].legend(fontsize=8, loc="lower left")
fig.tight_layout()
page.glue(
    mass_steps=p.mass_steps,
    mass_slope=(s_tv, ".2f"),
    mass_slope_lo=(s_tv - 1.96 * e_tv, ".2f"),
    mass_slope_hi=(s_tv + 1.96 * e_tv, ".2f"),
    mass_straight="every" if straight else "NOT every",
    mass_reach=(reach, ".1e"),
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
        }
    },
    statement="Theorem 4.2 for a density (the hardmax limit)",
    caption="Uniform tokens on a pentagon carried to its vertices: "
    "exact masses of the cells "
    "and the particle fractions against n",
)

# %% [markdown]
# ```{glue:figure} fig-many-hardmax-limit
# :name: fig-many-hardmax-limit
#
# (a) The pentagon, its cells (grey rays bound the wedges) and the exact masses $\mu_0(C_i)$; the
# discs' areas are the fractions of the largest run. (b) Total variation between the particle
# fractions and the exact masses against $n$, each independent sample and their mean, with a line of
# slope $-1/2$.
# ```
#
# In {glue:text}`mass_straight` run, every token ended at the vertex of the cell it started in
# (the farthest within {glue:text}`mass_reach` of it after the steps). The fractions approach the
# exact masses at the fitted rate $n^{s}$ with $s=$ {glue:text}`mass_slope` (95% interval
# {glue:text}`mass_slope_lo` to {glue:text}`mass_slope_hi`, a least-squares fit over the samples):
# the rate $-1/2$ of the multinomial law of the initial fractions, since the dynamics carries each
# cell whole to its vertex. This limit is exact for this density and this $B$; it is the mean-field
# form of Theorem 4.2, not a new theorem.
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
# that of an independent run of {glue:text}`chaos_reference` tokens, against $n$. The distance is
# the sliced Wasserstein distance (16 directions, each exact by sorting), a lower bound of $W_1$;
# the reference's own sampling error is of the order of its value at $n$ = the reference size.

# %%
ch = MT.chaos(
    p.chaos_ns,
    p.chaos_reference,
    0.5,
    p.chaos_beta,
    p.chaos_steps,
    p.chaos_reps,
    rng=seed_of(3),
    directions=16,
)
for n, row in zip(p.chaos_ns, ch.distances):
    print(
        f"n = {n:>7,}: sliced W1 to the reference {row.mean():.2e}"
        f" (mean of {len(row)})"
    )

# %% tags=["hide-input"]
cn = np.array(p.chaos_ns, float)
s_ch, e_ch = MT.slope(np.repeat(cn, p.chaos_reps), ch.distances.ravel())
fig, ax = plt.subplots(figsize=(5.6, 3.4))
ax.loglog(
    np.repeat(cn, p.chaos_reps),
    ch.distances.ravel(),
    "o",
    color="C0",
    ms=4,
    label="runs",
)
ax.loglog(cn, ch.distances.mean(axis=1), "-", color="C0", label="mean")
m0 = ch.distances.mean(axis=1)[0]
ax.loglog(cn, m0 * (cn / cn[0]) ** -0.5, "--", color="0.3", label="$n^{-1/2}$")
ax.set_xlabel("tokens $n$")
ax.set_ylabel("sliced $W_1$ to the reference")
ax.legend(fontsize=8, loc="lower left")
fig.tight_layout()
page.glue(
    chaos_reps=p.chaos_reps,
    chaos_beta=p.chaos_beta,
    chaos_steps=p.chaos_steps,
    chaos_reference=p.chaos_reference,
    chaos_slope=(s_ch, ".2f"),
    chaos_lo=(s_ch - 1.96 * e_ch, ".2f"),
    chaos_hi=(s_ch + 1.96 * e_ch, ".2f"),
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
        }
    },
    statement="Propagation of chaos (Chen–Lin–Liu–Rigollet 2026), for (SAβ)",
    caption="Sliced Wasserstein distance of the n-token (SAβ) measure "
    "to a large reference against n",
)

# %% [markdown]
# ```{glue:figure} fig-many-chaos
# :name: fig-many-chaos
#
# Sliced $W_1$ between the $n$-token measure after the steps and the reference measure, each
# independent run and their mean, with the line $n^{-1/2}$. In the plane $n^{-1/d}=n^{-1/2}$ too.
# ```
#
# The fitted slope is {glue:text}`chaos_slope` (95% interval {glue:text}`chaos_lo` to
# {glue:text}`chaos_hi`). In the plane $n^{-1/d}$ and $n^{-1/2}$ coincide, so this range cannot tell
# the two rates of Chen–Lin–Liu–Rigollet apart. The sliced distance between two independent samples
# of one law already decays like $n^{-1/2}$ (the sampling error of the initial tokens), so the
# fitted slope is consistent with the dynamics adding no slower error over these $n$ and this
# horizon; with {glue:text}`chaos_reps` runs per $n$ the scatter is large and the interval wide. Their theorem is for a continuous-time flow and $W$ distances; these
# are discrete steps and a lower bound of $W_1$.
#
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
        f"beta = {b:6g}: W1 at t = {list(low.steps)}: "
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
