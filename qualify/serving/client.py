"""HTTP to one OpenAI-compatible server (llama-server and the like), through httpx.

Every call returns what happened (status, parsed body, wall time; for streams every event with
its arrival time) instead of raising: a 4xx or 5xx is data a suite judges. Only one thing
raises: the server process is gone (`ServerGone`), because then every later case would fail
for the same reason and the suites stop.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

EXIT_GRACE_S = 2.0  # how long a transport error waits to see whether the server process exited


class ServerGone(Exception):
    """The server process died while a request was in flight (or before it was sent)."""


@dataclass
class Reply:
    """A plain request's outcome. `status` 0 means no HTTP answer (`error` says why)."""

    status: int
    body: Any
    seconds: float
    error: str = ""

    @property
    def json(self) -> dict[str, Any]:
        return self.body if isinstance(self.body, dict) else {}


@dataclass
class Streamed:
    """A server-sent-events stream: the JSON events in order, with their arrival times."""

    status: int
    events: list[dict[str, Any]] = field(default_factory=list)
    times_s: list[float] = field(default_factory=list)  # seconds from sending, per event
    done: bool = False  # the stream ended with `data: [DONE]`
    unparsable: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""
    body: Any = None  # the JSON body when the server answered without streaming (an error)

    def first_content_s(self) -> float | None:
        """Time to the first event that carries generated text or a tool call (TTFT)."""
        for event, at in zip(self.events, self.times_s, strict=True):
            if event_content(event):
                return at
        return None


def event_content(event: dict[str, Any]) -> str:
    """The generated text an event carries (`/completion` or chat/completions deltas)."""
    if isinstance(event.get("content"), str) and event["content"]:
        return str(event["content"])
    for choice in event.get("choices") or []:
        delta = choice.get("delta") or {}
        text = delta.get("content") or choice.get("text") or ""
        if delta.get("tool_calls"):
            text += json.dumps(delta["tool_calls"])
        if text:
            return str(text)
    return ""


class Client:
    """Requests to one server; `alive` tells whether its process still runs."""

    def __init__(self, base_url: str, timeout_s: float, alive: Callable[[], bool]) -> None:
        self.base_url = base_url
        self.alive = alive
        # One connection per request: a kept-alive connection that the server closes while
        # idle fails the next request with "disconnected without sending a response".
        self.http = httpx.Client(
            base_url=base_url, timeout=timeout_s, limits=httpx.Limits(max_keepalive_connections=0)
        )

    def close(self) -> None:
        self.http.close()

    def _gone_or(self, exc: Exception) -> str:
        # A dying server's sockets close before its exit is visible to `alive` (the kernel tears
        # down the files first): give the process a moment to be seen gone before calling the
        # failure one case's.
        deadline = time.monotonic() + EXIT_GRACE_S
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not self.alive():
            raise ServerGone(f"the server exited during a request ({type(exc).__name__}: {exc})") from exc
        return f"{type(exc).__name__}: {exc}"

    def get(self, path: str) -> Reply:
        return self._call("GET", path, None)

    def post(self, path: str, body: dict[str, Any]) -> Reply:
        return self._call("POST", path, body)

    def _call(self, method: str, path: str, body: dict[str, Any] | None) -> Reply:
        if not self.alive():
            raise ServerGone("the server is not running")
        start = time.monotonic()
        try:
            response = self.http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            return Reply(0, None, time.monotonic() - start, self._gone_or(exc))
        seconds = time.monotonic() - start
        try:
            parsed: Any = response.json()
        except ValueError:
            parsed = response.text[:2000]
        return Reply(response.status_code, parsed, seconds)

    def stream(self, path: str, body: dict[str, Any], *, stop_after: int | None = None) -> Streamed:
        """POST with `stream: true` and read the events; `stop_after` closes the connection after
        that many events (a client that goes away mid-generation)."""
        if not self.alive():
            raise ServerGone("the server is not running")
        start = time.monotonic()
        out = Streamed(0)
        try:
            with self.http.stream("POST", path, json={**body, "stream": True}) as response:
                out.status = response.status_code
                if "text/event-stream" not in response.headers.get("content-type", ""):
                    text = response.read().decode("utf-8", errors="replace")
                    try:
                        out.body = json.loads(text)
                    except ValueError:
                        out.body = text[:2000]
                else:
                    for line in response.iter_lines():
                        if not line.startswith("data:"):
                            continue
                        data = line[5:].strip()
                        if data == "[DONE]":
                            out.done = True
                            continue
                        try:
                            event = json.loads(data)
                        except ValueError:
                            out.unparsable.append(data[:200])
                            continue
                        out.events.append(event if isinstance(event, dict) else {"value": event})
                        out.times_s.append(time.monotonic() - start)
                        if stop_after is not None and len(out.events) >= stop_after:
                            break
        except httpx.HTTPError as exc:
            out.error = self._gone_or(exc)
        out.seconds = time.monotonic() - start
        return out
