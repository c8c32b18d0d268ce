"""The soak's load driver: replays a request schedule against one server over streaming HTTP.

Requests go to an OpenAI-compatible chat endpoint (`stream: true`, greedy) on loopback, at
their scheduled arrival times, with at most `concurrency` in flight (a request that arrives
while all are busy waits; the wait is recorded). Per request it records when it was sent, the
first content token (TTFT), the end, the tokens streamed (the final `usage` count when the
server sends one) and how it ended:

- `ok`: the stream finished;
- `error`: an HTTP error, a broken stream or an error object in it;
- `stalled`: the watchdog saw no progress for `stall_s` seconds (the request is cancelled);
- `cut`: still in flight when the soak's time was up (not counted against the server).

A stall or the server exiting stops the load: what follows would only repeat it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import httpx

from qualify.soak.watchdog import Watchdog
from qualify.soak.workload import Request

OK, ERROR, STALLED, CUT = "ok", "error", "stalled", "cut"


@dataclass
class Outcome:
    """What happened to one request; times are seconds after the role's load started."""

    index: int
    conversation: int
    turn: int
    scheduled_s: float
    sent_s: float | None = None
    first_token_s: float | None = None
    end_s: float | None = None
    tokens: int = 0
    status: str = CUT
    error: str = ""

    @property
    def ttft_s(self) -> float | None:
        if self.sent_s is None or self.first_token_s is None:
            return None
        return self.first_token_s - self.sent_s

    @property
    def tpot_s(self) -> float | None:
        if self.first_token_s is None or self.end_s is None or self.tokens < 2:
            return None
        return (self.end_s - self.first_token_s) / (self.tokens - 1)

    @property
    def e2e_s(self) -> float | None:
        if self.sent_s is None or self.end_s is None:
            return None
        return self.end_s - self.sent_s

    def row(self) -> dict[str, Any]:
        return {**asdict(self), "ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "e2e_s": self.e2e_s}


@dataclass(frozen=True)
class DriverSettings:
    base_url: str
    endpoint: str = "/v1/chat/completions"
    concurrency: int = 2
    stall_s: float = 60.0
    deadline_s: float = 600.0  # load stops here; requests still in flight are `cut`
    body: dict[str, Any] | None = None  # extra fields of every request body
    model: str = "soak"


@dataclass
class DriverResult:
    outcomes: list[Outcome]
    stop_reason: str
    stalls: list[dict[str, Any]]


class _Stop(Exception):
    pass


def _body(request: Request, settings: DriverSettings) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": settings.model,
        "messages": list(request.messages),
        "max_tokens": request.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0,
        "seed": 42,
    }
    body.update(settings.body or {})
    return body


async def _stream(
    client: httpx.AsyncClient,
    request: Request,
    outcome: Outcome,
    settings: DriverSettings,
    watchdog: Watchdog,
    t0: float,
) -> None:
    watchdog.start(request.index)
    outcome.sent_s = time.monotonic() - t0
    usage_tokens: int | None = None
    try:
        async with client.stream("POST", settings.endpoint, json=_body(request, settings)) as response:
            if response.status_code != 200:
                text = (await response.aread()).decode("utf-8", errors="replace")
                outcome.status, outcome.error = ERROR, f"HTTP {response.status_code}: {text[:200]}"
                return
            async for line in response.aiter_lines():
                watchdog.progress(request.index)
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    outcome.status, outcome.error = ERROR, json.dumps(chunk["error"])[:200]
                    return
                for choice in chunk.get("choices") or ():
                    delta = choice.get("delta") or {}
                    if delta.get("content") or delta.get("reasoning_content"):
                        if outcome.first_token_s is None:
                            outcome.first_token_s = time.monotonic() - t0
                        outcome.tokens += 1
                usage = chunk.get("usage")
                if usage and usage.get("completion_tokens") is not None:
                    usage_tokens = int(usage["completion_tokens"])
        outcome.end_s = time.monotonic() - t0
        if usage_tokens is not None:
            outcome.tokens = usage_tokens
        outcome.status = OK
    except (httpx.HTTPError, json.JSONDecodeError, ValueError) as exc:
        outcome.status, outcome.error = ERROR, f"{type(exc).__name__}: {exc}"[:200]
    finally:
        watchdog.finish(request.index)


async def _drive(
    requests: Sequence[Request], settings: DriverSettings, t0: float, alive: Callable[[], bool]
) -> DriverResult:
    # Keyed by the request's index: a block of an interleaved soak replays a slice of the schedule.
    outcomes = {r.index: Outcome(r.index, r.conversation, r.turn, r.at_s) for r in requests}
    watchdog = Watchdog(settings.stall_s)
    slots = asyncio.Semaphore(settings.concurrency)
    tasks: dict[int, asyncio.Task[None]] = {}
    stalls: list[dict[str, Any]] = []
    stop = asyncio.Event()
    reason = ["schedule done"]

    timeout = httpx.Timeout(connect=10.0, read=None, write=30.0, pool=None)
    async with httpx.AsyncClient(base_url=settings.base_url, timeout=timeout) as client:

        async def one(request: Request) -> None:
            async with slots:
                if stop.is_set():
                    return
                await _stream(client, request, outcomes[request.index], settings, watchdog, t0)

        async def watch() -> None:
            while not stop.is_set():
                await asyncio.sleep(min(1.0, settings.stall_s / 4))
                for index, silent in watchdog.overdue():
                    outcomes[index].status = STALLED
                    outcomes[index].error = f"no stream progress for {silent:.1f} s"
                    stalls.append(
                        {"index": index, "t_s": round(time.monotonic() - t0, 3), "silent_s": silent}
                    )
                    tasks[index].cancel()
                    watchdog.finish(index)
                if stalls:
                    reason[0] = "stall"
                    stop.set()
                elif not alive():
                    reason[0] = "server exited"
                    stop.set()
                elif time.monotonic() - t0 > settings.deadline_s:
                    reason[0] = "deadline"
                    stop.set()

        watcher = asyncio.create_task(watch())
        for request in requests:
            delay = request.at_s - (time.monotonic() - t0)
            if delay > 0:
                with contextlib.suppress(TimeoutError):  # the arrival time came first
                    await asyncio.wait_for(stop.wait(), timeout=delay)
            if stop.is_set():
                break
            tasks[request.index] = asyncio.create_task(one(request))
        pending = [t for t in tasks.values() if not t.done()]
        if pending:
            stopper = asyncio.create_task(stop.wait())
            await asyncio.wait([*pending, stopper], return_when=asyncio.FIRST_COMPLETED)
            while not stop.is_set() and any(not t.done() for t in pending):
                await asyncio.wait([*pending, stopper], return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
        for task in tasks.values():
            task.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)
        stop.set()
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    sent = [o for o in outcomes.values() if o.sent_s is not None or o.status != CUT]
    return DriverResult(sent, reason[0], stalls)


def drive(
    requests: Sequence[Request], settings: DriverSettings, t0: float, alive: Callable[[], bool]
) -> DriverResult:
    """Replay `requests` (arrival times relative to `t0`, a `time.monotonic()` value)."""
    return asyncio.run(_drive(requests, settings, t0, alive))
