"""What a bench check's judge writes beside its verdict (`BenchFacts`): the stopping rule it
ran by, each test's finding with its ratio and interval, the machine's state and, in a run set,
the one measurement its members share. Here, below the stages, because the fleet merge and the
report read them too, and neither imports a stage.

What a bench check saves and reads back, as types: each role's measurement (`measurement.json`:
its arm, the engine's build and each test's configuration) and the schedule (`schedule.json`:
the stopping rule, every unit in run order with its outcome and the machine's state around it,
and, for a run set's member, the joint measurement it was cut from).

The documents of the recorded runs are version 1: what was added later (the GPU telemetry, the
host's load, a schedule's roles and wall time) is optional. The engine's own figures (the
configuration and build facts llama-bench reports, what a server's `/props` said) are kept as
they came: qualify does not own them.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from qualify.checks.evidence import Evidence, Part
from qualify.checks.evidence import Part as EvidencePart


class StoppingRule(Part):
    """The group-sequential design, fixed before the first pair ran, as schedule.json holds it
    (the judge needs `alpha` and `looks`; the rest is shown when the schedule recorded it)."""

    alpha: float
    looks: list[int] = Field(description="the pair counts at which the data were looked at")
    tests: int | None = None
    first_level: float | None = Field(None, description="the first Holm step at the first look")
    computed_min_pairs: int | None = None
    max_pairs: int | None = None
    budget_s: float | None = None
    margin: float | None = None


class BenchTestFact(Part):
    """One test's finding and the figures behind it (R = candidate/pinned throughput)."""

    finding: str
    regression: bool
    invalid: str | None = Field(description="why the test's data cannot be judged")
    ratio: float | None
    low: float | None
    high: float | None
    p_value: float | None
    level: float | None
    method: str | None
    pairs: int
    look: int
    pinned: float | None = Field(description="pinned's median, in `unit`")
    candidate: float | None
    unit: str
    pair_noise: float | None

    def shown(self) -> str:
        """As a cell: "1.012 [0.998, 1.027] NO CHANGE" (the finding alone when no ratio)."""
        if self.ratio is None:
            return self.finding
        span = f" [{self.low:.3f}, {self.high:.3f}]" if self.low is not None and self.high is not None else ""
        return f"{self.ratio:.3f}{span} {self.finding}".strip()


class Machine(Part):
    gpu_telemetry: dict[str, Any] | None = Field(description="where GPU state was read, as found")
    flagged: dict[str, list[str]] = Field(description="pair units run in a state that was flagged")


class SharedFact(Part):
    """A run set's member: the joint measurement its check read."""

    duration_s: float | None
    with_: list[str] = Field(alias="with")
    folder: str

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, populate_by_name=True)


class BenchFacts(Evidence):
    limits_of_evidence: list[str]
    pairs: int
    stop_reason: str | None
    plan: StoppingRule | None = Field(description="None when no rule could be made")
    margin: float
    a_a: bool = Field(description="pinned and the candidate ran the same arm")
    machine: Machine | None = Field(None, description="absent in runs made before it was recorded")
    geometric_mean_ratio: float | None
    tests: dict[str, BenchTestFact]
    shared_measurement: SharedFact | None = None


__all__ = ["BenchMeasurement", "BenchSchedule", "BenchUnit", "MachineState", "SharedFact", "StoppingRule"]


class SavedPart(EvidencePart):
    def to_json(self) -> dict[str, Any]:
        """As saved: the fields that were set."""
        return self.model_dump(mode="json", exclude_unset=True, by_alias=True)


class BenchMeasurement(Evidence):
    """One role's measurement: its arm, and what the engine said of itself and of each test."""

    role: str
    arm: str
    configs: dict[str, dict[str, Any]] = Field(description="each test's configuration, as the engine gave it")
    engine: dict[str, Any] = Field(
        default_factory=dict, description="the engine's build and device, as given"
    )
    measured_as: str | None = Field(default=None, description="a run set's member: the joint role it ran as")


class CpuCounters(SavedPart):
    clock_s: float
    busy_s: float
    steal_s: float
    own_s: float = Field(description="this process's CPU and its waited-for children's")
    cpus: int
    qualify_s: float | None = Field(default=None, description="this process's CPU alone")
    commands_s: float | None = Field(default=None, description="the run's commands' CPU, from its cgroup")


class MachineState(SavedPart):
    """The machine at one moment (`qualify.bench.machine.snapshot`)."""

    time: float | None = None
    load: float | None = Field(default=None, description="the 1-minute load average")
    governor: str | None = None
    gpu_processes: list[str] = Field(default_factory=list, description="other processes holding a GPU")
    cpu: CpuCounters | None = None
    gpu: dict[str, dict[str, float]] | None = Field(default=None, description="amdgpu sensors, by card")


class HostLoad(SavedPart):
    """Other processes' CPU over one unit (`qualify.bench.machine.foreign_load`); empty when
    /proc/stat could not be read."""

    interval_s: float | None = None
    load_1m: float | None = None
    foreign_cores: float | None = None
    steal_cores: float | None = None
    cpus: int | None = None
    top: list[str] | None = None


class GpuSeen(SavedPart):
    """One GPU over one unit: [min, median, max] of each quantity, and in how many samples
    each throttle reason was active."""

    samples: int
    reasons: dict[str, int]
    sm_mhz: list[float] | None = None
    mem_mhz: list[float] | None = None
    power_w: list[float] | None = None
    temp_c: list[float] | None = None


class GpuRecord(SavedPart):
    source: str
    samples: int
    gpus: dict[str, GpuSeen]


class Telemetry(SavedPart):
    """Where the GPU's state was read, or why it was not."""

    source: str | None
    described: str | None = None
    reason: str | None = None


class UnitError(SavedPart):
    message: str
    hint: str | None = None


class ServerInfo(SavedPart):
    """A server-block unit's server: its command and what its `/props` said (as it said it)."""

    argv: list[str] | None = None
    build_info: Any = None
    total_slots: Any = None
    model_path: Any = None


class BenchUnit(SavedPart):
    """One run of the check's command for one role (a server block's role, for servers)."""

    index: int
    role: str
    phase: str = Field(description="setup, warmup or pair")
    pair: int | None
    output: str | None = None
    started_at: str | None = None
    duration_s: float | None = None
    outcome: str | None = None
    ok: bool
    output_tail: list[str] = Field(default_factory=list)
    error: UnitError | None = None
    block_roles: list[str] | None = None
    server: ServerInfo | None = None
    env_before: MachineState | None = None
    env_after: MachineState | None = None
    env_notes: list[str] = Field(default_factory=list)
    host: HostLoad | None = None
    gpu: GpuRecord | None = None
    tests: list[str] = Field(default_factory=list)
    configs: dict[str, dict[str, Any]] = Field(default_factory=dict)


class BenchSchedule(Evidence):
    """The schedule as it ran: the units in run order, the stopping rule and why it stopped."""

    started_at: str | None = None
    duration_s: float | None = None
    plan: StoppingRule | None = Field(description="the stopping rule; None before any test was known")
    stop_reason: str
    pairs: int
    roles: list[str] | None = None
    design: str | None = None
    baseline_env: MachineState | None = None
    gpu_telemetry: Telemetry | None = None
    units: list[BenchUnit]
    measured_with: list[str] | None = Field(default=None, description="a run set's member: the joint roles")
    joint: str | None = Field(default=None, description="a run set's member: the joint measurement's folder")
    shared: SharedFact | None = None
