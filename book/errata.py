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
# (errata)=
# # Errata (placeholder while the chapters are written)

# %% tags=["parameters"]
preset = "paper"

# %%
from attention_fw.presets import resolve
p = resolve({"paper": {}, "quick": {}}, preset)
