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
# (frank-wolfe)=
# # The Frank–Wolfe reading
#
# Section 2 of the paper rests on one observation. If $B$ is symmetric, let
# $\mathcal J(x)=\tfrac12\langle Bx,x\rangle$, so that $\nabla\mathcal J(x)=Bx$. Then one
# (SA∞) step of token $i$ is one Frank–Wolfe (conditional-gradient) step
# {cite:p}`frank1956algorithm,jaggi2013revisiting`:
#
# $$
# s_i^t\in\arg\min_{y\in\mathcal K^t}\big\langle\nabla(-\mathcal J)(x_i^t),y\big\rangle
# =\arg\max_{y\in\mathcal K^t}\langle Bx_i^t,y\rangle
# \quad\text{(linear oracle)},\qquad
# x_i^{t+1}=x_i^t+\gamma^t\big(s_i^t-x_i^t\big)\quad\text{(step)} .
# $$
#
# Each token runs Frank–Wolfe on $-\mathcal J$ over the **current** hull
# $\mathcal K^t=\operatorname{conv}\{x_1^t,\dots,x_n^t\}$, a constraint set shared by all
# tokens and moving with them. With a general value matrix the step is the preconditioned
# $x_i^t+P^t(s_i^t-x_i^t)$, $P^t=(I+V^t)^{-1}V^t$. This chapter checks the oracle, the
# uniqueness of the leader (Lemma 2.1), the shrinking of the hull, and the remark showing
# that a diagonal value matrix can make the hull grow.

# %% tags=["parameters"]
preset = "paper"
oracle_configs = None  # random point sets for the oracle check
oracle_n = None        # points per set
oracle_d = None        # dimension of the oracle check
tie_configs = None     # random initialisations for the tie count of Lemma 2.1
tie_steps = None       # layers followed for each of them
gamma = None           # constant step of (SA-inf) on this page
e7_pairs = None        # random pairs for the counterexample E7
hull_configs = None    # random configurations for the hull-shrinking check
hull_steps = None      # layers for the hull-shrinking check
seed = None            # seed of every random draw on this page

# %%
from attention_fw.presets import resolve

PRESETS = {
    "paper": dict(oracle_configs=60, oracle_n=12, oracle_d=3, tie_configs=10_000, tie_steps=100, gamma=0.1,
                  e7_pairs=100_000, hull_configs=300, hull_steps=60, seed=2508),
    "quick": dict(oracle_configs=10, oracle_n=8, oracle_d=3, tie_configs=200, tie_steps=20, gamma=0.1,
                  e7_pairs=1_000, hull_configs=12, hull_steps=15, seed=2508),
}
p = resolve(PRESETS, preset, oracle_configs=oracle_configs, oracle_n=oracle_n, oracle_d=oracle_d,
            tie_configs=tie_configs, tie_steps=tie_steps, gamma=gamma, e7_pairs=e7_pairs,
            hull_configs=hull_configs, hull_steps=hull_steps, seed=seed)

# %%
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import HTML, display
from myst_nb import glue
from scipy.spatial import ConvexHull

from attention_fw import dynamics as dyn
from attention_fw import frank_wolfe as fw
from attention_fw import plotting, polytope
from attention_fw.animate import trajectory_animation

# %matplotlib inline
# %config InlineBackend.figure_formats = ["retina"]
plotting.use_style()
rng = np.random.default_rng(p.seed)

# %% [markdown]
# ## The oracle: the token argmax is the hull's linear minimisation oracle
#
# A linear function on a polytope attains its maximum at a vertex, and the vertices of
# $\mathcal K^t$ are tokens; so the maximiser over the hull can be found by scanning the
# tokens, at cost $O(n^2d)$ per layer. The library does exactly that
# (`frank_wolfe.lmo`); `frank_wolfe.lmo_linprog` solves the same problem as a linear program
# over the simplex of convex weights (HiGHS). Over {glue:text}`ch2-oracle-configs` random
# sets of {glue:text}`ch2-oracle-n` points in $\mathbb R^{d}$, $d=$ {glue:text}`ch2-oracle-d`,
# each point querying the oracle with its own direction $Bx_i$ (a random symmetric $B$ per
# set), the two answers differ by at most {glue:text}`ch2-oracle-res:.1e`; they are identical
# bit for bit in {glue:text}`ch2-oracle-exact` of the {glue:text}`ch2-oracle-queries` queries
# (the linear program returns a vertex of the simplex, so no rounding enters). A reproduction
# log of the paper reports a residual of $8.9\times10^{-16}$ for the same check.

