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
#
# :::{admonition} What the paper says, what is true, where this page shows it
# :class: important
# * **Says**: one (SA∞) step of a token is one Frank–Wolfe step over the current hull; the
#   leader is unique for almost every start (Lemma 2.1); the hull only shrinks; a diagonal value
#   matrix can make it grow.
# * **True**, checked below: the oracle of each token is the hull's linear oracle; Lemma 2.1
#   holds, but one step of its proof does not (a piecewise-affine map can send a set of positive
#   measure to a null set: erratum E7); the hull shrinks for any key–query matrix; the remark
#   on diagonal value matrices holds.
# * **Where**: the oracle, the ties of Lemma 2.1, the hull and the remark, in this order.
# :::

# %% tags=["parameters", "remove-cell"]
preset = "paper"  # "paper": the book; "quick": seconds (tests)
# Every parameter, once: (type, accepted values, meaning). Each takes the value of the preset unless
# it is given: `make notebook NB=02-frank-wolfe ARGS="-p gamma 0.3"`, or here a line `gamma = 0.3`.
PARAMETERS = {
    "oracle_configs": ("int", ">= 1", "random point sets for the oracle check"),
    "oracle_n": ("int", ">= 2", "points per set"),
    "oracle_d": ("int", ">= 1", "dimension of the oracle check"),
    "tie_configs": ("int", ">= 1", "random initialisations for the ties of Lemma 2.1"),
    "tie_steps": ("int", ">= 1", "layers followed for each of them"),
    "gamma": ("float", "(0, 1]", "constant step γ of (SA∞) on this page"),
    "e7_pairs": ("int", ">= 1", "random pairs for the counterexample E7"),
    "hull_configs": ("int", ">= 1", "random configurations for the hull-shrinking check"),
    "hull_steps": ("int", ">= 1", "layers for the hull-shrinking check"),
    "seed": ("int", ">= 0", "seed of every random draw on this page"),
}

# %% tags=["hide-input"]
from afw_book.presets import resolve_declared

PRESETS = {
    "paper": dict(oracle_configs=60, oracle_n=12, oracle_d=3,
                  tie_configs=10_000, tie_steps=100, gamma=0.1,
                  e7_pairs=100_000, hull_configs=300, hull_steps=60,
                  seed=2508),
    "quick": dict(oracle_configs=10, oracle_n=8, oracle_d=3,
                  tie_configs=200, tie_steps=20, gamma=0.1,
                  e7_pairs=1_000, hull_configs=12, hull_steps=15, seed=2508),
}
p = resolve_declared(PRESETS, preset, PARAMETERS, globals())

import numpy as np
from IPython.display import HTML, display

from attention_fw.model import dynamics as dyn
from attention_fw.model import frank_wolfe as fw
from attention_fw.plot import figure_data
from attention_fw.plot import frank_wolfe as fwp
from afw_book import figures as plotting
from attention_fw.plot.animate import trajectory_animation
from afw_book.notebook import Page, fmt

# %matplotlib inline
# %config InlineBackend.figure_formats = ["retina"]
plotting.use_style()
# saves and glues figures; page.stream(name): an experiment's random stream
page = Page("02-frank-wolfe", p)
page.parameters()  # the table "Parameters of this run"


# %%
def random_symmetric(rng, count, d):
    """``count`` random symmetric d x d matrices (typically indefinite)."""
    M = rng.standard_normal((count, d, d))
    return (M + np.swapaxes(M, 1, 2)) / 2

# %% [markdown]
# ## The oracle: the token argmax is the hull's linear minimisation oracle
#
# A linear function on a polytope attains its maximum at a vertex, and the vertices of
# $\mathcal K^t$ are tokens; so the maximiser over the hull can be found by scanning the
# tokens, at cost $O(n^2d)$ per layer. The library does exactly that
# ({py:func}`~attention_fw.model.frank_wolfe.lmo`); {py:func}`~attention_fw.model.frank_wolfe.lmo_linprog` solves the same problem as a linear program
# over the simplex of convex weights (HiGHS). Over {glue:text}`ch2-oracle-configs` random
# sets of {glue:text}`ch2-oracle-n` points in $\mathbb R^{d}$, $d=$ {glue:text}`ch2-oracle-d`,
# each point querying the oracle with its own direction $Bx_i$ (a random symmetric $B$ per
# set), {glue:text}`ch2-oracle-agree` (the linear program returns a vertex of the simplex, so
# no rounding enters). A reproduction
# log of the paper reports a residual of $8.9\times10^{-16}$ for the same check.

