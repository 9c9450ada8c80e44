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
# # Real context lengths: who stays put among 65,536 tokens
#
# The paper's statements hold for any number of tokens $n$, but the experiments of the other
# chapters use a few hundred at most. A transformer reads tens of thousands of tokens, and one
# attention head works in dimension $d=64$. This chapter runs one statement of the paper at that
# scale: which tokens *own their cells*, and therefore never move, under the hardmax dynamics
# (SA∞). It is the genericity condition of Theorem 4.2 and the event of Remark 4.6, asked here
# for every one of $n$ random tokens at once rather than for a fixed number $\kappa$ of vertices.
# The answer depends on $n$ and $d$ together. At the size of one head, Gaussian tokens essentially
# all own their cells, and a hardmax layer with $B=I$ leaves them where they are.
#
# :::{admonition} What the paper says, what is true, where this page shows it
# :class: important
# * **Says**: a token that owns its cell never moves under (SA∞) with $B=I$ (Theorem 4.2), and
#   Gaussian vertices own their cells as the dimension grows (Remark 4.6), for any $n$.
# * **True**, computed here at the size of one head: whether a token owns its cell depends on
#   $n$ and $d$ together; at $d=64$ and tens of thousands of tokens essentially every Gaussian
#   token owns its cell, and a hardmax layer leaves those tokens where they are.
# * **Where**: the ownership sweep over $n$ and $d$, then one hardmax run; the tiled steps that
#   make $n=65{,}536$ fit in memory are checked against the untiled ones.
# :::
#
# **Memory.** A step of the library holds the whole $n\times n$ matrix of scores
# $\langle Bx_i,x_j\rangle$. At $n=65{,}536$ that is tens of gigabytes, more than many machines have. The
# module {py:mod}`attention_fw.model.tiled` computes the same steps with the keys in tiles, in memory
# $O(n(d+k))$ for tiles of $k$ keys:
#
# * the softmax step (SAβ) keeps a running maximum and a running sum for each query, as
#   attention kernels on accelerators do;
# * the hardmax step (SA∞) keeps a running leader set, with the library's tie rule (ties between
#   tiles included);
# * the Markov chain (SAP) uses an exact streaming sampler. Each token keeps one pick and
#   replaces it by a draw from a new tile with probability (weight of the tile)/(weight seen so
#   far). The final pick then has exactly the softmax law.
#
# The tiles are blocks of queries times keys small enough to stay in the processor's cache while
# their scores are computed, exponentiated and summed, and the blocks of queries are shared
# between the cores. A memory budget caps them: 256 MiB unless it is changed with
# `tiled.set_memory_budget` or `ATTENTION_FW_MEMORY_BUDGET`. The functions of
# `attention_fw.model.dynamics` switch to the tiles by themselves when their own arrays would not fit,
# so no code changes when $n$ grows. The tests check that the tiled steps agree with the untiled
# ones: softmax to $10^{-12}$ relative, identical leader sets, and the chain's law by chi-square
# tests and by an exact escape probability. `make bench` measures time and memory at $n=65{,}536$.

# %% tags=["parameters", "remove-cell"]
preset = "paper"  # "paper": the book; "quick": seconds (tests)
# Every parameter, once: (type, accepted values, meaning). Each takes the value of the preset unless
# it is given: `make notebook NB=06-context-length ARGS="-p run_n 16384"`, or here a line `run_n = 16384`.
PARAMETERS = {
    "executor": ("str", "", "serial, processes, local-dask or a Dask address"),
    "own_ns": ("list[int]", ">= 4", "numbers of tokens n of the ownership sweep (from 4 on, a dimension "
               "where half the tokens own their cells exists)"),
    "own_dims": ("list[int]", ">= 1", "dimensions d of the ownership sweep"),
    "own_tokens": ("int", ">= 2", "tokens per (n, d): own_tokens // n systems of n"),
    "run_n": ("int", ">= 2", "tokens of the hardmax run"),
    "run_d": ("int", ">= 1", "dimension of the hardmax run"),
    "run_gamma": ("float", "(0, 1)", "constant step of the hardmax run"),
    "run_steps": ("int", ">= 1", "layers of the hardmax run"),
    "check_n": ("int", ">= 2", "tokens (dimension 64) for the check of the tiled steps"),
    "seed": ("int", ">= 0", "seed of every random draw"),
}