# %%
residuals = []
for r in range(p.oracle_configs):
    pts = rng.standard_normal((p.oracle_n, p.oracle_d))
    M = rng.standard_normal((p.oracle_d, p.oracle_d))
    B = (M + M.T) / 2
    direction = -(pts @ B.T)                       # argmax <B x_i, y>  =  argmin <-B x_i, y>
    residuals.append(np.abs(fw.lmo(pts, direction) - fw.lmo_linprog(pts, direction)).max(axis=1))
residuals = np.concatenate(residuals)
glue("ch2-oracle-configs", p.oracle_configs, display=False)
glue("ch2-oracle-n", p.oracle_n, display=False)
glue("ch2-oracle-d", p.oracle_d, display=False)
glue("ch2-oracle-res", float(residuals.max()), display=False)
glue("ch2-oracle-exact", int((residuals == 0).sum()), display=False)
glue("ch2-oracle-queries", int(residuals.size), display=False)

# %% tags=["hide-input"]
pts = np.array([[0.9, 0.1], [0.4, 0.8], [-0.5, 0.7], [-0.8, -0.3], [0.1, -0.9], [0.2, 0.1], [-0.1, 0.3]])
B = np.diag([1.0, 2.0])
i = 5
g = B @ pts[i]
s = fw.lmo(pts, -g[None, :])[0]
hull = ConvexHull(pts)
fig, ax = plt.subplots(figsize=(plotting.ONE_COLUMN, plotting.ONE_COLUMN))
poly = pts[np.r_[hull.vertices, hull.vertices[0]]]
gx, gy = np.meshgrid(np.linspace(-1.1, 1.1, 200), np.linspace(-1.1, 1.1, 200))
ax.contour(gx, gy, g[0] * gx + g[1] * gy, levels=12, colors="0.75", linewidths=0.5)
ax.fill(poly[:, 0], poly[:, 1], color="C0", alpha=0.12)
ax.plot(poly[:, 0], poly[:, 1], color="C0", lw=1)
ax.scatter(pts[:, 0], pts[:, 1], c="k", s=14, zorder=3)
ax.annotate("", xy=pts[i] + 0.25 * g / np.linalg.norm(g), xytext=pts[i], arrowprops=dict(arrowstyle="->", color="C3"))
ax.scatter(*s, s=90, facecolors="none", edgecolors="C3", lw=1.5, zorder=4)
ax.annotate("", xy=pts[i] + 0.5 * (s - pts[i]), xytext=pts[i], arrowprops=dict(arrowstyle="->", color="C2", lw=1.3))
ax.text(*(pts[i] + [-0.12, -0.13]), "$x_i$")
ax.text(*(s + [0.05, 0.06]), "$s_i$", color="C3")
ax.set_aspect("equal")
ax.set_xticks([])
ax.set_yticks([])
ax.set_title(r"$s_i=\arg\max_{y\in\mathcal{K}}\langle Bx_i,y\rangle$", fontsize=9)
glue("fig-ch2-oracle", fig, display=False)
_ = plotting.save(fig, "ch2-oracle", {"points": pts, "B": B, "i": i, "lmo": s, "residuals": residuals})

# %% [markdown]
# ```{glue:figure} fig-ch2-oracle
# :name: fig-ch2-oracle
#
# One Frank–Wolfe step with $B=\mathrm{diag}(1,2)$: grey lines are level sets of
# $y\mapsto\langle Bx_i,y\rangle$, the red arrow is the direction $Bx_i$, the circled vertex is
# the oracle's answer $s_i$ and the green arrow the step with $\gamma=\tfrac12$.
# File: `figures/ch2-oracle.{pdf,png,svg}`.
# ```

