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
# (model)=
# # The model and its limits
#
# Section 1 of {cite:t}`alcalde2025attention` studies self-attention as a particle system:
# $n$ tokens $x_1^t,\dots,x_n^t\in\mathbb R^d$ move from layer $t$ to layer $t+1$, the layer
# index playing the role of time. The model is encoder-only, single-head, with **no MLP**,
# and the tokens live in $\mathbb R^d$ (not on a sphere). With key–query matrix $B^t$, value
# matrix $V^t$ and inverse temperature $\beta>0$, token $i$ attends to token $j$ with weight
#
# $$
# A^t_{ij}=\frac{e^{\beta\langle B^t x_i^t,\,x_j^t\rangle}}{\sum_{k=1}^n e^{\beta\langle B^t x_i^t,\,x_k^t\rangle}},
# $$
#
# the sum running over **all** $k$, the token itself included. This chapter checks each
# form of the dynamics numerically, in the order of the paper: the layer (1.1), its
# renormalised version (1.3), the hardmax limit (SA∞), the finite-$\beta$ dynamics (SAβ)
# and the Markov chain (SAP). Everything is computed by the library `attention_fw`
# ({py:mod}`attention_fw.model.dynamics`, described with the rest in the library reference); this page
# only calls it and plots.
#
# :::{note}
# The paper is quoted through five public sources (a formalization and a reproduction log that
# transcribe its LaTeX source, the authors' figure scripts, the abstracts and a review; the
# {ref}`errata <errata>` page says which statement rests on which). None of them gives
# Equation (1.2), which is not reproduced; the printed form of (1.3) is put together from them
# and marked as such below.
# :::
#
# :::{admonition} What the paper says, what is true, where this page shows it
# :class: important
# * **Says**: the layer (1.1), its renormalised form (1.3) with $P=(I+V)^{-1}V$, the hardmax
#   limit (SA∞) as $\beta\to\infty$, the softmax dynamics (SAβ) and the Markov chain (SAP), one
#   step of which is one (SAβ) step in expectation.
# * **True**, computed here: at finite $\beta$ the layer approaches (SA∞) like
#   $e^{-\beta\Delta}$, $\Delta$ the gap between the best and the second-best score; the mean of
#   one (SAP) step is one (SAβ) step, to Monte Carlo precision.
# * **Careful**: $V=\gamma I_d$ in (1.3) gives the step $\gamma/(1+\gamma)$, not $\gamma$
#   (erratum E8); Equation (1.2) is in no source and is not reproduced.
# * **Where**: sections 1.1 to 1.4 below, in that order.
# :::

# %% tags=["parameters", "remove-cell"]
preset = "paper"  # "paper": the book; "quick": seconds (tests)
# Every parameter, once: (type, accepted values, meaning). Each takes the value of the preset unless
# it is given: `make notebook NB=01-model ARGS="-p steps 20"`, or here a line `steps = 20`.
PARAMETERS = {
    "n": ("int", ">= 2", "tokens per configuration"),
    "configs": ("int", ">= 1", "random configurations for the β → ∞ limit"),
    "steps": ("int", ">= 1", "layers t for the β → ∞ limit"),
    "h": ("float", "> 0", "the value matrix is h times the identity, so γ is h/(1+h)"),
    "betas": ("list[float]", "> 0", "inverse temperatures for the limit"),
    "gamma": ("float", "(0, 1]", "step γ of (SAβ) and (SAP)"),
    "beta_mc": ("float", "> 0", "inverse temperature of the Monte Carlo check"),
    "samples": ("int", ">= 1", "Monte Carlo samples of one (SAP) step"),
    "seed": ("int", ">= 0", "seed of every random draw on this page"),
}

# %% tags=["hide-input"]
import numpy as np

from afw_book.presets import resolve_declared

PRESETS = {
    "paper": dict(n=8, configs=64, steps=5, h=0.25,
                  betas=[float(b) for b in np.logspace(0, 3, 31)],
                  gamma=0.3, beta_mc=2.0, samples=400_000, seed=20250813),
    "quick": dict(n=6, configs=8, steps=5, h=0.25,
                  betas=[1.0, 3.0, 10.0, 30.0, 100.0, 1000.0],
                  gamma=0.3, beta_mc=2.0, samples=4_000, seed=20250813),
}
p = resolve_declared(PRESETS, preset, PARAMETERS, globals())

import matplotlib.pyplot as plt
from IPython.display import HTML, Markdown, display

from attention_fw.model import dynamics as dyn
from attention_fw.experiments import model_checks as mc
from attention_fw.plot import model as mp
from afw_book import figures as plotting
from attention_fw.plot.animate import frames_view, trajectory_animation
from afw_book.notebook import Page, fmt

