"""A page in a real headless Chromium, driven over the DevTools protocol on a pipe: what a
reader sees (sizes, positions, what is open, where the page is scrolled) is measured in
the browser itself, the page's own Content-Security-Policy in force.

DevTools' ``Runtime.evaluate`` runs outside that policy, as a reader's devtools console
does: the measuring never needs the page to allow a script of the test's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any


class Chromium:
    """One headless Chromium with one page, its window ``width`` by ``height`` pixels."""

    def __init__(self, width: int = 1280, height: int = 900) -> None:
        chromium = shutil.which("chromium")
        assert chromium is not None
        self._profile = tempfile.mkdtemp(prefix="chromium-")
        to_browser, self._to_browser = os.pipe()
        self._from_browser, from_browser = os.pipe()

        def as_fds_3_and_4() -> None:  # the pipes DevTools reads and writes
            reading, writing = os.dup(to_browser), os.dup(from_browser)
            os.dup2(reading, 3)
            os.dup2(writing, 4)

        self._process = subprocess.Popen(
            [
                chromium,
                "--headless",
                "--disable-gpu",
                "--no-sandbox",
                "--no-first-run",
                "--hide-scrollbars",
                f"--user-data-dir={self._profile}",
                "--remote-debugging-pipe",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            close_fds=False,  # os.pipe's fds are not inherited; 3 and 4 are, by dup2
            preexec_fn=as_fds_3_and_4,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser)
        os.close(from_browser)
        self._sent = 0
        self._buffer = b""
        self._events: list[dict[str, Any]] = []
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        attached = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)
        self._session = attached["sessionId"]
        self.call("Page.enable", page=True)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            page=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *_: object) -> None:
        self._process.kill()
        self._process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)
        shutil.rmtree(self._profile, ignore_errors=True)

    def open(self, page: Path, fragment: str = "") -> None:
        """Load ``page`` (with ``#fragment``) and wait until it has loaded."""
        url = page.as_uri() + (f"#{fragment}" if fragment else "")
        self.call("Page.navigate", page=True, url=url)
        self._event("Page.loadEventFired")

    def value(self, expression: str) -> Any:
        """What ``expression`` evaluates to in the page, as JSON."""
        answer = self.call("Runtime.evaluate", page=True, expression=expression, returnByValue=True)
        assert "exceptionDetails" not in answer, answer["exceptionDetails"]
        return answer["result"].get("value")

    def settle(self, seconds: float = 0.3) -> None:
        """Let the page's own handlers and scrolling run."""
        time.sleep(seconds)

    def call(self, method: str, *, page: bool = False, **params: Any) -> Any:
        self._sent += 1
        message: dict[str, Any] = {"id": self._sent, "method": method, "params": params}
        if page:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read()
            if answer.get("id") == self._sent:
                assert "error" not in answer, answer["error"]
                return answer["result"]
            self._events.append(answer)

    def _event(self, name: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for index, event in enumerate(self._events):
                if event.get("method") == name:
                    del self._events[index]
                    return
            self._events.append(self._read())
        raise AssertionError(f"no {name} from Chromium")

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_browser, 1 << 16)
            assert chunk, "Chromium closed its DevTools pipe"
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)  # type: ignore[no-any-return]
