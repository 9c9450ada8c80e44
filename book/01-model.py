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
# (`attention_fw.dynamics`); this page only calls it and plots.
#
# :::{note}
# The paper's body could not be read directly (see the provenance notes in the
# {ref}`errata <errata>`). Equation (1.2) was not found in any source and is not reproduced;
# the printed form of (1.3) is reconstructed and marked as such below.
# :::

# %% tags=["parameters"]
preset = "paper"
n = None          # tokens per configuration
configs = None    # random configurations for the beta -> infinity limit
steps = None      # layers t for the beta -> infinity limit
h = None          # value matrix V is h times I, hence gamma is h/(1+h)
betas = None      # inverse temperatures for the limit
gamma = None      # step of (SA-beta) / (SAP)
beta_mc = None    # inverse temperature of the Monte Carlo check
samples = None    # Monte Carlo samples of one (SAP) step
seed = None       # seed of every random draw on this page

# %%
import numpy as np

from attention_fw.presets import resolve

PRESETS = {
    "paper": dict(n=8, configs=64, steps=5, h=0.25, betas=[float(b) for b in np.logspace(0, 3, 31)],
                  gamma=0.3, beta_mc=2.0, samples=400_000, seed=20250813),
    "quick": dict(n=6, configs=8, steps=5, h=0.25, betas=[1.0, 3.0, 10.0, 30.0, 100.0, 1000.0],
                  gamma=0.3, beta_mc=2.0, samples=4_000, seed=20250813),
}
p = resolve(PRESETS, preset, n=n, configs=configs, steps=steps, h=h, betas=betas, gamma=gamma,
            beta_mc=beta_mc, samples=samples, seed=seed)

# %%
import matplotlib.pyplot as plt
from IPython.display import HTML, display
from myst_nb import glue

from attention_fw import dynamics as dyn
from attention_fw import plotting
from attention_fw.animate import frames_view, trajectory_animation

# %matplotlib inline
# %config InlineBackend.figure_formats = ["retina"]
plotting.use_style()
rng = np.random.default_rng(p.seed)

# %% [markdown]
# ## The layer (1.1) and its renormalisation (1.3)
#
# The self-attention layer (1.1) is $x_i^{t+1}=x_i^t+V^t\sum_j A^t_{ij}x_j^t$. The paper
# replaces LayerNorm by the proxy $R^t=I_d+V^t$ and adopts the renormalised layer (1.3):
#
# $$
# x_i^{t+1}=(R^t)^{-1}\Big(x_i^t+V^t\sum_j A^t_{ij}x_j^t\Big)
# \quad\Longleftrightarrow\quad
# x_i^{t+1}=x_i^t+P^t\Big(\sum_j A^t_{ij}x_j^t-x_i^t\Big),\qquad P^t=(I_d+V^t)^{-1}V^t .
# $$
#
# That is, one layer (1.1) followed by the rescaling $(R^t)^{-1}$. The right-hand form is the
# one transcribed in the Lean formalization; the left-hand $R^t$ form is reconstructed from a
# review of the paper (uncertain as a printed form). The
# two are algebraically identical, since $(I+V)^{-1}(x+VAx)=x+(I+V)^{-1}V(Ax-x)$. Numerically,
# for a random non-symmetric $V$, $B$ and $\beta=$ {glue:text}`ch1-beta-check`, the two forms
# differ by at most {glue:text}`ch1-R-vs-P:.1e` over all tokens.

# %%
d = 2
x = rng.standard_normal((p.n, d))
Vm = rng.standard_normal((d, d))
Bm = rng.standard_normal((d, d))
beta_check = 1.5
A = dyn.attention(x, Bm, beta_check)
r_form = np.linalg.solve(np.eye(d) + Vm, (x + (A @ x) @ Vm.T).T).T  # R-form
p_form = dyn.layer_step(x, beta_check, Bm, Vm)                     # P-form
glue("ch1-beta-check", beta_check, display=False)
glue("ch1-R-vs-P", float(np.abs(r_form - p_form).max()), display=False)

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
# $P_{11}=$ {glue:text}`ch1-P-11:.4f`, i.e. $P=\gamma I$ with $\gamma=h/(1+h)$ (largest
# entrywise deviation {glue:text}`ch1-P-err:.1e`).

