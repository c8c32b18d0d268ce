"""What a bench check saves and reads back, as types: each role's measurement (`measurement.json`:
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

from pydantic import Field

from qualify.checks.benchfacts import SharedFact, StoppingRule
from qualify.checks.evidence import Evidence
from qualify.checks.evidence import Part as EvidencePart

__all__ = ["BenchMeasurement", "BenchSchedule", "BenchUnit", "MachineState", "SharedFact", "StoppingRule"]


class Part(EvidencePart):
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


class CpuCounters(Part):
    clock_s: float
    busy_s: float
    steal_s: float
    own_s: float
    cpus: int


class MachineState(Part):
    """The machine at one moment (`qualify.bench.machine.snapshot`)."""

    time: float | None = None
    load: float | None = Field(default=None, description="the 1-minute load average")
    governor: str | None = None
    gpu_processes: list[str] = Field(default_factory=list, description="other processes holding a GPU")
    cpu: CpuCounters | None = None
    gpu: dict[str, dict[str, float]] | None = Field(default=None, description="amdgpu sensors, by card")


class HostLoad(Part):
    """Other processes' CPU over one unit (`qualify.bench.machine.foreign_load`); empty when
    /proc/stat could not be read."""

    interval_s: float | None = None
    load_1m: float | None = None
    foreign_cores: float | None = None
    steal_cores: float | None = None
    cpus: int | None = None
    top: list[str] | None = None


class GpuSeen(Part):
    """One GPU over one unit: [min, median, max] of each quantity, and in how many samples
    each throttle reason was active."""

    samples: int
    reasons: dict[str, int]
    sm_mhz: list[float] | None = None
    mem_mhz: list[float] | None = None
    power_w: list[float] | None = None
    temp_c: list[float] | None = None


class GpuRecord(Part):
    source: str
    samples: int
    gpus: dict[str, GpuSeen]


class Telemetry(Part):
    """Where the GPU's state was read, or why it was not."""

    source: str | None
    described: str | None = None
    reason: str | None = None


class UnitError(Part):
    message: str
    hint: str | None = None


class ServerInfo(Part):
    """A server-block unit's server: its command and what its `/props` said (as it said it)."""

    argv: list[str] | None = None
    build_info: Any = None
    total_slots: Any = None
    model_path: Any = None


class BenchUnit(Part):
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