# %matplotlib inline
# %config InlineBackend.figure_formats = ["retina"]
plotting.use_style()
# saves and glues figures; page.stream(name): an experiment's random stream
page = Page("01-model", p)
page.parameters()  # the table "Parameters of this run"

# %% [markdown]
# ## The layer (1.1) and its renormalisation (1.3)
#
# The self-attention layer (1.1) is $x_i^{t+1}=x_i^t+V^t\sum_j A^t_{ij}x_j^t$. The paper
# replaces LayerNorm by the proxy $R^t=I_d+V^t$ and adopts the renormalised layer (1.3):
#
# $$
# \begin{aligned}
# x_i^{t+1}&=(R^t)^{-1}\Big(x_i^t+V^t\sum_j A^t_{ij}x_j^t\Big)\\
# &=x_i^t+P^t\Big(\sum_j A^t_{ij}x_j^t-x_i^t\Big),\qquad P^t=(I_d+V^t)^{-1}V^t .
# \end{aligned}
# $$
#
# That is, one layer (1.1) followed by the rescaling $(R^t)^{-1}$. The second form is the
# one transcribed in the Lean formalization; the first, with $R^t$, is reconstructed from a
# review of the paper {unconfirmed}`The printed form of (1.3) could not be read: the R-form is reconstructed from a review of the paper; the P-form is transcribed from the Lean formalization.`.
# The two are algebraically identical, since $(I+V)^{-1}(x+VAx)=x+(I+V)^{-1}V(Ax-x)$. Numerically,
# for a random non-symmetric $V$, $B$ and $\beta=$ {glue:text}`ch1-beta-check`, the two forms
# differ by at most {glue:text}`ch1-R-vs-P` over all tokens.

# %%
d, beta_check = 2, 1.5
rng = page.stream("layer-forms")
x = rng.standard_normal((p.n, d))
V, B = rng.standard_normal((d, d)), rng.standard_normal((d, d))
A = dyn.attention(x, beta_check, B)
r_form = np.linalg.solve(np.eye(d) + V, (x + (A @ x) @ V.T).T).T  # R-form
p_form = dyn.layer_step(x, beta_check, B, V)                      # P-form
gap = np.abs(r_form - p_form).max()
page.glue(**{"ch1-beta-check": beta_check, "ch1-R-vs-P": (gap, ".1e")})

# %% [markdown]
# ## The hardmax dynamics (SA∞)
#
# As $\beta\to+\infty$ the weights concentrate on the *leader set*
# $\mathcal C_i^t=\arg\max_j\langle B^tx_i^t,x_j^t\rangle$ (self included), and (1.3) becomes
# $x_i^{t+1}=x_i^t+P^t(\tfrac1{\#\mathcal C_i^t}\sum_{y\in\mathcal C_i^t}y-x_i^t)$. Ties are
# averaged; the library averages over tied *indices*, which is the true limit of the softmax
# (the paper's set-of-points reading differs only when tokens coincide). With $V^t=h^tI_d$ the
# preconditioner is $P^t=\gamma^tI_d$ with $\gamma^t=h^t/(1+h^t)\in(0,1)$, and the dynamics is
# the paper's object of study:
#
# $$
# x_i^{t+1}=x_i^t+\gamma^t\Big(\arg\max_{y\in\mathcal K^t}\langle B^tx_i^t,y\rangle-x_i^t\Big),
# \qquad \mathcal K^t=\operatorname{conv}\{x_1^t,\dots,x_n^t\}. \tag{SA∞}
# $$
#
# With $h=$ {glue:text}`ch1-h`, the preconditioner computed from $V=hI$ is
# $P_{11}=$ {glue:text}`ch1-P-11`, i.e. $P=\gamma I$ with $\gamma=h/(1+h)$ (largest
# entrywise deviation {glue:text}`ch1-P-err`).

# %%
P = dyn.preconditioner(p.h * np.eye(d))
P_err = np.abs(P - p.h / (1 + p.h) * np.eye(d)).max()
page.glue(**{"ch1-h": p.h, "ch1-P-11": (P[0, 0], ".4f"),
             "ch1-P-err": (P_err, ".1e")})