# %% tags=["hide-input"]
from afw_book.presets import resolve_declared

PRESETS = {
    "paper": dict(executor="processes", own_ns=[1024, 8192, 65536],
                  own_dims=[10, 15, 20, 25, 32, 64], own_tokens=65536,
                  run_n=65536, run_d=20, run_gamma=0.5, run_steps=5,
                  check_n=4096, seed=0),
    "quick": dict(executor="serial", own_ns=[256, 1024],
                  own_dims=[4, 8, 16, 64], own_tokens=2048,
                  run_n=1024, run_d=12, run_gamma=0.5, run_steps=4,
                  check_n=512, seed=0),
}
p = resolve_declared(PRESETS, preset, PARAMETERS, globals())

import numpy as np

from attention_fw.experiments import context_length as CL
from attention_fw.plot import context as CP
from afw_book import figures as plotting, sweeps
from attention_fw.model import tiled
from afw_book.notebook import Page, fmt

# %matplotlib inline
plotting.use_style()
RUN = dict(executor=p.executor, progress=False)  # no progress bars
HEAD_D = 64
page = Page("06-context-length", p)  # saves and glues figures
page.parameters()  # the table "Parameters of this run"

# %% [markdown]
# ## The tiled steps, checked and sized
#
# Before the experiment, one comparison at a size where both versions run:
# {glue:text}`check_n` tokens in $d=64$, with tiles of 256 keys.

# %%
rng = page.stream("tiled-check")
check = CL.tiled_check(p.check_n, HEAD_D, key_tile=256, rng=rng)
big = CL.step_memory(p.run_n, HEAD_D)
print(f"softmax step, tiled against untiled: {check.softmax_error:.1e}")
print(f"the same leaders: {check.same_leaders}")
untiled, tile = CL.size_text(big.untiled_bytes), CL.size_text(big.tile_bytes)
print(f"n = {big.n:,}: untiled scores {untiled}")
print(f"tiled: blocks of {big.tile_queries:,} tokens x {big.tile_keys:,} keys, "
      f"{tile} each, {big.workers} at a time")

# %% tags=["hide-input"]
page.glue(
    check_n=p.check_n, check_soft=(check.softmax_error, ".1e"),
    check_leaders="the same" if check.same_leaders else "NOT the same", big_n=big.n,
    big_untiled=untiled, big_tiles=big.tiles, big_tile=tile,
    big_tile_keys=big.tile_keys, big_tile_queries=big.tile_queries,
    big_workers=f"{big.workers} block{'s' if big.workers != 1 else ''}",
    budget=CL.size_text(tiled.memory_budget()),
)

# %% [markdown]
# The two softmax steps differ by {glue:text}`check_soft` relative to the size of the tokens
# (rounding), and the leaders are {glue:text}`check_leaders`. For the
# {glue:text}`big_n` tokens below, the untiled score matrix would take
# {glue:text}`big_untiled`. The tiled steps compare {glue:text}`big_tile_queries` tokens with
# {glue:text}`big_tile_keys` keys at a time, {glue:text}`big_tile` of scores per block and
# {glue:text}`big_workers` at once (the default budget of {glue:text}`budget` is far from reached).
#
# ## Which tokens own their cells?
#
# Take $B=I_d$ and $n$ tokens drawn independently from $\mathcal N(0,I_d)$. Token $i$ owns its
# cell when it is its own unique leader:
#
# $$
# \langle x_i,x_i\rangle>\langle x_i,x_j\rangle\qquad\text{for every }j\ne i .
# $$
#
# This is the genericity condition of Theorem 4.2. It forces $x_i$ to be
# a vertex of the hull. Remark 4.6 says that $\kappa$ Gaussian vertices all
# own their cells with probability tending to 1 as $d\to\infty$, for $\kappa$ fixed. In a
# transformer, $\kappa$ is replaced by the context length $n$, which is large too.
#
# For one token the probability is exact. Given $x_i$ with $\|x_i\|=r$, the scores
# $\langle x_i,x_j\rangle$, $j\ne i$, are independent $\mathcal N(0,r^2)$ variables, and each one
# is below $r^2$ with probability $\Phi(r)$. Hence
#
# $$
# \mathbb P(\text{token $i$ owns its cell})=\mathbb E\big[\Phi(R)^{\,n-1}\big],\qquad R\sim\chi_d ,
# $$
#
# a one-dimensional integral (`context_length.own_cell_probability`). It is also the expected
# fraction of tokens that own their cells. Since $R\approx\sqrt d$ and the largest of $n$
# standard normal variables is about $\sqrt{2\ln n}$, the fraction drops from near 1 to near 0
# around $d\approx2\ln n$. That threshold grows with the context length.
#
# The sweep below draws {glue:text}`own_tokens` tokens for every $n$ and $d$ (as
# `own_tokens`$/n$ independent sequences), finds every leader with the tiled steps, and compares
# the fraction of owners with the integral.