# %% [markdown]
# ## Lemma 2.1: a single leader, almost everywhere
#
# **Lemma 2.1.** *If $B^t$ is invertible for every $t$, then for Lebesgue-almost every initial
# configuration, $\#\mathcal C_i^t=1$ for all $t\ge0$ and all $i$.*
#
# Lemma 2.1 says that random initialisations hit a tie with probability zero; a sample agrees. For {glue:text}`ch2-tie-configs:,.0f` configurations
# of 6 tokens uniform in $[-1,1]^2$, followed for {glue:text}`ch2-tie-steps` layers of
# (SA∞) with $\gamma=$ {glue:text}`ch2-gamma` and $B=I_2$ or $B=\mathrm{diag}(1,2)$, the number
# of (configuration, layer, token) triples with more than one leader is
# {glue:text}`ch2-ties-random` (ties are detected with a relative tolerance of $10^{-12}$ on
# the scores, so near-ties are counted too).
#
# Ties can be engineered, though, with symmetric configurations. (a) Put four tokens at the
# corners of the square $[-1,1]^2$ and one at its centre: all five scores of the centre token
# are $0$, its leader set has {glue:text}`ch2-tie-centre` elements (itself included), and the
# averaged step leaves it in place (largest displacement over 12 layers:
# {glue:text}`ch2-centre-moved:.1e`). (b) Put the fifth token at $(\tfrac12,0)$ instead, on the
# boundary between the cells of $(1,1)$ and $(1,-1)$: it has {glue:text}`ch2-tie-edge` tied
# leaders and walks towards their midpoint, reaching ({glue:text}`ch2-edge-end-x:.4f`,
# {glue:text}`ch2-edge-end-y:.4f`) after 12 layers; it converges to $(1,0)$, which is not a
# vertex of the hull ({numref}`fig-ch2-ties`).

# %%
def count_ties(B):
    X0 = rng.uniform(-1, 1, (p.tie_configs, 6, 2))
    rec = dyn.FunctionRecorder("ties", lambda x, t: (dyn.tie_counts(x, B) > 1).sum())
    dyn.simulate(X0, dyn.Hardmax(p.gamma, B), p.tie_steps, recorders=[rec])
    return int(rec.result().sum())


ties_random = count_ties(np.eye(2)) + count_ties(np.diag([1.0, 2.0]))
glue("ch2-tie-configs", 2 * p.tie_configs, display=False)
glue("ch2-tie-steps", p.tie_steps, display=False)
glue("ch2-gamma", p.gamma, display=False)
glue("ch2-ties-random", ties_random, display=False)

corners = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, -1.0], [-1.0, 1.0]])
with_centre = np.vstack([corners, [[0.0, 0.0]]])        # configuration (a): a token at the centre
with_edge = np.vstack([corners, [[0.5, 0.0]]])          # configuration (b): a token on a cell boundary
count_centre = int(dyn.tie_counts(with_centre)[4])
count_edge = int(dyn.tie_counts(with_edge)[4])
glue("ch2-tie-centre", count_centre, display=False)
glue("ch2-tie-edge", count_edge, display=False)
run_a = dyn.simulate(with_centre, dyn.Hardmax(0.3), 12, trajectory=True).trajectory
run_b = dyn.simulate(with_edge, dyn.Hardmax(0.3), 12, trajectory=True).trajectory
glue("ch2-centre-moved", float(np.abs(run_a[:, 4] - run_a[0, 4]).max()), display=False)
glue("ch2-edge-end-x", float(run_b[-1, 4, 0]), display=False)
glue("ch2-edge-end-y", float(run_b[-1, 4, 1]), display=False)

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(plotting.ONE_COLUMN, plotting.ONE_COLUMN))
ax.plot(*np.r_[corners, corners[:1]].T, color="0.5", lw=0.8)
ax.plot(run_b[:, 4, 0], run_b[:, 4, 1], "o-", ms=2.5, color="C2", lw=0.8)
ax.scatter(*run_a[-1, 4], s=40, facecolors="none", edgecolors="C3", lw=1.5, zorder=4)
ax.scatter(corners[:, 0], corners[:, 1], c="k", s=18, zorder=3)
ax.annotate(f"(a) centre: {count_centre} tied leaders,\nstays put", run_a[-1, 4], xytext=(-0.9, 0.45), fontsize=7,
            arrowprops=dict(arrowstyle="->", lw=0.6))
ax.annotate(f"(b) (1/2, 0): {count_edge} tied leaders,\nwalks to (1, 0)", with_edge[4], xytext=(-0.3, -0.6),
            fontsize=7, arrowprops=dict(arrowstyle="->", lw=0.6))
