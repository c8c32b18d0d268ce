"""What a soak saves for each role (`SoakMeasurement`, its measurement.json) and what its judge
writes beside the verdict (`SoakFacts`): the types every reader of them goes through.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from qualify.checks.evidence import Evidence, Part


class Problem(Part):
    """Why the role could not be soaked at all (a placeholder the plan forgot, a missing tool)."""

    message: str
    hint: str | None = None


class StartFailure(Part):
    """The server never became ready: what qualify said, and the tail of the server's log."""

    message: str
    tail: list[str] = Field(default_factory=list)


class ServerRecord(Part):
    argv: list[str]
    start_s: float = Field(description="seconds from start to ready")
    slots: int | None = Field(None, description="parallel slots the server reported")
    pids: list[int] = Field(
        default_factory=list, description="the server's processes seen while it was loaded"
    )
    alive_at_end: bool = True
    returncode: int | None = None


class BlockRecord(Part):
    """One block of the role's soak: its span of the role's clock and of the whole soak's."""

    block: int
    start_s: float
    end_s: float
    wall_start_s: float
    wall_end_s: float
    requests: int
    stop_reason: str


class Stall(Part):
    index: int
    t_s: float
    silent_s: float


class CompactionEvent(Part):
    t_s: float
    duration_s: float


class Compaction(Part):
    """Memory pressure: compaction asked for at the planned times, and whether the host let it."""

    path: str
    planned: list[float]
    permitted: bool | None = None
    reason: str | None = None
    events: list[CompactionEvent] = Field(default_factory=list)


class KernelLog(Part):
    source: str | None = Field(None, description="where driver messages were read; None: not watched")
    unavailable: str | None = None
    lines: int = 0
    dropped: int = 0


class SoakMeasurement(Evidence):
    """One role's soak."""

    role: str
    arm: str
    measured_as: str | None = Field(
        None, description="in a run set's member: the role its arm ran as in the set's one measurement"
    )
    settings: dict[str, Any] = Field(description="the soak's settings as the plan resolved them")
    schedule: str = Field(description="sequential, interleaved or concurrent")
    error: Problem | None = None
    start_failed: StartFailure | None = None
    server: ServerRecord | None = None
    concurrency: int | None = None
    load_s: float | None = Field(None, description="seconds the server was under load")
    stop_reason: str = ""
    blocks: list[BlockRecord] = Field(default_factory=list)
    stalls: list[Stall] = Field(default_factory=list)
    compaction: Compaction | None = None
    kernel_log: KernelLog | None = None
    telemetry_samples: int | None = None
    server_log: str | None = None

    @property
    def server_died(self) -> bool:
        exited = self.server is not None and not self.server.alive_at_end
        return self.stop_reason == "server exited" or exited


class RequestSummary(Part):
    """A role's requests: how they ended, and the latencies of those that completed."""

    sent: int
    ok: int
    error: int
    stalled: int
    cut: int
    tokens: int
    ttft_p50_s: float | None
    tpot_p50_s: float | None
    e2e_p99_s: float | None
    stop_reason: str
    load_s: float | None
    concurrency: int | None


class TrendRecord(Part):
    """One series' trend test for one role, and (the candidate's) what it was judged."""

    series: str
    role: str
    points: int
    method: str | None
    s: float | None
    tau: float | None
    p_value: float | None
    variance_factor: float | None
    reachable: bool
    slope_per_h: float | None
    slope_low_per_h: float | None
    slope_high_per_h: float | None
    increments_p_value: float | None
    growth_low: float | None
    growth: float | None
    growth_high: float | None
    finding: str | None = None
    budget: float | None = None


class KernelLogMatch(Part):
    """A driver fault line from the kernel log or the server's own log, and whose it is."""

    role: str
    log: str
    pattern: str
    line: str
    source: str
    moved_from: str | None = Field(None, description="the role whose log held it, when its pid was another's")


class SoakFacts(Evidence):
    limits_of_evidence: list[str]
    requests: dict[str, RequestSummary] = Field(description="per role")
    horizon_s: float = Field(description="the span a budget's growth is projected over")
    trends: list[TrendRecord]
    kernel_log_matches: list[KernelLogMatch]
    compaction: dict[str, Compaction | None] = Field(description="per role")
    a_a: bool = Field(description="both roles ran the same arm")
