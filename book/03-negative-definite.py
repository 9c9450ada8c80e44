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
# # Negative definite key–query (section 3)
#
# :::{warning}
# PLACEHOLDER on the `book` branch so that the book builds and links resolve. The real chapter
# is written on another branch and replaces this file when the branches are merged.
# :::

# %% tags=["parameters"]
preset = "paper"

# %%
from attention_fw.presets import resolve

p = resolve({"paper": {}, "quick": {}}, preset)