ax.set_aspect("equal")
ax.set_xlim(-1.2, 1.3)
ax.set_ylim(-1.2, 1.2)
ax.set_xticks([])
ax.set_yticks([])
glue("fig-ch2-ties", fig, display=False)
_ = plotting.save(fig, "ch2-ties", {"corners": corners, "tie_counts": [count_centre, count_edge],
                                    "trajectory_centre": run_a[:, 4], "trajectory_edge": run_b[:, 4],
                                    "random_ties": ties_random, "random_configs": 2 * p.tie_configs})

# %% [markdown]
# ```{glue:figure} fig-ch2-ties
# :name: fig-ch2-ties
#
# Engineered ties in a square ($B=I_2$, $\gamma=0.3$, two separate configurations): (a) the
# centre token (red circle) is tied between all five tokens and does not move; (b) the token
# at $(\tfrac12,0)$ (green) is tied between two vertices and walks to the midpoint of their
# edge. File: `figures/ch2-ties.{pdf,png,svg}`.
# ```

# %% [markdown]
# ### The proof of Lemma 2.1 has a gap (erratum E7)
#
# The paper's proof observes that ties lie on finitely many hyperplanes, null sets since $B^t$
# is invertible, and then asserts that a piecewise-affine step cannot map a set of positive
# measure into a null set. That last step is **false** (erratum {ref}`E7 <e7>`). Take $d=1$, $V=I_1$ (so $P=\tfrac12$)
# and $B=-I_1$, and two tokens $a>0>b$. Each is the other's leader
# ($\langle Ba,b\rangle=-ab>0>-a^2$), so both jump to $(a+b)/2$: an open set of initial data
# is mapped onto the diagonal $\{x_1=x_2\}$. Every one of {glue:text}`ch2-e7-pairs:,.0f` random
# pairs with $a>0>b$ merges mathematically after one layer (1.3). In floating point,
# {glue:text}`ch2-e7-merged:,.0f` of them land on the same double; the others differ only by
# rounding, at most {glue:text}`ch2-e7-maxres:.1e` ({glue:text}`ch2-e7-ulp:.0f` units in the last
# place of the larger of $|a|,|b|$).
#
# The lemma itself is nevertheless **true** when leaders are counted as *points* (merged tokens
# are one point): the Lean formalization re-proves it by another argument (finitely many linear
# branches per layer, each fixing consensus tuples, plus Fubini), valid for every linear $P$.
# Counting tied *indices*, as the library's averaging does, merged tokens are tied leaders
# forever after; this is the one place where the two readings of $\mathcal C_i^t$ differ.

# %%
a = rng.uniform(0.01, 3.0, p.e7_pairs)
b = -rng.uniform(0.01, 3.0, p.e7_pairs)
pairs = np.stack([a, b], axis=-1)[..., None]                       # (pairs, n=2, d=1)
after = dyn.layer_step(pairs, np.inf, -np.eye(1), np.eye(1))
merged = int((after[:, 0, 0] == after[:, 1, 0]).sum())
glue("ch2-e7-pairs", p.e7_pairs, display=False)
glue("ch2-e7-merged", merged, display=False)
resid = np.abs(after[:, 0, 0] - after[:, 1, 0])
glue("ch2-e7-maxres", float(resid.max()), display=False)
glue("ch2-e7-ulp", float((resid / np.spacing(np.abs(pairs[:, :, 0]).max(axis=1))).max()), display=False)

# %% [markdown]
# ## The hull shrinks (lemma of §2.3, number unverified)
#
# If $\gamma^t\in(0,1)$, every new token $(1-\gamma^t)x_i^t+\gamma^ts_i^t$ is a convex
# combination of two points of $\mathcal K^t$, so $\mathcal K^{t+1}\subseteq\mathcal K^t$:
# the constraint set of the Frank–Wolfe reading can only shrink. This holds for **any**
# key–query matrix. Over {glue:text}`ch2-hull-configs` configurations of 10 Gaussian tokens in
# the plane, each with its own random symmetric (typically indefinite) $B$, followed for
# {glue:text}`ch2-hull-steps` layers, the largest relative change of the hull's area from
# one layer to the next is {glue:text}`ch2-hull-incr:.1e`: the area never increased beyond
# rounding, and
# {glue:text}`ch2-hull-outside` new tokens lie outside the previous hull
# ({numref}`fig-ch2-hull`).

