"""A headless Chromium driven over its DevTools protocol, for the query page's tests and the
page benchmark: navigate, type, press Enter, evaluate JavaScript, wait for a condition, take
a screenshot, and record the JavaScript dialogs a page tried to open (none must)."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

CHROMIUM = next(
    (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
    None,
)


class Browser:
    """One Chromium process and its first tab."""

    def __init__(self, profile: Path, width: int = 1400, height: int = 1000) -> None:
        assert CHROMIUM, "no chromium"
        profile.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            assert self.process.poll() is None, "chromium exited"
            assert time.monotonic() < deadline, "chromium did not open its DevTools port"
            time.sleep(0.05)
        port = int(port_file.read_text().splitlines()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            targets = json.load(r)
        page = next(t for t in targets if t["type"] == "page")
        self.ws = connect(page["webSocketDebuggerUrl"], max_size=64 * 2**20).__enter__()
        self.events: list[dict[str, Any]] = []
        self._id = 0
        self.send("Page.enable")
        self.send("Runtime.enable")

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.process.terminate()
            self.process.wait(20)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send(self, method: str, params: dict | None = None, timeout: float = 60) -> dict:
        """The result of one DevTools command; events that come meanwhile are kept."""
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while True:
            message = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message.get("id") == self._id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def dialogs(self) -> list[dict]:
        """JavaScript dialogs (alert, confirm, prompt) the page opened so far."""
        return [e for e in self.events if e.get("method") == "Page.javascriptDialogOpening"]

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (promises awaited)."""
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60) -> Any:
        """Poll until the expression is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                state = self.evaluate("JSON.stringify(document.body.dataset)")
                raise AssertionError(f"timed out waiting for {expression}; body: {state}")
            time.sleep(0.05)

    def navigate(self, url: str) -> None:
        """Load `url` afresh (also when only its fragment differs) and wait for the page."""
        self.evaluate("window.__left = 1")  # gone once the new document is there
        self.send("Page.navigate", {"url": "about:blank"})
        self.send("Page.navigate", {"url": url})
        self.wait_for(
            "!window.__left && document.readyState === 'complete' && !!document.body.dataset.state"
        )

    def type_and_enter(self, selector: str, text: str) -> None:
        """Focus `selector`, type `text` and press Enter, as a person would."""
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        self.send("Input.insertText", {"text": text})
        key = {"key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13}
        self.send("Input.dispatchKeyEvent", {"type": "keyDown", "text": "\r", **key})
        self.send("Input.dispatchKeyEvent", {"type": "keyUp", **key})

    def press(self, key: str, code: int, text: str = "") -> None:
        """Press and release one key (e.g. "Tab", 9; "Enter", 13, "\\r") where focus is."""
        event = {"key": key, "code": key, "windowsVirtualKeyCode": code}
        self.send("Input.dispatchKeyEvent", {"type": "keyDown", "text": text, **event})
        self.send("Input.dispatchKeyEvent", {"type": "keyUp", **event})

    def click_at(self, x: float, y: float) -> None:
        """A left click at (x, y) CSS pixels of the viewport, as a mouse would."""
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            event = {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}
            self.send("Input.dispatchMouseEvent", event)

    def screenshot(self) -> bytes:
        return base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"])
