"""The book's own layer on top of the library ``attention_fw`` (not needed to use the library).

Modules
-------
  paths           every path of the project, anchored on the repository root
  figures         figure style, venue styles and the single atomic, reproducible ``save``
  notebook        how a chapter saves, glues and describes a figure and quotes a number
  presets         the named parameter sets of the notebooks
  sweeps          parameter grids over an executor, cached on disk
  paper_figures   the paper's Figures 1-4 from exact geometry (also a command line)
"""

__all__: list[str] = []