# %% [markdown]
# ### The limit $\beta\to\infty$, measured
#
# Run the renormalised layer (1.3) with $B=I_2$ and $V=hI_2$ from the same initial tokens,
# once for each finite $\beta$ and once with the hardmax, and measure after $t$ layers
#
# $$
# \operatorname{err}_t(\beta)=\max_i\big\|x_i^t(\beta)-x_i^t(\infty)\big\| .
# $$
#
# Over {glue:text}`ch1-configs` random configurations of {glue:text}`ch1-n` Gaussian tokens
# and $t=$ {glue:text}`ch1-steps` layers ({numref}`fig-ch1-beta-limit`), the median error is
# {glue:text}`ch1-err-first` at $\beta=$ {glue:text}`ch1-beta-first` and
# {glue:text}`ch1-err-mid` at $\beta=$ {glue:text}`ch1-beta-mid`; at $\beta=$
# {glue:text}`ch1-beta-last`, {glue:text}`ch1-agree` of the {glue:text}`ch1-configs`
# configurations agree with the hardmax to $10^{-12}$, and the largest error among them all is
# {glue:text}`ch1-err-worst`. What sets the speed is the smallest gap $\Delta$ between
# the best and the second-best score met along the hardmax trajectory: a leader chosen by a
# margin $\Delta$ gets all but a fraction of order $e^{-\beta\Delta}$ of the softmax weight.
# Plotted against $\beta\Delta$ (right panel) the errors follow one exponential (the constant of
# the dashed line is said below the code).
# Random configurations occasionally have a small $\Delta$ (here as small as
# {glue:text}`ch1-gap-min`), which is why the worst case converges so late; Lemma 2.1
# ({doc}`02-frank-wolfe`) says $\Delta>0$ almost surely, not that it is large.

# %%
X0 = page.stream("beta-limit").standard_normal((p.configs, p.n, d))
lim = mc.beta_limit(X0, p.betas, p.h, p.steps)
page.figure(mp.fig_beta_limit(lim), "ch1-beta-limit",
            mp.beta_limit_data(lim, p.n),
            statement="Section 1: the hardmax limit (SA∞) of layer (1.3)",
            caption="Layer (1.3) at finite β converges to the hardmax "
                    "dynamics like $e^{-\\beta\\Delta}$")

# %% tags=["hide-input"]
const_half, held_in, held_n = mc.held_out_constant(lim)
half_spec = ".1f" if const_half >= 1 else ".2g"        # as C, unless small
mid = int(np.argmin(np.abs(np.log(np.array(p.betas) / 10.0))))  # beta ~ 10
page.glue(**{"ch1-configs": p.configs, "ch1-n": p.n, "ch1-steps": p.steps,
             "ch1-err-first": (lim.median[0], ".3g"),
             "ch1-beta-first": (p.betas[0], ".4g"),
             "ch1-err-mid": (lim.median[mid], ".3g"),
             "ch1-beta-mid": (p.betas[mid], ".4g"),
             "ch1-beta-last": (p.betas[-1], ".4g"),
             "ch1-agree": int((lim.errors[-1] < 1e-12).sum()),
             "ch1-err-worst": (lim.worst[-1], ".2g"),
             "ch1-gap-min": (lim.Delta.min(), ".1e")})

# %% tags=["remove-input"]
# what the run allows to say about the constant C (a run may have no point with beta Delta > 10)
if np.isfinite(lim.const):
    said = (f"The dashed line $C\\,e^{{-\\beta\\Delta}}$ uses $C=$ {fmt(lim.const, '.1f')}, the largest "
            "$\\operatorname{err}\\,e^{\\beta\\Delta}$ over the plotted points with $\\beta\\Delta>10$, so these "
            "points lie under it by construction. ")
    if np.isfinite(const_half) and held_n:
        said += (f"As a check that is not circular, the constant fitted in the same way on half of the "
                 f"configurations is {fmt(const_half, half_spec)}, and {held_in} of the {held_n} points of the "
                 "other half with $\\beta\\Delta>10$ lie under its line.")
    else:
        said += ("The check that is not circular (the constant fitted on half of the configurations, tested on "
                 "the other half) is not made here: one of the two halves has no point with "
                 "$\\beta\\Delta>10$.")
else:
    said = (f"No point of this run has $\\beta\\Delta>10$ (the largest is {fmt(lim.bD.max(), '.3g')}), so no "
            "constant $C$ is fitted and no dashed line is drawn; larger values of $\\beta$ would show the "
            "exponential regime.")
display(Markdown(said))

# %% [markdown]
# ```{glue:figure} fig-ch1-beta-limit
# :name: fig-ch1-beta-limit
#
# The $\beta\to\infty$ limit of the renormalised layer (1.3). Left: distance after $t$ layers
# between the finite-$\beta$ tokens and the hardmax tokens, from the same initial data. Right:
# the same errors, one dot per configuration and $\beta$, against $\beta\Delta$. Values below
# $10^{-16}$ are drawn on the floor (equal in double precision).
# ```

