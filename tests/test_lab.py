"""`make lab`: the chapters as working notebooks in JupyterLab, driven in headless Chromium.

Each test starts ``make lab PORT=<free port> NO_BROWSER=1`` in a scratch copy of the
repository (``bookbuild.make_copy``; the ``.venv`` is the project's own), with private Jupyter
config, data and runtime folders and a token of its own, then works through the lab URL as a
reader would:

* ``test_chapter_runs_live_in_the_lab``: ``/lab/tree/book/01-model.py`` opens as a notebook on
  a ``python3`` kernel from the project's ``.venv``; with ``preset = "quick"`` typed into the
  parameters cell, *run all* runs every cell without error, the explorer cell (tagged
  ``skip-execution`` for the build only) included; its sliders render, and dragging the beta
  slider changes both its readout and the plot. Saving writes the edit back to the ``.py`` and
  nothing else; the figures went to ``figures/custom/``; once the server is stopped, every
  process it started (kernels included) has ended and ``book/`` holds the files it held before.
* ``test_downloaded_notebook_runs_in_the_lab``: the notebook the built book offers for download
  (an executed ``.ipynb`` with papermill's injected-parameters cell), saved at the top of the
  clone, runs there unedited; an override added to its injected cell takes effect, as with
  papermill.

Nothing waits a fixed time: every step polls a condition against a generous deadline, and
the server is stopped in a ``finally`` whatever happens. A screenshot of each step is kept in
the test's temporary folder (its path is in the failure message).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

import bookbuild
from cdp import Browser, evaluate, new_tab, screenshot

START_TIMEOUT = 300.0   # make, the server and its extensions
STEP_TIMEOUT = 180.0    # opening a notebook, starting a kernel, one redraw, a save
RUN_TIMEOUT = 1200.0    # all cells of a chapter in the quick preset
CHAPTER = "book/01-model.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (hidden ones included) with the SHA-256 of its bytes."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


class Lab:
    """``make lab`` running in ``repo``; ``stop()`` ends it and every process it started."""

    def __init__(self, repo: Path, home: Path):
        self.repo, self.home = repo, home
        self.token = secrets.token_hex(16)
        config = home / "config"
        config.mkdir(parents=True, exist_ok=True)
        # The application object is exposed to the page, as JupyterLab's own UI tests do, so
        # that the test can run the lab's commands and read the notebook's model.
        (config / "jupyter_lab_config.py").write_text("c.LabApp.expose_app_in_browser = True\n")
        self.env = bookbuild.env_for(repo)
        self.env.update(JUPYTER_TOKEN=self.token, JUPYTER_CONFIG_DIR=str(config),
                        JUPYTER_DATA_DIR=str(home / "data"), JUPYTER_RUNTIME_DIR=str(home / "runtime"),
                        IPYTHONDIR=str(home / "ipython"))
        self.log = home / "lab.log"
        self.proc = None
        self.port = None

    def start(self) -> None:
        """Start on a free port and wait until the server answers (another port if it was taken)."""
        for _ in range(3):
            self.port = free_port()
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen(
                    ["make", "--no-print-directory", "lab", f"PORT={self.port}", "NO_BROWSER=1"],
                    cwd=self.repo, env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, start_new_session=True)
            deadline = time.monotonic() + START_TIMEOUT
            while time.monotonic() < deadline and self.proc.poll() is None:
                if self._answers():
                    return
                time.sleep(0.2)
            if self.proc.poll() is None:
                raise AssertionError(f"make lab did not answer within {START_TIMEOUT} s:\n{self.tail()}")
            if "already in use" not in self.tail():
                raise AssertionError(f"make lab exited with {self.proc.returncode}:\n{self.tail()}")
        raise AssertionError(f"no free port for make lab:\n{self.tail()}")

    def _answers(self) -> bool:
        req = urllib.request.Request(f"{self.url}/api/status",
                                     headers={"Authorization": f"token {self.token}"})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""

    def stop(self, timeout: float = 120.0) -> list[str]:
        """SIGTERM to make and the server (which shuts its kernels down); wait for every process
        started under make to end. Returns those still alive at the deadline (then killed)."""
        if self.proc is None:
            return []
        try:
            procs = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            procs = []
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        _, alive = psutil.wait_procs(procs, timeout=timeout)
        survivors = []
        for p in alive:
            try:
                survivors.append(f"{p.pid} {' '.join(p.cmdline())[:120]}")
                p.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=30)
        return survivors


# --- the page ------------------------------------------------------------------------------
# Every snippet runs inside an async function with `app` (the JupyterLab application) and,
# when a path is given, `w`: the document widget open on that path (null if none).
PRELUDE = """
const app = window.jupyterapp;
let w = null;
if (app && app.shell && PATH) {
  for (const x of app.shell.widgets('main')) { if (x.context && x.context.path === PATH) { w = x; break; } }
}
"""


class Page:
    def __init__(self, browser: Browser, session: str, shots: Path):
        self.browser, self.session, self.shots = browser, session, shots
        self.shots.mkdir(parents=True, exist_ok=True)
        self.n = 0

    def js(self, body: str, path: str | None = None, timeout: float = STEP_TIMEOUT):
        expr = "(async () => {" + PRELUDE.replace("PATH", json.dumps(path)) + body + "})()"
        return evaluate(self.browser, self.session, expr, timeout=timeout)

    def wait(self, what: str, body: str, path: str | None = None, timeout: float = STEP_TIMEOUT):
        """Poll ``body`` until it returns an object with a true ``ok``; return that object."""
        deadline = time.monotonic() + timeout
        state = None
        while time.monotonic() < deadline:
            try:
                state = self.js(body, path)
            except (AssertionError, RuntimeError, TimeoutError) as err:  # e.g. the page still loading
                state = {"ok": False, "script": str(err)[:300]}
            if state and state.get("ok"):
                return state
            time.sleep(0.25)
        shot = self.shot("timeout")
        brief = {k: (v[:80] + "..." if isinstance(v, str) and len(v) > 80 else v) for k, v in (state or {}).items()}
        raise AssertionError(f"{what}: not within {timeout} s; last state {brief}; screenshot {shot}")

    def shot(self, name: str) -> Path:
        self.n += 1
        return screenshot(self.browser, self.session, self.shots / f"{self.n:02d}-{name}.png")

    def drag(self, x: float, y: float, dx: float, steps: int = 12):
        send = self.browser.send
        send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y}, self.session)
        send("Input.dispatchMouseEvent", {"type": "mousePressed", "x": x, "y": y, "button": "left",
                                          "buttons": 1, "clickCount": 1}, self.session)
        for k in range(1, steps + 1):
            send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x + dx * k / steps, "y": y,
                                              "button": "left", "buttons": 1}, self.session)
        send("Input.dispatchMouseEvent", {"type": "mouseReleased", "x": x + dx, "y": y,
                                          "button": "left", "buttons": 0, "clickCount": 1}, self.session)


OPENED = """
if (!app || !app.shell) return {ok: false, app: false};
await app.restored;
if (!w) return {ok: false, open: false};
await w.context.ready;
const kernel = w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
return {ok: !!(kernel && kernel.status === 'idle'), notebook: w.node.classList.contains('jp-NotebookPanel'),
        kernel: kernel ? kernel.name : null, status: kernel ? kernel.status : null};
