"""Where a run was made, as a type (`Origin`: its host, source and GPUs), for readers of a run
folder that may come from another host (`qualify merge`): each field's type is checked when it
is read, a wrong one refused naming the file and the key (`RunRecord.origin`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from qualify.pipeline.recordfields import mapping, string, wrong


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
    #: Each GPU as the run saw it (the provenance's own shape: `describe_gpu` reads it).
    gpus: tuple[Mapping[str, Any], ...]


def origin(provenance: Mapping[str, Any], where: str) -> Origin:
    """The run's origin from its (already shape-checked) provenance, each field's type checked."""
    host = mapping(provenance.get("host", {}), where, "provenance.host")
    git = mapping(provenance.get("git") or {}, where, "provenance.git")
    lock = mapping(provenance.get("flake_lock") or {}, where, "provenance.flake_lock")
    dirty = git.get("dirty")
    if dirty is not None and not isinstance(dirty, bool):
        raise wrong(where, "provenance.git.dirty", dirty, "true, false or null")
    gpus = provenance.get("gpus", [])
    if not isinstance(gpus, list) or not all(isinstance(g, Mapping) for g in gpus):
        raise wrong(where, "provenance.gpus", gpus, "a list of objects")
    return Origin(
        label=string(host, "label", where, at="provenance.host."),
        hostname=string(host, "hostname", where, at="provenance.host."),
        kernel=string(host, "kernel", where, at="provenance.host."),
        revision=string(git, "rev", where, at="provenance.git."),
        dirty=dirty,
        flake_lock=string(lock, "sha256", where, at="provenance.flake_lock."),
        gpus=tuple(gpus),
    )