# %%
P = dyn.preconditioner(p.h * np.eye(d))
glue("ch1-h", p.h, display=False)
glue("ch1-P-11", float(P[0, 0]), display=False)
glue("ch1-P-err", float(np.abs(P - p.h / (1 + p.h) * np.eye(d)).max()), display=False)

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
# {glue:text}`ch1-err-first:.2e` at $\beta=$ {glue:text}`ch1-beta-first:.3g` and
# {glue:text}`ch1-err-mid:.2e` at $\beta=$ {glue:text}`ch1-beta-mid:.3g`; at $\beta=$
# {glue:text}`ch1-beta-last:.3g`, {glue:text}`ch1-agree` of the {glue:text}`ch1-configs`
# configurations agree with the hardmax to $10^{-12}$, but the worst one is still off by
# {glue:text}`ch1-err-worst:.2f`. What sets the speed is the smallest gap $\Delta$ between
# the best and the second-best score met along the hardmax trajectory: a leader chosen by a
# margin $\Delta$ gets all but a fraction of order $e^{-\beta\Delta}$ of the softmax weight.
# Plotted against $\beta\Delta$ (right panel) the errors follow one exponential. The dashed
# line $C\,e^{-\beta\Delta}$ uses $C=$ {glue:text}`ch1-err-const:.1f`, the largest
# $\operatorname{err}\,e^{\beta\Delta}$ over the plotted points with $\beta\Delta>10$, so these points
# lie under it by construction. As a check that is not circular, the constant fitted in the same
# way on half of the configurations is {glue:text}`ch1-err-const-half:.1f`, and
# {glue:text}`ch1-err-held-in` of the {glue:text}`ch1-err-held-n` points of the other half with
# $\beta\Delta>10$ lie under its line.
# Random configurations occasionally have a small $\Delta$ (here as small as
# {glue:text}`ch1-gap-min:.1e`), which is why the worst case converges so late; Lemma 2.1
# ({doc}`02-frank-wolfe`) says $\Delta>0$ almost surely, not that it is large.

# %%
def score_gap(x, t):
    """Smallest margin between the best and the second-best score, per configuration."""
    S = np.sort(dyn.scores(x), axis=-1)
    return (S[..., -1] - S[..., -2]).min(axis=-1)


X0 = rng.standard_normal((p.configs, p.n, d))
I2 = np.eye(d)
gaps = dyn.FunctionRecorder("gap", score_gap)
hard = dyn.simulate(X0, dyn.Layer(np.inf, I2, p.h * I2), p.steps, recorders=[gaps]).x
Delta = gaps.result()[:-1].min(axis=0)                                           # (configs,), layers 0..t-1
errors = np.array([np.linalg.norm(dyn.simulate(X0, dyn.Layer(b, I2, p.h * I2), p.steps).x - hard,
                                  axis=-1).max(axis=-1) for b in p.betas])      # (len(betas), configs)
floor = 1e-16
med, worst = np.median(errors, axis=1), errors.max(axis=1)
bD = np.array(p.betas)[:, None] * Delta[None, :]
far = bD > 10
const = float((errors[far] * np.exp(bD[far])).max()) if far.any() else float("nan")

# %% tags=["hide-input"]
fig, (ax, ax2) = plt.subplots(1, 2, figsize=(plotting.TWO_COLUMN, 2.6))
ax.loglog(p.betas, np.maximum(med, floor), "o-", ms=3, label="median over configurations")
ax.loglog(p.betas, np.maximum(worst, floor), "s--", ms=3, color="C3", label="worst configuration")
ax.axhline(floor, color="0.6", lw=0.8, ls=":")
ax.set_xlabel(r"inverse temperature $\beta$")
ax.set_ylabel(r"$\max_i\|x_i^t(\beta)-x_i^t(\infty)\|$")
ax.set_title(f"(1.3) against (SA$\\infty$) after t = {p.steps} layers", fontsize=8)
ax.legend(frameon=False, fontsize=7)
ax2.semilogy(bD.ravel(), np.maximum(errors.ravel(), floor), ".", ms=2, color="C0", alpha=0.5)
xs = np.linspace(10, max(bD.max(), 10), 200)
if np.isfinite(const):
    ax2.semilogy(xs, np.maximum(const * np.exp(-xs), floor), "k--", lw=0.8, label=f"{const:.1f} exp($-\\beta\\Delta$)")
    ax2.legend(frameon=False, fontsize=7)