# %%
rng = page.stream("oracle")
sets = rng.standard_normal((p.oracle_configs, p.oracle_n, p.oracle_d))
Bs = random_symmetric(rng, p.oracle_configs, p.oracle_d)
residuals = fw.oracle_residuals(sets, Bs).ravel()

# %% tags=["hide-input"]
same, total = int((residuals == 0).sum()), residuals.size
if same == total:
    agree = f"the two answers are identical bit for bit in all {total} queries"
else:
    agree = (f"the two answers differ by at most {fmt(residuals.max(), '.1e')}; "
             f"they are identical bit for bit in {same} of the {total} queries")
page.glue(**{"ch2-oracle-configs": p.oracle_configs,
             "ch2-oracle-n": p.oracle_n, "ch2-oracle-d": p.oracle_d,
             "ch2-oracle-agree": agree})

# %%
pts = np.array([[0.9, 0.1], [0.4, 0.8], [-0.5, 0.7], [-0.8, -0.3],
                [0.1, -0.9], [0.2, 0.1], [-0.1, 0.3]])
B, i = np.diag([1.0, 2.0]), 5
fig = fwp.fig_oracle(pts, B, i, extent=(-1.1, 1.1, -1.1, 1.1))
s = figure_data(fig)["lmo"]
data = {"points": pts, "B": B, "i": i, "lmo": s, "residuals": residuals}
page.figure(fig, "ch2-oracle", data,
            statement="Section 2: the Frank–Wolfe reading of (SA∞)",
            caption="One (SA∞) step is one Frank–Wolfe step: the oracle "
                    "picks a vertex of the hull")

# %% [markdown]
# ```{glue:figure} fig-ch2-oracle
# :name: fig-ch2-oracle
#
# One Frank–Wolfe step with $B=\mathrm{diag}(1,2)$: grey lines are level sets of
# $y\mapsto\langle Bx_i,y\rangle$, the red arrow is the direction $Bx_i$, the circled vertex is
# the oracle's answer $s_i$ and the green arrow the step with $\gamma=\tfrac12$.
# ```

# %% [markdown]
# ## Lemma 2.1: a single leader, almost everywhere
#
# **Lemma 2.1.** *If $B^t$ is invertible for every $t$, then for Lebesgue-almost every initial
# configuration, $\#\mathcal C_i^t=1$ for all $t\ge0$ and all $i$.*
#
# Lemma 2.1 says that random initialisations hit a tie with probability zero; a sample agrees. For {glue:text}`ch2-tie-configs` configurations
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
# {glue:text}`ch2-centre-moved`). (b) Put the fifth token at $(\tfrac12,0)$ instead, on the
# boundary between the cells of $(1,1)$ and $(1,-1)$: it has {glue:text}`ch2-tie-edge` tied
# leaders and walks towards their midpoint, reaching ({glue:text}`ch2-edge-end-x`,
# {glue:text}`ch2-edge-end-y`) after 12 layers; it converges to $(1,0)$, which is not a
# vertex of the hull ({numref}`fig-ch2-ties`).

# %%
def count_ties(B, rng):
    """(configuration, layer, token) triples with several leaders."""
    x0 = rng.uniform(-1, 1, (p.tie_configs, 6, 2))        # uniform starts
    rec = dyn.FunctionRecorder(
        "ties", lambda x, t: (dyn.tie_counts(x, B) > 1).sum())
    dyn.simulate(x0, dyn.Hardmax(p.gamma, B), p.tie_steps, recorders=[rec])
    return int(rec.result().sum())


ties_random = (count_ties(np.eye(2), page.stream("ties-identity"))
               + count_ties(np.diag([1.0, 2.0]),
                            page.stream("ties-diagonal")))

