"""Headless Chromium driven over the DevTools protocol, shared by the browser tests.

The protocol is spoken over ``--remote-debugging-pipe`` (file descriptors 3 and 4,
NUL-separated JSON), so no extra Python package and no debugging port are needed.
``test_browser.py`` opens the built book with it, ``test_lab.py`` the chapters in ``make lab``.
"""
from __future__ import annotations

import base64
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path

INSTALL_HINT = ("headless Chromium is needed for the browser test and was not found. Install it with "
                "`sudo apt-get install -y chromium` (Debian/Ubuntu; .ci/run does this), or point the "
                "CHROMIUM environment variable at a Chromium/Chrome executable.")
# Only a deadline for a page (or a reply) that never comes: generous, since the machine may be
# loaded (make test runs two workers, each perhaps with a kernel or a build beside it).
PAGE_TIMEOUT = 180.0


def chromium_executable() -> str | None:
    env = os.environ.get("CHROMIUM")
    if env:
        return env if Path(env).exists() else shutil.which(env)
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """Minimal DevTools-protocol client over --remote-debugging-pipe."""

    def __init__(self, exe: str, profile: Path):
        to_child_r, self._to_child_w = os.pipe()
        self._from_child_r, from_child_w = os.pipe()

        def wire_fds():  # runs in the child before exec: its fd 3 reads, fd 4 writes
            a, b = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
                "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
                "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
                f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"]
        self.proc = subprocess.Popen(args, preexec_fn=wire_fds, pass_fds=(3, 4),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self._next = 0
        self._replies: dict[int, dict] = {}
        self.events: queue.Queue = queue.Queue()
        self._cv = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        buf = b""
        while True:
            chunk = os.read(self._from_child_r, 1 << 16)
            if not chunk:
                break
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    with self._cv:
                        self._replies[msg["id"]] = msg
                        self._cv.notify_all()
                else:
                    self.events.put(msg)

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = PAGE_TIMEOUT) -> dict:
        self._next += 1
        msg = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._cv:
            while self._next not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no reply to {method}")
                self._cv.wait(left)
            reply = self._replies.pop(self._next)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def close(self):
        try:
            self.send("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_child_w)


def evaluate(browser, session, expression, timeout: float = PAGE_TIMEOUT):
    res = browser.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                            "returnByValue": True}, session, timeout)
    if "exceptionDetails" in res:
        raise AssertionError(f"page script failed: {res['exceptionDetails']}")
    return res["result"].get("value")


def new_tab(browser: Browser, width: int = 1280, height: int = 900) -> tuple[str, str]:
    """A new page of the given size: (target id, flat session id), with Page and Runtime enabled."""
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    browser.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                        "deviceScaleFactor": 1, "mobile": False}, session)
    for domain in ("Page", "Runtime"):
        browser.send(f"{domain}.enable", session=session)
    return target, session


def screenshot(browser: Browser, session: str, path: Path) -> Path:
    """Save what the page shows now as a PNG."""
    data = browser.send("Page.captureScreenshot", {"format": "png"}, session)["data"]
    path.write_bytes(base64.b64decode(data))
    return path