ax2.set_xlim(0, min(bD.max(), 60))
ax2.set_ylim(floor / 2, 10)
ax2.set_xlabel(r"$\beta\Delta$ ($\Delta$: smallest score gap of the configuration)")
glue("fig-ch1-beta-limit", fig, display=False)
_ = plotting.save(fig, "ch1-beta-limit", {"betas": p.betas, "median": med, "worst": worst, "Delta": Delta,
                                          "errors": errors, "steps": p.steps, "n": p.n, "h": p.h})
for name, value in [("configs", p.configs), ("n", p.n), ("steps", p.steps)]:
    glue(f"ch1-{name}", value, display=False)
glue("ch1-err-first", float(med[0]), display=False)
glue("ch1-beta-first", p.betas[0], display=False)
glue("ch1-beta-last", p.betas[-1], display=False)
mid = int(np.argmin(np.abs(np.log(np.array(p.betas) / 10.0))))       # the beta closest to 10
glue("ch1-err-mid", float(med[mid]), display=False)
glue("ch1-beta-mid", p.betas[mid], display=False)
glue("ch1-agree", int((errors[-1] < 1e-12).sum()), display=False)
glue("ch1-err-worst", float(worst[-1]), display=False)
glue("ch1-err-const", const, display=False)
fit_half = far & (np.arange(p.configs) % 2 == 0)[None, :]           # fit C on even configurations,
held = far & ~fit_half                                               # test it on the odd ones
const_half = float((errors[fit_half] * np.exp(bD[fit_half])).max()) if fit_half.any() else float("nan")
glue("ch1-err-const-half", const_half, display=False)
glue("ch1-err-held-in", int((errors[held] <= const_half * np.exp(-bD[held])).sum()), display=False)
glue("ch1-err-held-n", int(held.sum()), display=False)
glue("ch1-gap-min", float(Delta.min()), display=False)

# %% [markdown]
# ```{glue:figure} fig-ch1-beta-limit
# :name: fig-ch1-beta-limit
#
# The $\beta\to\infty$ limit of the renormalised layer (1.3). Left: distance after $t$ layers
# between the finite-$\beta$ tokens and the hardmax tokens, from the same initial data. Right:
# the same errors, one dot per configuration and $\beta$, against $\beta\Delta$. Values below
# $10^{-16}$ are drawn on the floor (equal in double precision).
# File: `figures/ch1-beta-limit.{pdf,png,svg}`.
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
# to {glue:text}`ch1-E8-wrong:.3f`, but agrees with an (SAβ) step of size
# $\gamma/(1+\gamma)=$ {glue:text}`ch1-E8-step:.4f` to {glue:text}`ch1-E8-right:.1e`; the value
# matrix that does give (SAβ) is $V=\frac{\gamma}{1-\gamma}I$ (agreement
# {glue:text}`ch1-E8-fix:.1e`). The book implements the displayed formula, with $\gamma$ the
# convex weight.

# %%
x = rng.uniform(-1, 1, (p.n, d))
sa_beta = dyn.softmax_step(x, p.gamma, p.beta_mc)
with_V_gamma = dyn.layer_step(x, p.beta_mc, I2, p.gamma * I2)
glue("ch1-gamma", p.gamma, display=False)
glue("ch1-E8-wrong", float(np.abs(with_V_gamma - sa_beta).max()), display=False)
glue("ch1-E8-step", p.gamma / (1 + p.gamma), display=False)
glue("ch1-E8-right", float(np.abs(with_V_gamma - dyn.softmax_step(x, p.gamma / (1 + p.gamma), p.beta_mc)).max()),
     display=False)
glue("ch1-E8-fix", float(np.abs(dyn.layer_step(x, p.beta_mc, I2, p.gamma / (1 - p.gamma) * I2) - sa_beta).max()),
     display=False)

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
# {glue:text}`ch1-samples:,.0f` independent steps from the same tokens ($\beta=$
# {glue:text}`ch1-beta-mc`, $\gamma=$ {glue:text}`ch1-gamma`): the sample mean differs from the
# (SAβ) step by at most {glue:text}`ch1-mc-err:.1e`, and the largest deviation in units of
# the standard error is {glue:text}`ch1-mc-z:.2f` over the {glue:text}`ch1-mc-coords`
# coordinates ({numref}`fig-ch1-sap`: error bars in the middle; on the right the error
# shrinks like $M^{-1/2}$).