# %% [markdown]
# ## Finite $\beta$: (SAβ) and a notation glitch (E8)
#
# Section 5 fixes $B^t\equiv I_d$ and a constant step $\gamma$ and studies
#
# $$
# x_i^{t+1}=(1-\gamma)\,x_i^t+\gamma\sum_{j=1}^n
# \frac{e^{\beta\langle x_i^t,x_j^t\rangle}}{\sum_k e^{\beta\langle x_i^t,x_k^t\rangle}}\,x_j^t .
# \tag{SAβ}
# $$
#
# The paper introduces it by setting "$V^t=\gamma I_d$". Through (1.3) that value matrix gives
# the step $\gamma/(1+\gamma)$, not $\gamma$ (erratum {ref}`E8 <e8>`). With $\gamma=$
# {glue:text}`ch1-gamma`: one layer (1.3) with $V=\gamma I$ differs from one (SAβ) step by up
# to {glue:text}`ch1-E8-wrong`, but agrees with an (SAβ) step of size
# $\gamma/(1+\gamma)=$ {glue:text}`ch1-E8-step` to {glue:text}`ch1-E8-right`; the value
# matrix that does give (SAβ) is $V=\frac{\gamma}{1-\gamma}I$ (agreement
# {glue:text}`ch1-E8-fix`). The book implements the displayed formula, with $\gamma$ the
# convex weight.

# %%
x, I2 = page.stream("sa-beta-vs-layer").uniform(-1, 1, (p.n, d)), np.eye(d)
sa_beta = dyn.softmax_step(x, p.gamma, p.beta_mc)
with_V_gamma = dyn.layer_step(x, p.beta_mc, I2, p.gamma * I2)
shrunk = dyn.softmax_step(x, p.gamma / (1 + p.gamma), p.beta_mc)
# gamma = 1 has no such value matrix (gamma / (1 - gamma) is infinite)
fixed = (dyn.layer_step(x, p.beta_mc, I2, p.gamma / (1 - p.gamma) * I2)
         if p.gamma < 1 else None)
page.glue(**{"ch1-gamma": p.gamma,
             "ch1-E8-wrong": (np.abs(with_V_gamma - sa_beta).max(), ".3f"),
             "ch1-E8-step": (p.gamma / (1 + p.gamma), ".4f"),
             "ch1-E8-right": (np.abs(with_V_gamma - shrunk).max(), ".1e"),
             "ch1-E8-fix": (np.abs(fixed - sa_beta).max(), ".1e") if fixed is not None
             else "none: at γ = 1 no finite value matrix gives (SAβ)"})

# %% [markdown]
# ## The Markov chain (SAP): one step in expectation is one (SAβ) step
#
# The chain (SAP) moves token $i$ to $(1-\gamma)x_i^t+\gamma x_j^t$ with probability
# $A_{ij}$ (independently for each $i$; a self-pick is a no-op):
#
# $$
# \mathbb P\big(x_i^{t+1}=(1-\gamma)x_i^t+\gamma x_j^t\,\big|\,x^t\big)=
# \frac{e^{\beta\langle x_i^t,x_j^t\rangle}}{\sum_k e^{\beta\langle x_i^t,x_k^t\rangle}} .
# \tag{SAP}
# $$
#
# Equivalently, add i.i.d. Gumbel noise to the scores $\beta\langle x_i,x_j\rangle$ and take
# the hardmax {cite:p}`gumbel1954statistical`, hence the paper's "Gumbel trick". Taking the
# conditional expectation, $\mathbb E[x_i^{t+1}\mid x^t]=\sum_jA_{ij}\big((1-\gamma)x_i^t+\gamma
# x_j^t\big)$, which is exactly one (SAβ) step. A Monte Carlo check with
# {glue:text}`ch1-samples` independent steps from the same tokens ($\beta=$
# {glue:text}`ch1-beta-mc`, $\gamma=$ {glue:text}`ch1-gamma`): the sample mean differs from the
# (SAβ) step by at most {glue:text}`ch1-mc-err`, and the largest deviation in units of
# the standard error is {glue:text}`ch1-mc-z` over the {glue:text}`ch1-mc-coords`
# coordinates ({numref}`fig-ch1-sap-expectation`: error bars in the middle; on the right the error
# shrinks like $M^{-1/2}$).

# %%
x = np.array([[-0.6, 0.5], [0.7, 0.6], [0.1, -0.7],   # five fixed tokens
              [-0.8, -0.4], [0.5, -0.1]])
sap = mc.sap_mean(x, p.gamma, p.beta_mc, p.samples,
                  rng=page.stream("sap-mean"))
