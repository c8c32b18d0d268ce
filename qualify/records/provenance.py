"""Where a run was made, as types: the provenance run.json records (`Provenance`: its host,
source, flake.lock, tools, GPUs and the other processes that held one; `qualify.core.provenance`
writes it), checked with the run's record, and what a fleet reads of it (`Origin`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field

from qualify.checks.evidence import Part
from qualify.core.provenance import RecordedGpu


class Recorded(Part):
    """A part of the provenance, saved again (and shown in a report) as it was recorded."""

    def as_json(self) -> dict[str, Any]:
        """The fields the part was read with (one a run did not record stays out)."""
        return self.model_dump(mode="json", exclude_unset=True)


class RecordedHost(Recorded):
    """The host as `provenance.host()` saw it, with its `--host-label`."""

    hostname: str | None = None
    kernel: str | None = None
    kernel_version: str | None = None
    machine: str | None = None
    os: str | None = None
    cpu: str | None = None
    cpus: int | None = None
    memory_gib: float | None = None
    #: The load averages over 1, 5 and 15 minutes when the run started.
    loadavg: list[float] | None = None
    python: str | None = None
    label: str | None = None


class RecordedGit(Recorded):
    """The source's revision and whether its tracked files had changes (None: not a checkout)."""

    rev: str | None = None
    dirty: bool | None = None
    note: str | None = None
    changed: list[str] = Field(default_factory=list)
    untracked: list[str] = Field(default_factory=list)
    untracked_count: int | None = None


class RecordedLock(Recorded):
    """The flake.lock the run was made with (None: the project has none)."""

    path: str | None = None
    sha256: str | None = None


class GpuHolder(Recorded):
    """Another process that held a GPU device open when the run started."""

    pid: int
    command: str
    devices: list[str]


class Provenance(Recorded):
    """Where and from what a run was made (run.json's `provenance`); a part a run made before
    it was recorded reads as not known."""

    host: RecordedHost = Field(default_factory=RecordedHost)
    git: RecordedGit = RecordedGit()
    flake_lock: RecordedLock | None = None
    tools: dict[str, str | None] = Field(default_factory=dict)
    gpus: list[RecordedGpu] = Field(default_factory=list)
    gpu_processes: list[GpuHolder] = Field(default_factory=list)


@dataclass(frozen=True)
class Origin:
    """Where a run was made, as its provenance records it."""

    #: The host's label (`--host-label`), its name and its kernel's release.
    label: str | None
    hostname: str | None
    kernel: str | None
    #: The source's git revision, and whether its tree had uncommitted changes.
    revision: str | None
    dirty: bool | None
    #: The sha256 of the flake.lock the run was made with.
    flake_lock: str | None
    #: Each GPU as the run saw it (`describe_gpu` reads it).
    gpus: tuple[RecordedGpu, ...]


def origin(provenance: Provenance) -> Origin:
    """The run's origin from its provenance."""
    return Origin(
        label=provenance.host.label,
        hostname=provenance.host.hostname,
        kernel=provenance.host.kernel,
        revision=provenance.git.rev,
        dirty=provenance.git.dirty,
        flake_lock=provenance.flake_lock.sha256 if provenance.flake_lock else None,
        gpus=tuple(provenance.gpus),
    )
