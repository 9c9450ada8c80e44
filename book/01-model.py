# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# (model)=
# # The model
#
# Trivial pipeline check {cite}`alcalde2025attention`: $x_i^{t+1} = x_i^t + \gamma (y_i^t - x_i^t)$.
# The answer is {glue:text}`answer`.

# %% tags=["parameters"]
preset = "paper"
steps = None

# %%
from myst_nb import glue
from attention_fw.presets import resolve
p = resolve({"paper": {"steps": 10}, "quick": {"steps": 2}}, preset, steps=steps)
glue("answer", 6 * 7 + p.steps * 0, display=False)

# %% [markdown]
# ```{bibliography}
# ```
