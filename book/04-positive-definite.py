# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Positive definite key-query: cells, Voronoi diagrams and the vertices
#
# In section 4 of the paper the key-query matrix $B$ is symmetric positive definite. Under
# (SA$\infty$) each token then moves towards the vertex $v_j$ of the hull
# $\mathcal K=\operatorname{conv}\{v_1,\dots,v_\kappa\}$ that maximises $\langle Bx, v_j\rangle$.
# The **cells** (`eq: cells`) describe where each vertex is the leader:
#
# $$
# \mathcal C_i(v)=\{x\in\mathcal K:\ \langle Bx,v_i\rangle\ge\langle Bx,v_j\rangle\ \ \forall j\}
# =\mathcal K\cap\{x:\ \langle x,B(v_i-v_j)\rangle\ge 0\ \ \forall j\}.
# $$
#
# Every cell is $\mathcal K$ cut by half-planes whose boundary lines pass through the origin, so
# in the plane the cells are wedges from the origin truncated by $\mathcal K$. This chapter
# computes them **exactly**, as polygons (`attention_fw.geometry`), and regenerates the paper's
# four figures from these polygons (`attention_fw.paper_figures`). The published figures
# coloured a $1000\times1000$ grid instead. The theorem numbers used below follow the
# specification; the numbers of the cells lemma and of the polygon-condition remark are not
# confirmed by any source.

# %% tags=["parameters"]
preset = "paper"     # "paper": the published parameters; "quick": a few seconds, for tests
kappas = None        # numbers of vertices of the cell figures (published: [5, 7, 9, 10])
seed = None          # seed of numpy.random.default_rng (published: 42)
n_random = None      # random configurations for the checks of the cells lemma and the remarks
mc_reps = None       # Monte Carlo repetitions for the pointer to Remark 4.6

# %%
import numpy as np
from IPython.display import Image
from myst_nb import glue

from attention_fw import geometry as geo
from attention_fw import paper_figures as pf
from attention_fw import paths
from attention_fw.presets import resolve

PRESETS = {
    "paper": dict(kappas=[5, 7, 9, 10], seed=42, n_random=400, mc_reps=2000),
    "quick": dict(kappas=[5, 7], seed=42, n_random=40, mc_reps=200),
}
p = resolve(PRESETS, preset, kappas=kappas, seed=seed, n_random=n_random, mc_reps=mc_reps)
rng = np.random.default_rng(2025)


def show(name, **params):
    """Draw a paper figure, save it (figures/, or figures/custom/ when the parameters differ
    from the published ones) and glue it for the text."""
    _, data, written = pf.render(name, **params)
    glue(f"fig-{name}", Image(data=written["png"].read_bytes(), format="png"), display=False)
    return data


def random_spd(rng):
    A = rng.normal(size=(2, 2))
    return A @ A.T + 0.3 * np.eye(2)


def random_polygon(rng):
    pts = rng.normal(size=(int(rng.integers(3, 12)), 2)) + rng.normal(scale=0.7, size=2)
    return pts[geo.convex_hull(pts)]


# %% [markdown]
# ## The cells lemma
#
# The cells lemma (`lem: cells`, number unverified, probably Lemma 4.3; machine-checked in the
# Lean formalization) says: each $\mathcal C_i(v)$ is convex; two different cells have disjoint
# interiors (this needs $B\succ0$ and distinct vertices); and the cells cover $\mathcal K$.
# We check all three on random polygons with random symmetric positive definite $B$, by exact
# polygon arithmetic.

# %%
tiling_err, overlap, convex = 0.0, 0.0, True
for _ in range(p.n_random):
    K, B = random_polygon(rng), random_spd(rng)
    cells = geo.cells(K, B)
    area_K = geo.polygon_area(K)
    tiling_err = max(tiling_err, abs(sum(map(geo.polygon_area, cells)) - area_K) / area_K)
    convex &= all(geo.is_convex(c) for c in cells)
    for i in range(len(cells)):
        for j in range(i + 1, len(cells)):
            overlap = max(overlap, geo.polygon_area(geo.polygon_intersection(cells[i], cells[j])))