# %% tags=["hide-input"]
page.glue(**{"ch2-tie-configs": (2 * p.tie_configs, ","),
             "ch2-tie-steps": p.tie_steps,
             "ch2-gamma": p.gamma, "ch2-ties-random": ties_random})

# %%
corners = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, -1.0], [-1.0, 1.0]])
with_centre = np.vstack([corners, [[0.0, 0.0]]])  # (a): one at the centre
with_edge = np.vstack([corners, [[0.5, 0.0]]])    # (b): one on a cell edge
count_centre = int(dyn.tie_counts(with_centre)[4])
count_edge = int(dyn.tie_counts(with_edge)[4])
step = dyn.Hardmax(0.3)
run_a = dyn.simulate(with_centre, step, 12, trajectory=True).trajectory
run_b = dyn.simulate(with_edge, step, 12, trajectory=True).trajectory

# %% tags=["hide-input"]
moved = np.abs(run_a[:, 4] - run_a[0, 4]).max()
page.glue(**{"ch2-tie-centre": count_centre, "ch2-tie-edge": count_edge,
             "ch2-centre-moved": (moved, ".1e"),
             "ch2-edge-end-x": (run_b[-1, 4, 0], ".4f"),
             "ch2-edge-end-y": (run_b[-1, 4, 1], ".4f")})
ties_data = {"corners": corners, "tie_counts": [count_centre, count_edge],
             "trajectory_centre": run_a[:, 4],
             "trajectory_edge": run_b[:, 4], "random_ties": ties_random,
             "random_configs": 2 * p.tie_configs}

# %%
fig = fwp.fig_ties(corners, run_a, run_b, count_centre, count_edge)
page.figure(fig, "ch2-ties", ties_data, statement="Lemma 2.1",
            caption="Ties can be engineered: a tied centre token stays, "
                    "a tied edge token walks")

# %% [markdown]
# ```{glue:figure} fig-ch2-ties
# :name: fig-ch2-ties
#
# Engineered ties in a square ($B=I_2$, $\gamma=0.3$, two separate configurations): (a) the
# centre token (red circle) is tied between all five tokens and does not move; (b) the token
# at $(\tfrac12,0)$ (green) is tied between two vertices and walks to the midpoint of their
# edge.
# ```

# %% [markdown]
# ### The proof of Lemma 2.1 has a gap (erratum E7)
#
# The paper's proof observes that ties lie on finitely many hyperplanes, null sets since $B^t$
# is invertible, and then asserts that a piecewise-affine step cannot map a set of positive
# measure into a null set. That last step is **false** (erratum {ref}`E7 <e7>`). Take $d=1$, $V=I_1$ (so $P=\tfrac12$)
# and $B=-I_1$, and two tokens $a>0>b$. Each is the other's leader
# ($\langle Ba,b\rangle=-ab>0>-a^2$), so both jump to $(a+b)/2$: an open set of initial data
# is mapped onto the diagonal $\{x_1=x_2\}$. Every one of {glue:text}`ch2-e7-pairs` random
# pairs with $a>0>b$ merges mathematically after one layer (1.3). In floating point,
# {glue:text}`ch2-e7-merged` of them land on the same double; the others differ only by
# rounding, at most {glue:text}`ch2-e7-maxres`, that is {glue:text}`ch2-e7-ulp` in the last
# place of the larger of $|a|,|b|$.
#
# The lemma itself is nevertheless **true** when leaders are counted as *points* (merged tokens
# are one point): the Lean formalization re-proves it by another argument (finitely many linear
# branches per layer, each fixing consensus tuples, plus Fubini), valid for every linear $P$.
# Counting tied *indices*, as the library's averaging does, merged tokens are tied leaders
# forever after; this is the one place where the two readings of $\mathcal C_i^t$ differ.

# %%
rng = page.stream("e7-pairs")
a = rng.uniform(0.01, 3.0, p.e7_pairs)                 # a > 0
b = -rng.uniform(0.01, 3.0, p.e7_pairs)                # b < 0
pairs = np.stack([a, b], axis=-1)[..., None]           # (pairs, n=2, d=1)
after = dyn.layer_step(pairs, np.inf, -np.eye(1), np.eye(1))
resid = np.abs(after[:, 0, 0] - after[:, 1, 0])
ulp = np.spacing(np.abs(pairs[:, :, 0]).max(axis=1))

