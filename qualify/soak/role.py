"""One role's soak: its server started from the plan's template, then load, telemetry,
compaction and the kernel-log watcher together, block by block; everything saved.

A role's soak has its own clock: the workload's arrival times, the compaction schedule, the
telemetry's `t_s` and the requests' times are seconds of that role's load. Run one after the
other, a role has a single block [0, duration). Interleaved (`qualify.soak.blocks`), each role's
clock is cut into blocks that alternate with the other role's; the server stays up from the
first block to the last, so memory a build leaks keeps adding up across its blocks.

Files in the role's folder: `requests.parquet` (one row per request sent), `telemetry.parquet`
(the sampler's time series), `kernel.log` (kernel-log lines written during the role's blocks)
and `measurement.json` (settings, server, blocks, compaction events, stalls, how and why the
load stopped). The server's own output is `logs/<role>-server.log`.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, ExitStack
from dataclasses import asdict, dataclass
from typing import Any

import httpx
import pandas as pd

from qualify.core import process
from qualify.core.context import CheckContext
from qualify.core.errors import QualifyError, ToolMissing
from qualify.core.loopback import answers, on_free_port
from qualify.core.runstore import write_parquet
from qualify.records.soak import SoakMeasurement
from qualify.soak.blocks import Block
from qualify.soak.compaction import COMPACT_MEMORY, Compactor, schedule
from qualify.soak.driver import DriverSettings, Outcome, drive
from qualify.soak.kernellog import KernelLogWatcher
from qualify.soak.telemetry import Sampler
from qualify.soak.workload import Request

REQUEST_COLUMNS = (
    "index", "conversation", "turn", "scheduled_s", "sent_s", "first_token_s", "end_s", "tokens",
    "status", "error", "ttft_s", "tpot_s", "e2e_s", "block",
)  # fmt: skip
# Stop reasons after which the role's later blocks would only repeat the failure.
FINAL = ("stall", "server exited")


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
    grace_s: float = 30.0  # after a block's time, for requests in flight to finish
    body: dict[str, Any] | None = None
    compact_path: str = str(COMPACT_MEMORY)
    block_s: float = 0.0  # 0: the roles one after the other
    concurrent: bool = False  # every role loaded at once for the whole duration


def _slots(base_url: str) -> int | None:
    """The server's parallel slots from llama-server's `/props`, when it has that endpoint."""
    try:
        response = httpx.get(base_url + "/props", timeout=5.0)
        value = response.json().get("total_slots") if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return int(value) if isinstance(value, int) and value > 0 else None


class RoleSoak:
    """A role's server and everything measured on it, over one or more blocks.

    `start` brings the server up inside the caller's ExitStack (closing the stack stops it);
    `run_block` loads it for one block; `save` writes the role's files. A server that cannot
    start is recorded, not raised: the judge makes it the candidate's failure or pinned's error.
    """

    def __init__(
        self,
        ctx: CheckContext,
        role: str,
        requests: list[Request],
        settings: SoakSettings,
        t_start: float,
        schedule: str,
    ) -> None:
        self.ctx = ctx
        self.role = role
        self.requests = requests
        self.settings = settings
        self.t_start = t_start  # the whole soak's start (monotonic), for the blocks' wall times
        self.folder = ctx.role_dir(role)
        self.measurement: dict[str, Any] = {
            "role": role,
            "arm": ctx.arms[role].arm.name,
            "settings": asdict(settings),
            "schedule": schedule,  # sequential, interleaved or concurrent
        }
        self.server: process.Server | None = None
        self.base_url = ""
        self.concurrency = settings.concurrency
        self.outcomes: list[tuple[int, Outcome]] = []
        self.rows: list[dict[str, Any]] = []
        self.blocks: list[dict[str, Any]] = []
        self.stalls: list[dict[str, Any]] = []
        self.compactions: list[dict[str, Any]] = []
        self.watchers: list[KernelLogWatcher] = []
        self.stop_reason = ""
        self.pids: set[int] = set()

    @property
    def running(self) -> bool:
        """Started, and no block has ended in a stall or the server's exit."""
        return self.server is not None and self.stop_reason not in FINAL

    def start(self, stack: ExitStack) -> None:
        s, role = self.settings, self.role
        try:
            self.ctx.argv(s.server, role, port="0")
        except QualifyError as exc:  # a placeholder the plan forgot: the harness's problem
            self.measurement["error"] = {"message": exc.message, "hint": exc.hint}
            return

        def serve(port: int) -> AbstractContextManager[process.Server]:
            url = f"http://127.0.0.1:{port}{s.health}"
            return self.ctx.serve(
                role, self.ctx.argv(s.server, role, port=str(port)), lambda: answers(url), s.ready_timeout_s
            )

        try:
            self.ctx.progress(f"{role}: starting the server")
            started = time.monotonic()
            self.base_url, self.server = stack.enter_context(
                on_free_port(serve, retried=lambda why: self.ctx.echo(f"{role}: {why}"))
            )
        except ToolMissing as exc:
            self.measurement["error"] = {"message": exc.message, "hint": exc.hint}
            return
        except QualifyError as exc:
            # The server never became ready: the candidate's failure or a broken baseline.
            self.measurement["start_failed"] = {"message": exc.message, "tail": (exc.hint or "").splitlines()}
            return
        slots = _slots(self.base_url)
        self.measurement["server"] = {
            "argv": self.server.recorded_argv(),
            "start_s": round(time.monotonic() - started, 3),
            "slots": slots,
        }
        self.concurrency = min(self.settings.concurrency, slots) if slots else self.settings.concurrency
        self.measurement["concurrency"] = self.concurrency

    def run_block(self, block: Block) -> None:
        """Load the server for `block` (its span of the role's clock), then hold until the span
        is over, so telemetry covers it even when the last arrival came early."""
        assert self.server is not None
        s = self.settings
        todo = [r for r in self.requests if block.start_s <= r.at_s < block.end_s]
        self.ctx.progress(
            f"{self.role}: block {block.index + 1} of {block.count}, "
            f"{block.start_s:.0f}–{block.end_s:.0f} s, {len(todo)} requests planned"
        )
        t0 = time.monotonic() - block.start_s  # the role's clock reads block.start_s now
        wall_start = time.monotonic() - self.t_start
        refused = any(c.get("permitted") is False for c in self.compactions)
        planned = [t for t in schedule(s.warmup_s, s.compact_every_s, s.duration_s) if block.contains(t)]
        compactor = Compactor([] if refused else planned, t0, path=type(COMPACT_MEMORY)(s.compact_path))
        env = self.ctx.env(self.role)
        dmesg = self.ctx.log(self.role, "dmesg")
        watcher = KernelLogWatcher(self.folder / "kernel.log", dmesg_log=dmesg, env=env)
        last = block.index == block.count - 1
        sampler = Sampler(
            self.server.process.pid,
            t0,
            s.sample_s,
            self.folder / "telemetry.parquet",
            rows=self.rows,
            block=block.index,
            until_s=None if last else block.end_s,
        )
        with watcher, sampler, compactor:
            settings = DriverSettings(
                self.base_url, s.endpoint, self.concurrency, s.stall_s, block.end_s + s.grace_s, s.body
            )
            result = drive(todo, settings, t0, self.server.alive)
            if result.stop_reason not in FINAL:
                time.sleep(max(0.0, t0 + block.end_s - time.monotonic()))
        self.outcomes += [(block.index, o) for o in result.outcomes]
        self.stalls += result.stalls
        self.pids |= sampler.pids
        self.compactions.append(compactor.as_json())
        self.watchers.append(watcher)
        self.stop_reason = result.stop_reason
        self.blocks.append(
            {
                "block": block.index,
                "start_s": block.start_s,
                "end_s": block.end_s,
                "wall_start_s": round(wall_start, 3),
                "wall_end_s": round(time.monotonic() - self.t_start, 3),
                "requests": len(todo),
                "stop_reason": result.stop_reason,
            }
        )

    def finish(self) -> None:
        """Record the server's state; call before the server is stopped."""
        if self.server is None:
            return
        self.measurement["server"]["pids"] = sorted(self.pids | {self.server.process.pid})
        self.measurement["server"]["alive_at_end"] = self.server.alive()
        self.measurement["server"]["returncode"] = self.server.process.poll()

    def save(self) -> None:
        m = self.measurement
        if self.server is not None:
            m["load_s"] = round(sum(b["wall_end_s"] - b["wall_start_s"] for b in self.blocks), 3)
            m["stop_reason"] = self.stop_reason or "not loaded"
            m["blocks"] = self.blocks
            m["stalls"] = self.stalls
            m["compaction"] = self._compaction()
            m["kernel_log"] = self._kernel_log()
            m["telemetry_samples"] = len(self.rows)
            rows = [{**o.row(), "block": index} for index, o in self.outcomes]
            write_parquet(self.folder / "requests.parquet", pd.DataFrame(rows, columns=list(REQUEST_COLUMNS)))
            write_parquet(self.folder / "telemetry.parquet", pd.DataFrame(self.rows))
            m["server_log"] = str(self.ctx.log(self.role, "server"))
        # Checked as it is written: what the judge will read is what the type declares.
        self.ctx.save(self.role, SoakMeasurement.model_validate(m).to_json())

    def _compaction(self) -> dict[str, Any]:
        s = self.settings
        permitted = [c["permitted"] for c in self.compactions if c["permitted"] is not None]
        return {
            "path": s.compact_path,
            "planned": schedule(s.warmup_s, s.compact_every_s, s.duration_s),
            "permitted": None if not permitted else all(permitted),
            "reason": next((c["reason"] for c in self.compactions if c["reason"]), None),
            "events": [e for c in self.compactions for e in c["events"]],
        }

    def _kernel_log(self) -> dict[str, Any]:
        # Not watched in some block means not watched: a fault then could go unseen.
        unwatched = next((w for w in self.watchers if w.source is None), None)
        return {
            "source": None if unwatched else (self.watchers[-1].source if self.watchers else None),
            "unavailable": unwatched.unavailable if unwatched else None,
            "lines": sum(w.lines for w in self.watchers),
            "dropped": sum(w.dropped for w in self.watchers),
        }