"""

# Runs Python in the notebook's kernel and returns what it printed (and the error, if any).
KERNEL_RUN = """
const future = w.sessionContext.session.kernel.requestExecute({code: CODE, store_history: false});
let out = '', error = null;
future.onIOPub = m => {
  if (m.header.msg_type === 'stream') out += m.content.text;
  if (m.header.msg_type === 'error') error = m.content.ename + ': ' + m.content.evalue;
};
await future.done;
return {out, error};
"""

EDIT_CELL = """
let n = 0;
for (const cell of w.content.model.cells) {
  if ((cell.getMetadata('tags') || []).includes(TAG)) {
    const src = cell.sharedModel.getSource();
    const edited = EDIT(src);
    if (edited !== src) { cell.sharedModel.setSource(edited); n++; }
  }
}
return n;
"""

RUN_ALL = """
app.shell.activateById(w.id);
window.__runAll = null;
app.commands.execute('notebook:run-all-cells').then(r => { window.__runAll = {done: true, result: r}; },
                                                  e => { window.__runAll = {done: true, error: String(e)}; });
return true;
"""

RUN_STATE = """
const cells = Array.from(w.content.model.cells).filter(c => c.type === 'code' && c.sharedModel.getSource().trim());
const executed = cells.filter(c => c.executionCount !== null).length;
const errors = [];
for (const c of cells) {
  for (const o of c.outputs.toJSON()) if (o.output_type === 'error') errors.push(o.ename + ': ' + o.evalue);
}
const kernel = w.sessionContext.session.kernel;
const run = window.__runAll;
return {ok: !!(run && run.done) && kernel.status === 'idle', run, status: kernel.status,
        executed, code: cells.length, errors,
        unexecuted: cells.filter(c => c.executionCount === null).map(c => c.sharedModel.getSource().slice(0, 80))};