glue("lemma_n", p.n_random, display=False)
glue("lemma_tiling", tiling_err, display=False)
glue("lemma_overlap", overlap, display=False)
glue("lemma_convex", "all" if convex else "NOT all", display=False)
print(f"relative tiling error {tiling_err:.1e}, largest overlap area {overlap:.1e}, convex: {convex}")

# %% [markdown]
# Over {glue:text}`lemma_n` random polygons the cell areas add up to the area of $\mathcal K$
# with a largest relative error of {glue:text}`lemma_tiling:.1e`; the largest area shared by two
# cells is {glue:text}`lemma_overlap:.1e`; and {glue:text}`lemma_convex` cells are convex.
# These are floating-point zeros.
#
# ## Figure 1 as published, and corrected
#
# The published Figure 1 shows unequal-norm vertices for $\kappa=5,7,9,10$ (seed 42, the
# authors' sampling recipe). The committed PDFs that match it, `cells-k*-var-bij-unit-noself.pdf`,
# were made with the option `normalize_inner_product=True`. With this option each point is
# coloured by $\arg\max_j\langle x, v_j/\|v_j\|\rangle$ (the "unit" labelling). That is **not**
# $\mathcal C_i(v)$ when the norms differ (erratum E18). Which variant the paper prints is not
# confirmed; this one is the most likely. {numref}`fig-figure1` reproduces it exactly, with
# polygons instead of a grid.

# %%
fig1 = show("figure1", kappas=tuple(p.kappas), seed=p.seed)
fig1c = show("figure1-corrected", kappas=tuple(p.kappas), seed=p.seed)

# %% [markdown]
# ```{glue:figure} fig-figure1
# :name: "fig-figure1"
#
# The paper's Figure 1 as published: the unit-direction regions
# $\{x\in\mathcal K: \arg\max_j\langle x, v_j/\|v_j\|\rangle=i\}$ for unequal-norm vertices
# (colours: HSV hues in hull order; labels $v_j$ in sampling order). Panels share one metric
# scale.
# ```
#
# ```{glue:figure} fig-figure1-corrected
# :name: "fig-figure1-corrected"
#
# The paper's Figure 1 corrected: the same polygons with the true cells $\mathcal C_i(v)$ ($B=I_2$).
# ```

# %%
rows = []
for a, b in zip(fig1["panels"], fig1c["panels"]):
    diff = max(geo.symmetric_difference_area(u["polygon"], c["polygon"])
               for u, c in zip(a["cells"], b["cells"]))
    not_owning = [c["vertex"] for c, own in zip(b["cells"], b["owns_cell"]) if not own]
    rows.append((a["kappa"], diff / a["hull_area"], not_owning))
    print(f"kappa={a['kappa']:2d}: largest area moved {diff / a['hull_area']:.1%} of K; "
          f"vertices outside their own cell: {not_owning}")
worst = max(rows, key=lambda r: r[1])
glue("e18_kappa", worst[0], display=False)
glue("e18_diff", 100 * worst[1], display=False)
glue("e18_n_not_owning", sum(len(r[2]) for r in rows), display=False)
glue("e18_total", sum(r[0] for r in rows), display=False)

