"""JupyterLab configuration for `make lab` (passed with --config; nothing is installed elsewhere).

* The lab serves the repository root and opens on book/; settings/overrides.json makes a
  double click (or a /lab/tree/book/NN-name.py link) open a chapter as a Jupytext notebook,
  saved back to the .py (see jupytext.toml at the root), and turns off the news and update
  checks, which would reach the network.
* Checkpoints ("File > Revert to checkpoint") are kept under _build/lab-checkpoints/, mirroring
  the folders, instead of in an .ipynb_checkpoints/ folder beside each file: running and saving
  a chapter leaves no new file in book/.
* The port is exactly the one asked for (make lab PORT=...), so the printed URL is the right one.
"""
import os
from pathlib import Path

from jupyter_server.services.contents.filecheckpoints import AsyncFileCheckpoints

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


class BuildFolderCheckpoints(AsyncFileCheckpoints):
    """File checkpoints of <folder>/<name>.<ext> in _build/lab-checkpoints/<folder>/."""

    def checkpoint_path(self, checkpoint_id, path):
        parent, _, name = path.strip("/").rpartition("/")
        basename, ext = os.path.splitext(name)
        folder = ROOT / "_build" / "lab-checkpoints" / parent
        folder.mkdir(parents=True, exist_ok=True)
        return str(folder / f"{basename}-{checkpoint_id}{ext}")


c = get_config()  # noqa: F821 (provided by traitlets when the file is loaded)
c.ServerApp.root_dir = str(ROOT)
c.ServerApp.port_retries = 0
# Containers and CI run as root; the lab still listens on localhost only.
c.ServerApp.allow_root = True
c.LabApp.default_url = "/lab/tree/book"
c.LabApp.app_settings_dir = str(HERE / "settings")
# The extension manager would query PyPI; the lab's extensions are the pinned ones.
c.LabApp.extension_manager = "readonly"
c.AsyncFileContentsManager.checkpoints_class = BuildFolderCheckpoints