# %%
X = rng.standard_normal((p.hull_configs, 10, 2))
Bs = rng.standard_normal((p.hull_configs, 2, 2))
Bs = (Bs + np.swapaxes(Bs, 1, 2)) / 2
areas = np.empty((p.hull_steps + 1, p.hull_configs))
outside = 0
for t in range(p.hull_steps + 1):
    areas[t] = polytope.hull_area(X)
    if t == p.hull_steps:
        break
    S = np.einsum("rid,rde,rje->rij", X, Bs, X)                   # batched scores <B x_i, x_j>
    A = (S >= S.max(-1, keepdims=True) - 1e-12 * np.abs(S).max(-1, keepdims=True)).astype(float)
    A /= A.sum(-1, keepdims=True)                                  # hardmax, ties averaged (as the library)
    new = X + p.gamma * (A @ X - X)
    for r in range(p.hull_configs):                                # facets a.x + b <= 0 of the current hull
        eq = ConvexHull(X[r]).equations
        outside += int(((new[r] @ eq[:, :2].T + eq[:, 2]) > 1e-12).any(axis=1).sum())
    X = new
rel_incr = np.diff(areas, axis=0) / areas[:-1]
glue("ch2-hull-configs", p.hull_configs, display=False)
glue("ch2-hull-steps", p.hull_steps, display=False)
assert rel_incr.max() < 1e-12 and outside == 0, "the hull grew: the lemma would be violated"
glue("ch2-hull-incr", float(rel_incr.max()), display=False)
glue("ch2-hull-outside", outside, display=False)

# %% [markdown]
# The key–query matrices differ between configurations, so the batch above is advanced with
# the library's hardmax rule written out for a per-configuration $B$ (same tie rule); for one
# fixed $B$ it is `dynamics.hardmax_step`. A check of that equivalence on the first
# configuration: the largest difference after one step is {glue:text}`ch2-batch-check:.1e`.

# %%
x0 = rng.standard_normal((10, 2))
S = x0 @ Bs[0].T @ x0.T
A = (S >= S.max(-1, keepdims=True) - 1e-12 * np.abs(S).max(-1, keepdims=True)).astype(float)
A /= A.sum(-1, keepdims=True)
glue("ch2-batch-check", float(np.abs(x0 + p.gamma * (A @ x0 - x0) - dyn.hardmax_step(x0, p.gamma, Bs[0])).max()),
     display=False)

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(plotting.ONE_COLUMN, 2.3))
norm = areas / areas[0]
ax.semilogy(norm[:, :40], color="C0", lw=0.6, alpha=0.5)
ax.semilogy(np.median(norm, axis=1), color="k", lw=1.5, label="median")
ax.set_xlabel("layer $t$")
ax.set_ylabel(r"area$(\mathcal{K}^t)\,/\,$area$(\mathcal{K}^0)$")
ax.legend(frameon=False)
glue("fig-ch2-hull", fig, display=False)
_ = plotting.save(fig, "ch2-hull-area", {"relative_area": norm, "gamma": p.gamma, "max_relative_increase": rel_incr.max(),
                                         "new_tokens_outside": outside})

# %% [markdown]
# ```{glue:figure} fig-ch2-hull
# :name: fig-ch2-hull
#
# Area of the hull of the tokens under (SA∞), relative to the initial area, for random
# configurations and random symmetric $B$ (up to 40 curves drawn; black: median over all).
# No curve ever increases. File: `figures/ch2-hull-area.{pdf,png,svg}`.
# ```
#
# In motion, for one configuration with an indefinite $B$: the dotted line is the initial hull,
# the grey region the current one.

# %%
Bi = np.array([[1.0, 0.0], [0.0, -0.6]])
x0 = rng.standard_normal((12, 2))
run = dyn.simulate(x0, dyn.Hardmax(0.2, Bi), 30, trajectory=True)
display(HTML(trajectory_animation(run.trajectory, title=lambda k: f"(SA$\\infty$), B = diag(1, -0.6), t = {k}")))