# %% tags=["hide-input"]
page.glue(**{"ch2-e7-pairs": (p.e7_pairs, ","),
             "ch2-e7-merged": (int((resid == 0).sum()), ","),
             "ch2-e7-maxres": (resid.max(), ".1e"),
             "ch2-e7-ulp": "one unit" if round((resid / ulp).max()) == 1
             else f"{fmt((resid / ulp).max(), '.0f')} units"})

# %% [markdown]
# ## The hull shrinks (a lemma of §2.3)
#
# The hull lemma of §2.3 {unconfirmed}`Its number could not be confirmed: probably Lemma 2.2.`
# says that the hull of the tokens can only shrink. If $\gamma^t\in(0,1)$, every new token $(1-\gamma^t)x_i^t+\gamma^ts_i^t$ is a convex
# combination of two points of $\mathcal K^t$, so $\mathcal K^{t+1}\subseteq\mathcal K^t$:
# the constraint set of the Frank–Wolfe reading can only shrink. This holds for **any**
# key–query matrix. Over {glue:text}`ch2-hull-configs` configurations of 10 Gaussian tokens in
# the plane, each with its own random symmetric (typically indefinite) $B$, followed for
# {glue:text}`ch2-hull-steps` layers, the largest relative change of the hull's area from
# one layer to the next is {glue:text}`ch2-hull-incr`: the area never increased beyond
# rounding, and
# {glue:text}`ch2-hull-outside` new tokens lie outside the previous hull
# ({numref}`fig-ch2-hull-area`). {glue:text}`ch2-hull-flat` The library's hardmax step takes one key–query matrix per
# configuration, so the whole batch runs in one call ({py:func}`~attention_fw.model.frank_wolfe.hull_shrinking`).

# %%
rng = page.stream("hull-shrinking")
X = rng.standard_normal((p.hull_configs, 10, 2))
Bs = random_symmetric(rng, p.hull_configs, 2)
hull = fw.hull_shrinking(X, p.gamma, Bs, p.hull_steps)
# relative to the previous layer's area; a hull that has become flat (a segment or a
# point: area 0) stays flat, and any area after it would count as an infinite increase
prev, change = hull.areas[:-1], np.diff(hull.areas, axis=0)
rel_incr = np.where(prev > 0, change / np.where(prev > 0, prev, 1.0),
                    np.where(change > 0, np.inf, 0.0))
grew = rel_incr.max() >= 1e-12 or hull.outside > 0
assert not grew, "the hull grew: the lemma would be violated"
flat = hull.areas[-1] == 0      # configurations whose hull became a segment or a point
flat_from = int(np.argmax((hull.areas == 0).any(axis=1))) if flat.any() else None

# %% tags=["hide-input"]
flat_text = (f"In {fmt(int(flat.sum()))} of the {fmt(p.hull_configs)} configurations "
             "the tokens ended on a segment or a single point (area 0), the first "
             f"from layer {flat_from} on; an area of 0 stays 0, and the curves of "
             "these configurations are drawn on the floor of the figure from there."
             if flat.any() else
             "No hull became flat (a segment or a point) within these layers.")
page.glue(**{"ch2-hull-configs": p.hull_configs,
             "ch2-hull-steps": p.hull_steps,
             "ch2-hull-incr": (rel_incr.max(), ".1e"),
             "ch2-hull-outside": hull.outside,
             "ch2-hull-flat": flat_text})
hull_data = {"relative_area": hull.areas / hull.areas[0], "gamma": p.gamma,
             "max_relative_increase": rel_incr.max(),
             "new_tokens_outside": hull.outside}

# %%
page.figure(fwp.fig_hull_area(hull.areas), "ch2-hull-area", hull_data,
            statement="Hull lemma of Section 2.3 (number unconfirmed)",
            caption="Under (SA∞) the hull of the tokens only shrinks, "
                    "for any key-query matrix")