# %% [markdown]
# The difference is large. For $\kappa=$ {glue:text}`e18_kappa` one region of the published
# figure differs from the true cell by {glue:text}`e18_diff:.0f`% of the area of $\mathcal K$
# (area of the symmetric difference). Moreover, in {numref}`fig-figure1-corrected`
# {glue:text}`e18_n_not_owning` of the {glue:text}`e18_total` vertices do not lie in their own
# cell. The unit labelling hides this, because by Cauchy-Schwarz every vertex always lies in
# its own unit-direction region. The book uses the corrected cells everywhere else.
#
# ## Figure 2 and Proposition 4.5: Voronoi cells in the $B$-norm
#
# Proposition 4.5 (`prop: voronoi`): if $B\succ0$ and all vertices lie on one level set,
# $\tfrac12\langle Bv_i,v_i\rangle=c$, then
# $\mathcal C_i(v)=\mathrm{Vor}_B(v_i)\cap\mathcal K$ with
# $\mathrm{Vor}_B(v_i)=\{x:\|x-v_i\|_B\le\|x-v_j\|_B\ \forall j\}$. The proof is polarisation,
# $\|x-v_j\|_B^2=\langle Bx,x\rangle-2\langle Bx,v_j\rangle+2c$. The comparison in
# $\mathrm{Vor}_B$ must run over the **vertices** $v_j$ only (erratum E13). The printed version
# compares against every $y\in\mathcal K$; taking $y=x$ then forces $x=v_i$, so the "cell" would
# be the single point $v_i$. Figure 2 shows the case $B=I_2$ with vertices on the unit circle.

# %%
fig2 = show("figure2", kappas=tuple(p.kappas), seed=p.seed)
mis_eq = float(max(pan["voronoi_mismatch"] for pan in fig2["panels"]))
mis_var = max(geo.voronoi_mismatch(pan["hull"]) / pan["hull_area"] for pan in fig1c["panels"])
mis_B = 0.0
for _ in range(p.n_random):
    B = random_spd(rng)
    theta = rng.uniform(0, 2 * np.pi, int(rng.integers(3, 12)))
    v = geo.level_set_vertices(np.c_[np.cos(theta), np.sin(theta)], B, c=rng.uniform(0.5, 2))
    mis_B = max(mis_B, geo.voronoi_mismatch(v[geo.convex_hull(v)], B))
glue("vor_eq", mis_eq, display=False)
glue("vor_B", mis_B, display=False)
glue("vor_var", 100 * mis_var, display=False)
print(mis_eq, mis_B, mis_var)

# %% [markdown]
# ```{glue:figure} fig-figure2
# :name: "fig-figure2"
#
# The paper's Figure 2: vertices on the unit circle, so the cells $\mathcal C_i(v)$ are the Euclidean
# Voronoi cells of the vertices clipped to $\mathcal K$ (Proposition 4.5 with $B=I_2$).
# ```
#
# In {numref}`fig-figure2` the exact cells and the clipped Voronoi cells differ by at most
# {glue:text}`vor_eq:.1e` in area. For {glue:text}`lemma_n` random $B\succ0$ with the vertices
# placed on a level set of $\tfrac12\langle Bx,x\rangle$ the largest difference is
# {glue:text}`vor_B:.1e`. Both are floating-point zeros. When the norms differ (the polygons of
# {numref}`fig-figure1-corrected`) the two partitions disagree by up to
# {glue:text}`vor_var:.0f`% of the area of $\mathcal K$, so the level-set hypothesis is needed.
#
# ## Figure 3: the quadratic over $\mathcal K$ (erratum E17)
#
# Figure 3 draws $x\mapsto\tfrac12\langle Bx,x\rangle$ over $\mathcal K$ for $\kappa=5$ and $7$.
# The vertices are mapped onto the level set $\{\tfrac12\langle Bx,x\rangle=\tfrac12\}$ by
# $x=B^{-1/2}u$, with $u$ on the unit circle. The caption says $B=\mathrm{diag}(1,2)$. The
# authors' committed script has `B = np.diag([1, 1])`, but the published PDFs were made with
# $\mathrm{diag}(1,2)$. We check this below by comparing polygon corners with the published
# files.

# %%
fig3 = show("figure3", seed=p.seed)
J_dev = float(max(np.abs(np.asarray(pan["J_vertices"]) - 0.5).max() for pan in fig3["panels"]))
glue("J_dev", J_dev, display=False)
if paths.PUBLISHED.exists():
    res_12, res_11 = [], []
    for pan in fig3["panels"]:
        pdf = paths.PUBLISHED / f"quadratic_{pan['kappa']}.pdf"
        res_12.append(pf.published_geometry(pdf, pan["hull"])["hull_residual"])
        u, hull = geo.sample_vertices(pan["kappa"], p.seed, equal_norm=True)
        wrong = geo.level_set_vertices(u, np.eye(2))[hull]
        res_11.append(pf.published_geometry(pdf, wrong)["hull_residual"])
    glue("e17_12", f"{max(res_12):.1e}", display=False)
    glue("e17_11", f"{min(res_11):.2f}", display=False)
