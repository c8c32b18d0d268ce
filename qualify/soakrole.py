"""One role's soak: its server started from the plan's template, then load, telemetry,
compaction and the kernel-log watcher together, for the planned duration; everything saved.

Files in the role's folder: `requests.parquet` (one row per request sent), `telemetry.parquet`
(the sampler's time series), `kernel.log` (kernel-log lines written during the role) and
`measurement.json` (settings, server, compaction events, stalls, how and why the load stopped).
The server's own output is `logs/<role>-server.log`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import httpx
import pandas as pd

from qualify.context import CheckContext, free_port
from qualify.errors import QualifyError, ToolMissing
from qualify.kernellog import KernelLogWatcher
from qualify.runstore import write_parquet
from qualify.soakcompaction import COMPACT_MEMORY, Compactor, schedule
from qualify.soakdriver import DriverSettings, drive
from qualify.soaktelemetry import Sampler
from qualify.soakworkload import Request

REQUEST_COLUMNS = (
    "index", "conversation", "turn", "scheduled_s", "sent_s", "first_token_s", "end_s", "tokens",
    "status", "error", "ttft_s", "tpot_s", "e2e_s",
)  # fmt: skip


@dataclass(frozen=True)
class SoakSettings:
    """The plan's parameters for one role's soak (the same for every role)."""

    server: str
    duration_s: float
    warmup_s: float
    sample_s: float
    concurrency: int
    stall_s: float
    compact_every_s: float
    ready_timeout_s: float = 300.0
    endpoint: str = "/v1/chat/completions"
    health: str = "/health"
    grace_s: float = 30.0  # after the soak's time, for requests in flight to finish
    body: dict[str, Any] | None = None
    compact_path: str = str(COMPACT_MEMORY)


def _ready(base_url: str, path: str) -> bool:
    try:
        return httpx.get(base_url + path, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def _slots(base_url: str) -> int | None:
    """The server's parallel slots from llama-server's `/props`, when it has that endpoint."""
    try:
        response = httpx.get(base_url + "/props", timeout=5.0)
        value = response.json().get("total_slots") if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return int(value) if isinstance(value, int) and value > 0 else None


def soak_role(ctx: CheckContext, role: str, requests: list[Request], settings: SoakSettings) -> None:
    """Soak `role` and save what was measured; a server that cannot start is recorded, not raised."""
    folder = ctx.role_dir(role)
    measurement: dict[str, Any] = {
        "role": role,
        "arm": ctx.arms[role].arm.name,
        "settings": asdict(settings),
    }
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    try:
        argv = ctx.argv(settings.server, role, port=str(port))
    except QualifyError as exc:  # a placeholder the plan forgot: the harness's problem
        measurement["error"] = {"message": exc.message, "hint": exc.hint}
        ctx.save(role, measurement)
        return
    try:
        ctx.progress(f"{role}: starting the server")
        started = time.monotonic()
        with ctx.serve(
            role, argv, lambda: _ready(base_url, settings.health), settings.ready_timeout_s
        ) as server:
            measurement["server"] = {
                "argv": list(argv),
                "start_s": round(time.monotonic() - started, 3),
                "slots": _slots(base_url),
            }
            slots = measurement["server"]["slots"]
            concurrency = min(settings.concurrency, slots) if slots else settings.concurrency
            measurement["concurrency"] = concurrency
            end_s = settings.duration_s
            ctx.progress(f"{role}: soak of {end_s:.0f} s, {len(requests)} requests planned")
            t0 = time.monotonic()
            compactor = Compactor(
                schedule(settings.warmup_s, settings.compact_every_s, end_s),
                t0,
                path=type(COMPACT_MEMORY)(settings.compact_path),
            )
            watcher = KernelLogWatcher(
                folder / "kernel.log", dmesg_log=ctx.log(role, "dmesg"), env=ctx.env(role)
            )
            sampler = Sampler(
                server.process.pid, t0, settings.sample_s, folder / "telemetry.parquet", ctx.env(role)
            )
            with watcher, sampler, compactor:
                result = drive(
                    requests,
                    DriverSettings(
                        base_url,
                        settings.endpoint,
                        concurrency,
                        settings.stall_s,
                        end_s + settings.grace_s,
                        settings.body,
                    ),
                    t0,
                    server.alive,
                )
            measurement["load_s"] = round(time.monotonic() - t0, 3)
            measurement["server"]["alive_at_end"] = server.alive()
            measurement["server"]["returncode"] = server.process.poll()
            measurement["stop_reason"] = result.stop_reason
            measurement["stalls"] = result.stalls
            measurement["compaction"] = compactor.as_json()
            measurement["kernel_log"] = {
                "source": watcher.source,
                "unavailable": watcher.unavailable,
                "lines": watcher.lines,
                "dropped": watcher.dropped,
            }
            measurement["telemetry_samples"] = len(sampler.rows)
            frame = pd.DataFrame([o.row() for o in result.outcomes], columns=list(REQUEST_COLUMNS))
            write_parquet(folder / "requests.parquet", frame)
            measurement["server_log"] = str(ctx.log(role, "server"))
    except ToolMissing as exc:
        measurement["error"] = {"message": exc.message, "hint": exc.hint}
    except QualifyError as exc:
        # The server never became ready: the candidate's failure or a broken baseline.
        measurement["start_failed"] = {"message": exc.message, "tail": (exc.hint or "").splitlines()}
    ctx.save(role, measurement)
