"""Open a page in headless Chromium and report what a person would see (a test helper).

Chromium is driven through its DevTools protocol over ``--remote-debugging-pipe`` (file
descriptors 3 and 4, messages ending in NUL): no driver binary, no Python package. Used by
tests/test_sim_html.py and benchmarks/bench_report_page.py.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["PageVisit", "find_chromium", "visit"]


def find_chromium() -> str | None:
    """The Chromium (or Chrome) executable on PATH, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageVisit:
    load_seconds: float  # navigation start to the load event, as the page measured it
    console: list[str] = field(default_factory=list)  # console errors and warnings, exceptions
    requests: list[str] = field(default_factory=list)  # every URL requested but the page's
    values: dict[str, Any] = field(default_factory=dict)  # the expressions evaluated
    screenshot: bytes = b""


class _Pipe:
    def __init__(self, proc: subprocess.Popen[bytes], write: int, read: int) -> None:
        self.proc, self.write, self.read = proc, write, read
        self.next_id = 0
        self.buffer = b""
        self.events: list[dict[str, Any]] = []

    def _message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self.read, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self.write, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + 30
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        for event in self.events:
            if event.get("method") == method:
                return event
        while True:
            event = self._message(deadline)
            self.events.append(event)
            if event.get("method") == method:
                return event


def _as_fds_3_4(read: int, write: int) -> None:
    # first out of the way (either may be 3 or 4 already), then into place
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in (read, write)]
    os.dup2(high[0], 3)
    os.dup2(high[1], 4)


def visit(
    path: Path, *, expressions: dict[str, str], width: int = 1280, height: int = 800
) -> PageVisit:
    """Load ``path`` in a fresh headless Chromium at ``width`` × ``height``; evaluate
    ``expressions`` (name -> JavaScript) after the load event; take a screenshot."""
    exe = find_chromium()
    if exe is None:
        raise RuntimeError("no chromium on PATH")
    to_chrome_r, to_chrome_w = os.pipe()
    from_chrome_r, from_chrome_w = os.pipe()
    profile = tempfile.mkdtemp(prefix="torchplace-chromium-")
    # the child must see the pipe ends as fds 3 (it reads) and 4 (it writes)
    proc = subprocess.Popen(
        [
            exe,
            "--headless",
            "--remote-debugging-pipe",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "about:blank",
        ],
        pass_fds=(3, 4),
        preexec_fn=lambda: _as_fds_3_4(to_chrome_r, from_chrome_w),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(to_chrome_r)
    os.close(from_chrome_w)
    pipe = _Pipe(proc, to_chrome_w, from_chrome_r)
    try:
        target = pipe.call("Target.createTarget", url="about:blank")["targetId"]
        session = pipe.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Network", "Log"):
            pipe.call(f"{domain}.enable", session)
        pipe.call(
            "Emulation.setDeviceMetricsOverride", session, width=width, height=height,
            deviceScaleFactor=1, mobile=False,
        )  # fmt: skip
        pipe.events.clear()
        url = path.resolve().as_uri()
        pipe.call("Page.navigate", session, url=url)
        pipe.wait_for("Page.loadEventFired")
        timing = pipe.call(
            "Runtime.evaluate", session, returnByValue=True,
            expression="performance.timing.loadEventStart - performance.timing.navigationStart",
        )  # fmt: skip
        values = {
            name: pipe.call("Runtime.evaluate", session, expression=js, returnByValue=True)[
                "result"
            ].get("value")
            for name, js in expressions.items()
        }
        shot = pipe.call("Page.captureScreenshot", session, format="png")["data"]
        visit = PageVisit(
            load_seconds=timing["result"]["value"] / 1000,
            values=values,
            screenshot=base64.b64decode(shot),
        )
        for e in pipe.events:
            method, params = e.get("method"), e.get("params", {})
            if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "warning"):
                visit.console.append(" ".join(str(a.get("value")) for a in params["args"]))
            elif method == "Runtime.exceptionThrown":
                visit.console.append(params["exceptionDetails"].get("text", "exception"))
            elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
                visit.console.append(params["entry"]["text"])
            elif method == "Network.requestWillBeSent" and params["request"]["url"] != url:
                visit.requests.append(params["request"]["url"])
        return visit
    finally:
        os.close(to_chrome_w)
        os.close(from_chrome_r)
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
