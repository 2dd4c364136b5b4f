"""Open a page in a real headless Chromium (Debian's ``chromium``) with the network
cut off, and report what a person would see and what the page tried to do.

Driven through the DevTools protocol over ``--remote-debugging-pipe`` (JSON
messages ended by NUL on file descriptors 3 and 4, as Chromium's
``devtools_pipe_handler`` reads and writes them), so no websocket library
and no port: https://chromedevtools.github.io/devtools-protocol/ . What is
collected:

- console messages and uncaught exceptions (``Runtime.consoleAPICalled``,
  ``Runtime.exceptionThrown``) and browser log entries (``Log.entryAdded``:
  where a Content-Security-Policy violation or a failed load is reported);
- every request the page starts (``Network.requestWillBeSent``);
- per chart (``figure.chart`` elements), its box and a screenshot of it
  (``Page.captureScreenshot`` with a clip), decoded with pypng.

The network is cut off twice over: a proxy on a closed loopback port and a
host resolver that resolves nothing, so a request that slipped past the page's
policy would fail -- and still be seen in the log.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs
import pytest
from conftest import run_cli

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: how long one protocol answer or event may take (a page load on a busy 2-core machine)
TIMEOUT_S = 60.0

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
         "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--disable-extensions", "--disable-default-apps", "--mute-audio",
         "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
         "--host-resolver-rules=MAP * ~NOTFOUND",
         "--hide-scrollbars", "--font-render-hinting=none"]


@attrs.define
class Chart:
    name: str
    box: dict[str, float]
    pixels: list[tuple[int, int, int]]  # RGB of every pixel of its screenshot

    def count(self, test: Any) -> int:
        return sum(1 for p in self.pixels if test(p))

    def share(self, test: Any) -> float:
        return self.count(test) / max(1, len(self.pixels))


@attrs.define
class Visit:
    url: str
    problems: list[str]  # console errors/warnings, exceptions, log entries at warning or error
    requests: list[str]  # every URL the page asked for (refused ones too)
    failed: dict[str, str]  # URL -> why it failed: its blockedReason ("csp") or network error
    charts: list[Chart]
    svg_count: int
    screenshot: bytes  # the whole page, PNG


class _Pipe:
    def __init__(self, proc: subprocess.Popen[bytes], write_fd: int, read_fd: int) -> None:
        self.proc, self.write_fd, self.read_fd = proc, write_fd, read_fd
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str) -> dict[str, Any]:
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        while True:
            event = self._read()
            if event.get("method") == method:
                return event
            self.events.append(event)

    def drain(self, seconds: float) -> None:
        """Collect the events that come within ``seconds`` (late console messages)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ready, _, _ = select.select([self.read_fd], [], [], max(0.0, end - time.monotonic()))
            if not ready:
                break
            self.events.append(self._read())

    def _read(self) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT_S
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.read_fd], [], [], max(0.0, left))
            if not ready:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise RuntimeError(f"chromium closed the pipe (exit {self.proc.poll()})")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)  # type: ignore[no-any-return]