"""

# The explorer: the output of the cell that calls widgets.interact, scrolled into view.
EXPLORER = """
const idx = Array.from(w.content.model.cells).findIndex(c => c.sharedModel.getSource().includes('widgets.interact('));
if (idx < 0) return {ok: false, cell: false};
const cell = w.content.widgets[idx];
if (w.content.activeCellIndex !== idx) { w.content.activeCellIndex = idx; }
await w.content.scrollToCell(cell, 'start');
const first = cell.node.querySelector('.widget-slider .noUi-handle');
if (first) first.scrollIntoView({block: 'center'});
const sliders = Array.from(cell.node.querySelectorAll('.widget-slider')).map(s => {
  const handle = s.querySelector('.noUi-handle');
  const r = handle ? handle.getBoundingClientRect() : null;
  const label = s.querySelector('.widget-label');
  const readout = s.querySelector('.widget-readout');
  return {label: label ? label.textContent.trim() : '', readout: readout ? readout.textContent.trim() : '',
          x: r ? r.x + r.width / 2 : null, y: r ? r.y + r.height / 2 : null};
});
const imgs = Array.from(cell.node.querySelectorAll('.widget-output img'));
const img = imgs.length ? imgs[imgs.length - 1] : null;
const beta = sliders.find(s => s.label === 'beta');
return {ok: !!(beta && beta.x !== null && img && img.complete && img.naturalWidth > 0),
        sliders, images: imgs.length, src: img ? img.src : null, width: img ? img.naturalWidth : 0,
        busy: w.sessionContext.session.kernel.status};