# %%
x = np.array([[-0.6, 0.5], [0.7, 0.6], [0.1, -0.7], [-0.8, -0.4], [0.5, -0.1]])   # five fixed tokens
target = dyn.softmax_step(x, p.gamma, p.beta_mc)
chain_rng = np.random.default_rng(p.seed + 1)
sums = np.zeros_like(x)
sq = np.zeros_like(x)
checkpoints, errs, done = [], [], 0
while done < p.samples:                                  # batches double: checkpoints 1000, 2000, 4000, ...
    m = min(max(done, min(1000, p.samples)), p.samples - done, 100_000)
    Y = dyn.sap_step(np.broadcast_to(x, (m,) + x.shape), p.gamma, p.beta_mc, rng=chain_rng)  # (m, n, d)
    sums += Y.sum(0)
    sq += (Y ** 2).sum(0)
    done += m
    checkpoints.append(done)
    errs.append(np.abs(sums / done - target).max())
mean = sums / done
se = np.sqrt(np.maximum(sq / done - mean ** 2, 0) / done)
z = np.abs(mean - target) / np.where(se > 0, se, np.inf)
glue("ch1-samples", p.samples, display=False)
glue("ch1-beta-mc", p.beta_mc, display=False)
glue("ch1-mc-err", float(np.abs(mean - target).max()), display=False)
glue("ch1-mc-z", float(z.max()), display=False)
glue("ch1-mc-coords", int(z.size), display=False)
glue("ch1-mc-within", int((z <= 2).sum()), display=False)

# %% tags=["hide-input"]
A = dyn.attention(x, None, p.beta_mc)
fig, (ax, ax3, ax2) = plt.subplots(1, 3, figsize=(plotting.TWO_COLUMN, 3.1), layout="constrained",
                                   gridspec_kw={"width_ratios": [1.1, 0.9, 1]})
i = 0
dest = (1 - p.gamma) * x[i] + p.gamma * x                      # the n possible destinations of token i
for j in range(len(x)):
    ax.plot([x[i, 0], x[j, 0]], [x[i, 1], x[j, 1]], color="0.85", lw=0.6, zorder=1)
ax.scatter(x[:, 0], x[:, 1], s=30, c="k", zorder=3, label="tokens $x_j$")
ax.scatter(dest[:, 0], dest[:, 1], s=900 * A[i], facecolors="none", edgecolors="C0", zorder=2,
           label=r"SAP destinations of $x_1$ (area $\propto A_{1j}$)")
ax.scatter(*target[i], marker="*", s=120, c="C3", zorder=4, label=r"one SA$\beta$ step of $x_1$")
ax.scatter(*mean[i], marker="x", s=60, c="C2", zorder=5, label="Monte Carlo mean of SAP")
ax.annotate("$x_1$", x[i], textcoords="offset points", xytext=(-14, 6))
ax.set_aspect("equal")
ax.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.04), ncol=1, frameon=False)
ax.set_xticks([])
ax.set_yticks([])
ax.set_title(r"one step of token $x_1$", fontsize=8)
labels = [f"$x_{{{k + 1},{c + 1}}}$" for k in range(len(x)) for c in range(d)]
pos = np.arange(x.size)
ax3.errorbar(pos, (mean - target).ravel(), yerr=2 * se.ravel(), fmt="o", ms=3, capsize=2, color="C2")
ax3.axhline(0, color="C3", lw=1)
ax3.set_xticks(pos, labels, fontsize=6, rotation=90)
ax3.set_title(r"MC mean $-$ SA$\beta$ step, $\pm2$ s.e.", fontsize=8)
ax3.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
ax2.loglog(checkpoints, errs, "o-", ms=3, label="largest coordinate error")
ref = errs[0] * np.sqrt(checkpoints[0] / np.array(checkpoints, dtype=float))
ax2.loglog(checkpoints, ref, "k:", lw=0.8, label=r"slope $-1/2$")
ax2.set_xlabel("Monte Carlo samples $M$")
ax2.set_title("convergence of the mean", fontsize=8)
ax2.legend(frameon=False, fontsize=7)
glue("fig-ch1-sap", fig, display=False)
_ = plotting.save(fig, "ch1-sap-expectation", {"x": x, "weights_token1": A[i], "sa_beta": target, "mc_mean": mean,
                                               "mc_se": se, "samples": checkpoints, "max_error": errs})