page.figure(mp.fig_sap_expectation(sap), "ch1-sap-expectation",
            mp.sap_data(sap),
            statement="Section 1: the Markov chain (SAP) and (SAβ)",
            caption="One (SAP) step is one (SAβ) step in expectation: "
                    "Monte Carlo check")

# %% tags=["hide-input"]
page.glue(**{"ch1-samples": (p.samples, ","), "ch1-beta-mc": p.beta_mc,
             "ch1-mc-err": (np.abs(sap.mean - sap.target).max(), ".1e"),
             "ch1-mc-z": (sap.z.max(), ".2f"),
             "ch1-mc-coords": int(sap.z.size),
             "ch1-mc-within": int((sap.z <= 2).sum())})

# %% [markdown]
# ```{glue:figure} fig-ch1-sap-expectation
# :name: fig-ch1-sap-expectation
#
# Left: the possible moves of one token under (SAP), with circle areas proportional to their
# probabilities; their average (green cross, Monte Carlo) is the (SAβ) step (red star).
# Middle: for every coordinate of every token, the Monte Carlo mean minus the (SAβ) step, with
# error bars of two standard errors: {glue:text}`ch1-mc-within` of the {glue:text}`ch1-mc-coords`
# bars contain zero (red), where about 95% are expected. Right: the largest coordinate
# error of the Monte Carlo mean against the number of samples.
# ```

# %% [markdown]
# ## Watching the dynamics
#
# Motion shows what a still cannot. Under (SA∞) with $B=I_2$ and a constant step, each token
# moves towards its leader; hull vertices that lead themselves stay put, the others are
# pulled inside, and once the leaders have settled every token runs in a straight line to its
# vertex (colours: the final leader). Press play, or drag the slider.

# %%
x0 = page.stream("animation").uniform(-1, 1, (14, d))
run = dyn.simulate(x0, dyn.Hardmax(0.25), 16, trajectory=True)
leader = dyn.leaders(run.x)
final = np.unique(leader, return_inverse=True)[1]     # the final leaders
colors = plt.get_cmap("tab10")(final % 10)
title = "(SA$\\infty$), layer t = {}".format
display(HTML(trajectory_animation(run.trajectory, colors=colors,
                                  title=title)))

# %% [markdown]
# ### Explorer: the temperature $\beta$
#
# How does finite $\beta$ change the picture? Each frame of the player below is one
# value of $\beta$: the full (SAβ) trajectories ($B=I_2$, $\gamma=0.1$, 60 layers) from the
# same 14 tokens, with the start as open circles and layer 60 as dots. At small $\beta$ all
# tokens quickly collapse to one point inside the initial hull (Prop 5.1, see the
# finite-$\beta$ chapter); at large $\beta$ they first gather at the vertices, as under
# (SA∞), and stay there for a long time (metastability). These frames are precomputed, so
# they work in this static page.

# %% tags=["hide-input"]
beta_grid = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
paths = {b: dyn.simulate(x0, dyn.Softmax(0.1, b), 60,
                         trajectory=True).trajectory for b in beta_grid}


def draw_beta(ax, b):
    mp.draw_paths(ax, paths[b], colors,
                  f"(SA$\\beta$), $\\beta$ = {b:g}, 60 layers")


display(HTML(frames_view(draw_beta, beta_grid)))

# %% [markdown]
# When you run this notebook yourself (download it with the button at the top of the page),
# the cells below give a live explorer with sliders for $\beta$ and $\gamma$ (it needs
# `ipywidgets` in a running Jupyter kernel; in this static page its output is left out).

# %% tags=["remove-output"]
import ipywidgets as widgets


def live(beta=8.0, gamma=0.1, layers=60):
    run = dyn.simulate(x0, dyn.Softmax(gamma, beta), layers, trajectory=True)
    fig, ax = plt.subplots(figsize=(4, 4))
    mp.draw_paths(ax, run.trajectory, colors,
                  f"(SA$\\beta$), $\\beta$ = {beta:.3g}, "
                  f"$\\gamma$ = {gamma:.2g}, {layers} layers")
    plt.show()


live()  # one frame, so that the build checks the explorer's code

# %% tags=["remove-output", "skip-execution"]
# Not executed by the book's build (there is no frontend to draw the widgets
# there); Jupyter runs it as any other.
widgets.interact(
    live,
    beta=widgets.FloatLogSlider(value=8.0, base=10, min=-1, max=2.5,
                                step=0.05),
    gamma=widgets.FloatSlider(value=0.1, min=0.01, max=0.99, step=0.01),
    layers=widgets.IntSlider(value=60, min=1, max=300));