else:
    glue("e17_12", "(published files not available)", display=False)
    glue("e17_11", "(published files not available)", display=False)

# %% [markdown]
# ```{glue:figure} fig-figure3
# :name: "fig-figure3"
#
# The paper's Figure 3: $\tfrac12\langle Bx,x\rangle$ over $\mathcal K$ with $B=\mathrm{diag}(1,2)$,
# $\kappa=5$ (left) and $7$ (right). The vertices (crosses) all lie on the level set
# $\tfrac12\langle Bx,x\rangle=\tfrac12$ and maximise the quadratic over $\mathcal K$.
# ```
#
# In {numref}`fig-figure3` the values $\tfrac12\langle Bv_i,v_i\rangle$ all equal $0.5$ up to
# {glue:text}`J_dev:.1e`. After the best scale-and-shift alignment, the corners of the
# published polygons coincide with ours up to {glue:text}`e17_12` (in data units) for
# $B=\mathrm{diag}(1,2)$. For $B=\mathrm{diag}(1,1)$, the matrix in the committed script, the
# mismatch is at least {glue:text}`e17_11`.
#
# ## The polygon condition: only "$<0$", and strict (erratum E14)
#
# The genericity condition of Theorem 4.2 asks each vertex to **own** its cell,
# $\langle Bv_i,v_i\rangle>\langle Bv_i,v_j\rangle$ for all $j\ne i$ (`eq: vertices.own.cell`).
# The remark on the polytope condition (number unverified, probably Remark 4.7) reduces this
# to the neighbours of $v_i$: $v_i$ owns its cell if and only if
# $\langle Bv_i,w-v_i\rangle<0$ for every $w\in\mathrm{neigh}(v_i)\cup\{0\}$. This holds because
# a linear function has a unique maximum over a polytope at a vertex exactly when it beats all
# neighbours of that vertex. Two slips of the printed remark are corrected:
#
# * it is printed as an "either side" disjunction, but the "$>0$" side can never hold, since for
#   $w=0$ it would require $-\langle Bv_i,v_i\rangle>0$;
# * it is printed with non-strict cell membership, which makes the equivalence false at ties.

# %%
agree, total, never_positive = 0, 0, True
for _ in range(p.n_random):
    K, B = random_polygon(rng), random_spd(rng)
    own = geo.owns_cell(K, B)
    agree += int((geo.neighbour_condition(K, B) == own).sum())
    total += len(K)
    Bv = K @ B.T
    other_side = np.all([np.einsum("ij,ij->i", Bv, w - K) > 0
                         for w in (np.roll(K, 1, 0), np.roll(K, -1, 0), 0 * K)], axis=0)
    never_positive &= not other_side.any()
tie = np.array([[1.0, 0.0], [1.0, 1.0], [-1.0, 0.0]])   # <v1, v1> = <v1, v2>
glue("e14_agree", agree, display=False)
glue("e14_total", total, display=False)
glue("e14_pos", "never" if never_positive else "sometimes", display=False)
glue("e14_nonstrict", "accepts" if geo.neighbour_condition(tie, strict=False)[0] else "rejects",
     display=False)
glue("e14_owns", "owns" if geo.owns_cell(tie)[0] else "does not own", display=False)
print(agree, total, never_positive, geo.neighbour_condition(tie, strict=False)[0], geo.owns_cell(tie)[0])

