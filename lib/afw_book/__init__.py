"""The book's own layer on top of the library ``attention_fw`` (not needed to use the library).

The modules::

    paths           every path of the project, anchored on the repository root
    figures         the single atomic, reproducible ``save`` of a figure and its numbers; ``use_style``
    legibility      what ``save`` checks and repairs: no text under 8 pt, no overlapping texts,
                    no legend or box over data
    notebook        how a chapter saves, glues and describes a figure and quotes a number
    presets         the named parameter sets of the notebooks
    sweeps          parameter grids over an executor, cached on disk
    paper_figures   the paper's Figures 1-4 from exact geometry (also a command line)
    published_pdfs  the comparison with the authors' published PDFs, from committed data
"""

__all__: list[str] = []