# %%
grid = sweeps.grid(n=p.own_ns, d=p.own_dims)
for g in grid:
    g["systems"] = max(1, p.own_tokens // g["n"])
own = sweeps.run(CL.ownership_task, grid, seed=p.seed, **RUN)  # one stream per (n, d)
for r in own:
    print(f"n = {r.n:6,d}, d = {r.d:2d}: {r.owners:6,d} of "
          f"{r.tokens:,} own their cells ({r.fraction:.4f}; "
          f"exact {r.probability:.4f})")

# %% tags=["hide-input"]
alpha = 0.05 / len(own)  # 5% over all points (Bonferroni)
p_min = min(r.pvalue for r in own)
several = [
    r
    for r in own
    if r.systems >= 8 and min(r.probability, 1 - r.probability) * r.n >= 10
]
by_n = {}
for r in several:
    by_n.setdefault(r.n, []).append(r)
if by_n:
    factors = [
        f"{fmt(CL.variance_ratio(rs), '.1f')} times (n = {n:,})"
        for n, rs in sorted(by_n.items())
    ]
    ratio_text = (
        "pooled over the points with 8 or more sequences, the owner counts of the "
        "sequences vary "
        + " and ".join(factors)
        + " as much as binomial counts would, so binomial standard "
        "errors are off by the square root of that factor"
    )
else:
    ratio_text = "no point here has the 8 or more sequences it takes"
top = max(own, key=lambda r: (r.n, r.d))
head_owned = (
    f"all {fmt(top.tokens)} tokens own their cells"
    if top.owners == top.tokens
    else f"{fmt(top.owners)} of the {fmt(top.tokens)} tokens own their cells"
)
page.glue(
    own_tokens=p.own_tokens, own_points=len(own), own_pmin=(p_min, ".2g"),
    own_alpha=(alpha, ".2g"),
    own_agree="agree" if p_min >= alpha else "do NOT all agree",
    own_ratio_text=ratio_text, own_nmax=top.n, head_owned=head_owned, head_d=top.d,
    head_expected_non_owners=(top.tokens * (1 - top.probability), ".2g"),
    head_pairs=(float(top.n * (top.n - 1)), ".1e"),
)
n_lo, n_hi = min(p.own_ns), max(p.own_ns)
page.glue(
    n_lo=f"{n_lo:,}", n_hi=f"{n_hi:,}", d_half_lo=(CL.half_dimension(n_lo), ".1f"),
    d_half_hi=(CL.half_dimension(n_hi), ".1f"), two_log_lo=(2 * np.log(n_lo), ".1f"),
    two_log_hi=(2 * np.log(n_hi), ".1f"),
)
fig = CP.fig_ownership(own, head_d=HEAD_D)
page.figure(
    fig,
    "ctx-ownership",
    statement="Theorem 4.2 (genericity condition), Remark 4.6",
    caption="Fraction of n Gaussian tokens that own their cells under the hardmax, "
    "against the dimension, for several context lengths n",
)

# %% [markdown]
# ```{glue:figure} fig-ctx-ownership
# :name: fig-ctx-ownership
#
# Fraction of $n$ Gaussian tokens that own their cells under the hardmax with $B=I_d$, against
# the dimension. Lines: the exact probability $\mathbb E[\Phi(R)^{n-1}]$, $R\sim\chi_d$. Dots:
# the tiled steps on sampled tokens (bars: two binomial standard errors). Dotted: the dimension where the
# probability is $1/2$. Grey: $d=64$, the dimension of one attention head.
# ```
#
# The sampled fractions {glue:text}`own_agree` with the integral: the smallest exact binomial
# p-value over the {glue:text}`own_points` points is {glue:text}`own_pmin`, against the level
# {glue:text}`own_alpha` that a 5% test over all of them calls for (Bonferroni). The binomial
# treats the tokens as independent, and the tokens of one sequence are not: they compete for the
# same hull. `context_length.variance_ratio` measures that dependence where a point has several
# sequences: {glue:text}`own_ratio_text`.
#
# The probability is $1/2$ at
# $d\approx$ {glue:text}`d_half_lo` for $n=$ {glue:text}`n_lo` and at $d\approx$ {glue:text}`d_half_hi`
# for $n=$ {glue:text}`n_hi`. The rough rule $2\ln n$ gives {glue:text}`two_log_lo` and
# {glue:text}`two_log_hi`: it overestimates a little, but it has the right growth.
# In $d=$ {glue:text}`head_d`, {glue:text}`head_owned`. The expected number of tokens that do
# not is {glue:text}`head_expected_non_owners`.
#
# ### Remark 4.6 at the size of one head, against $n$
#
# With $\kappa$ fixed, Remark 4.6's union bound needs $\kappa(\kappa-1)$ ordered pairs to be in
# order. At $n=$ {glue:text}`n_hi` tokens, {glue:text}`head_pairs` ordered pairs are at stake. The
# expected number of tokens that do not own their cells is $\mu=n\,(1-\mathbb E[\Phi(R)^{n-1}])$,
# and all $n$ own their cells with probability at least $1-\mu$ (the union bound, exact), about
# $e^{-\mu}$ if the non-owners are rare and nearly independent (Poisson). The table below computes
# both in $d=$ {glue:text}`head_line_d` for growing $n$, with the margin $\sqrt d-\sqrt{2\ln n}$:
# a token's own score $\|x_i\|^2$ is about $\sqrt d$ standard deviations of a rival's score
# $\langle x_i,x_j\rangle$, and the largest of its $n-1$ rivals' scores about $\sqrt{2\ln n}$ of them.

# %% tags=["hide-input"]
ns_line = sorted({2 ** k for k in range(10, 25, 2)} | set(p.own_ns))
mu_line = np.array(ns_line) * (1 - CL.own_cell_probability(ns_line, HEAD_D))
margin_line = np.sqrt(HEAD_D) - np.sqrt(2 * np.log(ns_line))
print(f"d = {HEAD_D}: {'n':>12s} {'E[non-owners]':>14s} {'P(all own) >=':>14s} "
      f"{'~ exp(-mu)':>11s} {'margin':>7s}")
for n_, mu_, m_ in zip(ns_line, mu_line, margin_line):
    print(f"{'':7s}{n_:12,d} {mu_:14.3g} {max(0.0, 1 - mu_):14.3f} "
          f"{np.exp(-mu_):11.3g} {m_:7.2f}")

# %% tags=["hide-input"]
at_hi = ns_line.index(n_hi)


def non_owners(n):
    return n * (1 - CL.own_cell_probability(n, HEAD_D))


# where the expected number of non-owners passes 1 at d = 64 (it grows with n):
# bisection in log n
lo_n, hi_n = 2.0, 2.0 ** 40
for _ in range(100):
    mid = np.sqrt(lo_n * hi_n)
    lo_n, hi_n = (mid, hi_n) if non_owners(mid) < 1 else (lo_n, mid)
owned_hi = next((r for r in own if r.n == n_hi and r.d == HEAD_D), None)
if owned_hi is None:
    sample = f"the sweep above has no point at d = {HEAD_D}"
else:
    k_ = owned_hi.systems
    sample = (f"the sweep above at n = {n_hi:,}, d = {HEAD_D} found "
              f"{owned_hi.tokens - owned_hi.owners:,} non-owners in {k_:,} "
              f"sequence{'s' if k_ != 1 else ''} of {n_hi:,} tokens, "
              f"{'a draw' if k_ == 1 else 'draws'} of this law")
mu_hi = mu_line[at_hi]
page.glue(
    head_line_d=HEAD_D, head_mu=(mu_hi, ".2g"),
    head_all_lo=(max(0.0, 1 - mu_hi), ".2f"),
    head_all_poisson=(np.exp(-mu_hi), ".2f"),
    head_margin=(margin_line[at_hi], ".1f"), head_sqrt_d=(np.sqrt(HEAD_D), ".0f"),
    head_n_one=(float(hi_n), ".1e"),
    head_mu_20=(mu_line[ns_line.index(2 ** 20)], ".2g"),
    head_mu_24=(mu_line[ns_line.index(2 ** 24)], ".2g"),
    head_margin_24=(margin_line[ns_line.index(2 ** 24)], ".1f"),
    head_sample=sample,
)

# %% [markdown]
# At $n=$ {glue:text}`n_hi` and $d=$ {glue:text}`head_line_d`, $\mu=$ {glue:text}`head_mu`: all
# tokens own their cells with probability at least {glue:text}`head_all_lo` (about
# {glue:text}`head_all_poisson`); {glue:text}`head_sample`. This is Remark 4.6 with more
# competitors, not a stronger form of it: at fixed $d$ the expected number of non-owners grows
# with $n$, passes 1 near $n\approx$ {glue:text}`head_n_one`, and is {glue:text}`head_mu_20` at
# $n=2^{20}$ and {glue:text}`head_mu_24` at $n=2^{24}$. The margin that keeps the tokens in order is
# $\sqrt d-\sqrt{2\ln n}$, {glue:text}`head_margin` at $n=$ {glue:text}`n_hi` and
# {glue:text}`head_margin_24` at $n=2^{24}$, not of order $\sqrt d=$ {glue:text}`head_sqrt_d`:
# the context length eats into it like $\sqrt{2\ln n}$.
#
# ## Owners never move; the others run straight to an owner
#
# A token that owns its cell is its own leader, so a hardmax step leaves it exactly in place.
# It keeps owning its cell at every later layer. Indeed, every other token moves to a convex
# combination of current tokens, so the largest value of $\langle x_i,\cdot\rangle$ over the new
# hull is still $\|x_i\|^2$, attained at $x_i$ alone. **The tokens that never move are exactly
# the owners at $t=0$.**
#
# A token whose leader $v$ owns its cell moves on the segment towards $v$. Since cells are
# convex, it stays in the cell of $v$, so $v$ remains its leader. Theorem 4.2's closed form then
# holds exactly:
#
# $$
# x_i^t=v+(1-\gamma)^t\,(x_i^0-v) .
# $$
#
# We check both statements at full size: {glue:text}`run_n` tokens in $d=$ {glue:text}`run_d`,
# where a token owns its cell with probability {glue:text}`run_p`, for
# {glue:text}`run_steps` layers with $\gamma=$ {glue:text}`run_gamma`.

# %%
run_grid = sweeps.grid(n=p.run_n, d=p.run_d, gamma=p.run_gamma,
                       steps=p.run_steps)
run = sweeps.run(CL.hardmax_run_task, run_grid, seed=p.seed, **RUN)[0]
print(f"owners: {run.owners:,}; led by an owner: "
      f"{run.led_by_owner:,}; others: {run.others:,}")
print(f"moved at each layer: {run.moved}")
print(f"never moved: {run.never_moved:,} "
      f"(exactly the owners: {run.never_moved_are_owners})")
error = max(run.closed_form_error)
print(f"largest relative deviation from the closed form: {error:.1e}")

# %% tags=["hide-input"]
page.glue(
    **{
        f"run_{key}": run[key]
        for key in (
            "owners", "led_by_owner", "others", "never_moved", "n", "d", "steps",
            "gamma",
        )
    }
)
lo, hi = min(run["moved"]), max(run["moved"])
page.glue(
    run_moved=fmt(lo) if lo == hi else f"between {fmt(lo)} and {fmt(hi)}",
    run_exact="exactly" if run["never_moved_are_owners"] else "NOT exactly",
    run_cf_err=(max(run["closed_form_error"]), ".1e"),
    run_cf_sentence=(
        "They follow Theorem 4.2's closed form to a relative deviation of "
        f"{fmt(max(run['closed_form_error']), '.1e')}, i.e. to rounding."
        if run["led_by_owner"]
        else "So no token of this run can be compared with Theorem 4.2's "
             "closed form: panel (b) has no ratio to show."),
    run_expected_owners=(run["n"] * run["probability"], ",.0f"),
    run_p=(run["probability"], ".2f"),
)
fig = CP.fig_stay_put(run)
page.figure(
    fig,
    "ctx-stay-put",
    statement="Theorem 4.2 (closed form), hardmax dynamics (SA∞)",
    caption="Hardmax layers on Gaussian tokens: the owners of their cells never move, "
    "the tokens they lead follow the closed form",
)

# %% [markdown]
# ```{glue:figure} fig-ctx-stay-put
# :name: fig-ctx-stay-put
#
# (SA∞) with $B=I_d$ on $n$ Gaussian tokens, through the tiled steps. (a) At each layer the same
# number of tokens moves: those that do not own their cells. (b) Tokens led by a token that owns
# its cell: distance to that leader relative to the start, against $(1-\gamma)^t$, and the
# deviation from Theorem 4.2's closed form (squares, at the level of rounding).
# ```
#
# Of the {glue:text}`run_n` tokens, {glue:text}`run_owners` own their cells (the integral
# predicts {glue:text}`run_expected_owners`), and {glue:text}`run_never_moved` never moved:
# {glue:text}`run_exact` the owners. At each layer, {glue:text}`run_moved` tokens moved.
# {glue:text}`run_led_by_owner` tokens are led by an owner. {glue:text}`run_cf_sentence` The other tokens
# ({glue:text}`run_others` of them) are led by a token that moves itself, so they follow a
# chain of moving leaders.
#
# **What this means for the paper.** The stationary set of the hardmax dynamics with $B=I$ is
# decided at $t=0$ by one comparison per token, and at realistic sizes that comparison is all
# about $d$ against $\ln n$. Below $d\approx2\ln n$ most tokens are pulled to a few large-norm
# tokens, and the picture of Theorem 4.2 (tokens running to the vertices of a fixed hull) is the
# typical behaviour. In $d=64$, Gaussian tokens are almost all vertices that own their cells:
# the hardmax layer with $B=I$ does nothing. Real keys and queries are not isotropic Gaussians,
# and a general $B\succ0$ changes the effective dimension. The same computation with those
# inputs is one call of `context_length.ownership_task` (or of `tiled.leaders` with a matrix `B`).
#
# ## Running it yourself
#
# Every sweep of this chapter is a list of parameter dicts evaluated by
# `afw_book.sweeps.run`, on the local process pool or on a Dask cluster
# (`executor="tcp://scheduler:8786"`), and cached on disk. For example:
#
# ```python
# from afw_book import sweeps
# from attention_fw.experiments import context_length as CL
# from attention_fw.model import tiled
# tiled.set_memory_budget(2 * 2**30)    # allow 2 GiB of scores per step
# params = sweeps.grid(n=[65536, 131072], d=[16, 24, 32, 64], systems=2)
# results = sweeps.run(CL.ownership_task, params, seed=0,  # one stream per (n, d)
#                      executor="local-dask")
# ```
#
# On a cluster, set `ATTENTION_FW_MEMORY_BUDGET` (bytes) in the environment of the workers. Any
# step of `attention_fw.model.dynamics` called on more tokens than the budget allows runs in tiles by
# itself.