# %% [markdown]
# ## A diagonal value matrix can make the hull grow (remark after the lemma)
#
# The shrinking relies on $P^t=\gamma^tI$. With a general positive **diagonal** $V$ it fails.
# Take $V=\mathrm{diag}(3/2,7/3)$, so that $P=(I+V)^{-1}V=\mathrm{diag}(p_1,p_2)$ with $p_1=$ {glue:text}`ch2-P1:.2f` and $p_2=$ {glue:text}`ch2-P2:.2f`, the triangle
# $x_1=0$, $x_2=e_1$, $x_3=e_2$, and the symmetric invertible $B=\begin{pmatrix}0&1\\1&0\end{pmatrix}$,
# for which $Bx_2=e_2$ and $x_3$ is the unique leader of $x_2$. One layer (1.3) with
# $\beta=\infty$ sends $x_2$ to the point ({glue:text}`ch2-x2a:.2f`, {glue:text}`ch2-x2b:.2f`), whose coordinates sum to
# {glue:text}`ch2-x2-sum:.2f` $>1$: the new token lies **outside** $\mathcal K$, and the new
# hull has area {glue:text}`ch2-area-new:.4f`, of which {glue:text}`ch2-area-outside:.4f` lies
# outside the old triangle (area $\tfrac12$) ({numref}`fig-ch2-diagonal-V`).

# %%
from shapely.geometry import Polygon

Vd = np.diag([1.5, 7.0 / 3.0])
Pd = dyn.preconditioner(Vd)
tri = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
Bswap = np.array([[0.0, 1.0], [1.0, 0.0]])
new = dyn.layer_step(tri, np.inf, Bswap, Vd)
old_poly, new_poly = Polygon(tri), Polygon(new[ConvexHull(new).vertices])
glue("ch2-P1", float(Pd[0, 0]), display=False)
glue("ch2-P2", float(Pd[1, 1]), display=False)
glue("ch2-x2a", float(new[1, 0]), display=False)
glue("ch2-x2b", float(new[1, 1]), display=False)
glue("ch2-x2-sum", float(new[1].sum()), display=False)
glue("ch2-area-new", float(new_poly.area), display=False)
glue("ch2-area-outside", float(new_poly.difference(old_poly).area), display=False)

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(plotting.ONE_COLUMN, plotting.ONE_COLUMN * 0.95))
ax.fill(*tri[[0, 1, 2, 0]].T, color="C0", alpha=0.15, label=r"$\mathcal{K}$")
ax.plot(*tri[[0, 1, 2, 0]].T, color="C0", lw=1)
hv = ConvexHull(new).vertices
ax.plot(*new[np.r_[hv, hv[0]]].T, color="C3", lw=1, ls="--", label=r"$\mathcal{K}^{1}$ (new hull)")
for k in range(3):
    ax.annotate("", xy=new[k], xytext=tri[k], arrowprops=dict(arrowstyle="->", color="0.3", lw=0.8))
ax.scatter(*tri.T, c="C0", s=20, zorder=3)
ax.scatter(*new.T, c="C3", s=20, zorder=3)
ax.text(new[1, 0] + 0.03, new[1, 1] + 0.03, f"({new[1, 0]:.1f}, {new[1, 1]:.1f})", color="C3", fontsize=8)
ax.set_aspect("equal")
ax.set_xlim(-0.1, 1.15)
ax.set_ylim(-0.1, 1.1)
ax.legend(frameon=False, loc="upper right")
glue("fig-ch2-diagonal-V", fig, display=False)
_ = plotting.save(fig, "ch2-diagonal-V", {"V": Vd, "P": Pd, "B": Bswap, "tokens": tri, "after_one_layer": new})

# %% [markdown]
# ```{glue:figure} fig-ch2-diagonal-V
# :name: fig-ch2-diagonal-V
#
# One layer (1.3) with $\beta=\infty$, $B=\begin{pmatrix}0&1\\1&0\end{pmatrix}$ and the diagonal
# value matrix $V=\mathrm{diag}(3/2,7/3)$: the token $e_1$ leaves the triangle. (The token at
# the origin has all scores $0$, a three-way tie, and moves towards the average of the three.)
# File: `figures/ch2-diagonal-V.{pdf,png,svg}`.
# ```
#
# This is why the paper keeps $V^t=h^tI_d$: it states that it does not know how to extend the
# method to general value matrices.
