"""Headless Debian Chromium driven over the DevTools protocol (websocket-client, already pinned)."""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import websocket

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
    "--window-size=1400,1000",
]


def chromium_path() -> str | None:
    return shutil.which("chromium")


# DevTools' errors while the page navigates: the evaluation is retried on the new page.
NAVIGATING = ("Inspected target navigated or closed", "Execution context was destroyed")


class Chromium:
    """One browser with one page; `call` sends a DevTools command and returns its result."""

    def __init__(self, profile: Path, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self.proc = subprocess.Popen(
            [chromium_path() or "chromium", *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port = self._port(profile / "DevToolsActivePort")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            page = next(t for t in json.load(r) if t["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=timeout)
        self.ids = itertools.count(1)

    def _port(self, active_port: Path) -> int:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if active_port.exists() and active_port.read_text().strip():
                return int(active_port.read_text().split()[0])
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}")
            time.sleep(0.1)
        raise TimeoutError("chromium did not open its DevTools port")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        call_id = next(self.ids)
        self.ws.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def wait_for(self, expression: str) -> Any:
        """The expression's value once truthy; a page navigating meanwhile (a redirect to the
        login page) is waited out, as a user's browser would."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            try:
                value = self.evaluate(expression)
            except RuntimeError as err:
                if not any(m in str(err) for m in NAVIGATING):
                    raise
                value = None
            if value:
                return value
            time.sleep(0.1)
        raise TimeoutError(f"never true: {expression}")

    def reset(self, origin: str) -> None:
        """As a fresh profile would be for `origin`: a blank page, no cookies, no storage (the
        page's localStorage, IndexedDB, service workers), the default window size."""
        self.call("Page.navigate", url="about:blank")
        self.call("Network.clearBrowserCookies")
        self.call("Storage.clearDataForOrigin", origin=origin, storageTypes="all")
        self.call("Emulation.clearDeviceMetricsOverride")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def screenshot(self, target: Path) -> None:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(base64.b64decode(data["data"]))

    def close(self) -> None:
        self.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