# %% [markdown]
# ```{glue:figure} fig-ch1-sap
# :name: fig-ch1-sap
#
# Left: the possible moves of one token under (SAP), with circle areas proportional to their
# probabilities; their average (green cross, Monte Carlo) is the (SAβ) step (red star).
# Middle: for every coordinate of every token, the Monte Carlo mean minus the (SAβ) step, with
# error bars of two standard errors: {glue:text}`ch1-mc-within` of the {glue:text}`ch1-mc-coords`
# bars contain zero (red), where about 95% are expected. Right: the largest coordinate
# error of the Monte Carlo mean against the number of samples.
# File: `figures/ch1-sap-expectation.{pdf,png,svg}`.
# ```

# %% [markdown]
# ## Watching the dynamics
#
# Motion shows what a still cannot. Under (SA∞) with $B=I_2$ and a constant step, each token
# moves towards its leader; hull vertices that lead themselves stay put, the others are
# pulled inside, and once the leaders have settled every token runs in a straight line to its
# vertex (colours: the final leader). Press play, or drag the slider.

# %%
x0 = rng.uniform(-1, 1, (14, d))
run = dyn.simulate(x0, dyn.Hardmax(0.25), 16, trajectory=True)
leader = dyn.leaders(run.x)
colors = plt.get_cmap("tab10")(np.unique(leader, return_inverse=True)[1] % 10)
display(HTML(trajectory_animation(run.trajectory, colors=colors, title=lambda k: f"(SA$\\infty$), layer t = {k}")))

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
paths = {b: dyn.simulate(x0, dyn.Softmax(0.1, b), 60, trajectory=True).trajectory for b in beta_grid}


def draw_paths(ax, traj, title):
    for k in range(traj.shape[1]):
        ax.plot(traj[:, k, 0], traj[:, k, 1], color=colors[k], lw=0.9)
    ax.scatter(traj[0, :, 0], traj[0, :, 1], s=18, facecolors="none", edgecolors=colors)
    ax.scatter(traj[-1, :, 0], traj[-1, :, 1], s=18, c=colors, edgecolors="k", linewidths=0.4, zorder=3)
    ax.set_xlim(-1.1, 1.1)
    ax.set_ylim(-1.1, 1.1)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize=11)


def draw_beta(ax, b):
    draw_paths(ax, paths[b], f"(SA$\\beta$), $\\beta$ = {b:g}, 60 layers")


display(HTML(frames_view(draw_beta, beta_grid)))

# %% [markdown]
# When you run this notebook yourself (download it with the button at the top of the page),
# the cells below give a live explorer with sliders for $\beta$ and $\gamma$ (it needs
# `ipywidgets` in a running Jupyter kernel; in this static page its output is left out).

# %% tags=["remove-output"]
import ipywidgets as widgets


def live(beta=8.0, gamma=0.1, layers=60):
    traj = dyn.simulate(x0, dyn.Softmax(gamma, beta), layers, trajectory=True).trajectory
    fig, ax = plt.subplots(figsize=(4, 4))
    draw_paths(ax, traj, f"(SA$\\beta$), $\\beta$ = {beta:.3g}, $\\gamma$ = {gamma:.2g}, {layers} layers")
    plt.show()


live()  # one frame, so that the build checks the explorer's code

# %% tags=["remove-output", "skip-execution"]
# Not executed by the book's build (no frontend there, and a widget cell can stall a headless
# run: jupyter/nbclient#312); Jupyter runs it like any other cell.
widgets.interact(live, beta=widgets.FloatLogSlider(value=8.0, base=10, min=-1, max=2.5, step=0.05),
                 gamma=widgets.FloatSlider(value=0.1, min=0.01, max=0.99, step=0.01),
                 layers=widgets.IntSlider(value=60, min=1, max=300));