"""

SAVE = """
app.shell.activateById(w.id);
await app.commands.execute('docmanager:save');
return true;
"""


def open_notebook(page: Page, path: str, via_url: str | None = None) -> dict:
    if via_url:
        page.browser.send("Page.navigate", {"url": via_url}, page.session)
    else:
        page.js(f"await app.commands.execute('docmanager:open', {{path: {json.dumps(path)}}}); return true;")
    state = page.wait(f"{path} open on an idle kernel", OPENED, path)
    page.shot("opened")
    return state


def kernel_run(page: Page, path: str, code: str) -> dict:
    return page.js(KERNEL_RUN.replace("CODE", json.dumps(code)), path)


def edit_cell(page: Page, path: str, tag: str, js_edit: str) -> int:
    return page.js(EDIT_CELL.replace("TAG", json.dumps(tag)).replace("EDIT", js_edit), path)


def run_all(page: Page, path: str) -> dict:
    assert page.js(RUN_ALL, path)
    state = page.wait(f"run all cells of {path}", RUN_STATE, path, timeout=RUN_TIMEOUT)
    page.shot("ran")
    return state


def explorer(page: Page, path: str) -> dict:
    return page.wait(f"the explorer of {path} rendered", EXPLORER, path)


def _readout(state: dict, label: str) -> str:
    return next(s["readout"] for s in state["sliders"] if s["label"] == label)


# --- fixtures ------------------------------------------------------------------------------


@pytest.fixture
def lab(tmp_path):
    repo = bookbuild.make_copy(tmp_path / "repo")
    running = Lab(repo, tmp_path / "jupyter")
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def page(browser, tmp_path):
    target, session = new_tab(browser, 1400, 1000)
    try:
        yield Page(browser, session, tmp_path / "screenshots")
    finally:
        browser.send("Target.closeTarget", {"targetId": target})


# --- tests ---------------------------------------------------------------------------------
def test_saving_from_the_lab_rewrites_every_book_source_unchanged(tmp_path, monkeypatch):
    """A save from the lab, without the browser: the Jupytext contents manager of the server,
    with the repository's jupytext.toml, given each book/*.py as the lab sends it back after a
    run (the lab's python3 kernelspec and language_info in the metadata, outputs, execution
    counts and run-time cell metadata), writes the file back byte for byte and nothing else."""
    import asyncio

    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
    from jupytext.async_contentsmanager import build_async_jupytext_contents_manager_class

    monkeypatch.setenv("JUPYTER_PREFER_ENV_PATH", "1")  # as make lab does
    spec = KernelSpecManager().get_kernel_spec("python3")
    assert Path(spec.argv[0]).name.startswith("python")
    shutil.copy(bookbuild.ROOT / "jupytext.toml", tmp_path / "jupytext.toml")
    (tmp_path / "book").mkdir()
    sources = bookbuild.chapter_sources()
    for src in sources:
        shutil.copy(src, tmp_path / "book" / src.name)
    manager = build_async_jupytext_contents_manager_class(AsyncLargeFileManager)(root_dir=str(tmp_path))

    async def open_run_save(path):
        model = await manager.get(path, type="notebook", content=True)
        nb = model["content"]
        nb["metadata"]["kernelspec"] = {"name": "python3", "display_name": spec.display_name,
                                        "language": spec.language}
        nb["metadata"]["language_info"] = {"name": "python", "version": "3.11", "mimetype": "text/x-python"}
        for cell in nb["cells"]:
            cell["metadata"]["trusted"] = True
            if cell["cell_type"] == "code":
                cell["execution_count"] = 1
                cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "ran\n"}]
                cell["metadata"]["execution"] = {"iopub.status.idle": "2026-01-01T00:00:00Z"}
        await manager.save(model, path)

    for src in sources:
        asyncio.run(open_run_save(f"book/{src.name}"))
    assert sorted(p.name for p in (tmp_path / "book").iterdir()) == sorted(p.name for p in sources)
    changed = [src.name for src in sources if (tmp_path / "book" / src.name).read_bytes() != src.read_bytes()]
    assert changed == [], "saving from the lab would rewrite these headers or cells (see jupytext.toml)"


@pytest.mark.slow
@pytest.mark.browser
def test_chapter_runs_live_in_the_lab(lab, page):
    book_before = snapshot(lab.repo / "book")
    original = (lab.repo / CHAPTER).read_text()
    assert original.count('preset = "paper"') == 1
    lab.start()

    # The chapter, through the lab URL: a notebook (not the text editor) on the project's kernel.
    state = open_notebook(page, CHAPTER, f"{lab.url}/lab/tree/{CHAPTER}?token={lab.token}")
    assert state["notebook"], f"{CHAPTER} opened as a text file, not as a notebook"
    assert state["kernel"] == "python3"
    env = kernel_run(page, CHAPTER, "import sys, attention_fw\nprint(sys.prefix)\nprint(attention_fw.__file__)")
    assert env["error"] is None, env
    prefix, module = env["out"].split()
    assert Path(prefix).resolve() == bookbuild.VENV.resolve(), f"kernel runs in {prefix}, not in .venv"
    assert Path(module).resolve().is_relative_to(bookbuild.ROOT / "lib")

    # A reader's edit of the parameters cell, then Run All.
    assert edit_cell(page, CHAPTER, "parameters", "(s => s.replace('preset = \"paper\"', 'preset = \"quick\"'))") == 1
    ran = run_all(page, CHAPTER)
    assert ran["run"].get("result") is True and ran["errors"] == [], ran
    assert ran["executed"] == ran["code"], f"cells not run: {ran['unexecuted']}"

    # The explorer is live: its sliders render, and dragging beta redraws the plot.
    before = explorer(page, CHAPTER)
    page.shot("explorer")
    assert {s["label"] for s in before["sliders"]} == {"beta", "gamma", "layers"}, before["sliders"]
    beta = next(s for s in before["sliders"] if s["label"] == "beta")
    page.drag(beta["x"], beta["y"], 40)
    after = page.wait("the plot redrawn after dragging the beta slider", EXPLORER.replace(
        "return {ok: !!(", f"return {{ok: img && img.src !== {json.dumps(before['src'])} && "
        f"beta && beta.readout !== {json.dumps(_readout(before, 'beta'))} && "
        "w.sessionContext.session.kernel.status === 'idle' && !!("), CHAPTER)
    page.shot("explorer-moved")
    assert float(_readout(after, "beta")) > float(_readout(before, "beta")), (before["sliders"], after["sliders"])
    assert _readout(after, "gamma") == _readout(before, "gamma")
    assert after["width"] > 0 and after["src"] != before["src"]

    # Saving writes the edit, and only the edit, back to the .py.
    page.js(SAVE, CHAPTER)
    page.wait(f"{CHAPTER} saved", "return {ok: !w.context.model.dirty};", CHAPTER)
    assert (lab.repo / CHAPTER).read_text() == original.replace('preset = "paper"', 'preset = "quick"')

    survivors = lab.stop()
    assert survivors == [], f"still running after the server stopped: {survivors}"
    book_after = snapshot(lab.repo / "book")
    assert set(book_after) == set(book_before), (
        f"files left in book/: {sorted(set(book_after) - set(book_before))}, "
        f"missing: {sorted(set(book_before) - set(book_after))}")
    changed = [name for name in book_before if book_before[name] != book_after[name]]
    assert changed == [Path(CHAPTER).name]
    figures = lab.repo / "figures"
    written = sorted(p.relative_to(figures).as_posix() for p in figures.rglob("*") if p.is_file())
    assert written and all(name.startswith("custom/") for name in written), written


@pytest.mark.slow
@pytest.mark.browser
def test_downloaded_notebook_runs_in_the_lab(lab, page, quick_book):
    build = quick_book
    assert build.returncode == 0, f"the quick book did not build:\n{build.log[-4000:]}"
    # The file behind the page's download button, saved by the reader at the top of the clone.
    html = (build.html / "book" / "01-model.html").read_text()
    link = re.search(r'href="([^"]*_sources/book/01-model\.ipynb)"', html)
    assert link, "no .ipynb download link on the chapter page"
    download = (build.html / "book" / link.group(1)).resolve()
    nb = json.loads(download.read_text())
    injected = [c for c in nb["cells"] if "injected-parameters" in c["metadata"].get("tags", [])]
    assert len(injected) == 1 and 'preset = "quick"' in "".join(injected[0]["source"])
    shutil.copy(download, lab.repo / "01-model.ipynb")
    lab.start()

    path = "01-model.ipynb"
    state = open_notebook(page, path, f"{lab.url}/lab/tree/{path}?token={lab.token}")
    assert state["notebook"] and state["kernel"] == "python3"
    # As with papermill, the injected cell overrides the defaults of the parameters cell above it.
    assert edit_cell(page, path, "injected-parameters", "(s => s.trimEnd() + '\\nseed = 7\\n')") == 1
    ran = run_all(page, path)
    assert ran["run"].get("result") is True and ran["errors"] == [], ran
    assert ran["executed"] == ran["code"], f"cells not run: {ran['unexecuted']}"
    resolved = kernel_run(page, path, "print(p.preset, p.seed)")
    assert resolved == {"out": "quick 7\n", "error": None}
    rendered = explorer(page, path)
    page.shot("explorer")
    assert {s["label"] for s in rendered["sliders"]} == {"beta", "gamma", "layers"}
    assert lab.stop() == []