# %% [markdown]
# ```{glue:figure} fig-ch2-hull-area
# :name: fig-ch2-hull-area
#
# Area of the hull of the tokens under (SA∞), relative to the initial area, for random
# configurations and random symmetric $B$ (up to 40 curves drawn; black: median over all).
# No curve ever increases.
# ```
#
# In motion, for one configuration with an indefinite $B$: the dotted line is the initial hull,
# the grey region the current one.

# %%
Bi = np.array([[1.0, 0.0], [0.0, -0.6]])
x0 = page.stream("animation").standard_normal((12, 2))
run = dyn.simulate(x0, dyn.Hardmax(0.2, Bi), 30, trajectory=True)
title = "(SA$\\infty$), B = diag(1, -0.6), t = {}".format
display(HTML(trajectory_animation(run.trajectory, title=title)))

# %% [markdown]
# ## A diagonal value matrix can make the hull grow (remark after the lemma)
#
# The remark that follows the hull lemma {unconfirmed}`Its number could not be confirmed; the statement and the example below are those of the Lean formalization, where they are machine-checked.`
# shows that the shrinking relies on $P^t=\gamma^tI$. With a general positive **diagonal** $V$ it fails.
# Take $V=\mathrm{diag}(3/2,7/3)$, so that $P=(I+V)^{-1}V=\mathrm{diag}(p_1,p_2)$ with $p_1=$ {glue:text}`ch2-P1` and $p_2=$ {glue:text}`ch2-P2`, the triangle
# $x_1=0$, $x_2=e_1$, $x_3=e_2$, and the symmetric invertible $B=\begin{pmatrix}0&1\\1&0\end{pmatrix}$,
# for which $Bx_2=e_2$ and $x_3$ is the unique leader of $x_2$. One layer (1.3) with
# $\beta=\infty$ sends $x_2$ to the point ({glue:text}`ch2-x2a`, {glue:text}`ch2-x2b`), whose coordinates sum to
# {glue:text}`ch2-x2-sum` $>1$: the new token lies **outside** $\mathcal K$, and the new
# hull has area {glue:text}`ch2-area-new`, of which {glue:text}`ch2-area-outside` lies
# outside the old triangle (area $\tfrac12$) ({numref}`fig-ch2-diagonal-V`).

# %%
from shapely.geometry import Polygon

Vd = np.diag([1.5, 7.0 / 3.0])
Pd = dyn.preconditioner(Vd)
tri = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
Bswap = np.array([[0.0, 1.0], [1.0, 0.0]])
new = dyn.layer_step(tri, np.inf, Bswap, Vd)
new_hull = Polygon(new).convex_hull
outside = new_hull.difference(Polygon(tri)).area

# %% tags=["hide-input"]
page.glue(**{"ch2-P1": (Pd[0, 0], ".2f"), "ch2-P2": (Pd[1, 1], ".2f"),
             "ch2-x2a": (new[1, 0], ".2f"), "ch2-x2b": (new[1, 1], ".2f"),
             "ch2-x2-sum": (new[1].sum(), ".2f"),
             "ch2-area-new": (new_hull.area, ".4f"),
             "ch2-area-outside": (outside, ".4f")})
diag_data = {"V": Vd, "P": Pd, "B": Bswap, "tokens": tri,
             "after_one_layer": new}

# %%
page.figure(fwp.fig_diagonal_V(tri, new), "ch2-diagonal-V", diag_data,
            statement="Remark after the hull lemma (Section 2.3)",
            caption="A diagonal value matrix can make the hull grow: "
                    "one token leaves the triangle")

# %% [markdown]
# ```{glue:figure} fig-ch2-diagonal-V
# :name: fig-ch2-diagonal-V
#
# One layer (1.3) with $\beta=\infty$, $B=\begin{pmatrix}0&1\\1&0\end{pmatrix}$ and the diagonal
# value matrix $V=\mathrm{diag}(3/2,7/3)$: the token $e_1$ leaves the triangle. (The token at
# the origin has all scores $0$, a three-way tie, and moves towards the average of the three.)
# ```
#
# This is why the paper keeps $V^t=h^tI_d$: it states that it does not know how to extend the
# method to general value matrices.