# %% [markdown]
# On {glue:text}`e14_total` vertices of random polygons with random $B\succ0$, the strict
# neighbour test agrees with "owns its cell" for {glue:text}`e14_agree` of them. The "$>0$" side
# holds {glue:text}`e14_pos`. For the triangle $v_1=(1,0)$, $v_2=(1,1)$, $v_3=(-1,0)$ we have
# $\langle v_1,v_1\rangle=\langle v_1,v_2\rangle$. The non-strict version
# {glue:text}`e14_nonstrict` $v_1$, yet $v_1$ {glue:text}`e14_owns` its cell: it lies on the
# boundary it shares with $\mathcal C_2(v)$.
#
# ## Remark 4.6 in brief: Gaussian vertices in high dimension
#
# Remark 4.6 (`prop: d.to.infty`): for $\kappa$ fixed and $v_1,\dots,v_\kappa$ i.i.d.
# $\mathcal N(0,I_d)$, with probability tending to $1$ as $d\to\infty$ every vertex owns its
# cell. `geometry.owns_cell` tests this for many configurations at once in any dimension. A
# two-point preview with $B=I_d$ and $\kappa=5$:

# %%
own_by_d = {d: float(geo.owns_cell(rng.normal(size=(p.mc_reps, 5, d))).all(axis=1).mean())
            for d in (2, 200)}
glue("r46_d2", own_by_d[2], display=False)
glue("r46_d200", own_by_d[200], display=False)
glue("r46_reps", p.mc_reps, display=False)
print(own_by_d)

# %% [markdown]
# Over {glue:text}`r46_reps` draws the probability that all five vertices own their cells is
# {glue:text}`r46_d2:.2f` in $d=2$ and {glue:text}`r46_d200:.3f` in $d=200$.
#
# ## Figure 4: the strict cone and its erosion (section 5, erratum E16)
#
# Figure 4 belongs to section 5 ($B=I_2$, equal norms). Its ingredients are exact polygons
# too, so they are drawn here. The cone is
# $\mathcal I_i(\eta)=\{x\in\mathcal K:\langle v_i-v_j,x\rangle\ge\eta\ \forall j\ne i\}$.
# Its erosion $\mathcal I_i(\eta)\ominus\delta B_1$ is the cone with every edge moved inward by
# $\delta$, which is exact for a convex polygon. Here $\kappa=7$, the cell is number 2 in the
# counter-clockwise hull order and $\eta=0.05$. The caption says $\delta=0.02$, but the published
# file was made with $\delta=0.03$. {numref}`fig-figure4` uses $0.03$, like the file;
# `figures/figure4-delta002.pdf` has the captioned value.

# %%
fig4 = show("figure4", seed=p.seed)
fig4b = show("figure4-delta002", seed=p.seed)
glue("f4_ratio", fig4["eroded_cone"]["area"] / fig4["cone"]["area"], display=False)
glue("f4b_ratio", fig4b["eroded_cone"]["area"] / fig4b["cone"]["area"], display=False)

# %% [markdown]
# ```{glue:figure} fig-figure4
# :name: "fig-figure4"
#
# The paper's Figure 4: left, the cone $\mathcal I_i(\eta)$ (green) inside its cell (grey); right, the
# eroded cone $\mathcal I_i(\eta)\ominus\delta B_1$ (magenta), with $\eta=0.05$ and
# $\delta=0.03$ as in the published file.
# ```
#
# The eroded cone keeps {glue:text}`f4_ratio:.3f` of the area of the cone with $\delta=0.03$
# and {glue:text}`f4b_ratio:.3f` with the captioned $\delta=0.02$. Rasterised, the published
# file's magenta-to-green pixel ratio matches the first value; this is tested in
# `tests/test_paper_figures.py`.
#
# To regenerate any of these figures with other parameters, for a paper:
# `python -m attention_fw.paper_figures figure2 --kappas 6 --seed 7`. The files go to
# `figures/custom/` unless `--outdir` is given, and the numbers behind each figure go to
# `data/<name>.json`.

# %% [markdown]
# ## Convergence to the vertices (Theorem 4.2) and the ODE limit (Theorem 4.8)
#
# The convergence plots for Theorem 4.2 and the Euler-to-ODE check of Theorem 4.8 follow.