def visit(page: Path, *, width: int = 1200, height: int = 900) -> Visit:
    """Load ``page`` (a file) and collect what :class:`Visit` holds."""
    import png  # pypng

    assert CHROMIUM is not None
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()

    def fds() -> None:  # the child's fd 3 reads commands, fd 4 writes answers
        # (through fds above both: either pipe end may itself be 3 or 4)
        high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
        high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
        os.dup2(high_r, 3)
        os.dup2(high_w, 4)

    with tempfile.TemporaryDirectory(prefix="tickgate-chromium-") as profile:
        proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                preexec_fn=fds, pass_fds=(3, 4),  # close_fds runs after preexec_fn
                                stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        pipe = _Pipe(proc, to_child_w, from_child_r)
        try:
            target = pipe.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Runtime", "Log", "Network", "Page"):
                pipe.send(f"{domain}.enable", session=session)
            metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
            pipe.send("Emulation.setDeviceMetricsOverride", metrics, session)
            url = page.resolve().as_uri()
            pipe.send("Page.navigate", {"url": url}, session)
            pipe.wait_for("Page.loadEventFired")
            pipe.drain(0.5)
            boxes = json.loads(pipe.send("Runtime.evaluate", {"expression": _BOXES, "returnByValue": True},
                                         session)["result"]["value"])
            charts = []
            for box in boxes:
                shot = pipe.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                            "clip": {**box["clip"], "scale": 1}}, session)
                charts.append(Chart(box["name"], box["clip"], _rgb(png, base64.b64decode(shot["data"]))))
            whole = base64.b64decode(pipe.send("Page.captureScreenshot", {"format": "png",
                                                                          "captureBeyondViewport": True},
                                               session)["data"])
            count = {"expression": "document.querySelectorAll('svg').length", "returnByValue": True}
            svg_count = pipe.send("Runtime.evaluate", count, session)["result"]["value"]
            pipe.drain(0.2)
        finally:
            try:
                pipe.send("Browser.close")
            except (RuntimeError, TimeoutError, OSError):
                pass
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            os.close(to_child_w)
            os.close(from_child_r)
    problems, requests, failed = _read_events(pipe.events)
    return Visit(url, problems, requests, failed, charts, svg_count, whole)


_BOXES = """JSON.stringify([...document.querySelectorAll('figure.chart')].map(f => {
  const r = f.querySelector('svg').getBoundingClientRect();
  return {name: f.dataset.chart, clip: {x: r.left + window.scrollX, y: r.top + window.scrollY,
                                        width: r.width, height: r.height}};
}))"""


def _rgb(png: Any, data: bytes) -> list[tuple[int, int, int]]:
    _, _, rows, _ = png.Reader(bytes=data).asRGB8()
    out = []
    for row in rows:
        out.extend(zip(row[0::3], row[1::3], row[2::3]))
    return out


def _read_events(events: list[dict[str, Any]]) -> tuple[list[str], list[str], dict[str, str]]:
    problems, requests, urls, failed = [], [], {}, {}
    for e in events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
            args = (str(a.get("value", a.get("description"))) for a in params["args"])
            problems.append("console: " + " ".join(args))
        elif method == "Runtime.exceptionThrown":
            problems.append("exception: " + json.dumps(params.get("exceptionDetails", {}))[:300])
        elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
            entry = params["entry"]
            where = entry.get("url", "")
            problems.append(f"log ({entry.get('source')}): {entry.get('text')} {where}".strip())
        elif method == "Network.requestWillBeSent":
            requests.append(params["request"]["url"])
            urls[params["requestId"]] = params["request"]["url"]
        elif method == "Network.loadingFailed":
            why = params.get("blockedReason") or params.get("errorText", "failed")
            failed[urls.get(params["requestId"], params["requestId"])] = why
    return problems, requests, failed


def coloured(p: tuple[int, int, int]) -> bool:
    """A data mark's pixel: saturated colour (axes, grid and text are grey or black; a
    translucent mark over white still differs by 50 or more between its channels)."""
    return max(p) - min(p) > 40


def inked(p: tuple[int, int, int]) -> bool:
    """Anything but the white background."""
    return min(p) < 235


#: in CI (.ci/run installs both) a missing browser or extra is a failure, not a skip
IN_CI = os.environ.get("CI") == "true"
needs_chromium = pytest.mark.skipif(CHROMIUM is None and not IN_CI,
                                    reason="no chromium on PATH (apt-get install chromium; .ci/run does)")


def _has_extra() -> bool:
    from tickgate.html.charts import available

    return available()


needs_extra = pytest.mark.skipif(not _has_extra() and not IN_CI,
                                 reason="the 'html' extra is not installed (pip install './core[html]')")


def bad_page(tmp_path: Path, name: str, content: str | None, *extra: str) -> tuple[str, Path]:
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    page = tmp_path / "out.html"
    res = run_cli("report", str(path), "--html", str(page), *extra)
    assert res.returncode == 2, res.stdout
    assert not page.exists() and list(tmp_path.glob("*.tmp*")) == []
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.stderr
    return lines[0], path
